// Package names is the one home of the names xpu-cdi gives things outside
// itself: the default extended resource of the device plugin, the default
// DRA driver, the default CDI kind, the node labels' prefix, and the forms
// the partitions' resources, labels and DRA devices are named by. Every
// binary and every test takes them from here, so a default cannot drift
// between the device plugin, the DRA driver, the exporter and xpu-cdi.
//
// It is internal: the contract with users is the strings themselves
// (docs/kubernetes.md, docs/partitions.md), and each of them except the
// label prefix can be changed by a flag, so a program of another module
// must take them from the deployment, not from a Go constant. pkg/cdispec
// forwards the CDI kind for the stable API.
//
// It imports nothing of the project, so any package may import it.
package names
