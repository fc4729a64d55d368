package config

import (
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/cpupool/nri-cpupool/internal/cpulist"
)

// typeError is a value of the file whose kind does not fit its key: a
// string where a number goes (count: "4"), a list where a string goes. The
// decoder says "line 3: cannot unmarshal !!str `4` into int", which names
// neither the key nor what to write; this names both.
type typeError struct {
	Path    string
	Line    int
	Message string
}

func (e typeError) String() string {
	return fmt.Sprintf("line %d: %s: %s", e.Line, e.Path, e.Message)
}

// typeErrors walks the document beside the Config type, as the decoder
// does, and decodes each value into its field's type alone, to find the
// values the decoder refuses with their key paths. The values of types
// that read their own node (Duration, Frequency) say what is wrong in
// their own words; the path is put before them.
func typeErrors(data []byte) []typeError {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) == 0 {
		return nil
	}
	var out []typeError
	walkTypes(doc.Content[0], reflect.TypeFor[Config](), "", 0, &out)
	return out
}

// ownLine is the "line N: " an UnmarshalYAML method puts before its
// message.
var ownLine = regexp.MustCompile(`^(yaml: )?line \d+: `)

func walkTypes(n *yaml.Node, t reflect.Type, path string, depth int, out *[]typeError) {
	if depth > maxKeyDepth {
		return
	}
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.ShortTag() == "!!null" {
		return // leaves the default, as the decoder does
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	fail := func(msg string) {
		*out = append(*out, typeError{Path: path, Line: n.Line, Message: msg})
	}
	if t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
		if n.Kind != yaml.ScalarNode {
			fail(given(n) + ", want a single value")
		} else if err := n.Decode(reflect.New(t).Interface()); err != nil {
			fail(ownLine.ReplaceAllString(err.Error(), ""))
		}
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			fail(fmt.Sprintf("%s, want a mapping of keys (key: value, on the lines below it)", given(n)))
			return
		}
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "<<" { // a merge: its keys are this mapping's
				walkTypes(v, t, path, depth+1, out)
				continue
			}
			if ft, ok := fields[k.Value]; ok {
				walkTypes(v, ft, joinPath(path, k.Value), depth+1, out)
			}
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			fail(fmt.Sprintf("%s, want a mapping (name: value)", given(n)))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			walkTypes(n.Content[i+1], t.Elem(), joinPath(path, keyEcho(n.Content[i].Value)), depth+1, out)
		}
	case reflect.Slice, reflect.Array:
		if n.Kind != yaml.SequenceNode {
			fail(fmt.Sprintf("%s, want a list ([a, b], or one \"- item\" a line)", given(n)))
			return
		}
		for i, v := range n.Content {
			walkTypes(v, t.Elem(), fmt.Sprintf("%s[%d]", path, i), depth+1, out)
		}
	default:
		if err := n.Decode(reflect.New(t).Interface()); err != nil || fraction(t, n) {
			fail(fmt.Sprintf("%s, want %s", given(n), want(t, n)))
		}
	}
}

// fraction tells whether n is a number with a fraction for an integer
// key: the decoder truncates it without a word (count: 1.5 reads as 1).
func fraction(t reflect.Type, n *yaml.Node) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
	default:
		return false
	}
	if n.ShortTag() != "!!float" {
		return false
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64)
	return err != nil || f != math.Trunc(f)
}

// given says what the file has at a node.
func given(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	switch n.ShortTag() {
	case "!!str":
		return "the string " + cpulist.EchoLong(n.Value)
	case "!!int", "!!float":
		return "the number " + cpulist.EchoLong(n.Value)
	case "!!bool":
		return "the boolean " + cpulist.EchoLong(n.Value)
	}
	return cpulist.EchoLong(n.Value)
}

// want says what a key of type t takes, with a hint for the usual
// mistake: a number or a boolean written in quotes.
func want(t reflect.Type, n *yaml.Node) string {
	unquoted := ""
	if n.Kind == yaml.ScalarNode && n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
		unquoted = " (write it without quotes)"
	}
	switch t.Kind() {
	case reflect.Bool:
		if n.Value != "true" && n.Value != "false" {
			unquoted = ""
		}
		return "true or false" + unquoted
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if _, err := strconv.ParseInt(strings.TrimSpace(n.Value), 10, t.Bits()); err != nil {
			unquoted = ""
		}
		return "a whole number" + unquoted
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if _, err := strconv.ParseUint(strings.TrimSpace(n.Value), 10, t.Bits()); err != nil {
			unquoted = ""
		}
		return "a whole number ≥ 0" + unquoted
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	}
	return t.Kind().String()
}
