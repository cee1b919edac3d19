// Package sharing reads how the node's XPUs are shared between containers:
// NVIDIA k8s-device-plugin's time-slicing configuration (version v1,
// sharing.timeSlicing), so that users can carry theirs over, or the same
// settings given as flags.
//
// What it guarantees: a configuration is decoded strictly (an unknown key is
// refused with its full path, e.g. sharing.timeSlicing.resources[0].replica),
// every resource it names is the plugin's own or one of its partition
// sizes (RESOURCE-24gb: each resource is shared on its own, Policy), replicas are between 1 and
// MaxReplicas, and a bad file changes nothing (the caller gets an error and
// no Config).
//
// What it does not do: time-slicing is a scheduling fiction. The kubelet
// sees each XPU several times; the processes of the containers that get the
// same XPU share its memory and its faults, with no limit or isolation from
// this package or any other part of xpu-cdi.
package sharing
