// Package labels computes the node labels that describe a host's Kunlun
// XPUs (baidu.com/xpu.present, .count, .model, .family, .driver-version,
// .xre-version, .memory, .sharing-strategy, .replicas; on nodes with an
// SR-IOV card .partition-layout and one baidu.com/xpu-<size>.count per
// partition size) and writes them as a feature file of Node Feature
// Discovery's local source.
//
// What it guarantees: every value is a valid Kubernetes label value (at
// most 63 characters of letters, digits, '-', '_' and '.', starting and
// ending with a letter or digit; a value that cannot be made one is left
// out); a fact the host does not give is left out, never guessed; the
// feature file is replaced atomically (a dot-file in the same directory,
// which NFD ignores, then a rename) and stays under NFD's 64 kB limit; a
// host without a usable XPU gets no labels, and its feature file is removed.
//
// What it does not do: it does not talk to the API server (NFD's worker
// reads the file and labels the node) and does not label nodes without NFD.
package labels
