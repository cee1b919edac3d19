// Package cdispec turns a discovered host (package discover) into a CDI spec for
// the baidu.com/xpu kind and writes it.
//
// The wire types are the CDI library's specs-go types; the discovered host's
// values become container edits in one place (edits.go). Settings is the one
// configuration of New: its zero value is the default spec, and its defaults
// are filled in one place. Specs declare the lowest cdiVersion their
// content needs, so that the default spec stays readable by Podman 4.3.1
// (CDI 0.5.0), and every spec is checked with the CDI library's validators
// (ValidateSpec) before it replaces anything. YAML is written by a small
// block writer (yaml.go) whose output the tests load back with the
// library's strict parser.
//
// Multi-device requests: CDI env edits with the same key replace each other,
// so no device of a spec sets a variable that another device also sets with
// a different value. See docs/design.md, "What a container is told".
//
// Stability: this package is part of xpu-cdi's public surface (with
// discover, runtimeconfig and logger); its exported names change only with
// a major version. Everything else of the module lives under internal/.
package cdispec
