package podresources

// The unexported copies of other packages' names, for names_test.go (an
// external test package: the DRA driver imports internal/partition, which
// imports this package).
const (
	ReplicaSeparatorCopy = replicaSeparator
	DRADevicePrefixCopy  = draDevicePrefix
)
