package config

import "reflect"

// ExplainDecodeError says what a strict yaml.v3 decoder (KnownFields) refused
// in data, decoded into a value of type t, in the words Parse uses for the
// config file: unknown keys by their YAML path with the nearest known key,
// values of the wrong kind by their key path with the kind the key takes,
// instead of the decoder's Go type names ("field cpu not found in type
// simulate.Resize", "cannot unmarshal !!str `x` into simulate.Create").
// Other YAML files the commands read (simulate's requests) use it so that
// their errors read as validate's do.
func ExplainDecodeError(data []byte, t reflect.Type, err error) string {
	return decodeError(err, findDocProblemsIn(data, t))
}

// KeyEcho repeats a key of such a file in an error as Parse does: plain
// when it is a short printable word, else quoted and bounded.
func KeyEcho(k string) string { return keyEcho(k) }
