package runtimeconfig

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseDockerVersion(t *testing.T) {
	for _, tc := range []struct {
		out  string
		want DockerVersion
		mode DockerMode
	}{
		{"Docker version 20.10.24+dfsg1, build 297e128\n", DockerVersion{20, 10, "20.10.24+dfsg1"}, DockerModeShim},
		{"Docker version 24.0.9, build fca702d\n", DockerVersion{24, 0, "24.0.9"}, DockerModeShim},
		{"Docker version 25.0.0, build e758fe5\n", DockerVersion{25, 0, "25.0.0"}, DockerModeCDI},
		{"Docker version 26.1.5+dfsg1, build a72d7cd\n", DockerVersion{26, 1, "26.1.5+dfsg1"}, DockerModeCDI},
		{"Docker version 28.2.2, build e6534b4\n", DockerVersion{28, 2, "28.2.2"}, DockerModeCDI},
	} {
		v, err := ParseDockerVersion([]byte(tc.out))
		require.NoError(t, err, tc.out)
		require.Equal(t, tc.want, v, tc.out)
		require.Equal(t, tc.mode, v.Mode(), tc.out)
	}
	for _, bad := range []string{"", "dockerd: command not found", "Docker version x.y", "Docker version 99999.1"} {
		_, err := ParseDockerVersion([]byte(bad))
		require.ErrorIs(t, err, ErrUnsupportedDocker, bad)
	}
}

// TestDockerModeCDIEdits: mode cdi sets features.cdi (and cdi-spec-dirs
// only where the directories differ from Docker's defaults) and never the
// shim, in every combination of options that would add the shim in mode
// shim.
func TestDockerModeCDIEdits(t *testing.T) {
	c, err := New(Docker, WithDockerMode(DockerModeCDI), WithCDI(true), WithRuntimeName("xpu2"))
	require.NoError(t, err)
	require.Equal(t, []edit{{key: []string{"features", "cdi"}, value: true}}, c.dockerEdits())

	c.o.cdiSpecDirs = []string{"/etc/cdi"}
	require.Equal(t, []edit{
		{key: []string{"features", "cdi"}, value: true},
		{key: []string{"cdi-spec-dirs"}, value: []any{"/etc/cdi"}},
	}, c.dockerEdits())

	c, err = New(Docker)
	require.NoError(t, err)
	require.Equal(t, DockerModeShim, c.o.dockerMode, "the library's default is the shim")
	require.Equal(t, []edit{{key: []string{"runtimes", "xpu"}, value: map[string]any{"path": DefaultRuntimePath}}}, c.dockerEdits())

	for _, tc := range []struct {
		description string
		engine      Engine
		opts        []Option
	}{
		{"cdi with the shim as default", Docker, []Option{WithDockerMode(DockerModeCDI), WithSetAsDefault(true)}},
		{"unknown mode", Docker, []Option{WithDockerMode("jit")}},
		{"a docker mode for podman", Podman, []Option{WithDockerMode(DockerModeCDI)}},
	} {
		_, err := New(tc.engine, tc.opts...)
		require.True(t, errors.Is(err, ErrInvalidOption), "%s: %v", tc.description, err)
	}
}
