package runtimeconfig

import "slices"

// Docker's daemon.json keys (docs.docker.com, dockerd reference):
// "runtimes": {"<name>": {"path": "..."}}, "default-runtime", and for
// Docker 25+ "features": {"cdi": true} and "cdi-spec-dirs".
//
// dockerd refuses to start on a top-level key it does not know, and Docker
// 20.10 (Debian bookworm) does not know "cdi-spec-dirs"; "features" is a
// free map there. So "cdi-spec-dirs" is only written when the directories
// differ from Docker's own defaults (which are DefaultCDISpecDirs).
func (c *Configurator) dockerEdits() []edit {
	o := c.o
	edits := []edit{{key: []string{"runtimes", o.runtimeName}, value: map[string]any{"path": o.runtimePath}}}
	if o.setAsDefault {
		edits = append(edits, edit{key: []string{"default-runtime"}, value: o.runtimeName})
	}
	if o.enableCDI {
		edits = append(edits, edit{key: []string{"features", "cdi"}, value: true})
		if !slices.Equal(o.cdiSpecDirs, DefaultCDISpecDirs) {
			edits = append(edits, edit{key: []string{"cdi-spec-dirs"}, value: stringList(o.cdiSpecDirs)})
		}
	}
	return edits
}

func (c *Configurator) configureDocker(p *Plan) error {
	if c.o.enableCDI {
		p.Notes = append(p.Notes, "docker: features.cdi needs Docker 25 or later (on by default from 28.2); Docker 20.10 ignores it and uses the xpu runtime instead")
		if !slices.Equal(c.o.cdiSpecDirs, DefaultCDISpecDirs) {
			p.Notes = append(p.Notes, "docker: cdi-spec-dirs needs Docker 25 or later: Docker 20.10 refuses to start with it")
		}
	}
	return c.inPlaceConfigure(p, c.o.configPath, jsonFormat, c.dockerEdits())
}

func (c *Configurator) revertDocker(p *Plan) error {
	return c.inPlaceRevert(p, c.o.configPath, jsonFormat)
}
