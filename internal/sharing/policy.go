package sharing

import (
	"fmt"
	"maps"
	"slices"

	"github.com/xpu-cdi/xpu-cdi/internal/names"
)

// Policy is how every resource of the plugin is shared: its own resource
// (the whole cards) and each partition size it advertises under the
// resource name plus the size (baidu.com/xpu-48gb). Resources are
// time-sliced independently: the file names each one it shares, the flags
// share all of them alike. The zero value shares nothing.
type Policy struct {
	base               string
	renameByDefault    bool
	failGreaterThanOne bool
	// all, when set, shares every resource alike (the flags).
	all *share
	// named are the file's entries by resource name.
	named map[string]share
}

type share struct {
	replicas int
	rename   string
}

// PolicyFromFlags returns the policy f describes: every resource of the
// plugin shared f.Replicas ways.
func PolicyFromFlags(resource string, f Flags) (Policy, error) {
	if err := checkReplicas(f.Replicas); err != nil {
		return Policy{}, fmt.Errorf("--replicas: %w", err)
	}
	return Policy{
		base: resource, renameByDefault: f.RenameByDefault, failGreaterThanOne: f.FailRequestsGreaterThanOne,
		all: &share{replicas: f.Replicas},
	}, nil
}

// NonePolicy shares nothing of resource.
func NonePolicy(resource string) Policy { return Policy{base: resource} }

// PolicyOf is the policy that shares only resource, as c says (what a
// Config of one resource means for a plugin of several: the others are
// not shared).
func PolicyOf(resource string, c Config) Policy {
	p := Policy{base: resource, failGreaterThanOne: c.FailRequestsGreaterThanOne, named: map[string]share{}}
	if c.Shared() {
		s := share{replicas: c.Replicas}
		if c.ResourceName != resource {
			s.rename = c.ResourceName
		}
		p.named[resource] = s
	}
	return p
}

// For returns the sharing of resource (the plugin's own resource name or
// one of its partition resources): how many times each of its devices is
// advertised and under which name (renameByDefault appends .shared to the
// resource's own name, so baidu.com/xpu-24gb becomes
// baidu.com/xpu-24gb.shared).
func (p Policy) For(resource string) Config {
	s, ok := p.named[resource]
	if !ok && p.all != nil {
		s, ok = *p.all, true
	}
	c := Config{Replicas: 1, ResourceName: resource, FailRequestsGreaterThanOne: p.failGreaterThanOne}
	if !ok || s.replicas < 1 {
		return c
	}
	c.Replicas = s.replicas
	switch {
	case !c.Shared():
	case s.rename != "":
		c.ResourceName = s.rename
	case p.renameByDefault:
		c.ResourceName = resource + SharedSuffix
	}
	return c
}

// Renames are the names the file's entries rename their resources to,
// sorted: the caller checks them as resource names.
func (p Policy) Renames() []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(p.named)) {
		if c := p.For(name); c.ResourceName != name {
			out = append(out, c.ResourceName)
		}
	}
	return out
}

// checkRenames refuses two resources advertised under one name: a rename
// to the name of another resource, or two entries renamed alike.
func (p Policy) checkRenames() error {
	owner := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(p.named)) {
		to := p.For(name).ResourceName
		if to == name {
			continue
		}
		if to == p.base || names.IsPartitionResource(p.base, to) {
			return fmt.Errorf("sharing.timeSlicing.resources: %s is renamed %s, the name of another resource of this plugin; give another rename", name, to)
		}
		if prev, ok := owner[to]; ok {
			return fmt.Errorf("sharing.timeSlicing.resources: %s and %s are both renamed %s; give each its own name", prev, name, to)
		}
		owner[to] = name
	}
	return nil
}
