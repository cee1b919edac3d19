package harness

import (
	"fmt"
	"reflect"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// KubeletDirs are the places a test kubelet reads and writes outside its
// --root-dir, all below the test's directory.
type KubeletDirs struct {
	StaticPods    string
	PodLogs       string
	VolumePlugins string
}

// KubeletConfig is the KubeletConfiguration every test kubelet starts
// from: it listens on loopback only (port, and healthz on healthzPort),
// talks to the CRI engine at endpoint (unix://...), uses cgroupfs as both
// engines do, allows cgroup v1 (this machine kind has it) and swap, checks
// its static pods every second, evicts nothing and collects no images (the
// test images cannot be pulled again), gives pods no resolv.conf of the
// host's, and puts every directory it would write on the host into dirs.
// Anonymous requests are allowed and authorization is AlwaysAllow; the
// caller sets authentication and the cgroup layout it wants.
func KubeletConfig(dirs KubeletDirs, port, healthzPort int, endpoint string) *kubeletconfig.KubeletConfiguration {
	return &kubeletconfig.KubeletConfiguration{
		TypeMeta: metav1.TypeMeta{
			APIVersion: kubeletconfig.SchemeGroupVersion.String(),
			Kind:       "KubeletConfiguration",
		},
		FailCgroupV1:       ptr.To(false),
		FailSwapOn:         ptr.To(false),
		CgroupDriver:       "cgroupfs",
		StaticPodPath:      dirs.StaticPods,
		FileCheckFrequency: metav1.Duration{Duration: time.Second},
		SyncFrequency:      metav1.Duration{Duration: 5 * time.Second},
		Address:            "127.0.0.1",
		Port:               int32(port),
		HealthzBindAddress: "127.0.0.1",
		HealthzPort:        ptr.To(int32(healthzPort)),
		// ReadOnlyPort is left 0: no unauthenticated port.
		Authentication: kubeletconfig.KubeletAuthentication{
			Anonymous: kubeletconfig.KubeletAnonymousAuthentication{Enabled: ptr.To(true)},
			Webhook:   kubeletconfig.KubeletWebhookAuthentication{Enabled: ptr.To(false)},
		},
		Authorization:                 kubeletconfig.KubeletAuthorization{Mode: kubeletconfig.KubeletAuthorizationModeAlwaysAllow},
		ContainerRuntimeEndpoint:      endpoint,
		PodLogsDir:                    dirs.PodLogs,
		VolumePluginDir:               dirs.VolumePlugins,
		EnforceNodeAllocatable:        []string{},
		EvictionHard:                  map[string]string{},
		ImageGCHighThresholdPercent:   ptr.To(int32(100)),
		ImageGCLowThresholdPercent:    ptr.To(int32(99)),
		LocalStorageCapacityIsolation: ptr.To(false),
		ResolverConfig:                ptr.To(""),
	}
}

// MarshalKubeletConfig renders cfg as YAML with the fields that are not
// set left out, as a hand-written file leaves them. Two things of the
// typed struct's JSON tags stand in the way. omitempty does not leave out
// a struct (a zero duration is written "0s", an unset logging section
// whole): every field still at the value it has in an empty
// KubeletConfiguration is removed. And omitempty drops an empty list or
// map that was set on purpose, which the kubelet would read as its
// default (enforceNodeAllocatable: ["pods"], evictionHard:
// memory.available<100Mi and more): such fields, when set and empty, are
// written back.
func MarshalKubeletConfig(cfg *kubeletconfig.KubeletConfiguration) ([]byte, error) {
	fields, err := kubeletConfigFields(cfg)
	if err != nil {
		return nil, err
	}
	unset, err := kubeletConfigFields(&kubeletconfig.KubeletConfiguration{})
	if err != nil {
		return nil, err
	}
	dropUnset(fields, unset)
	for key, empty := range map[string]any{
		"enforceNodeAllocatable": emptyList(cfg.EnforceNodeAllocatable),
		"evictionHard":           emptyMap(cfg.EvictionHard),
		"evictionSoft":           emptyMap(cfg.EvictionSoft),
		"evictionMinimumReclaim": emptyMap(cfg.EvictionMinimumReclaim),
	} {
		if empty != nil {
			fields[key] = empty
		}
	}
	data, err := yaml.Marshal(fields)
	if err != nil {
		return nil, fmt.Errorf("marshalling the KubeletConfiguration: %w", err)
	}
	return data, nil
}

// kubeletConfigFields is cfg as the generic map its YAML reads into.
func kubeletConfigFields(cfg *kubeletconfig.KubeletConfiguration) (map[string]any, error) {
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("marshalling the KubeletConfiguration: %w", err)
	}
	var fields map[string]any
	if err := yaml.Unmarshal(data, &fields); err != nil {
		return nil, fmt.Errorf("reading back the KubeletConfiguration: %w", err)
	}
	return fields, nil
}

// dropUnset removes from fields each key whose value is the one unset has
// (the rendering of an empty configuration), and, within a section, each
// key so; a section left empty goes too.
func dropUnset(fields, unset map[string]any) {
	for key, zero := range unset {
		v, ok := fields[key]
		if !ok {
			continue
		}
		sub, isMap := v.(map[string]any)
		zeroSub, zeroIsMap := zero.(map[string]any)
		if isMap && zeroIsMap {
			dropUnset(sub, zeroSub)
			if len(sub) == 0 {
				delete(fields, key)
			}
			continue
		}
		if reflect.DeepEqual(v, zero) {
			delete(fields, key)
		}
	}
}

// emptyList is [] for a list that is set and empty, otherwise nil.
func emptyList[T any](l []T) any {
	if l != nil && len(l) == 0 {
		return []any{}
	}
	return nil
}

// emptyMap is {} for a map that is set and empty, otherwise nil.
func emptyMap[K comparable, V any](m map[K]V) any {
	if m != nil && len(m) == 0 {
		return map[string]any{}
	}
	return nil
}
