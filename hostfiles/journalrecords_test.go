package hostfiles

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRecordMapEncodesAsJSON: the journal's records are written byte for
// byte as encoding/json writes a map[string]Record (what every journal
// was written as before, and what older releases read), for every kind of
// string and field, with no allocation per record; a field added to
// Record fails here until recordMap encodes it.
func TestRecordMapEncodesAsJSON(t *testing.T) {
	fields := map[string]string{}
	rt := reflect.TypeFor[Record]()
	for i := range rt.NumField() {
		fields[rt.Field(i).Name] = rt.Field(i).Tag.Get("json")
	}
	require.Equal(t, map[string]string{"Original": "original", "Owner": "owner", "Order": "order,omitempty", "Identity": "identity,omitempty",
		"Root": "root,omitempty", "Rel": "rel,omitempty"},
		fields, "Record's fields, which recordMap.MarshalJSON writes itself")

	// reflective is journalContent as it was: its records encoded by
	// reflection.
	type reflective struct {
		BootID  string            `json:"bootID"`
		Records map[string]Record `json:"records"`
		Refused map[string]string `json:"refused,omitempty"`
	}
	odd := []string{"", "plain", `quote " and \ backslash`, "<tag> & amp", "tab\tnew\nline\r", "\x00\x1f ctl",
		"é ü 日本", "\u2028\u2029 separators", "bad \xff\xfe utf-8", "/proc/irq/24/smp_affinity_list", "0-3,8,10-11"}
	records := map[string]Record{}
	for i, s := range odd {
		records[s] = Record{Original: odd[(i+1)%len(odd)], Owner: odd[(i+2)%len(odd)], Order: []int{0, 1, -7, 1 << 40, 13}[i%5], Identity: odd[(i+3)%len(odd)],
			Root: odd[(i+4)%len(odd)], Rel: odd[(i+5)%len(odd)]}
	}
	for i := range 300 {
		records[fmt.Sprintf("/sys/fs/cgroup/kubepods/pod%d/cpuset.cpus.exclusive", i)] = Record{Original: "", Owner: "cpuset", Order: i % 3 * 2}
	}
	for _, c := range []struct {
		name    string
		records map[string]Record
	}{{"nil", nil}, {"empty", map[string]Record{}}, {"one", map[string]Record{"/a": {Owner: "irq"}}}, {"many", records}} {
		want, err := json.Marshal(reflective{BootID: "boot", Records: c.records, Refused: map[string]string{"/x": "EIO"}})
		require.NoError(t, err)
		got, err := json.Marshal(journalContent{BootID: "boot", Records: c.records, Refused: map[string]string{"/x": "EIO"}})
		require.NoError(t, err)
		assert.Equal(t, string(want), string(got), "records %s", c.name)
	}

	allocs := testing.AllocsPerRun(5, func() {
		if _, err := json.Marshal(journalContent{BootID: "boot", Records: records}); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("allocations to encode %d records: %.0f (race detector %v)", len(records), allocs, raceBuild)
	if !raceBuild { // under it sync.Pool drops the encoder's buffers at random: 1,041 here
		assert.Less(t, allocs, 30.0, "allocations to encode %d records", len(records))
	}
}
