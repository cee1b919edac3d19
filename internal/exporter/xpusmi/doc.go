// Package xpusmi runs the host's xpu-smi and parses what it prints, for the
// exporter.
//
// The parsers are strict. An `xpu-smi -m` line is 32 whitespace-separated
// fields of which only the positions public parsers rely on are read (1 the
// xpu-smi index, 4 temperature in C, 8 power in W, 17 and 18 memory used and
// total in MiB, 19 utilisation in percent, 21-22 the name in parentheses); a
// line with another field count, or whose fields at those positions are not
// numbers in range, is returned as a LineError and never guessed at.
// `xpu-smi -i N -q` is read for the device's Bus Id only: the one way to
// learn which /dev/xpuN an xpu-smi index is (the index is not N).
//
// The runner executes exactly one program, by absolute path, never through a
// shell, with an explicit environment, bounded in time and in output size,
// on the host or inside a chroot into the host root (xpu-smi is a glibc
// program of the host's XRE that a static exporter image cannot otherwise
// load). It does not interpret device facts (model, serial, versions):
// those come from discovery.
package xpusmi
