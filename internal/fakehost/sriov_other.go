//go:build !linux

package fakehost

import "errors"

var errNoFUSE = errors.New("the fake SR-IOV kernel needs Linux FUSE")

func mountLoopback(*SRIOVKernel, *sriovPF) (unmounter, error) { return nil, errNoFUSE }

func detachMount(string) error { return errNoFUSE }

func detachStaleMounts(func(string, ...any)) {}
