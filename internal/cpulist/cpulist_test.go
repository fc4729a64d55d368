package cpulist

import "testing"

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		spaced   bool // only ParseSpaced accepts it
		bad      bool
	}{
		{in: "0-3,8,10-11", want: "0-3,8,10-11"},
		{in: " 2-5\n", want: "2-5"},
		{in: "", want: ""},
		{in: "0-3, 8", want: "0-3,8", spaced: true},
		{in: "3-1", bad: true},
		{in: "a", bad: true},
		{in: "-1", bad: true},
	} {
		got, err := ParseSpaced(tc.in)
		if tc.bad != (err != nil) || (!tc.bad && got.String() != tc.want) {
			t.Errorf("ParseSpaced(%q) = %q, %v", tc.in, got, err)
		}
		got, err = Parse(tc.in)
		if bad := tc.bad || tc.spaced; bad != (err != nil) || (!bad && got.String() != tc.want) {
			t.Errorf("Parse(%q) = %q, %v", tc.in, got, err)
		}
	}
}
