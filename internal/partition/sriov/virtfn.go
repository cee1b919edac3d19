package sriov

import "fmt"

// VirtFns returns the PCI addresses of the VFs of the PF at addr below
// devRoot, by position (virtfn0 first): the VF a slot of a card cut into
// len(result) VFs is. The count is the PF's sriov_numvfs, and every
// virtfn link below it must lead to a VF (else an error naming it: the
// kernel is not done). Paths are resolved inside devRoot, as Apply's are.
func VirtFns(devRoot, addr string) ([]string, error) {
	sys, err := openSysfs(devRoot)
	if err != nil {
		return nil, err
	}
	defer sys.close()
	n, err := sys.readNumVFs(addr)
	if err != nil {
		return nil, fmt.Errorf("reading the VF count of %s: %w", addr, err)
	}
	return sys.virtfns(addr, n)
}
