package validate

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"tags.cncf.io/container-device-interface/specs-go"
)

// writeSummary prints what a spec gives a container, one line for the
// edits every device brings (the spec's own) and one per device: how many
// mounts, hooks and environment variables, and the device nodes by their
// container path (last, as the widest column). It is the short form of the
// spec for a person; the spec file itself stays the whole truth.
func writeSummary(w io.Writer, path string, spec *specs.Spec) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  DEVICE\tMOUNTS\tHOOKS\tENV\tNODES")
	summaryRow(tw, "(spec-wide)", &spec.ContainerEdits)
	for i := range spec.Devices {
		summaryRow(tw, spec.Devices[i].Name, &spec.Devices[i].ContainerEdits)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing the summary of %s: %w", path, err)
	}
	return nil
}

func summaryRow(w io.Writer, name string, e *specs.ContainerEdits) {
	nodes := make([]string, 0, len(e.DeviceNodes))
	for _, n := range e.DeviceNodes {
		nodes = append(nodes, n.Path)
	}
	shown := strings.Join(nodes, ",")
	if shown == "" {
		shown = "-"
	}
	fmt.Fprintf(w, "  %s\t%d\t%d\t%d\t%s\n", name, len(e.Mounts), len(e.Hooks), len(e.Env), shown)
}
