// Package cdicompat holds every place where xpu-cdi re-implements behaviour
// of the CDI library (tags.cncf.io/container-device-interface) instead of
// calling it, one file per concern:
//
//   - validate.go: the checks ReadSpec runs after parsing, applied to a spec
//     value (generate validates without encoding and parsing its output);
//   - inject.go: the order in which Cache.InjectDevices collects edits (the
//     shim applies edits it resolved once and cached);
//   - members.go: which members of an OCI spec ContainerEdits.Apply changes
//     (the shim rewrites only those members of config.json);
//   - specfiles.go: which files of which spec directories the Cache reads,
//     in which order (the shim's spec cache snapshots exactly those);
//   - cache.go: how the Cache loads those files and resolves their devices
//     (priorities, conflicts), on files xpu-cdi read itself, bounded and
//     without blocking: the library's own reads (os.ReadFile) hang on a
//     FIFO and read a link to /dev/zero without end.
//
// Each file names the library version and the function it mirrors.
// compat_test.go runs every one of them against the library itself, and
// fails when the library in go.mod is not MirroredVersion: upgrading the
// library means reading the mirrored functions' new source, adjusting the
// files here, bumping MirroredVersion and running that one suite.
package cdicompat

// MirroredVersion is the version of the CDI library whose behaviour this
// package mirrors.
const MirroredVersion = "v1.1.2"

// LibraryModule is the module path of the CDI library.
const LibraryModule = "tags.cncf.io/container-device-interface"
