package shim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
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
	// objects are the objects of configMembers' paths by path ("" is the
	// top level); an absent or null object is nil.
	objects map[string]*rawObject
	view    oci.Spec
}

// configObjects are the objects that hold configMembers, parents first,
// and how the view gets the struct a present one decodes into.
var configObjects = []struct {
	path  string
	alloc func(v *oci.Spec)
}{
	{"process", func(v *oci.Spec) { v.Process = &oci.Process{} }},
	{"linux", func(v *oci.Spec) { v.Linux = &oci.Linux{} }},
	{"linux.resources", func(v *oci.Spec) { v.Linux.Resources = &oci.LinuxResources{} }},
}

// configMember is a member of config.json the shim decodes: its JSON path
// and its field in the view (nil when the view lacks its parent).
type configMember struct {
	path  string
	field func(v *oci.Spec) any
}

// configMembers are the members of config.json the shim decodes, in the
// order they are decoded: what a request and the CDI edits look at. The
// editable ones, which encode writes back, are those
// cdicompat.EditableMembers names: everything ContainerEdits.Apply changes.
var configMembers = []configMember{
	{"annotations", func(v *oci.Spec) any { return &v.Annotations }},
	{"mounts", func(v *oci.Spec) any { return &v.Mounts }},
	{"hooks", func(v *oci.Spec) any { return &v.Hooks }},
	{memberEnv, inProcess(func(p *oci.Process) any { return &p.Env })},
	{"process.user", inProcess(func(p *oci.Process) any { return &p.User })},
	{"process.capabilities", inProcess(func(p *oci.Process) any { return &p.Capabilities })},
	{"linux.devices", inLinux(func(l *oci.Linux) any { return &l.Devices })},
	{"linux.netDevices", inLinux(func(l *oci.Linux) any { return &l.NetDevices })},
	{"linux.intelRdt", inLinux(func(l *oci.Linux) any { return &l.IntelRdt })},
	{"linux.uidMappings", inLinux(func(l *oci.Linux) any { return &l.UIDMappings })},
	{"linux.gidMappings", inLinux(func(l *oci.Linux) any { return &l.GIDMappings })},
	{"linux.namespaces", inLinux(func(l *oci.Linux) any { return &l.Namespaces })},
	{"linux.resources.devices", func(v *oci.Spec) any {
		if v.Linux == nil || v.Linux.Resources == nil {
			return nil
		}
		return &v.Linux.Resources.Devices
	}},
}

// memberEnv is the member XPU_VISIBLE_DEVICES is read from and set in.
const memberEnv = "process.env"

func inProcess(f func(*oci.Process) any) func(*oci.Spec) any {
	return func(v *oci.Spec) any {
		if v.Process == nil {
			return nil
		}
		return f(v.Process)
	}
}

func inLinux(f func(*oci.Linux) any) func(*oci.Spec) any {
	return func(v *oci.Spec) any {
		if v.Linux == nil {
			return nil
		}
		return f(v.Linux)
	}
}

// splitPath returns the parent object's path and the key of a member path.
func splitPath(path string) (parent, key string) {
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[:i], path[i+1:]
	}
	return "", path
}

// parseConfigDoc reads config.json. Malformed JSON, a member of the wrong
// type and a key given twice in an object the shim reads are errors: a
// duplicate would let the shim and the runtime read different values.
func parseConfigDoc(data []byte) (*configDoc, error) {
	top, err := parseRawObject(data)
	if err != nil {
		// encoding/json's syntax errors say what is wrong and where;
		// checked only on failure, not as a second pass over every file.
		var raw json.RawMessage
		if uerr := json.Unmarshal(data, &raw); uerr != nil {
			return nil, fmt.Errorf("invalid JSON: %w", uerr)
		}
		return nil, err
	}
	d := &configDoc{objects: map[string]*rawObject{"": top}}
	for _, o := range configObjects {
		parent, key := splitPath(o.path)
		if d.objects[parent] == nil {
			continue
		}
		obj, err := d.objects[parent].object(key)
		if err != nil {
			return nil, wrapPath(parent, err)
		}
		if obj != nil {
			d.objects[o.path] = obj
			o.alloc(&d.view)
		}
	}
	for _, m := range configMembers {
		parent, key := splitPath(m.path)
		if obj := d.objects[parent]; obj != nil {
			if err := obj.decode(key, m.field(&d.view)); err != nil {
				return nil, wrapPath(parent, err)
			}
		}
	}
	return d, nil
}

// wrapPath prefixes err with the path of the object it is about.
func wrapPath(path string, err error) error {
	if path == "" {
		return err
	}
	return fmt.Errorf("%s: %w", path, err)
}

// editedMembers names the members of config.json that ContainerEdits.Apply
// changes for edits.
func editedMembers(e *cdiapi.ContainerEdits) []string {
	return cdicompat.EditedMembers(e.ContainerEdits)
}

// spec is the decoded view that requests are read from and edits applied to.
func (d *configDoc) spec() *oci.Spec { return &d.view }

// encode returns config.json with the members named (editable ones)
// written back from the view; objects the edits had to create (process,
// linux, linux.resources) are added. The other members keep their bytes.
func (d *configDoc) encode(members ...string) ([]byte, error) {
	for _, name := range members {
		i := slices.IndexFunc(configMembers, func(m configMember) bool { return m.path == name })
		if i < 0 || !slices.Contains(cdicompat.EditableMembers(), name) {
			return nil, fmt.Errorf("internal error: %s is not an editable member of config.json", name)
		}
		field := configMembers[i].field(&d.view)
		if field == nil {
			continue // the edits did not create its parent: nothing to write
		}
		enc, err := json.Marshal(field)
		if err != nil {
			return nil, fmt.Errorf("encoding %s: %w", name, err)
		}
		if err := d.set(name, enc); err != nil {
			return nil, err
		}
	}
	return d.objects[""].marshal()
}

// set stores the encoding of the member at path in its object, creating
// the objects on its path that config.json did not have, and writes the
// changed objects back into their parents.
func (d *configDoc) set(path string, value json.RawMessage) error {
	parent, key := splitPath(path)
	d.mkObject(parent).set(key, value)
	for p := parent; p != ""; {
		up, k := splitPath(p)
		if err := d.objects[up].setObject(k, d.objects[p]); err != nil {
			return err
		}
		p = up
	}
	return nil
}

// mkObject returns the object at path, creating it and its parents.
func (d *configDoc) mkObject(path string) *rawObject {
	if o := d.objects[path]; o != nil {
		return o
	}
	o := newRawObject()
	d.objects[path] = o
	if path != "" {
		parent, _ := splitPath(path)
		d.mkObject(parent)
	}
	return o
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
