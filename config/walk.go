package config

import (
	"fmt"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/cpupool/nri-cpupool/internal/cpulist"
)

// docFindings is what one walk of the document beside the Config type
// finds: the keys that name no field, and the values whose kind does not
// fit their key, each in the order of the file. The strict decoder knows
// both but names Go types ("field sahred not found in type config.Pools",
// "cannot unmarshal !!str `4` into int"), which mean nothing to an
// operator; YAML paths, the nearest known key and the kind a key takes do.
// One walk serves both, as the file is parsed on every reload.
type docFindings struct {
	unknown []unknownKey
	typed   []typeError
	// exhausted says the walk stopped at its budget: what it found is
	// only part of what the file holds (tooManyAliasedValues).
	exhausted bool

	// merged are the merges already walked, by what the walk of one
	// depends on: the same mapping merged again at the same place (a
	// repeated "<<" key, or two merged mappings that merge a third) adds
	// no key and no finding, and following each anew costs K^L visits for
	// K repeats L merges deep (a 1 KiB file hung validate and the daemon).
	merged map[mergeVisit]bool
	// visits counts the nodes walked; budget bounds them (countNodes plus maxAliasedVisits).
	visits, budget int
}

// mergeVisit is one walk of a merged mapping: its node, the type it
// fills, the path its keys take, the depth and whether kinds are judged.
type mergeVisit struct {
	n     *yaml.Node
	t     reflect.Type
	path  string
	depth int
	kinds bool
}

// maxKeyDepth bounds the walk: the configuration nests a few levels, and a
// file that nests deeper is wrong anyway (the decoder reports it).
const maxKeyDepth = 16

// maxAliasedVisits is how many nodes the walk visits beyond those the file
// holds, through aliases (the same list under a hundred keys is walked a
// hundred times, once for each path). Merges are walked once a place, so
// only aliases the type nests multiply, and no real file comes near; it is
// the backstop, as "excessive aliasing" is the decoder's.
const maxAliasedVisits = 100_000

// tooManyAliasedValues says the walk ran out of its budget.
var tooManyAliasedValues = fmt.Sprintf("the file's anchors and aliases (&name, *name, <<: *name) expand it by more than %d values, too many to check; write the values out, or use fewer aliases", maxAliasedVisits)

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// findDocProblems walks data beside the Config type, as the decoder
// fills it, and returns what it finds; nothing when data is no YAML (the
// decoder says why).
func findDocProblems(data []byte) docFindings {
	return findDocProblemsIn(data, reflect.TypeFor[Config]())
}

// findDocProblemsIn is findDocProblems for a document decoded into a value
// of type t (ExplainDecodeError).
func findDocProblemsIn(data []byte, t reflect.Type) docFindings {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) == 0 {
		return docFindings{}
	}
	f := docFindings{merged: map[mergeVisit]bool{}, budget: countNodes(&doc) + maxAliasedVisits}
	f.walk(doc.Content[0], t, "", 0, true)
	return f
}

// countNodes is how many nodes the document holds, an alias one node
// (not what it stands for): what a walk without aliases visits at most.
func countNodes(root *yaml.Node) int {
	n := 0
	for stack := []*yaml.Node{root}; len(stack) > 0; {
		top := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		n++
		stack = append(stack, top.Content...)
	}
	return n
}

// walk visits node n, which the decoder reads into a value of type t at
// path. kinds says whether values are still judged: not below a null,
// which leaves the default as the decoder does, though its keys are still
// looked up.
func (f *docFindings) walk(n *yaml.Node, t reflect.Type, path string, depth int, kinds bool) {
	if depth > maxKeyDepth {
		return
	}
	if f.visits++; f.visits > f.budget {
		f.exhausted = true
		return
	}
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.ShortTag() == "!!null" {
		kinds = false
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	wrong := func(msg string) {
		if kinds {
			f.typed = append(f.typed, typeError{Path: path, Line: n.Line, Message: msg})
		}
	}
	if t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
		// Reads its own node: no keys below it; its own words if refused.
		if kinds {
			if msg := ownValueError(t, n); msg != "" {
				wrong(msg)
			}
		}
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			wrong(fmt.Sprintf("%s, want a mapping of keys (key: value, on the lines below it)", given(n)))
			return
		}
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "<<" { // a merge: its keys are this mapping's
				f.walkMerge(v, t, path, depth+1, kinds)
				continue
			}
			if ft, ok := fields[k.Value]; ok {
				f.walk(v, ft, joinPath(path, k.Value), depth+1, kinds)
				continue
			}
			if et := inlineMapElem(t); et != nil {
				if closest(k.Value, fields) != "" {
					// The decoder puts every other key into the inline
					// map, and refuses its value if it is not of the
					// map's kind; but a key this near a field is a typo
					// of it, not a key of the map whose value is wrong
					// ("annotation: {...}" wants no string).
					u := newUnknownKey(path, k, fields)
					u.inInlineMap = true
					f.unknown = append(f.unknown, u)
					continue
				}
				f.walk(v, et, joinPath(path, keyEcho(k.Value)), depth+1, kinds)
				continue
			}
			f.unknown = append(f.unknown, newUnknownKey(path, k, fields))
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			wrong(fmt.Sprintf("%s, want a mapping (name: value)", given(n)))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			f.walk(n.Content[i+1], t.Elem(), joinPath(path, keyEcho(n.Content[i].Value)), depth+1, kinds)
		}
	case reflect.Slice, reflect.Array:
		if n.Kind != yaml.SequenceNode {
			wrong(fmt.Sprintf("%s, want a list ([a, b], or one \"- item\" a line)", given(n)))
			return
		}
		for i, v := range n.Content {
			f.walk(v, t.Elem(), fmt.Sprintf("%s[%d]", path, i), depth+1, kinds)
		}
	default:
		if kinds {
			if msg := scalarError(t, n); msg != "" {
				wrong(msg)
			}
		}
	}
}

// walkMerge walks the mapping v that a "<<" key merges into a mapping of
// type t at path, unless it was walked there already; a list of mappings
// ("<<: [*a, *b]") merges each of them, as the decoder does.
func (f *docFindings) walkMerge(v *yaml.Node, t reflect.Type, path string, depth int, kinds bool) {
	for v.Kind == yaml.AliasNode && v.Alias != nil {
		v = v.Alias
	}
	if v.Kind == yaml.SequenceNode {
		for _, m := range v.Content {
			for m.Kind == yaml.AliasNode && m.Alias != nil {
				m = m.Alias
			}
			if m.Kind == yaml.SequenceNode {
				// The decoder refuses a list in the list (and one
				// may hold itself: "&l [*l]"); the walk has nothing
				// of the type to say of it.
				continue
			}
			f.walkMerge(m, t, path, depth, kinds)
		}
		return
	}
	key := mergeVisit{n: v, t: t, path: path, depth: depth, kinds: kinds}
	if f.merged[key] {
		return
	}
	f.merged[key] = true
	f.walk(v, t, path, depth, kinds)
}

// yamlFields maps a struct's YAML keys to their types, as yaml.v3 names
// them: the tag's name, else the lower-cased field name; inline structs
// lend theirs, an inline map none.
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
		if strings.Contains(","+opts+",", ",inline,") && f.Type.Kind() == reflect.Map {
			continue // no key of its own: inlineMapElem
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		fields[name] = f.Type
	}
	return fields
}

// inlineMapElem is the value type of a struct's `yaml:",inline"` map,
// which takes every key that names no field; nil if it has none.
func inlineMapElem(t reflect.Type) reflect.Type {
	for f := range t.Fields() {
		_, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if f.IsExported() && f.Type.Kind() == reflect.Map && strings.Contains(","+opts+",", ",inline,") {
			return f.Type.Elem()
		}
	}
	return nil
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
