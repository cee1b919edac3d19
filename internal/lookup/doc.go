// Package lookup reads below a root directory (a driver root): Resolve turns
// a path as seen from inside the root (the path a container would use) into
// the host path of the file it names, following symlinks without ever
// leaving the root, so that a driver root shaped with absolute links (as in
// a driver container mounted at /run/xpu/driver) is read correctly. A
// Resolver does the same for the many paths of one discovery, looking at
// each path component they share once. LdcacheLocator reads the root's
// /etc/ld.so.cache: the libraries of this machine's ABI, by SONAME.
package lookup
