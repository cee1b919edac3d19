package dra

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
)

// A record of the format before versions (no version field) is read: its
// claim still holds its device. A record of a newer version stops the
// driver with an error naming the file. What the driver writes carries
// its version.
func TestClaimRecordVersion(t *testing.T) {
	f := newFixture(t, fakehost.P800x8())
	unversioned := `{"uid": "uid-old", "namespace": "default", "name": "old",
  "devices": [{"request": "xpua", "pool": "node-1", "device": "xpu-1", "cdiDevices": ["baidu.com/xpu=1"]}]}`
	require.NoError(t, os.WriteFile(filepath.Join(f.stateDir, "uid-old.json"), []byte(unversioned), 0o600))
	d := f.driver(t)
	require.Equal(t, []string{"uid-old"}, uids(d.Prepared()))
	k := startKubelet(t, d)
	other := claim("other", "xpu-1")
	k.create(t, other)
	require.Contains(t, k.prepare(t, other).GetError(), "the device is prepared for another claim default/old")

	fresh := claim("fresh", "xpu-2")
	k.create(t, fresh)
	require.Empty(t, k.prepare(t, fresh).GetError())
	data, err := os.ReadFile(filepath.Join(f.stateDir, "uid-fresh.json"))
	require.NoError(t, err)
	require.Contains(t, string(data), `"version": 1,`)

	newer := filepath.Join(f.stateDir, "uid-new.json")
	require.NoError(t, os.WriteFile(newer, []byte(`{"version": 2, "uid": "uid-new", "namespace": "default", "name": "new"}`), 0o600))
	_, err = New(Config{NodeName: "node-1", Discover: discoverTree(f.tree), SpecDirs: []string{f.specDir}, StateDir: f.stateDir})
	require.ErrorIs(t, err, ErrRecordVersion)
	require.ErrorContains(t, err, newer+" has version 2, this driver reads up to version 1")
}

// HandleError ends Run on an error the helper library does not mark
// recoverable, and only logs (and keeps) a recoverable one.
func TestHandleErrorFatal(t *testing.T) {
	f := newFixture(t, fakehost.P800x8())
	done := make(chan error, 1)
	go func() { done <- f.d.Run(context.Background(), newRecorder()) }()

	f.d.HandleError(context.Background(), fmt.Errorf("conflict: %w", kubeletplugin.ErrRecoverable), "processing ResourceSlice objects")
	select {
	case err := <-done:
		t.Fatalf("a recoverable error ended Run: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	require.ErrorContains(t, f.d.PublishError(), "conflict")

	served := errors.New("accept unix dra.sock: use of closed network connection")
	f.d.HandleError(context.Background(), served, "DRA gRPC server failed")
	select {
	case err := <-done:
		require.ErrorIs(t, err, served)
		require.ErrorContains(t, err, "DRA gRPC server failed: accept unix")
	case <-time.After(10 * time.Second):
		t.Fatal("a fatal error did not end Run")
	}
	require.True(t, f.log.Has("DRA gRPC server failed: accept unix dra.sock"))
}
