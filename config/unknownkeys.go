package config

import (
	"fmt"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"
)

// unknownKey is a key of the file that names no configuration key: its
// YAML path ("pools.sahred"), its line, and the closest known key at that
// place, if one is close enough to be a typo.
type unknownKey struct {
	Path    string
	Line    int
	Suggest string
	// inInlineMap says the decoder took the key into an inline map: its
	// error, if any, is of the value's kind on the key's line, which this
	// key explains.
	inInlineMap bool
}

func (u unknownKey) String() string {
	s := fmt.Sprintf("line %d: unknown key %s", u.Line, u.Path)
	if u.Suggest != "" {
		s += "; did you mean " + u.Suggest + "?"
	}
	return s
}

// newUnknownKey is key k of a mapping at path whose known keys are
// fields, which names none of them.
func newUnknownKey(path string, k *yaml.Node, fields map[string]reflect.Type) unknownKey {
	u := unknownKey{Path: joinPath(path, keyEcho(k.Value)), Line: k.Line}
	if s := closest(k.Value, fields); s != "" {
		u.Suggest = joinPath(path, s)
	}
	return u
}

// closest returns the known key nearest to k by edit distance (case
// ignored, a swap of two letters counting as one edit), when it is near
// enough to be a typo of it: at most 2 edits, or a third of its length.
func closest(k string, known map[string]reflect.Type) string {
	if len(k) > 64 {
		return "" // no key is that long; and the distance is quadratic
	}
	best, bestD := "", -1
	for name := range known {
		d := EditDistance(strings.ToLower(k), strings.ToLower(name))
		if d > max(2, len(name)/3) {
			continue
		}
		if bestD < 0 || d < bestD || d == bestD && name < best {
			best, bestD = name, d
		}
	}
	return best
}

// EditDistance is the optimal-string-alignment distance: insertions,
// deletions, substitutions and swaps of adjacent bytes, one edit each. It
// takes time proportional to len(a)*len(b): callers bound the lengths.
func EditDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
