// Package kubeclient is the flag group of the API server client
// (--kubeconfig, default the pod's service account), apart from package
// cmdflags so that only the commands that talk to the API server link
// client-go.
package kubeclient

import (
	"fmt"

	"github.com/urfave/cli/v2"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Flags is the group of --kubeconfig.
type Flags struct {
	Kubeconfig string
}

// Flag returns --kubeconfig (env KUBECONFIG) bound to f.
func (f *Flags) Flag() cli.Flag {
	return &cli.StringFlag{Name: "kubeconfig", Usage: "kubeconfig `FILE` of the API server; default: the pod's service account", EnvVars: []string{"KUBECONFIG"}, Destination: &f.Kubeconfig}
}

// Client returns a client of the API server --kubeconfig names, else of
// the cluster the pod runs in.
func (f *Flags) Client() (kubernetes.Interface, error) {
	var cfg *rest.Config
	var err error
	if f.Kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", f.Kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("configuring the API client (--kubeconfig %q): %w", f.Kubeconfig, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the API client: %w", err)
	}
	return cs, nil
}
