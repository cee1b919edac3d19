package lookup_test

import (
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	securejoin "github.com/cyphar/filepath-securejoin"
	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/lookup"
)

// trickyRoot builds a driver root whose links climb out of it, point at
// absolute paths, loop, dangle, and pass through files, next to a file
// outside the root that no resolution may reach.
func trickyRoot(t *testing.T) (root, outside string) {
	t.Helper()
	base := t.TempDir()
	root, outside = filepath.Join(base, "root"), filepath.Join(base, "outside")
	for _, d := range []string{"usr/local/xpu-1.0/lib64", "usr/local/xpu-1.0/bin", "usr/local/bin", "usr/bin", "etc", "opt"} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	require.NoError(t, os.MkdirAll(outside, 0o755))
	for _, f := range []string{"usr/local/xpu-1.0/lib64/libxpurt.so.1", "usr/local/xpu-1.0/bin/xpu_smi", "etc/secret"} {
		require.NoError(t, os.WriteFile(filepath.Join(root, f), []byte("x"), 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("outside"), 0o644))
	links := map[string]string{
		"usr/local/xpu":                        "xpu-1.0",
		"usr/local/xpu-1.0/lib64/libxpurt.so":  "libxpurt.so.1",
		"usr/local/xpu-1.0/lib64/libabs.so":    "/usr/local/xpu/lib64/libxpurt.so.1",
		"usr/local/xpu-1.0/lib64/libup.so":     "../../../../../../../../../outside/secret",
		"usr/local/xpu-1.0/lib64/libout.so":    filepath.Join(outside, "secret"),
		"usr/local/xpu-1.0/lib64/libdotdot.so": "../../xpu/../xpu/lib64/./libxpurt.so",
		"usr/local/xpu-1.0/lib64/libloop.so":   "libloop2.so",
		"usr/local/xpu-1.0/lib64/libloop2.so":  "libloop.so",
		"usr/local/xpu-1.0/lib64/libgone.so":   "libgone.so.9",
		"usr/local/bin/xpu-smi":                "../xpu/bin/xpu_smi",
		"usr/bin/xpu-smi":                      "/usr/local/bin/xpu-smi",
		"opt/up":                               "../..",
		"opt/rootlink":                         "/",
		"opt/outdir":                           outside,
		"opt/through-file":                     "/etc/secret/x",
	}
	for link, target := range links {
		require.NoError(t, os.Symlink(target, filepath.Join(root, link)))
	}
	return root, outside
}

// TestResolverMatchesSecureJoin resolves the same in-root paths with one
// Resolver (in two orders, each path twice, so that answers come from its
// memory) and with SecureJoin: the results and errors are the same, and no
// result leaves the root.
func TestResolverMatchesSecureJoin(t *testing.T) {
	root, outside := trickyRoot(t)
	paths := []string{
		"/usr/local/xpu/lib64/libxpurt.so.1",
		"/usr/local/xpu/lib64/libxpurt.so",
		"/usr/local/xpu/lib64/libabs.so",
		"/usr/local/xpu/lib64/libup.so",
		"/usr/local/xpu/lib64/libout.so",
		"/usr/local/xpu/lib64/libdotdot.so",
		"/usr/local/xpu/lib64/libloop.so",
		"/usr/local/xpu/lib64/libgone.so",
		"/usr/local/xpu/lib64/missing/../libxpurt.so",
		"/usr/local/xpu/../xpu/lib64",
		"/usr/local/xpu/../../../../etc/secret",
		"usr/local/xpu/lib64",
		"/usr/bin/xpu-smi",
		"/usr/local/bin/xpu-smi",
		"/opt/up/etc/secret",
		"/opt/up/outside/secret",
		"/opt/rootlink/../outside/secret",
		"/opt/outdir/secret",
		"/opt/through-file",
		"/etc/secret/x",
		"/",
		"",
		"../../outside/secret",
		"/usr/local/xpu/../bin/xpu-smi",
		"/usr/local/xpu/lib64/../../xpu/bin/./xpu_smi",
		"//usr//local/./xpu/lib64/",
		"/usr/local/xpu/lib64/libxpurt.so.1/",
		"/usr/local/xpu/lib64/libxpurt.so/..",
		"usr/../../usr/local/xpu",
		"/opt/through-file/../etc",
	}
	reversed := slices.Clone(paths)
	slices.Reverse(reversed)
	for _, order := range [][]string{paths, reversed} {
		r := lookup.NewResolver(root)
		for _, p := range slices.Concat(order, order) {
			want, wantErr := securejoin.SecureJoin(root, p)
			got, err := r.Resolve(p)
			if wantErr != nil {
				require.Error(t, err, p)
				require.Equal(t, wantErr.Error(), err.Error(), p)
				continue
			}
			require.NoError(t, err, p)
			require.Equal(t, want, got, p)
			require.True(t, got == root || strings.HasPrefix(got, root+"/"), "%s resolved out of the root: %s", p, got)
			require.False(t, strings.HasPrefix(got, outside), p)

			wantSt, wantStErr := os.Stat(got)
			st, err := r.Stat(got)
			require.Equal(t, wantStErr == nil, err == nil, p)
			if err == nil {
				require.Equal(t, wantSt.Mode(), st.Mode(), p)
				require.Equal(t, wantSt.Size(), st.Size(), p)
			}
		}
	}

	_, err := lookup.NewResolver(root).Resolve("/usr/local/xpu/lib64/libloop.so")
	require.ErrorIs(t, err, syscall.ELOOP)

	// Stat of a host path that is a symlink (not from Resolve) follows it,
	// as os.Stat, after the resolution has met the link.
	r := lookup.NewResolver(root)
	_, err = r.Resolve("/usr/local/xpu/lib64")
	require.NoError(t, err)
	st, err := r.Stat(filepath.Join(root, "usr/local/xpu"))
	require.NoError(t, err)
	require.True(t, st.IsDir())
}

// components are the pieces TestResolverRandomPaths and FuzzResolver build
// paths of.
var components = []string{
	"", ".", "..", "usr", "local", "xpu", "xpu-1.0", "lib64", "bin", "libxpurt.so", "libabs.so", "libup.so",
	"libdotdot.so", "libloop.so", "libgone.so", "xpu-smi", "xpu_smi", "opt", "up", "rootlink", "outdir", "through-file", "etc", "secret", "outside",
}

// checkLikeSecureJoin resolves p with r and with SecureJoin.
func checkLikeSecureJoin(t *testing.T, r *lookup.Resolver, root, p string) {
	t.Helper()
	want, wantErr := securejoin.SecureJoin(root, p)
	got, err := r.Resolve(p)
	if wantErr != nil {
		require.Error(t, err, p)
		// The same failure, not the same text: SecureJoin names a path
		// with a doubled slash where the Resolver's is clean (the "\x00"
		// input), so the operation, the cleaned path and the errno are
		// compared.
		var wantPE, gotPE *fs.PathError
		if errors.As(wantErr, &wantPE) {
			require.True(t, errors.As(err, &gotPE), "%q: want a *fs.PathError like %v, got %v", p, wantErr, err)
			require.Equal(t, wantPE.Op, gotPE.Op, p)
			require.Equal(t, filepath.Clean(wantPE.Path), filepath.Clean(gotPE.Path), p)
			require.ErrorIs(t, err, wantPE.Err, p)
			return
		}
		require.Equal(t, wantErr.Error(), err.Error(), p)
		return
	}
	require.NoError(t, err, p)
	require.Equal(t, want, got, p)
}

// TestResolverRandomPaths resolves thousands of paths made of the tree's
// names (and ".", "..", empty components) with one Resolver, so that most
// start with a part it has met, and compares each with SecureJoin.
func TestResolverRandomPaths(t *testing.T) {
	root, _ := trickyRoot(t)
	rng := rand.New(rand.NewPCG(1, 2))
	r := lookup.NewResolver(root)
	for range 5000 {
		n := 1 + rng.IntN(7)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = components[rng.IntN(len(components))]
		}
		p := strings.Join(parts, "/")
		if rng.IntN(4) != 0 {
			p = "/" + p
		}
		checkLikeSecureJoin(t, r, root, p)
	}
}

// FuzzResolver compares a Resolver that has already resolved the seed paths
// with SecureJoin on any path.
func FuzzResolver(f *testing.F) {
	for _, p := range []string{"/usr/local/xpu/lib64/libabs.so", "/opt/up/../usr/bin/xpu-smi", "usr//local/xpu/..", "/opt/through-file"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		root, _ := trickyRoot(t)
		r := lookup.NewResolver(root)
		for _, seed := range []string{"/usr/local/xpu/lib64", "/opt/up", "/usr/bin/xpu-smi"} {
			_, err := r.Resolve(seed)
			require.NoError(t, err)
		}
		checkLikeSecureJoin(t, r, root, p)
		checkLikeSecureJoin(t, r, root, p)
	})
}
