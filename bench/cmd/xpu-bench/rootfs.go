package main

import "github.com/xpu-cdi/xpu-cdi/internal/testenv"

// buildGlibcRootfs writes a glibc image root at dir (see internal/testenv):
// busybox (static) with its applets, the host's loader and the libraries of
// a typical glibc base image in the host's libc directory, /etc/ld.so.conf
// and an /etc/ld.so.cache built by the host's ldconfig for that root, so the
// image's cache has a realistic size. It returns the bytes of that cache.
func buildGlibcRootfs(dir string) ([]byte, error) {
	if err := testenv.BuildGlibcRootfs(dir); err != nil {
		return nil, err
	}
	if err := testenv.AddBaseImageLibs(dir); err != nil {
		return nil, err
	}
	return testenv.WriteLDCache(dir)
}

// copyFile copies the host file src to dst (in an image root), keeping its
// permission bits.
func copyFile(src, dst string) error { return testenv.CopyFile(src, dst) }
