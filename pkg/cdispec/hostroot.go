package cdispec

import (
	"fmt"
	"path/filepath"
	"strings"

	"tags.cncf.io/container-device-interface/specs-go"
)

// HostPath returns p, a path read through root, as the host names it:
// root is removed by whole path components (/host is not a prefix of
// /hostile). A p outside root is an error: the host cannot name it.
func HostPath(root, p string) (string, error) {
	root = filepath.Clean(root)
	if root == "/" || root == "." {
		return p, nil
	}
	rel, err := filepath.Rel(root, filepath.Clean(p))
	if err != nil || !filepath.IsAbs(p) || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("%s is not below the host root %s", p, root)
	}
	return filepath.Join("/", rel), nil
}

// transformRoot rewrites the host paths of spec with HostPath.
func transformRoot(spec *specs.Spec, root string) error {
	fix := func(e *specs.ContainerEdits) error {
		for _, n := range e.DeviceNodes {
			if n.HostPath == "" {
				continue
			}
			hp, err := HostPath(root, n.HostPath)
			if err != nil {
				return fmt.Errorf("device node %s: %w", n.Path, err)
			}
			n.HostPath = hp
		}
		for _, m := range e.Mounts {
			hp, err := HostPath(root, m.HostPath)
			if err != nil {
				return fmt.Errorf("mount %s: %w", m.ContainerPath, err)
			}
			m.HostPath = hp
		}
		return nil
	}
	if err := fix(&spec.ContainerEdits); err != nil {
		return err
	}
	for i := range spec.Devices {
		if err := fix(&spec.Devices[i].ContainerEdits); err != nil {
			return fmt.Errorf("device %s: %w", spec.Devices[i].Name, err)
		}
	}
	return nil
}
