// Package sriov is the SR-IOV writer of a node's Kunlun cards: it lays a
// layout (package partition plans it) out through the kernel's standard
// SR-IOV interface, sriov_numvfs, and waits until the kernel and udev show
// the result, putting a card that fails back to its old count (Apply).
//
// Every writer of a card's sriov_numvfs on a node (Apply, and any other
// code that cuts cards, such as a DRA driver) holds the node's layout lock
// (LockLayout: a file in a directory only its owner, root, can open) from
// its last look at the cards to its last write, and checks who holds a
// card (partition.FindUsers: processes and the kubelet's PodResources)
// right before the card's first write.
package sriov
