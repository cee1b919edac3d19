package discover_test

import (
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// buildArm64 builds the aarch64 R200 host (its ELF files come from
// aarch64-linux-gnu-gcc unless the tests run on arm64).
func buildArm64(t *testing.T) *fakehost.Tree {
	t.Helper()
	if runtime.GOARCH != "arm64" {
		testreq.Tool(t, "aarch64-linux-gnu-gcc")
	}
	return fakehosttest.Build(t, fakehost.R200Arm64())
}

// coreLibraryPaths are the container paths of fakehost.CoreLibraries in
// an XRE 4 lib64.
func coreLibraryPaths() []string {
	var out []string
	for _, l := range fakehost.CoreLibraries() {
		out = append(out, "/usr/local/xpu/lib64/"+l.SONAME)
	}
	sort.Strings(out)
	return out
}

func sortedPaths(h *discover.Host) []string {
	var out []string
	for _, l := range h.Libraries {
		out = append(out, l.Path)
	}
	sort.Strings(out)
	return out
}

// TestArm64Host discovers the aarch64 R200 host as a host of that machine:
// both cards, every XRE library with the SONAME read from its aarch64 ELF
// file, xpu-smi, no warning. The same tree read as a host of the other
// machine leaves every library out, each with a warning naming it.
func TestArm64Host(t *testing.T) {
	tree := buildArm64(t)
	h, err := discoverTree(t, tree, discover.WithArch("arm64"))
	require.NoError(t, err)
	require.Empty(t, h.Warnings)
	require.Len(t, h.ComputeDevices(), 2)
	require.Equal(t, coreLibraryPaths(), sortedPaths(h))
	for _, l := range h.Libraries {
		f, err := elf.Open(l.HostPath)
		require.NoError(t, err)
		require.Equal(t, elf.EM_AARCH64, f.Machine, l.HostPath)
		require.NoError(t, f.Close())
	}
	require.Len(t, h.Tools, 1)

	h, err = discoverTree(t, tree, discover.WithArch("amd64"))
	require.NoError(t, err)
	require.Empty(t, h.Libraries, "aarch64 libraries given to x86-64 containers")
	for _, l := range fakehost.CoreLibraries() {
		require.Equal(t, 1, countContaining(h.Warnings, "/usr/local/xpu/lib64/"+l.File+" under driver root "+tree.Root+
			" is built for aarch64, not for this host's x86-64 (amd64); left out"), "%s in %q", l.File, h.Warnings)
	}
	// Nor through the loader cache: its entries carry aarch64's flags.
	require.Equal(t, 1, countContaining(h.Warnings, "driver library libxpurt.so.N not found"), "%q", h.Warnings)

	_, err = discoverTree(t, tree, discover.WithArch("sparc64"))
	require.ErrorContains(t, err, `driver root architecture: architecture "sparc64" is not supported`)
}

// TestArm64SystemLibrary gives the aarch64 host a driver library in its
// multiarch system directory, /lib/aarch64-linux-gnu, found only through
// the driver root's ld.so.cache (as XRE 5 puts libxpunvidia-ml in the
// system directory): its entry carries aarch64's flags, so it is taken for
// an arm64 host and not for an x86-64 one.
func TestArm64SystemLibrary(t *testing.T) {
	if runtime.GOARCH != "arm64" {
		testreq.Tool(t, "aarch64-linux-gnu-gcc")
	}
	h := fakehost.R200Arm64()
	sys := fakehost.SystemLibDirFor("arm64")
	h.Libraries = append(h.Libraries, fakehost.Library{Dir: sys, File: "libxpunvidia-ml.so.4.33.0", SONAME: "libxpunvidia-ml.so.1"})
	tree := fakehosttest.Build(t, h)

	d, err := discoverTree(t, tree, discover.WithArch("arm64"))
	require.NoError(t, err)
	require.Empty(t, d.Warnings)
	paths := libraryPaths(d, tree.Root)
	require.Equal(t, "/lib/aarch64-linux-gnu/libxpunvidia-ml.so.4.33.0", paths[sys+"/libxpunvidia-ml.so.1"], "%v", paths)

	d, err = discoverTree(t, tree, discover.WithArch("amd64"))
	require.NoError(t, err)
	require.NotContains(t, libraryPaths(d, tree.Root), sys+"/libxpunvidia-ml.so.1", "an aarch64 cache entry given to x86-64 containers")
}

// setMachine rewrites the e_machine field of the ELF file at path.
func setMachine(t *testing.T, path string, m elf.Machine) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	var b [2]byte
	binary.LittleEndian.PutUint16(b[:], uint16(m))
	_, err = f.WriteAt(b[:], 18)
	require.NoError(t, err)
}

// TestWrongMachineLibraries puts bad files into the aarch64 host's XRE
// directory: a library of another machine (the XRE directory mixing
// x86-64 and aarch64 libraries), an ELF file with a machine nobody knows,
// a truncated ELF header. Each gets a warning naming the file; the other
// libraries are discovered as without it.
func TestWrongMachineLibraries(t *testing.T) {
	native := fakehosttest.Build(t, fakehost.K200()) // this machine's libraries
	for _, tc := range []struct {
		description string
		file        string // in the XRE lib64
		spoil       func(t *testing.T, path string)
		warning     string
	}{
		{
			description: "an x86-64 library among aarch64 ones",
			file:        "libxpuml.so.1",
			spoil: func(t *testing.T, path string) {
				data, err := os.ReadFile(native.Path(native.XREDir + "/lib64/libxpuml.so.1"))
				require.NoError(t, err)
				setMachineBytes(data, elf.EM_X86_64)
				require.NoError(t, os.WriteFile(path, data, 0o755))
			},
			warning: "is built for x86-64, not for this host's aarch64 (arm64); left out",
		},
		{
			description: "an unknown machine",
			file:        "libxft.so",
			spoil:       func(t *testing.T, path string) { setMachine(t, path, elf.Machine(0xbeef)) },
			warning:     "is built for unknown machine 0xbeef, not for this host's aarch64 (arm64); left out",
		},
		{
			description: "a truncated ELF header",
			file:        "libbkcl.so",
			spoil: func(t *testing.T, path string) {
				data, err := os.ReadFile(path)
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(path, data[:40], 0o755))
			},
			warning: "is not a usable shared library",
		},
	} {
		t.Run(tc.description, func(t *testing.T) {
			tree := buildArm64(t)
			path := tree.Path(tree.XREDir + "/lib64/" + tc.file)
			tc.spoil(t, path)
			h, err := discoverTree(t, tree, discover.WithArch("arm64"))
			require.NoError(t, err)
			require.Len(t, h.Warnings, 1, "%q", h.Warnings)
			require.Contains(t, h.Warnings[0], "/usr/local/xpu/lib64/"+tc.file+" under driver root "+tree.Root)
			require.Contains(t, h.Warnings[0], tc.warning)

			var want []string
			for _, p := range coreLibraryPaths() {
				if filepath.Base(p) != tc.file {
					want = append(want, p)
				}
			}
			require.Equal(t, want, sortedPaths(h), "the other libraries are all there")
			require.Len(t, h.ComputeDevices(), 2)
		})
	}
}

// setMachineBytes rewrites e_machine in an ELF image.
func setMachineBytes(data []byte, m elf.Machine) {
	binary.LittleEndian.PutUint16(data[18:], uint16(m))
}
