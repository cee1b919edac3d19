package harness

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Media types of the OCI image spec v1 (written out to avoid a dependency
// for five strings).
const (
	mediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
	mediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	mediaTypeLayer    = "application/vnd.oci.image.layer.v1.tar"
)

type ociDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *ociPlatform      `json:"platform,omitempty"`
}

type ociPlatform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

// NormalizeImageRef turns a short image name ("e2e-busybox") into the
// fully qualified reference containerd stores ("docker.io/library/e2e-busybox:latest").
func NormalizeImageRef(name string) string {
	ref := name
	first, _, found := strings.Cut(name, "/")
	switch {
	case !found:
		ref = "docker.io/library/" + name
	case !strings.ContainsAny(first, ".:") && first != "localhost":
		ref = "docker.io/" + name
	}
	if !strings.Contains(ref[strings.LastIndex(ref, "/")+1:], ":") && !strings.Contains(ref, "@") {
		ref += ":latest"
	}
	return ref
}

type imageOptions struct {
	cmd       []string
	env       []string
	namespace string
}

// ImageOption configures an image built from a rootfs.
type ImageOption func(*imageOptions)

// WithImageCmd sets the image's Cmd (default ["/bin/sh"]); a CRI sandbox
// ("pause") image needs one that keeps running, e.g. "sleep", "2147483647".
func WithImageCmd(cmd ...string) ImageOption {
	return func(o *imageOptions) { o.cmd = cmd }
}

// WithImageEnv adds KEY=VALUE entries to the image's Env (after PATH), as
// an image's ENV instruction does: a hostile image's XPU_VISIBLE_DEVICES.
func WithImageEnv(env ...string) ImageOption {
	return func(o *imageOptions) { o.env = append(o.env, env...) }
}

// WithImageNamespace imports into another containerd namespace than the
// harness's own, e.g. CRINamespace for images the CRI plugin must see.
func WithImageNamespace(ns string) ImageOption {
	return func(o *imageOptions) { o.namespace = ns }
}

func newImageOptions(opts []ImageOption) imageOptions {
	var o imageOptions
	for _, opt := range opts {
		opt(&o)
	}
	if len(o.cmd) == 0 {
		o.cmd = []string{"/bin/sh"}
	}
	return o
}

// WriteOCIArchive writes the rootfs dir as a single-layer OCI image archive
// (an OCI layout in a tar) named ref, with Cmd ["/bin/sh"] unless
// WithImageCmd says otherwise, for the host's platform. `ctr images import`
// reads it; no registry and no Podman needed.
func WriteOCIArchive(t testing.TB, rootfsDir, ref, archive string, opts ...ImageOption) {
	t.Helper()
	if err := writeOCIArchive(rootfsDir, ref, archive, t.TempDir(), newImageOptions(opts)); err != nil {
		t.Fatalf("writing OCI archive %s of %s: %v", archive, rootfsDir, err)
	}
}

func writeOCIArchive(rootfsDir, ref, archive, work string, o imageOptions) error {
	layout := filepath.Join(work, "layout")
	blobs := filepath.Join(layout, "blobs", "sha256")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", blobs, err)
	}
	layerTar := filepath.Join(work, "layer.tar")
	if err := tarDir(rootfsDir, layerTar); err != nil {
		return err
	}
	layer, err := addBlobFile(blobs, layerTar, mediaTypeLayer)
	if err != nil {
		return err
	}
	platform := ociPlatform{Architecture: runtime.GOARCH, OS: "linux"}
	config, err := addBlobJSON(blobs, mediaTypeConfig, map[string]any{
		"architecture": platform.Architecture,
		"os":           platform.OS,
		"config":       map[string]any{"Cmd": o.cmd, "Env": append([]string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, o.env...)},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{layer.Digest}},
	})
	if err != nil {
		return err
	}
	manifest, err := addBlobJSON(blobs, mediaTypeManifest, map[string]any{
		"schemaVersion": 2,
		"mediaType":     mediaTypeManifest,
		"config":        config,
		"layers":        []ociDescriptor{layer},
	})
	if err != nil {
		return err
	}
	manifest.Platform = &platform
	tag := "latest"
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		tag = ref[i+1:]
	}
	manifest.Annotations = map[string]string{
		"io.containerd.image.name":          ref,
		"org.opencontainers.image.ref.name": tag,
	}
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     mediaTypeIndex,
		"manifests":     []ociDescriptor{manifest},
	})
	if err != nil {
		return fmt.Errorf("encoding index.json: %w", err)
	}
	if err := writeFile(filepath.Join(layout, "index.json"), index); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(layout, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	return tarDir(layout, archive)
}

func addBlobFile(blobs, path, mediaType string) (ociDescriptor, error) {
	f, err := os.Open(path)
	if err != nil {
		return ociDescriptor{}, fmt.Errorf("opening %s: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	size, err := io.Copy(h, f)
	if err != nil {
		return ociDescriptor{}, fmt.Errorf("hashing %s: %w", path, err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if err := os.Rename(path, filepath.Join(blobs, sum)); err != nil {
		return ociDescriptor{}, fmt.Errorf("moving %s into the layout: %w", path, err)
	}
	return ociDescriptor{MediaType: mediaType, Digest: "sha256:" + sum, Size: size}, nil
}

func addBlobJSON(blobs, mediaType string, v any) (ociDescriptor, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return ociDescriptor{}, fmt.Errorf("encoding %s: %w", mediaType, err)
	}
	sum := sha256.Sum256(data)
	hexSum := hex.EncodeToString(sum[:])
	if err := writeFile(filepath.Join(blobs, hexSum), data); err != nil {
		return ociDescriptor{}, err
	}
	return ociDescriptor{MediaType: mediaType, Digest: "sha256:" + hexSum, Size: int64(len(data))}, nil
}
