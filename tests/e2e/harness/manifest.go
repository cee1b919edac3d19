package harness

import (
	"bytes"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// Manifest renders typed Kubernetes objects (a corev1.Pod, a
// resourceapi.ResourceClaimTemplate, ...) as one YAML stream for kubectl,
// each document with the apiVersion and kind client-go's scheme knows it
// by; the objects themselves are not changed.
func Manifest(objs ...runtime.Object) ([]byte, error) {
	var out bytes.Buffer
	for i, obj := range objs {
		gvks, _, err := scheme.Scheme.ObjectKinds(obj)
		if err != nil {
			return nil, fmt.Errorf("manifest object %d (%T): %w", i, obj, err)
		}
		obj = obj.DeepCopyObject()
		obj.GetObjectKind().SetGroupVersionKind(gvks[0])
		data, err := yaml.Marshal(obj)
		if err != nil {
			return nil, fmt.Errorf("marshalling manifest object %d (%T): %w", i, obj, err)
		}
		if i > 0 {
			out.WriteString("---\n")
		}
		out.Write(data)
	}
	return out.Bytes(), nil
}

// ApplyObjects is Apply of the Manifest of objs.
func (c *Cluster) ApplyObjects(t testing.TB, objs ...runtime.Object) Result {
	t.Helper()
	data, err := Manifest(objs...)
	if err != nil {
		t.Fatalf("applying: %v", err)
	}
	return c.Apply(t, string(data))
}
