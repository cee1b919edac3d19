package install

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"

	"github.com/xpu-cdi/xpu-cdi/internal/labels"
	"github.com/xpu-cdi/xpu-cdi/internal/nodeinstall"
	"github.com/xpu-cdi/xpu-cdi/internal/partition"
	"github.com/xpu-cdi/xpu-cdi/internal/partition/sriov"
	"github.com/xpu-cdi/xpu-cdi/internal/podresources"
)

// nodeTimeout bounds one read of the Node.
const nodeTimeout = 10 * time.Second

// partitionOptions are the flags of the partition layout install keeps.
type partitionOptions struct {
	layout             string
	nodeLabel          bool
	nodeName           string
	labelInterval      time.Duration
	podResourcesSocket string
	draDriver          string
	// serviceAccountDir is where the pod's token and CA are (tests).
	serviceAccountDir string

	parsed partition.Layout
}

func (p *partitionOptions) flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "partition-layout", Usage: "keep the cards laid out as `LAYOUT` (SELECTOR=N entries, as partition apply --layout takes them, e.g. all=2); default: leave them alone", EnvVars: []string{"XPU_CDI_PARTITION_LAYOUT"}, Destination: &p.layout},
		&cli.BoolFlag{Name: "partition-node-label", Usage: "lay the cards out as the node label " + labels.PartitionLayoutRequest + " of --node-name says (over --partition-layout; without it, the old label " + labels.PartitionLayout + ", with a warning); needs the API server", EnvVars: []string{"XPU_CDI_PARTITION_NODE_LABEL"}, Destination: &p.nodeLabel},
		&cli.DurationFlag{Name: "partition-label-interval", Usage: "read the node label at most every `DURATION` (one GET of the Node, from the API server's cache)", Value: nodeinstall.DefaultLabelInterval, EnvVars: []string{"XPU_CDI_PARTITION_LABEL_INTERVAL"}, Destination: &p.labelInterval},
		&cli.StringFlag{Name: "node-name", Usage: "the `NAME` of this node, whose label --partition-node-label reads (the pod's spec.nodeName)", EnvVars: []string{"XPU_CDI_NODE_NAME"}, Destination: &p.nodeName},
		&cli.StringFlag{Name: "dra-driver-name", Usage: "the DRA driver whose claims hold cards, for the in-use check", Value: podresources.DefaultDRADriver, EnvVars: []string{"XPU_CDI_DRA_DRIVER_NAME"}, Destination: &p.draDriver},
		&cli.StringFlag{Name: "pod-resources-socket", Usage: "the kubelet's PodResources `SOCKET` in this container, for the in-use check of partition layouts (e.g. /host/var/lib/kubelet/pod-resources/kubelet.sock); a socket that does not exist is an error (a kubelet restarting, or another kubelet root directory), no layout is applied then; \"\": processes only", EnvVars: []string{"XPU_CDI_POD_RESOURCES_SOCKET"}, Destination: &p.podResourcesSocket},
	}
}

func (p *partitionOptions) validate() error {
	if p.layout != "" {
		l, err := partition.ParseLayout(p.layout)
		if err != nil {
			return fmt.Errorf("--partition-layout: %w", err)
		}
		p.parsed = l
	}
	if p.labelInterval < 100*time.Millisecond {
		return fmt.Errorf("--partition-label-interval %s is too short: give at least 100ms (e.g. 30s)", p.labelInterval)
	}
	if p.nodeLabel && p.nodeName == "" {
		return errors.New("--partition-node-label needs --node-name (env XPU_CDI_NODE_NAME, from the pod's spec.nodeName)")
	}
	if p.nodeLabel && !isNodeName(p.nodeName) {
		return fmt.Errorf("--node-name %q is not a node name (a DNS subdomain: at most 253 lower-case letters, digits, '-' and '.', each dot-separated part starting and ending with a letter or digit)", p.nodeName)
	}
	return nil
}

// isNodeName reports whether s is a DNS subdomain (RFC 1123), as every
// Node's name is: it goes into the URL path of the GET of the Node, where
// "." or ".." would name another resource.
func isNodeName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, part := range strings.Split(s, ".") {
		if part == "" || len(part) > 63 || part[0] == '-' || part[len(part)-1] == '-' {
			return false
		}
		for _, c := range []byte(part) {
			if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
				return false
			}
		}
	}
	return true
}

// build returns the installer's Partitions, nil when no layout is kept.
func (p *partitionOptions) build(hostRoot, devRoot, driverRoot, resourceName, sharingFile, cdiKind string, log *logrus.Logger) (*nodeinstall.Partitions, error) {
	if p.parsed == nil && !p.nodeLabel {
		return nil, nil
	}
	// The device plugin's resources (NAME, NAME-<size>, NAME.shared and
	// the renames of its sharing configuration) and the DRA driver's
	// claims (their devices, and CDI devices of the spec's kind) count as
	// holding a card.
	pr, err := podresources.Config{ResourcePrefix: resourceName, DRADriver: p.draDriver, CDIKind: cdiKind}.WithSharingFile(sharingFile)
	if err != nil {
		return nil, fmt.Errorf("--config-file: %w", err)
	}
	cfg := sriov.Config{
		Config: partition.Config{
			DevRoot:            path.Join(hostRoot, devRoot),
			DriverRoot:         path.Join(hostRoot, driverRoot),
			PodResourcesSocket: p.podResourcesSocket,
			// Under a kubelet a missing socket is not "no pods": the
			// kubelet is restarting or has another root directory.
			RequirePodResources: true,
			PodResources:        pr,
			Log:                 log,
		},
		HostRoot: hostRoot,
	}
	parts := &nodeinstall.Partitions{
		Layout:        p.parsed,
		LabelInterval: p.labelInterval,
		Apply: func(ctx context.Context, l partition.Layout) error {
			_, err := sriov.Apply(ctx, cfg, l)
			return err
		},
	}
	if p.nodeLabel {
		dir := p.serviceAccountDir
		if dir == "" {
			dir = serviceAccountDir
		}
		nc, err := newNodeClient(dir)
		if err != nil {
			return nil, fmt.Errorf("--partition-node-label: the API server: %w", err)
		}
		name := p.nodeName
		parts.NodeLabels = func(ctx context.Context) (map[string]string, error) {
			return nc.labels(ctx, name)
		}
	}
	return parts, nil
}
