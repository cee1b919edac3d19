package partition

import (
	"strconv"
	"strings"

	"github.com/xpu-cdi/xpu-cdi/internal/rootfs"
	"github.com/xpu-cdi/xpu-cdi/pkg/discover"
)

// maxAttr bounds the read of a sysfs attribute. A real attribute reports
// a size of one page whatever it holds.
const maxAttr = 4096

// FillTotalVFs reads sriov_totalvfs of the cards whose PF has no node
// (discovery read only the VFs, which do not carry it), inside devRoot
// (no link followed out of it, a regular file only). A card whose
// attribute cannot be read keeps what discovery found.
func FillTotalVFs(devRoot string, cards []Card) {
	var root *rootfs.Root
	for i := range cards {
		if cards[i].Index >= 0 || cards[i].TotalVFs > 0 || !discover.IsPCIAddress(cards[i].Address) {
			continue
		}
		if root == nil {
			r, err := rootfs.Open(devRoot)
			if err != nil {
				return
			}
			root = r
			defer func() { _ = root.Close() }()
		}
		b, err := root.ReadFile("/sys/bus/pci/devices/"+cards[i].Address+"/sriov_totalvfs", maxAttr)
		if err != nil {
			continue
		}
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n >= 0 {
			cards[i].TotalVFs = n
			cards[i].Allowed = allowed(cards[i].Board, n)
		}
	}
}
