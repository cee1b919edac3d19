// Package runtimeconfig registers the xpu-container-runtime shim (and,
// optionally, CDI) with the container engines' own configuration files:
// containerd (config version 2 and 3), CRI-O, Docker and Podman.
//
// Every operation is computed first as a Plan: the list of files to write or
// delete with their old and new bytes. A Plan can be printed (dry run),
// inspected (tests) or applied. Applying writes each file atomically (temp
// file in the same directory, fsync, rename, fsync of the directory) and keeps
// the mode and owner of the file it replaces; new files are 0644 in 0755
// directories. A path that is a symbolic link is refused rather than
// followed or replaced.
//
// Guarantees:
//   - Idempotent: configuring twice yields a Plan without changes the second time.
//   - An existing file that does not parse is refused with its name and the
//     parse error, and is not touched.
//   - Revert removes only what Configure added: drop-in files carry a marker
//     header and are deleted only when it is present; the containerd imports
//     entry is removed only when the marker comment written with it is still
//     there; Docker keys are restored from a record of their previous values
//     kept next to daemon.json, and only where they still hold the value this
//     package set.
//
// Not guaranteed: comments and key order of a Docker daemon.json (JSON has no
// comments; keys are re-encoded in sorted order, values kept as written).
// The containerd main file is never re-encoded: only the imports line is
// inserted or rewritten, so its comments and layout survive.
//
// Stability: this package is part of xpu-cdi's public surface (with
// discover, cdispec and logger); its exported names change only with
// a major version. Everything else of the module lives under internal/.
package runtimeconfig
