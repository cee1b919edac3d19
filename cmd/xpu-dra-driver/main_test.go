package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	"github.com/xpu-cdi/xpu-cdi/internal/dra"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/logtest"
	"github.com/xpu-cdi/xpu-cdi/internal/testreq"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var stdout bytes.Buffer
	log := logrus.New()
	log.SetOutput(io.Discard)
	app := newApp(log)
	app.Writer = &stdout
	app.ErrWriter = io.Discard
	err := app.Run(append([]string{"xpu-dra-driver"}, args...))
	return stdout.String(), err
}

func TestHelpShowsFlagsAndEnv(t *testing.T) {
	out, err := run(t, "--help")
	require.NoError(t, err)
	for _, s := range []string{
		`--dra-driver-name value, --driver-name value`, `(default: "xpu.baidu.com") [$XPU_CDI_DRA_DRIVER_NAME]`,
		`[$NODE_NAME, $XPU_CDI_NODE_NAME]`, "[$XPU_CDI_VENDOR]", "[$XPU_CDI_CLASS]",
		"--dev-root", "[$XPU_CDI_DEV_ROOT, $XPU_DEV_ROOT]", "--driver-root",
		`(default: 10s) [$XPU_CDI_POLL_INTERVAL, $XPU_CDI_HEALTH_CHECK_INTERVAL]`, "[$KUBECONFIG]", "[$XPU_CDI_PLUGIN_DATA_DIR]",
		`(default: "/var/lib/kubelet/plugins_registry") [$XPU_CDI_PLUGIN_REGISTRY_DIR]`,
		"xpu-cdi generate --output /etc/cdi/baidu.com-xpu.yaml", "print-slice",
		"without memory or fault isolation",
		`--partitions MODE`, `(default: "static") [$XPU_CDI_PARTITIONS]`,
		`--idle-layout POLICY`, `(default: "keep") [$XPU_CDI_IDLE_LAYOUT]`,
		"--pod-resources-socket SOCKET", "[$XPU_CDI_POD_RESOURCES_SOCKET]",
		"--partitions=dynamic", "DRADeviceCompatibilityGroups",
	} {
		require.Contains(t, out, s)
	}
}

func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"--node-name", "n", "--dra-driver-name", "XPU"}, `--dra-driver-name: driver name "XPU"`},
		{[]string{"--node-name", "n", "--driver-name", "XPU"}, `--dra-driver-name: driver name "XPU"`},
		{[]string{"--node-name", "n", "--vendor", "Baidu com"}, "--vendor/--class"},
		{[]string{"--node-name", "n", "--poll-interval", "1ms"}, "--poll-interval 1ms is too short"},
		{[]string{"--node-name", ""}, "--node-name (or NODE_NAME) is empty"},
		{[]string{"--node-name", "n", "--log-level", "loud"}, "--log-level"},
		{[]string{"print-slice", "--driver-name", "a_b"}, `--dra-driver-name: driver name "a_b"`},
		{[]string{"--node-name", "n", "--partitions", "auto"}, `--partitions (XPU_CDI_PARTITIONS): unknown partition mode "auto": give static or dynamic`},
		{[]string{"--node-name", "n", "--partitions", "Dynamic"}, `unknown partition mode "Dynamic": give static or dynamic`},
		{[]string{"print-slice", "--node-name", "n", "--partitions", ""}, `--partitions (XPU_CDI_PARTITIONS): unknown partition mode ""`},
		{[]string{"--node-name", "n", "--partitions", "dynamic", "--idle-layout", "free"}, `--idle-layout (XPU_CDI_IDLE_LAYOUT) "free": give keep or whole`},
		{[]string{"--node-name", "n", "--idle-layout", "whole"}, "--idle-layout (XPU_CDI_IDLE_LAYOUT) whole needs --partitions=dynamic: with --partitions=static the driver lays out no card"},
	} {
		t.Run(tc.args[len(tc.args)-2]+"="+tc.args[len(tc.args)-1], func(t *testing.T) {
			t.Setenv("NODE_NAME", "")
			// Nothing starts: no API server is asked (none is
			// configured), no plugin directory is made.
			dataDir := filepath.Join(t.TempDir(), "plugin")
			args := tc.args
			if args[0] != "print-slice" {
				args = append(args, "--plugin-data-dir", dataDir)
			}
			_, err := run(t, args...)
			require.ErrorContains(t, err, tc.err)
			require.NoDirExists(t, dataDir)
		})
	}
}

// The variables set what the flags set, and are checked alike.
func TestPartitionEnv(t *testing.T) {
	t.Setenv("XPU_CDI_PARTITIONS", "sometimes")
	_, err := run(t, "--node-name", "n")
	require.ErrorContains(t, err, `--partitions (XPU_CDI_PARTITIONS): unknown partition mode "sometimes"`)
	require.ErrorIs(t, err, dra.ErrPartitionMode)

	t.Setenv("XPU_CDI_PARTITIONS", "static")
	t.Setenv("XPU_CDI_IDLE_LAYOUT", "whole")
	_, err = run(t, "--node-name", "n")
	require.ErrorContains(t, err, "whole needs --partitions=dynamic")
}

// validate reads the mode and the idle policy into what the driver is
// configured with.
func TestPartitionFlagsParsed(t *testing.T) {
	for _, tc := range []struct {
		description         string
		partitions, idle    string
		serve               bool
		wantMode            dra.PartitionMode
		wantWhole, wantSock bool
	}{
		{description: "defaults", partitions: "static", idle: "keep", serve: true, wantMode: dra.PartitionsStatic},
		{description: "dynamic keeps", partitions: "dynamic", idle: "keep", serve: true, wantMode: dra.PartitionsDynamic, wantSock: true},
		{description: "dynamic whole", partitions: "dynamic", idle: "whole", serve: true, wantMode: dra.PartitionsDynamic, wantWhole: true, wantSock: true},
		{description: "print-slice dynamic", partitions: "dynamic", wantMode: dra.PartitionsDynamic},
	} {
		t.Run(tc.description, func(t *testing.T) {
			o := &options{nodeName: "n", partitions: tc.partitions, idleLayout: tc.idle, registryDir: "/r", pluginDataDir: "/p"}
			o.kubelet.DRADriverName, o.kubelet.PollInterval, o.kubelet.PodResourcesSocket = "xpu.baidu.com", time.Second, "/s"
			o.kind.Vendor, o.kind.Class = "baidu.com", "xpu"
			require.NoError(t, o.validate(tc.serve))
			cfg := o.driverConfig(nil)
			require.Equal(t, tc.wantMode, cfg.Partitions)
			require.Equal(t, tc.wantWhole, cfg.IdleWhole)
			if tc.wantSock {
				l := o.layout(logrus.New())
				require.Equal(t, "/s", l.PodResourcesSocket)
				require.True(t, l.RequirePodResources)
				require.NotNil(t, l.AfterApply)
			}
		})
	}
}

// At start in dynamic mode, an API server that drops the compatibility
// groups stops the driver with the gates to turn on; one that cannot be
// asked stops it too, saying what was checked.
func TestCheckGates(t *testing.T) {
	d, err := dra.New(dra.Config{NodeName: "n", Partitions: dra.PartitionsDynamic, Discover: func() (*discover.Host, error) { return nil, discover.ErrNoDevices }})
	require.NoError(t, err)

	c := fake.NewClientset()
	c.PrependReactor("create", "resourceslices", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s := a.(k8stesting.CreateAction).GetObject().(*resourceapi.ResourceSlice).DeepCopy()
		for i := range s.Spec.Devices {
			for j := range s.Spec.Devices[i].ConsumesCounters {
				s.Spec.Devices[i].ConsumesCounters[j].CompatibilityGroups = nil
			}
		}
		return true, s, nil
	})
	err = checkGates(context.Background(), d, c)
	var gate *dra.GateError
	require.ErrorAs(t, err, &gate)
	require.Equal(t, []string{dra.GateDeviceCompatibilityGroups}, gate.Gates)
	require.ErrorContains(t, err, "--partitions=dynamic refused")
	require.ErrorContains(t, err, "kube-apiserver and kube-scheduler with --feature-gates=DRADeviceCompatibilityGroups=true")

	refused := errors.New("connection refused")
	c = fake.NewClientset()
	c.PrependReactor("create", "resourceslices", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, refused })
	err = checkGates(context.Background(), d, c)
	require.ErrorIs(t, err, refused)
	require.NotErrorAs(t, err, &gate)
	require.ErrorContains(t, err, "checking that the API server keeps the shared counters and compatibility groups")

	require.NoError(t, checkGates(context.Background(), d, fake.NewClientset()))
}

// print-slice --partitions=dynamic shows the dynamic offer of an 8-card
// P800 host: the counter sets in slices of their own (8 cards and the
// handle budget: 9 sets, two slices), then one slice of the 56 devices,
// each card whole and in its halves and quarters.
func TestPrintSliceDynamic(t *testing.T) {
	testreq.Root(t, "discovery stats real device nodes, made with mknod")
	tree := fakehosttest.Build(t, fakehost.P800x8SRIOV())
	out, err := run(t, "print-slice", "--dev-root", tree.Root, "--driver-root", tree.Root, "--node-name", "gpu-7", "--cdi-spec-dir", t.TempDir(), "--partitions", "dynamic")
	require.NoError(t, err)
	docs := strings.Split(out, "---\n")
	require.Len(t, docs, 3, out)
	var sets []resourceapi.CounterSet
	var devs []resourceapi.Device
	for i, doc := range docs {
		var s resourceapi.ResourceSlice
		require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &s))
		require.Equal(t, "gpu-7-xpu.baidu.com-"+strconv.Itoa(i), s.Name)
		require.EqualValues(t, 3, s.Spec.Pool.ResourceSliceCount)
		require.False(t, len(s.Spec.SharedCounters) > 0 && len(s.Spec.Devices) > 0, "slice %d holds both counter sets and devices", i)
		sets = append(sets, s.Spec.SharedCounters...)
		devs = append(devs, s.Spec.Devices...)
	}
	require.Len(t, sets, 9)
	require.Equal(t, dra.CardCounterSet(0), sets[0].Name)
	require.Equal(t, dra.HandleCounterSet, sets[8].Name)
	require.Len(t, devs, 56)
	byName := map[string]resourceapi.Device{}
	for _, d := range devs {
		byName[d.Name] = d
	}
	for card := range 8 {
		whole := byName[dra.CardName(card)]
		require.Len(t, whole.ConsumesCounters, 1, dra.CardName(card))
		require.Equal(t, dra.CardCounterSet(card), whole.ConsumesCounters[0].CounterSet)
		for n, slots := range map[int]int{2: 2, 4: 4} {
			for slot := range slots {
				name := dra.SlotName(card, n, slot)
				d, ok := byName[name]
				require.True(t, ok, "no device %s", name)
				require.Equal(t, []string{dra.CompatibilityGroup(n)}, d.ConsumesCounters[0].CompatibilityGroups, name)
				require.Equal(t, dra.HandleCounterSet, d.ConsumesCounters[1].CounterSet, name)
			}
		}
	}
	// Static mode on the same host: the 8 whole cards, no counters.
	out, err = run(t, "print-slice", "--dev-root", tree.Root, "--driver-root", tree.Root, "--node-name", "gpu-7", "--cdi-spec-dir", t.TempDir())
	require.NoError(t, err)
	var s resourceapi.ResourceSlice
	require.NoError(t, yaml.UnmarshalStrict([]byte(out), &s))
	require.Len(t, s.Spec.Devices, 8)
	require.Empty(t, s.Spec.SharedCounters)
}

// print-slice prints the slice of a fake host, decodable strictly as a
// ResourceSlice (the golden files of package dra hold the whole text).
func TestPrintSlice(t *testing.T) {
	testreq.Root(t, "discovery stats real device nodes, made with mknod")
	tree := fakehosttest.Build(t, fakehost.Degraded())
	out, err := run(t, "print-slice", "--dev-root", tree.Root, "--driver-root", tree.Root, "--node-name", "gpu-7", "--cdi-spec-dir", t.TempDir())
	require.NoError(t, err)
	var s resourceapi.ResourceSlice
	require.NoError(t, yaml.UnmarshalStrict([]byte(out), &s))
	require.Equal(t, "gpu-7", *s.Spec.NodeName)
	require.Equal(t, "xpu.baidu.com", s.Spec.Driver)
	require.Len(t, s.Spec.Devices, 3)
	// No spec in the directory: every device is tainted and says so.
	for _, d := range s.Spec.Devices {
		require.NotEmpty(t, d.Taints, d.Name)
	}
	taint := map[string]string{}
	for _, d := range s.Spec.Devices {
		taint[d.Name] = d.Taints[0].Value
	}
	require.Equal(t, map[string]string{"xpu-0": "NoCDISpec", "xpu-1": "NoCDISpec", "xpu-3": "ERROR"}, taint)
}

// On a host without XPU print-slice prints an empty slice, not an error.
func TestPrintSliceNoXPU(t *testing.T) {
	root := t.TempDir()
	out, err := run(t, "print-slice", "--dev-root", root, "--driver-root", root, "--node-name", "cpu-1")
	require.NoError(t, err)
	var s resourceapi.ResourceSlice
	require.NoError(t, yaml.UnmarshalStrict([]byte(out), &s))
	require.Empty(t, s.Spec.Devices)
}

// A driver started before the kubelet waits for the plugin registry
// instead of failing (a DaemonSet pod would crash-loop).
func TestWaitForKubelet(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "plugins_registry")
	log := logrus.New()
	rec := &logtest.Recorder{}
	log.SetOutput(io.Discard)
	log.AddHook(hook{rec})
	done := make(chan error, 1)
	go func() { done <- waitForDir(context.Background(), dir, log) }()
	time.Sleep(100 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("returned before the directory exists: %v", err)
	default:
	}
	require.NoError(t, os.Mkdir(dir, 0o755))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("still waiting 5s after the directory appeared")
	}
	require.True(t, rec.Has("waiting for the kubelet: its plugin registry "+dir+" does not exist yet"), rec.String())

	file := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	require.ErrorContains(t, waitForDir(context.Background(), file, log), "is not a directory")
}

type hook struct{ r *logtest.Recorder }

func (hook) Levels() []logrus.Level { return logrus.AllLevels }
func (h hook) Fire(e *logrus.Entry) error {
	h.r.Warnf("%s", e.Message)
	return nil
}
