// Package lookup finds files below a root directory (a driver root) by name.
//
// A Locator returns the paths it found as seen from inside the root (the
// paths a container would use), never host paths; Resolve turns such a path
// into the host path of the file it names, following symlinks without ever
// leaving the root, so that a driver root shaped with absolute links (as in
// a driver container mounted at /run/xpu/driver) is read correctly. A
// Resolver does the same for the many paths of one discovery, looking at
// each path component they share once.
package lookup
