package shim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/xpu-cdi/xpu-cdi/internal/cdicompat"
)

// configDoc is a bundle's config.json read only as far as the shim needs
// it. The members that CDI edits change or that a request is read from are
// decoded into runtime-spec types and gathered in an oci.Spec (view); every
// other member, known to runtime-spec v1.3 or not, stays the bytes it was,
// in its place. encode writes back only the members the edits touched.
//
// That keeps fields a newer engine or runtime adds (and that this build's
// runtime-spec types do not know) through the rewrite, and it spares the
// shim the reflection cost of decoding and encoding the whole OCI spec on
// every create (docs/benchmarks.md).
type configDoc struct {
	top       *rawObject
	process   *rawObject // nil when config.json has no process object
	linux     *rawObject // nil when config.json has no linux object
	resources *rawObject // linux.resources; nil when absent
	view      oci.Spec
}

// Members of config.json the shim decodes. The read-only ones are what a
// request and the CDI edits look at; the editable ones are everything
// ContainerEdits.Apply of the CDI library changes.
const (
	memberEnv          = "process.env"
	memberUser         = "process.user"
	memberMounts       = "mounts"
	memberHooks        = "hooks"
	memberDevices      = "linux.devices"
	memberCgroupDevs   = "linux.resources.devices"
	memberNetDevices   = "linux.netDevices"
	memberIntelRdt     = "linux.intelRdt"
	memberAnnotations  = "annotations"
	memberCapabilities = "process.capabilities"
)

// parseConfigDoc reads config.json. Malformed JSON, a member of the wrong
// type and a key given twice in an object the shim reads are errors: a
// duplicate would let the shim and the runtime read different values.
func parseConfigDoc(data []byte) (*configDoc, error) {
	d := &configDoc{}
	var err error
	if d.top, err = parseRawObject(data); err != nil {
		// encoding/json's syntax errors say what is wrong and where;
		// checked only on failure, not as a second pass over every file.
		var raw json.RawMessage
		if uerr := json.Unmarshal(data, &raw); uerr != nil {
			return nil, fmt.Errorf("invalid JSON: %w", uerr)
		}
		return nil, err
	}
	if d.process, err = d.top.object("process"); err != nil {
		return nil, err
	}
	if d.linux, err = d.top.object("linux"); err != nil {
		return nil, err
	}
	if d.linux != nil {
		if d.resources, err = d.linux.object("resources"); err != nil {
			return nil, fmt.Errorf("linux: %w", err)
		}
	}

	v := &d.view
	if err := d.top.decode("annotations", &v.Annotations); err != nil {
		return nil, err
	}
	if err := d.top.decode("mounts", &v.Mounts); err != nil {
		return nil, err
	}
	if err := d.top.decode("hooks", &v.Hooks); err != nil {
		return nil, err
	}
	if d.process != nil {
		v.Process = &oci.Process{}
		for _, m := range []member{{"env", &v.Process.Env}, {"user", &v.Process.User}, {"capabilities", &v.Process.Capabilities}} {
			if err := d.process.decode(m.key, m.dst); err != nil {
				return nil, fmt.Errorf("process: %w", err)
			}
		}
	}
	if d.linux != nil {
		v.Linux = &oci.Linux{}
		for _, m := range []member{
			{"devices", &v.Linux.Devices},
			{"netDevices", &v.Linux.NetDevices},
			{"intelRdt", &v.Linux.IntelRdt},
			{"uidMappings", &v.Linux.UIDMappings},
			{"gidMappings", &v.Linux.GIDMappings},
			{"namespaces", &v.Linux.Namespaces},
		} {
			if err := d.linux.decode(m.key, m.dst); err != nil {
				return nil, fmt.Errorf("linux: %w", err)
			}
		}
		if d.resources != nil {
			v.Linux.Resources = &oci.LinuxResources{}
			if err := d.resources.decode("devices", &v.Linux.Resources.Devices); err != nil {
				return nil, fmt.Errorf("linux.resources: %w", err)
			}
		}
	}
	return d, nil
}

// member is a key of a JSON object and where its value is decoded to.
type member struct {
	key string
	dst any
}

// editedMembers names the members of config.json that ContainerEdits.Apply
// changes for edits.
func editedMembers(e *cdiapi.ContainerEdits) []string {
	var m []string
	add := func(cond bool, names ...string) {
		if cond {
			m = append(m, names...)
		}
	}
	em := cdicompat.EditedMembers(e.ContainerEdits)
	add(em.Env, memberEnv)
	add(em.Devices, memberDevices)
	add(em.CgroupDevices, memberCgroupDevs)
	add(em.Mounts, memberMounts)
	add(em.Hooks, memberHooks)
	add(em.IntelRdt, memberIntelRdt)
	add(em.User, memberUser)
	add(em.NetDevices, memberNetDevices)
	return m
}

// spec is the decoded view that requests are read from and edits applied to.
func (d *configDoc) spec() *oci.Spec { return &d.view }

// encode returns config.json with the members named written back from the
// view; objects the edits had to create (process, linux, linux.resources)
// are added. The other members keep their bytes.
func (d *configDoc) encode(members ...string) ([]byte, error) {
	v := &d.view
	for _, name := range members {
		var value any
		switch name {
		case memberMounts:
			value = v.Mounts
		case memberHooks:
			value = v.Hooks
		case memberEnv, memberUser:
			if v.Process == nil {
				continue
			}
			value = v.Process.Env
			if name == memberUser {
				value = v.Process.User
			}
		case memberDevices, memberNetDevices, memberIntelRdt, memberCgroupDevs:
			if v.Linux == nil {
				continue
			}
			switch name {
			case memberDevices:
				value = v.Linux.Devices
			case memberNetDevices:
				value = v.Linux.NetDevices
			case memberIntelRdt:
				value = v.Linux.IntelRdt
			default:
				if v.Linux.Resources == nil {
					continue
				}
				value = v.Linux.Resources.Devices
			}
		default:
			return nil, fmt.Errorf("internal error: %s is not an editable member of config.json", name)
		}
		enc, err := json.Marshal(value)
		if err != nil {
			return nil, fmt.Errorf("encoding %s: %w", name, err)
		}
		if err := d.set(name, enc); err != nil {
			return nil, err
		}
	}
	return d.top.marshal()
}

// set stores the encoding of one editable member in its object, creating
// the objects on its path that config.json did not have.
func (d *configDoc) set(name string, value json.RawMessage) error {
	switch name {
	case memberMounts:
		d.top.set("mounts", value)
	case memberHooks:
		d.top.set("hooks", value)
	case memberEnv, memberUser:
		if d.process == nil {
			d.process = newRawObject()
		}
		d.process.set(name[len("process."):], value)
		return d.top.setObject("process", d.process)
	case memberDevices, memberNetDevices, memberIntelRdt:
		if d.linux == nil {
			d.linux = newRawObject()
		}
		d.linux.set(name[len("linux."):], value)
		return d.top.setObject("linux", d.linux)
	case memberCgroupDevs:
		if d.linux == nil {
			d.linux = newRawObject()
		}
		if d.resources == nil {
			d.resources = newRawObject()
		}
		d.resources.set("devices", value)
		if err := d.linux.setObject("resources", d.resources); err != nil {
			return err
		}
		return d.top.setObject("linux", d.linux)
	default:
		return fmt.Errorf("internal error: %s is not an editable member of config.json", name)
	}
	return nil
}

// rawObject is a JSON object whose members are kept undecoded, in order.
// Keys are looked up as encoding/json (and so runc) matches them to struct
// fields: the exact key, else one equal under case folding. Two keys equal
// under case folding are refused, so that lookup has one answer.
type rawObject struct {
	keys   []string
	values map[string]json.RawMessage
}

func newRawObject() *rawObject { return &rawObject{values: map[string]json.RawMessage{}} }

// errNotObject is returned for JSON text that is not an object.
var errNotObject = errors.New("not a JSON object")

// parseRawObject splits a JSON object into its members. A key given twice
// is an error.
func parseRawObject(data []byte) (*rawObject, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if tok != json.Delim('{') {
		return nil, errNotObject
	}
	o := newRawObject()
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("invalid JSON: %w", err)
		}
		key, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("invalid JSON: object key %v is not a string", tok)
		}
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil, fmt.Errorf("invalid JSON in %q: %w", key, err)
		}
		if prev, dup := o.lookup(key); dup {
			if prev == key {
				return nil, fmt.Errorf("key %q appears twice", key)
			}
			return nil, fmt.Errorf("keys %q and %q both name the same member (keys are matched without regard to case)", prev, key)
		}
		o.keys = append(o.keys, key)
		o.values[key] = value
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("invalid JSON: data after the top-level object")
	}
	return o, nil
}

// object returns the member key parsed as an object; nil when it is absent
// or null.
func (o *rawObject) object(key string) (*rawObject, error) {
	v, ok := o.get(key)
	if !ok || isNull(v) {
		return nil, nil
	}
	sub, err := parseRawObject(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return sub, nil
}

// decode decodes the member key into dst; an absent member leaves dst alone.
func (o *rawObject) decode(key string, dst any) error {
	v, ok := o.get(key)
	if !ok {
		return nil
	}
	if err := json.Unmarshal(v, dst); err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	return nil
}

// lookup returns the key of the object that key names.
func (o *rawObject) lookup(key string) (string, bool) {
	if _, ok := o.values[key]; ok {
		return key, true
	}
	for _, k := range o.keys {
		if strings.EqualFold(k, key) {
			return k, true
		}
	}
	return "", false
}

// get returns the value of the member key names.
func (o *rawObject) get(key string) (json.RawMessage, bool) {
	k, ok := o.lookup(key)
	if !ok {
		return nil, false
	}
	return o.values[k], true
}

// set replaces the member key names, or appends it.
func (o *rawObject) set(key string, value json.RawMessage) {
	k, ok := o.lookup(key)
	if !ok {
		k = key
		o.keys = append(o.keys, k)
	}
	o.values[k] = value
}

// setObject stores sub as the member key.
func (o *rawObject) setObject(key string, sub *rawObject) error {
	b, err := sub.marshal()
	if err != nil {
		return fmt.Errorf("encoding %s: %w", key, err)
	}
	o.set(key, b)
	return nil
}

// marshal writes the object with its members in order.
func (o *rawObject) marshal() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			buf.WriteByte(',')
		}
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, fmt.Errorf("encoding key %q: %w", k, err)
		}
		buf.Write(kb)
		buf.WriteByte(':')
		buf.Write(o.values[k])
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

func isNull(v json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(v), []byte("null")) }
