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
	path := e.Path
	if path == "" {
		path = "the file" // its root: a list or a value where keys go
	}
	return fmt.Sprintf("line %d: %s: %s", e.Line, path, e.Message)
}

// ownLine is the "line N: " an UnmarshalYAML method puts before its
// message.
var ownLine = regexp.MustCompile(`^(yaml: )?line \d+: `)

// ownValueError is what is wrong with n for a type t that reads its own
// node (Duration, Frequency): it takes a single value and says in its own
// words what is wrong with it; the path is put before them. "" if n fits.
func ownValueError(t reflect.Type, n *yaml.Node) string {
	if n.Kind != yaml.ScalarNode {
		return given(n) + ", want a single value"
	}
	if err := n.Decode(reflect.New(t).Interface()); err != nil {
		return ownLine.ReplaceAllString(err.Error(), "")
	}
	return ""
}

// scalarError is what is wrong with n for a key of a plain type t (a
// number, a string, a boolean): the decoder refuses it, or takes a
// fraction for a whole number. "" if n fits.
func scalarError(t reflect.Type, n *yaml.Node) string {
	if err := n.Decode(reflect.New(t).Interface()); err != nil || fraction(t, n) {
		return fmt.Sprintf("%s, want %s", given(n), want(t, n))
	}
	return ""
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
