package config

import (
	"fmt"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/cpupool/nri-cpupool/internal/cpulist"
)

// unknownKey is a key of the file that names no configuration key: its
// YAML path ("pools.sahred"), its line, and the closest known key at that
// place, if one is close enough to be a typo.
type unknownKey struct {
	Path    string
	Line    int
	Suggest string
}

func (u unknownKey) String() string {
	s := fmt.Sprintf("line %d: unknown key %s", u.Line, u.Path)
	if u.Suggest != "" {
		s += "; did you mean " + u.Suggest + "?"
	}
	return s
}

// maxKeyDepth bounds the walk: the configuration nests a few levels, and a
// file that nests deeper is wrong anyway (the decoder reports it).
const maxKeyDepth = 16

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// unknownKeys walks the document beside the Config type, as the strict
// decoder does, and returns every key that names no field. The decoder
// knows them too but names Go types ("field sahred not found in type
// config.Pools"), which mean nothing to an operator; the YAML path and
// the nearest known key do.
func unknownKeys(data []byte) []unknownKey {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) == 0 {
		return nil
	}
	var out []unknownKey
	walkKeys(doc.Content[0], reflect.TypeFor[Config](), "", 0, &out)
	return out
}

func walkKeys(n *yaml.Node, t reflect.Type, path string, depth int, out *[]unknownKey) {
	if depth > maxKeyDepth {
		return
	}
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
		return // reads its own node
	}
	switch {
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "<<" { // a merge: its keys are this mapping's
				walkKeys(v, t, path, depth+1, out)
				continue
			}
			if ft, ok := fields[k.Value]; ok {
				walkKeys(v, ft, joinPath(path, k.Value), depth+1, out)
				continue
			}
			u := unknownKey{Path: joinPath(path, keyEcho(k.Value)), Line: k.Line}
			if s := closest(k.Value, fields); s != "" {
				u.Suggest = joinPath(path, s)
			}
			*out = append(*out, u)
		}
	case t.Kind() == reflect.Map && n.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			walkKeys(n.Content[i+1], t.Elem(), joinPath(path, keyEcho(n.Content[i].Value)), depth+1, out)
		}
	case (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && n.Kind == yaml.SequenceNode:
		for i, v := range n.Content {
			walkKeys(v, t.Elem(), fmt.Sprintf("%s[%d]", path, i), depth+1, out)
		}
	}
}

// yamlFields maps a struct's YAML keys to their types, as yaml.v3 names
// them: the tag's name, else the lower-cased field name; inline structs
// lend theirs.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if strings.Contains(","+opts+",", ",inline,") && f.Type.Kind() == reflect.Struct {
			for k, v := range yamlFields(f.Type) {
				fields[k] = v
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		fields[name] = f.Type
	}
	return fields
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// keyEcho repeats a key in a path: plain when it is a short printable
// word, else quoted and bounded like any value from the file.
func keyEcho(k string) string {
	if len(k) > 0 && len(k) <= 64 && strings.IndexFunc(k, func(r rune) bool {
		return !(r == '-' || r == '_' || r == '/' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) < 0 {
		return k
	}
	return cpulist.EchoLong(k)
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
