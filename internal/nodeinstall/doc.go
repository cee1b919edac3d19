// Package nodeinstall sets up a Kubernetes node that has only the Kunlun
// driver, from a container that sees the host's / at a host root (/host):
// it installs the static xpu-runtime-hook into a host directory and keeps
// the node's CDI spec, which names that hook by its host path, in the
// host's CDI directory, as the host packages' refresh unit would.
//
// What it guarantees: paths on the host are resolved inside the host root
// (an absolute symlink such as /var/run -> /run leads to the host's /run,
// not the container's); the hook and the spec are replaced atomically (a
// temporary file in the same directory, fsync, rename), so a container
// starting meanwhile runs the old hook or the new one, never a half-written
// file, and a running hook keeps its inode; a file already equal to what
// would be written is left alone; a hook directory that is a symlink, or
// that cannot be written, is refused before anything is written anywhere,
// and so is a hook, spec or labels directory that someone other than root
// may change: it, a parent of it, or a directory a symlink on its way leads
// to, owned by another user or writable by its group or by everyone (a
// sticky one only as a parent whose entry on the path is root's;
// checkPath); the directories it creates are 0755 root:root whatever the
// umask;
// the spec follows the host (driver reloads, devices appearing or going) at
// each poll and is removed while the host has no usable XPU; Uninstall
// removes the spec (if it is one of its kind), the hook, and the
// directories Install created when they are empty: those it recorded in
// the hook directory, trusted only while that directory passes the same
// check, and only the hook directory, the spec's and their parents.
// With Partitions it keeps a partition layout: applied (sriov.Apply,
// which checks the whole layout and refuses cards in use) before the spec
// is written, when the layout asked for (the node label, else the
// installer's) changes or the cards no longer have what the last apply
// left; a refused or failed apply is an error of that pass, the spec is
// still made to match the cards as they are, and it is tried again at the
// next pass.
//
// What it does not do: it does not load the driver, configure the
// container engine (its CDI support must be on, as in containerd 2.x and
// CRI-O) or coexist with the host packages' spec of the same kind (one
// spec per kind and node: run one or the other). It does not undo a
// layout on Uninstall: the cards stay as they were laid out until the
// next reboot or apply.
package nodeinstall
