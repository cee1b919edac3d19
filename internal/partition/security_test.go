package partition

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A process holding a card sets its command name (prctl PR_SET_NAME, any
// bytes but NUL) to terminal escapes: the admin running `partition show`
// or `apply` sees them escaped, never raw (discover.CleanText).
func TestProcessCommandEscaped(t *testing.T) {
	tr := build(t, p800SRIOV())
	evil := "\x1b]0;owned\x07\x1b[2J\u202e"
	defer holdOpen(t, tr, 4242, 7, evil, "/dev/xpu2")()
	s, err := Show(context.Background(), config(tr))
	require.NoError(t, err)
	require.Len(t, s.Cards[0].InUse, 1)
	got := s.Cards[0].InUse[0]
	require.Equal(t, `\x1b]0;owned\a\x1b[2J\u202e`, got.Command)
	require.False(t, strings.ContainsAny(got.String(), "\x1b\x07\u202e"), got.String())

	l, _ := ParseLayout("0=4")
	_, err = Apply(context.Background(), config(tr), l)
	require.ErrorIs(t, err, ErrInUse)
	require.False(t, strings.ContainsAny(err.Error(), "\x1b\x07\u202e"), err.Error())
}
