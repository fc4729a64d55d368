package hostfiles

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
)

// recordMap is the journal's records by host path, encoded as
// encoding/json encodes a map[string]Record (keys sorted, the Record's
// fields in order, omitempty honoured, strings escaped alike), byte for
// byte, without reflection: a pass that changes a file writes the whole
// journal, and the reflective encoding made two objects per record
// (issue 45: a pass's allocations grew with the files changed, about
// 1,300 per pass at 1,000 running). TestRecordMapEncodesAsJSON holds it
// to encoding/json's output, and fails when Record gains a field.
type recordMap map[string]Record

// MarshalJSON encodes the records as encoding/json does a
// map[string]Record.
func (m recordMap) MarshalJSON() ([]byte, error) {
	if m == nil {
		return []byte("null"), nil
	}
	var buf bytes.Buffer
	buf.Grow(64 + 160*len(m))
	// Strings go through an Encoder for encoding/json's escaping; a
	// pointer the loop reuses keeps each from being boxed anew. Its
	// trailing newlines are whitespace, dropped when json.Marshal
	// compacts what a Marshaler returns.
	enc := json.NewEncoder(&buf)
	s := new(string)
	str := func(v string) error {
		*s = v
		return enc.Encode(s)
	}
	buf.WriteByte('{')
	for i, path := range slices.Sorted(maps.Keys(m)) {
		r := m[path]
		if i > 0 {
			buf.WriteByte(',')
		}
		if err := str(path); err != nil {
			return nil, err
		}
		buf.WriteString(`:{"original":`)
		if err := str(r.Original); err != nil {
			return nil, err
		}
		buf.WriteString(`,"owner":`)
		if err := str(r.Owner); err != nil {
			return nil, err
		}
		if r.Order != 0 {
			buf.WriteString(`,"order":`)
			buf.Write(strconv.AppendInt(buf.AvailableBuffer(), int64(r.Order), 10))
		}
		if r.Identity != "" {
			buf.WriteString(`,"identity":`)
			if err := str(r.Identity); err != nil {
				return nil, err
			}
		}
		if r.Root != "" {
			buf.WriteString(`,"root":`)
			if err := str(r.Root); err != nil {
				return nil, err
			}
		}
		if r.Rel != "" {
			buf.WriteString(`,"rel":`)
			if err := str(r.Rel); err != nil {
				return nil, err
			}
		}
		buf.WriteByte('}')
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}
