package xpunode

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xpu-cdi/xpu-cdi/internal/fakehost"
	"github.com/xpu-cdi/xpu-cdi/internal/fakehost/fakehosttest"
	"github.com/xpu-cdi/xpu-cdi/internal/logtest"
	"github.com/xpu-cdi/xpu-cdi/pkg/cdispec"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

func scannerOn(t *testing.T, h fakehost.Host, specDir string, noSpecCheck bool) (*Scanner, *logtest.Recorder, *fakehost.Tree) {
	t.Helper()
	tree := fakehosttest.Build(t, h)
	log := &logtest.Recorder{}
	s := NewScanner(ScannerConfig{
		Discover:    func() (*discover.Host, error) { return discover.Discover(tree.DiscoverOptions()...) },
		SpecDirs:    []string{specDir},
		NoSpecCheck: noSpecCheck,
		Empty:       "offering nothing",
		Unusable:    "they are unusable",
		Log:         log,
	})
	return s, log, tree
}

// Conditions are logged when they appear and when they clear, not at every
// scan; the devices no spec names are unhealthy.
func TestScannerLogsOnChange(t *testing.T) {
	specDir := t.TempDir()
	s, log, tree := scannerOn(t, fakehost.P800SRIOV(), specDir, false)
	for range 3 {
		sc := s.Scan()
		require.NoError(t, sc.Err)
		require.NotNil(t, sc.Host)
		require.Len(t, sc.Devices, 3)
		for _, d := range sc.Devices {
			require.Equal(t, Unhealthy, d.Health, d.ID)
			require.Equal(t, "no CDI spec of kind baidu.com/xpu names it", d.Reason)
		}
		require.Empty(t, sc.Names)
	}
	require.Equal(t, 1, log.Count("error: no CDI spec of kind baidu.com/xpu in "+specDir+" names XPU(s) 1,2,3 (there is none): they are unusable"), log.String())

	host, err := discover.Discover(tree.DiscoverOptions()...)
	require.NoError(t, err)
	spec, _, err := cdispec.New(host, cdispec.Settings{NameStrategies: []cdispec.NameStrategy{cdispec.NameByIndex}, NoHooks: true})
	require.NoError(t, err)
	require.NoError(t, cdispec.WriteFile(filepath.Join(specDir, "baidu.com-xpu.yaml"), spec, cdispec.FormatYAML))
	for range 2 {
		sc := s.Scan()
		for _, d := range sc.Devices {
			require.Equal(t, Healthy, d.Health, d.ID)
		}
		require.Equal(t, map[string]bool{"1": true, "2": true, "3": true, "all": true}, sc.Names, "the PF with VFs enabled has no name")
	}
	require.Equal(t, 1, log.Count("info: the CDI specs of kind baidu.com/xpu now name every XPU"), log.String())
}

func TestScannerNoSpecCheck(t *testing.T) {
	s, log, _ := scannerOn(t, fakehost.P800x8(), t.TempDir(), true)
	sc := s.Scan()
	require.Len(t, sc.Devices, 8)
	for _, d := range sc.Devices {
		require.Equal(t, Healthy, d.Health, d.ID)
	}
	require.Nil(t, sc.Names)
	require.Empty(t, log.Lines())
}

func TestScannerNoXPU(t *testing.T) {
	h := fakehost.P800x8()
	h.NoNodes = true
	s, log, _ := scannerOn(t, h, t.TempDir(), false)
	for range 2 {
		sc := s.Scan()
		require.ErrorIs(t, sc.Err, discover.ErrNoDevices)
		require.Nil(t, sc.Host)
		require.NotNil(t, sc.Devices)
		require.Empty(t, sc.Devices)
	}
	require.Equal(t, 1, log.Count("warning: offering nothing: no Kunlun XPU found under"), log.String())
	require.NotContains(t, log.String(), "no CDI spec", "no device, no spec needed")
}

// The devices of the cards being laid out are withheld (a VF by its PF, a
// whole card by its own address) while Withheld names them, with one note
// when it starts and one when it ends; a list that cannot be read
// withholds nothing and says so.
func TestScannerWithholdsCardsBeingLaidOut(t *testing.T) {
	tree := fakehosttest.Build(t, fakehost.P800SRIOV())
	log := &logtest.Recorder{}
	var cards []string
	var listErr error
	s := NewScanner(ScannerConfig{
		Discover:    func() (*discover.Host, error) { return discover.Discover(tree.DiscoverOptions()...) },
		NoSpecCheck: true, Log: log,
		Withheld: func() ([]string, error) { return cards, listErr },
	})
	ids := func() []string {
		var out []string
		for _, d := range s.Scan().Devices {
			out = append(out, d.ID)
		}
		return out
	}
	require.Equal(t, []string{"1", "2", "3"}, ids())
	cards = []string{"0000:03:00.0"}
	require.Equal(t, []string{"3"}, ids(), "the VFs of the card being laid out")
	require.Equal(t, []string{"3"}, ids())
	require.Equal(t, 1, log.Count("XPU(s) 1,2 withheld while their cards 0000:03:00.0 are laid out"))
	cards = []string{"0000:83:00.0"}
	require.Equal(t, []string{"1", "2"}, ids(), "a whole card by its own address")
	cards = nil
	require.Equal(t, []string{"1", "2", "3"}, ids())
	require.Equal(t, 1, log.Count("every XPU is offered again"))
	listErr = errors.New("the layout lock is not private to its owner")
	cards = []string{"0000:03:00.0"}
	require.Equal(t, []string{"1", "2", "3"}, ids(), "an untrusted list withholds nothing")
	require.Equal(t, 1, log.Count("the cards being laid out are not known, none withheld: the layout lock is not private"))
}
