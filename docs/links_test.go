// Package docs holds the project's documentation; its test keeps the
// relative links of every Markdown file of the repository working.
package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var (
	link    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *$`)
	// GitHub's anchors keep letters, digits, '-', '_' and spaces (then dashes).
	notAnchor = regexp.MustCompile(`[^\p{L}\p{N}\- _]`)
)

// TestLinks: every relative link of a Markdown file names a file or
// directory that exists, and an anchor into a Markdown file names one of
// its headings (as GitHub makes anchors), so that moving a section cannot
// leave a dead link behind.
func TestLinks(t *testing.T) {
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		a := map[string]bool{}
		for _, m := range heading.FindAllStringSubmatch(stripCode(string(data), false), -1) {
			a[slug(m[1])] = true
		}
		anchors[path] = a
		return a
	}
	var pages int
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".md") {
			return nil
		}
		pages++
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		rel, _ := filepath.Rel(root, path)
		for _, m := range link.FindAllStringSubmatch(stripCode(string(data), true), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			dest := path
			if file != "" {
				dest = filepath.Join(filepath.Dir(path), filepath.FromSlash(file))
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s: link %s: %v", rel, target, err)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(dest, ".md") && !anchorsOf(dest)[anchor] {
				t.Errorf("%s: link %s: no heading with anchor #%s", rel, target, anchor)
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, pages, 10, "the walk saw the repository's Markdown files")
}

// stripCode drops fenced code blocks (no headings, no links there) and, with
// inline, inline code (no links there; headings keep it in their anchors).
func stripCode(s string, inline bool) string {
	var b strings.Builder
	fenced := false
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		if !inline {
			b.WriteString(line + "\n")
			continue
		}
		parts := strings.Split(line, "`")
		for i := 0; i < len(parts); i += 2 {
			b.WriteString(parts[i])
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func slug(h string) string {
	h = strings.ToLower(strings.ReplaceAll(h, "`", ""))
	return strings.ReplaceAll(notAnchor.ReplaceAllString(h, ""), " ", "-")
}
