//go:build !linux

package fakehost

import "errors"

var errNoMknod = errors.New("device nodes need Linux")

// mknodChar always fails outside Linux; Build then writes regular files.
func mknodChar(string, NodeFacts) error { return errNoMknod }

func isPermission(err error) bool { return errors.Is(err, errNoMknod) }
