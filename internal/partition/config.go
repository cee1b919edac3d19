package partition

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/xpu-cdi/xpu-cdi/internal/fdio"
)

// DefaultConfigFile is the node's layout, applied at boot by the host
// package (`xpu-cdi partition apply --config /etc/xpu-cdi/partitions.conf`).
const DefaultConfigFile = "/etc/xpu-cdi/partitions.conf"

// maxConfigSize bounds what is read of a layout file.
const maxConfigSize = 64 << 10

// maxNameLen bounds a layout's name; names are also label values (the
// installer's request label may name one), which hold at most 63 characters.
const maxNameLen = 63

// ErrNoLayout is returned by ReadConfig for a file that holds only
// comments and blank lines: the node keeps its layout.
var ErrNoLayout = errors.New("no layout")

// LayoutFile is a layout file: either one unnamed layout, or named layouts,
// each under a "[NAME]" line, as mig-parted keeps named configurations in
// one file.
type LayoutFile struct {
	// Unnamed is the layout of a file without sections.
	Unnamed Layout
	// Names are the sections in file order; Named holds their layouts.
	Names []string
	Named map[string]Layout
}

// Layout returns the layout to apply: name "" selects the unnamed layout of
// a file without sections, any other name a section. A wrong choice is an
// error that lists what the file has.
func (c *LayoutFile) Layout(name string) (Layout, error) {
	switch {
	case name == "" && len(c.Names) == 0:
		if c.Unnamed == nil {
			return nil, ErrNoLayout
		}
		return c.Unnamed, nil
	case name == "":
		return nil, fmt.Errorf("the file holds named layouts (%s): choose one with --name", strings.Join(c.Names, ", "))
	case len(c.Names) == 0:
		return nil, fmt.Errorf("layout %q asked, but the file has no [NAME] sections: drop --name", name)
	}
	l, ok := c.Named[name]
	if !ok {
		return nil, fmt.Errorf("no layout named %q in the file (it has %s)", name, strings.Join(c.Names, ", "))
	}
	return l, nil
}

// ParseConfig reads a layout file. '#' starts a comment and blank lines are
// ignored. Without sections the file is one layout, as --layout takes it,
// whose entries may be spread over several lines (the lines are joined with
// commas). With sections, every layout follows a "[NAME]" line (NAME: a
// letter or digit, then letters, digits, '-', '_' or '.', at most 63) and
// every entry belongs to a section; a section may not be empty or repeated.
func ParseConfig(data []byte) (*LayoutFile, error) {
	c := &LayoutFile{Named: map[string]Layout{}}
	var (
		section string
		parts   []string
		lineOf  = map[string]int{}
	)
	flush := func() error {
		if section == "" {
			return nil
		}
		if len(parts) == 0 {
			return fmt.Errorf("line %d: layout [%s] has no entries", lineOf[section], section)
		}
		l, err := ParseLayout(strings.Join(parts, ","))
		if err != nil {
			return fmt.Errorf("layout [%s]: %w", section, err)
		}
		c.Named[section] = l
		return nil
	}
	for i, line := range strings.Split(string(data), "\n") {
		line, _, _ = strings.Cut(line, "#")
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "[") {
			name, ok := strings.CutSuffix(strings.TrimPrefix(line, "["), "]")
			if !ok {
				return nil, fmt.Errorf("line %d: %q: a section line is [NAME]", i+1, line)
			}
			if err := checkName(name); err != nil {
				return nil, fmt.Errorf("line %d: %w", i+1, err)
			}
			if section == "" && len(parts) > 0 {
				return nil, fmt.Errorf("line %d: [%s] follows entries outside any section: in a file with named layouts every entry belongs to one", i+1, name)
			}
			if _, dup := lineOf[name]; dup {
				return nil, fmt.Errorf("line %d: layout [%s] already defined on line %d", i+1, name, lineOf[name])
			}
			if err := flush(); err != nil {
				return nil, err
			}
			section, parts, lineOf[name] = name, nil, i+1
			c.Names = append(c.Names, name)
			continue
		}
		line = strings.TrimSuffix(line, ",")
		if _, err := ParseLayout(line); err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		parts = append(parts, line)
	}
	if err := flush(); err != nil {
		return nil, err
	}
	if section == "" && len(parts) > 0 {
		l, err := ParseLayout(strings.Join(parts, ","))
		if err != nil {
			return nil, err
		}
		c.Unnamed = l
	}
	return c, nil
}

// checkName checks a section's name.
func checkName(name string) error {
	if name == "" || len(name) > maxNameLen {
		return fmt.Errorf("layout name %q: 1 to %d characters", name, maxNameLen)
	}
	for i, r := range name {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !alnum && (i == 0 || !slices.Contains([]rune{'-', '_', '.'}, r)) {
			return fmt.Errorf("layout name %q: letters, digits, '-', '_' and '.', starting with a letter or digit", name)
		}
	}
	return nil
}

// ReadConfig reads the layout file at path (a regular file of at most 64
// KiB) and returns the layout name selects (see LayoutFile.Layout). A file
// without sections that holds no entry gives ErrNoLayout.
func ReadConfig(path, name string) (Layout, error) {
	c, err := ReadLayoutFile(path)
	if err != nil {
		return nil, err
	}
	l, err := c.Layout(name)
	if err != nil && !errors.Is(err, ErrNoLayout) {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return l, err
}

// ReadLayoutFile reads and parses the layout file at path (a regular file
// of at most 64 KiB).
func ReadLayoutFile(path string) (*LayoutFile, error) {
	data, _, err := fdio.ReadFileAt(unix.AT_FDCWD, path, path, 0, maxConfigSize)
	if err != nil {
		return nil, fmt.Errorf("reading the layout file: %w", err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// FormatConfig writes l in the file's form, one entry a line, under a
// "[name]" line when name is not empty.
func FormatConfig(l Layout, name string) (string, error) {
	var b strings.Builder
	if name != "" {
		if err := checkName(name); err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "[%s]\n", name)
	}
	for _, e := range l {
		fmt.Fprintf(&b, "%s=%d\n", e.Selector, e.VFs)
	}
	return b.String(), nil
}
