package harness

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// notInScheme is a runtime.Object client-go's scheme does not know.
type notInScheme struct{ metav1.TypeMeta }

func (n *notInScheme) DeepCopyObject() runtime.Object { c := *n; return &c }

// Manifest writes each typed object as a document kubectl reads, with the
// apiVersion and kind the caller did not set, and leaves the objects as
// they were; an object of no known kind is refused by its type.
func TestManifest(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
	}
	tmpl := &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "one", Namespace: "default"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "xpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "xpu.baidu.com"}}},
		}}},
	}
	data, err := Manifest(pod, tmpl)
	require.NoError(t, err)
	require.Empty(t, pod.Kind, "the caller's object is not changed")

	docs := strings.Split(string(data), "\n---\n")
	require.Len(t, docs, 2, "%s", data)
	decode := scheme.Codecs.UniversalDeserializer().Decode
	for i, want := range []runtime.Object{pod, tmpl} {
		got, gvk, err := decode([]byte(docs[i]), nil, nil)
		require.NoError(t, err, docs[i])
		wantGVKs, _, err := scheme.Scheme.ObjectKinds(want)
		require.NoError(t, err)
		require.Equal(t, wantGVKs[0], *gvk)
		withKind := want.DeepCopyObject()
		withKind.GetObjectKind().SetGroupVersionKind(*gvk)
		require.Equal(t, withKind, got)
		// Strict: nothing in the document that the type does not have.
		typed := want.DeepCopyObject()
		require.NoError(t, yaml.UnmarshalStrict([]byte(docs[i]), typed))
	}

	data, err = Manifest(pod, &notInScheme{})
	// The error names the object by its place and type.
	require.ErrorContains(t, err, "manifest object 1 (*harness.notInScheme)")
	require.Nil(t, data)
}
