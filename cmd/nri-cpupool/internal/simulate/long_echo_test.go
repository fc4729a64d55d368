package simulate

import (
	"strings"
	"testing"
)

// TestErrorsEchoALongKeyOrValueShort: a create's unknown key, a hugepage
// key that names no page size and a quantity that is none are repeated in
// the error bounded, as every other echo of the file is (cpulist.EchoLong):
// a 1 MiB key made a 1 MiB error. (An explicit key, "? ", may be longer
// than the 1024 characters YAML allows an implicit one.)
func TestErrorsEchoALongKeyOrValueShort(t *testing.T) {
	long := strings.Repeat("k", 1<<20)
	data := "steps:\n  - create:\n      pod: a\n      container: b\n      ? " + long + "\n      : x\n"
	_, err := Parse([]byte(data), "rq.yaml")
	if err == nil {
		t.Fatal("parsed")
	}
	if n := len(err.Error()); n > 1024 {
		t.Errorf("Parse: the error is %d bytes for a 1 MiB key", n)
	}
	for _, c := range []*Create{
		{HugePages: map[string]string{hugePagesPrefix + long: "64Mi"}},
		{HugePages: map[string]string{"hugepages-2Mi": long}},
		{Memory: long},
	} {
		_, err := demandOf(c)
		if err == nil {
			t.Fatal("a demand")
		}
		if n := len(err.Error()); n > 1024 {
			t.Errorf("demandOf: the error is %d bytes for a 1 MiB key or value", n)
		}
	}
	for _, key := range []string{"cpus", "limit"} {
		if _, err := milli(key, long); err == nil || len(err.Error()) > 1024 {
			t.Errorf("milli(%s): %d bytes of error for a 1 MiB value", key, len(err.Error()))
		}
	}
}
