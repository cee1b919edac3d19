package docs

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// ticketCite is "issue" or "finding" (any case, maybe plural) followed by a
// number: a ticket of a tracker that is not in the repository, which tells
// a reader nothing. A public tracker is cited by its repository
// (kubernetes/kubernetes#141433), which this does not match.
var ticketCite = regexp.MustCompile(`(?i)\b(issue|finding)s?\s+#?[0-9]+`)

// TestNoTicketComments: no Go comment of the module cites a ticket by
// number. A comment says what the code does and why; where a test
// reproduces an attack, it names the attack's entry in docs/security.md.
func TestNoTicketComments(t *testing.T) {
	fset := token.NewFileSet()
	files := walkRepo(t, ".go", func(path, _ string) error {
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, g := range f.Comments {
			for _, c := range g.List {
				if m := ticketCite.FindString(c.Text); m != "" {
					t.Errorf("%s: a comment cites %q: say what and why instead (an attack by its docs/security.md entry)", fset.Position(c.Pos()), m)
				}
			}
		}
		return nil
	})
	require.Greater(t, files, 100, "the walk found the module's Go files")
}

// TestTicketCite: the pattern catches the forms the comments used and lets
// a public tracker's repository#number through.
func TestTicketCite(t *testing.T) {
	for _, s := range []string{"issue 17's finding 3", "(Issue 28, reliability)", "finding 5", "issues 1548, 1629", "issue #6"} {
		require.True(t, ticketCite.MatchString(s), s)
	}
	for _, s := range []string{"kubernetes/kubernetes#141433", "containers/common#2460", "the issue is", "tissue 5"} {
		require.False(t, ticketCite.MatchString(s), s)
	}
}

// TestNoTicketCitesInMarkdown: the same for the Markdown files of the
// repository, which a reader reads without the tracker too.
func TestNoTicketCitesInMarkdown(t *testing.T) {
	files := walkRepo(t, ".md", func(path, rel string) error {
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(data), "\n") {
			if m := ticketCite.FindString(line); m != "" {
				t.Errorf("%s:%d cites %q: say what and why instead (a public tracker as owner/repo#N)", rel, i+1, m)
			}
		}
		return nil
	})
	require.Greater(t, files, 10, "the walk found the repository's Markdown files")
}

// walkRepo calls check with the path and the repository-relative path of
// every file of the repository whose name ends in ext (hidden, testdata and
// vendor directories left out) and returns how many it checked.
func walkRepo(t *testing.T, ext string, check func(path, rel string) error) int {
	t.Helper()
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	var files int
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ext) {
			return nil
		}
		files++
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		return check(path, rel)
	})
	require.NoError(t, err)
	return files
}
