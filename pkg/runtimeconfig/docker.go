package runtimeconfig

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
)

// DockerMode is how Docker is given the XPUs.
type DockerMode string

// The Docker modes.
const (
	// DockerModeShim registers the xpu runtime shim (runtimes.<name>):
	// Docker 20.10, which has no CDI, and users who select devices with
	// XPU_VISIBLE_DEVICES. With WithCDI, features.cdi is set as well.
	DockerModeShim DockerMode = "shim"
	// DockerModeCDI turns on Docker's own CDI (features.cdi, plus
	// cdi-spec-dirs where they differ from Docker's defaults) and registers
	// no shim: Docker 25 and later resolve `docker run --device
	// baidu.com/xpu=0` themselves.
	DockerModeCDI DockerMode = "cdi"
)

// DockerCDIMinMajor is the first Docker release that reads CDI specs
// (features.cdi; on by default from 28.2).
const DockerCDIMinMajor = 25

// ParseDockerMode checks a mode given on the command line.
func ParseDockerMode(s string) (DockerMode, error) {
	switch m := DockerMode(s); m {
	case DockerModeShim, DockerModeCDI:
		return m, nil
	}
	return "", fmt.Errorf("docker mode %q: want %s or %s: %w", s, DockerModeCDI, DockerModeShim, ErrInvalidOption)
}

// dockerVersionRE reads `dockerd --version`: "Docker version 26.1.5+dfsg1,
// build a72d7cd" (Debian), "Docker version 28.2.2, build e6534b4".
var dockerVersionRE = regexp.MustCompile(`(?m)^Docker version v?(\d{1,4})\.(\d{1,4})[.\d]*\S*`)

// DockerVersion is a dockerd release, as `dockerd --version` prints it.
type DockerVersion struct {
	Major, Minor int
	// Text is the version as printed ("26.1.5+dfsg1").
	Text string
}

// ParseDockerVersion reads the output of `dockerd --version`.
func ParseDockerVersion(out []byte) (DockerVersion, error) {
	m := dockerVersionRE.FindSubmatch(out)
	if m == nil {
		return DockerVersion{}, fmt.Errorf("no \"Docker version X.Y\" in %q: %w", truncate(out, 200), ErrUnsupportedDocker)
	}
	major, err1 := strconv.Atoi(string(m[1]))
	minor, err2 := strconv.Atoi(string(m[2]))
	if err1 != nil || err2 != nil {
		return DockerVersion{}, fmt.Errorf("docker version in %q: %w", m[0], ErrUnsupportedDocker)
	}
	text := string(m[0])[len("Docker version "):]
	if text != "" && text[len(text)-1] == ',' {
		text = text[:len(text)-1]
	}
	return DockerVersion{Major: major, Minor: minor, Text: text}, nil
}

// Mode is the mode a dockerd of this version gets: its own CDI from
// Docker 25, the shim before.
func (v DockerVersion) Mode() DockerMode {
	if v.Major >= DockerCDIMinMajor {
		return DockerModeCDI
	}
	return DockerModeShim
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

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
	var edits []edit
	if o.dockerMode != DockerModeCDI {
		edits = append(edits, edit{key: []string{"runtimes", o.runtimeName}, value: map[string]any{"path": o.runtimePath}})
		if o.setAsDefault {
			edits = append(edits, edit{key: []string{"default-runtime"}, value: o.runtimeName})
		}
	}
	if o.enableCDI || o.dockerMode == DockerModeCDI {
		edits = append(edits, edit{key: []string{"features", "cdi"}, value: true})
		if !slices.Equal(o.cdiSpecDirs, DefaultCDISpecDirs) {
			edits = append(edits, edit{key: []string{"cdi-spec-dirs"}, value: stringList(o.cdiSpecDirs)})
		}
	}
	return edits
}

func (c *Configurator) configureDocker(p *Plan) error {
	switch {
	case c.o.dockerMode == DockerModeCDI:
		p.Notes = append(p.Notes, "docker: mode cdi: Docker's own CDI (features.cdi, Docker 25 or later) resolves `docker run --device baidu.com/xpu=0`; no runtime shim is registered")
	case c.o.enableCDI:
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
