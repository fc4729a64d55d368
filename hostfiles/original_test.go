package hostfiles

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// originalSource wants one file to hold "0-3", and takes a file first
// seen holding "0-3" as having inherited it from an original "0-7"
// (Change.Original), as housekeeping does for a forked thread.
type originalSource struct {
	path   string
	wanted bool
}

func (s *originalSource) Owner() string { return "housekeeping" }

func (s *originalSource) Plan() (Plan, error) {
	if !s.wanted {
		return Plan{}, nil
	}
	return Plan{Changes: []Change{{Path: s.path,
		Want: func(string) (string, error) { return "0-3", nil },
		Original: func(content string) string {
			if content == "0-3" {
				return "0-7"
			}
			return content
		}}}}, nil
}

// TestOriginalOfAFileFirstSeen: a file first seen with the wanted value
// already is recorded with the original Change.Original gives, not left
// alone, and gets that original when no longer wanted; a file already
// recorded keeps its record.
func TestOriginalOfAFileFirstSeen(t *testing.T) {
	tr := newTree(t, map[string]string{"affinity": "0-3"})
	src := &originalSource{path: tr.path("affinity"), wanted: true}
	in := openInstance(t, &faultFS{}, tr, bootA, src)
	require.NoError(t, in.r.Flush())
	rec, ok := in.j.Get(tr.path("affinity"))
	require.True(t, ok, "recorded although it held the wanted value")
	assert.Equal(t, "0-7", rec.Original)
	assert.Equal(t, "0-3", tr.read(t, "affinity"))
	require.NoError(t, in.r.Flush())
	rec, _ = in.j.Get(tr.path("affinity"))
	assert.Equal(t, "0-7", rec.Original, "a record keeps its first original")

	src.wanted = false
	require.NoError(t, in.r.Flush())
	assert.Equal(t, "0-7", tr.read(t, "affinity"), "widened on release")
	assert.Equal(t, 0, in.j.Len())
}
