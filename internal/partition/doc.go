// Package partition is the read model of the SR-IOV partitions (VFs) of a
// node's Kunlun cards: it reads layouts (SELECTOR=N lists, the config
// file, the node label's form), finds the cards, checks a layout against
// them and the public partition facts (pkg/discover's partition table)
// and plans it (Plan), shows the node (Show, Assert, Export), and finds
// who holds a card (FindUsers: processes through the dev root's /proc,
// and the kubelet's PodResources).
//
// It writes nothing: the writer of sriov_numvfs, with the node's layout
// lock, is package sriov below it, which the code that cuts cards imports
// beside this one. What only reads layouts (the device plugin) imports
// this package alone.
package partition
