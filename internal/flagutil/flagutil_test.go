package flagutil

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSplitList(t *testing.T) {
	require.Equal(t, []string{"a", "b", "c"}, SplitList([]string{"a, b", "", " c ,,"}))
	require.Nil(t, SplitList(nil))
}
