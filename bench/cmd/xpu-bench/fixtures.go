package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	"tags.cncf.io/container-device-interface/specs-go"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
)

// fixtures are built once and shared by the sections that need them.
type fixtures struct {
	host     string      // fake P800x8 host root (tmpfs)
	specDir  string      // private CDI spec directory holding specPath
	specPath string      // spec of b.vendor for host
	spec     *specs.Spec // parsed
	rootfs   string      // glibc image root (disk)
	ldCache  []byte      // the image's own /etc/ld.so.cache
}

func (b *bench) fixtures() (*fixtures, error) {
	if b.fx != nil {
		return b.fx, nil
	}
	fx := &fixtures{
		host:    filepath.Join(b.shm, "host-p800x8"),
		specDir: filepath.Join(b.shm, "cdi"),
		rootfs:  filepath.Join(b.disk, "rootfs"),
	}
	if _, err := fakehost.Build(fx.host, fakehost.P800x8(), fakehost.WithCacheDir(b.cache)); err != nil {
		return nil, err
	}
	fx.specPath = filepath.Join(fx.specDir, b.vendor+"-xpu.yaml")
	if err := b.generateSpec(fx.host, fx.specPath); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(fx.specPath)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", fx.specPath, err)
	}
	if fx.spec, err = cdispec.Parse(data); err != nil {
		return nil, fmt.Errorf("parsing %s: %w", fx.specPath, err)
	}
	if fx.ldCache, err = buildGlibcRootfs(fx.rootfs); err != nil {
		return nil, err
	}
	b.fx = fx
	return fx, nil
}

// generateSpec writes the spec of b.vendor for the fake host at dst.
func (b *bench) generateSpec(host, dst string, extra ...string) error {
	return b.generateVendorSpec(b.vendor, host, dst, extra...)
}

// generateVendorSpec writes the spec of a test vendor for the fake host at
// dst; extra are more xpu-cdi generate flags.
func (b *bench) generateVendorSpec(vendor, host, dst string, extra ...string) error {
	if !strings.HasSuffix(vendor, testVendorDomain) {
		return fmt.Errorf("refusing to write a spec for vendor %q: not a test vendor", vendor)
	}
	argv := []string{
		filepath.Join(b.bin, "xpu-cdi"), "generate",
		"--dev-root", host, "--driver-root", host,
		"--vendor", vendor, "--hook-path", filepath.Join(b.bin, "xpu-runtime-hook"),
		"--output", dst,
	}
	_, err := output(nil, append(argv, extra...)...)
	return err
}

// bundleConfig returns the config.json of a container running `true` in
// rootfs, as `runc spec` makes it but without a terminal and with a
// writable root (an image root is writable; the hook then has work to do).
// With request it asks for device 0 of the bench vendor through a
// cdi.k8s.io annotation, as Kubernetes device plugins do.
func (b *bench) bundleConfig(rootfs string, request bool) ([]byte, error) {
	dir, err := os.MkdirTemp(b.shm, "spec-")
	if err != nil {
		return nil, fmt.Errorf("creating a directory for runc spec: %w", err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if _, err := output(nil, b.runc, "spec", "--bundle", dir); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, fmt.Errorf("reading runc's default spec: %w", err)
	}
	var s oci.Spec
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("parsing runc's default spec: %w", err)
	}
	s.Process.Terminal = false
	s.Process.Args = []string{"true"}
	s.Root = &oci.Root{Path: rootfs}
	if request {
		s.Annotations = map[string]string{"cdi.k8s.io/xpu-bench": b.vendor + "/xpu=0"}
	}
	return json.MarshalIndent(&s, "", "\t")
}

// injected reports whether a config.json carries the device of the request.
func injected(config []byte) bool {
	return bytes.Contains(config, []byte(`"/dev/xpu0"`))
}
