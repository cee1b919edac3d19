package runtimeconfig

// CRI-O keys, from crio.conf(5): [crio.runtime] default_runtime (string) and
// cdi_spec_dirs (string array); [crio.runtime.runtimes.<name>] runtime_path
// (string) and runtime_type (string: "oci", "vm" or "pod"). CRI-O applies
// the files of crio.conf.d in name order on top of crio.conf, key by key, so
// a drop-in needs only the keys it sets.
func (c *Configurator) crioEdits() []edit {
	o := c.o
	edits := []edit{{
		key:   []string{"crio", "runtime", "runtimes", o.runtimeName},
		value: map[string]any{"runtime_path": o.runtimePath, "runtime_type": "oci"},
	}}
	if o.setAsDefault {
		edits = append(edits, edit{key: []string{"crio", "runtime", "default_runtime"}, value: o.runtimeName})
	}
	if o.enableCDI {
		edits = append(edits, edit{key: []string{"crio", "runtime", "cdi_spec_dirs"}, value: stringList(o.cdiSpecDirs)})
	}
	return edits
}

func (c *Configurator) configureCRIO(p *Plan) error {
	return c.configureDropInOrMain(p, c.crioEdits())
}

// Podman keys, from containers.conf(5): [engine] runtime (string) and
// [engine.runtimes] <name> = [paths]. Podman 4.x reads CDI specs from
// /etc/cdi and /var/run/cdi without configuration.
func (c *Configurator) podmanEdits() []edit {
	o := c.o
	edits := []edit{{key: []string{"engine", "runtimes", o.runtimeName}, value: stringList([]string{o.runtimePath})}}
	if o.setAsDefault {
		edits = append(edits, edit{key: []string{"engine", "runtime"}, value: o.runtimeName})
	}
	return edits
}

func (c *Configurator) configurePodman(p *Plan) error {
	if c.o.enableCDI {
		p.Notes = append(p.Notes, "podman: nothing to set for CDI: Podman 4.x reads CDI specs from /etc/cdi and /var/run/cdi by default")
	}
	return c.configureDropInOrMain(p, c.podmanEdits())
}

func (c *Configurator) configureDropInOrMain(p *Plan, edits []edit) error {
	if c.o.noDropIn {
		return c.inPlaceConfigure(p, c.o.configPath, tomlFormat, edits)
	}
	tree, err := treeFromEdits(edits)
	if err != nil {
		return err
	}
	fc, err := c.dropInChange(c.o.dropInPath, tree)
	if err != nil {
		return err
	}
	p.Changes = append(p.Changes, fc)
	return nil
}

func (c *Configurator) revertDropInOrMain(p *Plan) error {
	if c.o.noDropIn {
		return c.inPlaceRevert(p, c.o.configPath, tomlFormat)
	}
	fc, err := dropInRemoval(c.o.dropInPath)
	if err != nil {
		return err
	}
	if fc == nil {
		p.Notes = append(p.Notes, c.o.dropInPath+" does not exist: nothing to revert")
		return nil
	}
	p.Changes = append(p.Changes, *fc)
	return nil
}
