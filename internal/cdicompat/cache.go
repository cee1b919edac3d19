package cdicompat

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"

	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"
	"tags.cncf.io/container-device-interface/specs-go"

	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
)

// MaxSpecSize bounds one spec file read from a spec directory.
const MaxSpecSize = 16 << 20

// SpecFile is one file of a spec directory, as ReadSpecFiles read it.
type SpecFile struct {
	Dir, Name string
	// Priority is the index of Dir among the directories (higher wins).
	Priority int
	Data     []byte
	// Err is why the file could not be read (a FIFO, a device, a file
	// over MaxSpecSize, ...); Data is nil then.
	Err error
}

// Path is the file's path.
func (f *SpecFile) Path() string { return filepath.Join(f.Dir, f.Name) }

// ReadSpecFiles reads the files of dirs that the library reads as specs
// (SpecFiles), the way xpu-cdi reads every host file (fdio): opened without
// blocking relative to the directory listed, refused unless a regular file
// on an ordinary file system, at most MaxSpecSize bytes. A file that cannot
// be read is returned with its error; a directory that does not exist
// gives nothing; one that cannot be listed ends the walk with its error,
// after the files of the directories before it.
func ReadSpecFiles(dirs []string) ([]SpecFile, error) {
	var files []SpecFile
	err := walkSpecDirs(dirs, func(priority int, dir string, dirfd int, name string, err error) error {
		if errors.Is(err, ErrDirAbsent) {
			return nil
		}
		f := SpecFile{Dir: dir, Name: name, Priority: priority}
		f.Data, _, f.Err = fdio.ReadFileAt(dirfd, name, f.Path(), 0, MaxSpecSize)
		files = append(files, f)
		return nil
	})
	return files, err
}

// Spec is a spec file that parsed and validated.
type Spec struct {
	*specs.Spec
	Path     string
	Priority int
	Vendor   string
	Class    string
}

// Device is a device of a Spec.
type Device struct {
	*specs.Device
	Spec *Spec
}

// Specs is what the library's Cache resolves from the spec directories.
type Specs struct {
	// Specs are the specs that loaded, in the order they were read.
	Specs []*Spec
	// Devices are the devices by qualified name (vendor/class=name),
	// without those two specs of the same priority both define.
	Devices map[string]*Device
	// Errors are the problems of each spec file, by path (and of a
	// directory that could not be listed).
	Errors map[string][]error
}

// ResolveSpecs resolves files (from ReadSpecFiles) as the library's Cache
// does, without reading anything: the library only reads through
// os.ReadFile, which blocks on a FIFO and reads a link to /dev/zero until
// memory runs out, so xpu-cdi reads the files itself and resolves them
// here.
//
// Mirrors (library v1.1.2) (*Cache).refresh with ReadSpec and newSpec: each
// file parsed with ParseSpec (a file without data is an error), validated
// (specValidate, as newSpec's validate), its devices added under their
// qualified names; a device already defined by a spec of lower priority is
// replaced, one of the same priority is a conflict recorded for both files
// and dropped, one of higher priority stays. The library's optional
// external validator (SetSpecValidator) is never set by xpu-cdi and not
// run; neither is the annotation check, which in v1.1.2 accepts every
// map[string]string (its type assertion is to map[string]any).
func ResolveSpecs(files []SpecFile) *Specs {
	s := &Specs{Devices: map[string]*Device{}, Errors: map[string][]error{}}
	conflicts := map[string]bool{}
	for i := range files {
		f := &files[i]
		path := f.Path()
		spec, err := loadSpec(f)
		if err != nil {
			s.Errors[path] = append(s.Errors[path], fmt.Errorf("failed to load CDI Spec %w", err))
			continue
		}
		s.Specs = append(s.Specs, spec)
		for j := range spec.Devices {
			dev := &Device{Device: &spec.Devices[j], Spec: spec}
			q := parser.QualifiedName(spec.Vendor, spec.Class, dev.Name)
			if old, ok := s.Devices[q]; ok {
				switch {
				case spec.Priority < old.Spec.Priority:
					continue
				case spec.Priority == old.Spec.Priority:
					err := fmt.Errorf("conflicting device %q (specs %q, %q)", q, spec.Path, old.Spec.Path)
					s.Errors[spec.Path] = append(s.Errors[spec.Path], err)
					s.Errors[old.Spec.Path] = append(s.Errors[old.Spec.Path], err)
					conflicts[q] = true
					continue
				}
			}
			s.Devices[q] = dev
		}
	}
	for q := range conflicts {
		delete(s.Devices, q)
	}
	return s
}

// ListDevices returns the qualified names of the devices, sorted (Cache.ListDevices).
func (s *Specs) ListDevices() []string { return slices.Sorted(maps.Keys(s.Devices)) }

// Err joins the errors of every file, as Cache.Refresh returns them.
func (s *Specs) Err() error {
	var errs []error
	for _, p := range slices.Sorted(maps.Keys(s.Errors)) {
		errs = append(errs, errors.Join(s.Errors[p]...))
	}
	return errors.Join(errs...)
}

// loadSpec is ReadSpec on the bytes read.
func loadSpec(f *SpecFile) (*Spec, error) {
	path := f.Path()
	if f.Err != nil {
		return nil, fmt.Errorf("failed to read CDI Spec %q: %w", path, f.Err)
	}
	raw, err := cdiapi.ParseSpec(f.Data)
	if err != nil {
		return nil, fmt.Errorf("failed to parse CDI Spec %q: %w", path, err)
	}
	if raw == nil {
		return nil, fmt.Errorf("failed to parse CDI Spec %q, no Spec data", path)
	}
	vendor, class := parser.ParseQualifier(raw.Kind)
	if err := specValidate(raw, vendor, class); err != nil {
		return nil, fmt.Errorf("invalid CDI Spec: %w", err)
	}
	return &Spec{Spec: raw, Path: filepath.Clean(path), Priority: f.Priority, Vendor: vendor, Class: class}, nil
}

// specValidate is (*Spec).validate with newDevice's (*Device).validate.
func specValidate(raw *specs.Spec, vendor, class string) error {
	if err := specs.ValidateVersion(raw); err != nil {
		return err
	}
	if err := parser.ValidateVendorName(vendor); err != nil {
		return err
	}
	if err := parser.ValidateClassName(class); err != nil {
		return err
	}
	if err := (&cdiapi.ContainerEdits{ContainerEdits: &raw.ContainerEdits}).Validate(); err != nil {
		return err
	}
	seen := make(map[string]bool, len(raw.Devices))
	for i := range raw.Devices {
		d := &raw.Devices[i]
		if err := deviceValidate(d); err != nil {
			return fmt.Errorf("failed add device %q: %w", d.Name, err)
		}
		if seen[d.Name] {
			return fmt.Errorf("invalid spec, multiple device %q", d.Name)
		}
		seen[d.Name] = true
	}
	if len(seen) == 0 {
		return errors.New("invalid spec, no devices")
	}
	return nil
}

func deviceValidate(d *specs.Device) error {
	if err := parser.ValidateDeviceName(d.Name); err != nil {
		return err
	}
	if editsEmpty(&d.ContainerEdits) {
		return errors.New("invalid device, empty device edits")
	}
	if err := (&cdiapi.ContainerEdits{ContainerEdits: &d.ContainerEdits}).Validate(); err != nil {
		return fmt.Errorf("invalid device %q: %w", d.Name, err)
	}
	return nil
}

// editsEmpty is (*ContainerEdits).isEmpty.
func editsEmpty(e *specs.ContainerEdits) bool {
	return len(e.Env) == 0 && len(e.DeviceNodes) == 0 && len(e.Hooks) == 0 && len(e.Mounts) == 0 &&
		len(e.AdditionalGIDs) == 0 && e.IntelRdt == nil && len(e.NetDevices) == 0
}
