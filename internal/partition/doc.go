// Package partition lays out the SR-IOV partitions (VFs) of a node's
// Kunlun cards: it reads layouts (SELECTOR=N lists), checks them against
// the host and the public partition facts (pkg/discover's partition
// table), and applies them through the kernel's standard SR-IOV interface,
// sriov_numvfs.
//
// Every writer of a card's sriov_numvfs on a node (Apply, and any other
// code that cuts cards, such as a DRA driver) holds the node's layout lock
// (LockLayout: a file in a directory only its owner, root, can open) from
// its last look at the cards to its last write, and checks who holds a
// card (processes and the kubelet's PodResources) right before the card's
// first write.
package partition
