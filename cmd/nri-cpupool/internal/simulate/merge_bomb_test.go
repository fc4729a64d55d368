package simulate

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// mergeBomb is a small file whose mappings each merge the one before k
// times (duplicate "<<" keys), l deep: following every merge visits
// k^(l-1) mappings.
func mergeBomb(k, l int) []byte {
	var b strings.Builder
	b.WriteString("x0: &x0 {}\n")
	for i := 1; i < l; i++ {
		fmt.Fprintf(&b, "x%d: &x%d {%s}\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("<<: *x%d, ", i-1), k), ", "))
	}
	fmt.Fprintf(&b, "<<: *x%d\n", l-1)
	return []byte(b.String())
}

// TestParseOfAMergeBombIsRefusedQuickly: a 1 KiB requests file that the
// decoder refuses in milliseconds (duplicate "<<" keys) hung simulate
// while the walk that explains the decoder's errors followed all 6^17
// merges (config.ExplainDecodeError). Run narrowly: on failure the
// goroutine is left spinning.
func TestParseOfAMergeBombIsRefusedQuickly(t *testing.T) {
	data := mergeBomb(6, 18)
	done := make(chan error, 1)
	go func() { _, err := Parse(data, "rq.yaml"); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("parsed")
		}
		if !strings.Contains(err.Error(), `mapping key "<<" already defined`) {
			t.Errorf("error %q does not name the repeated merge key", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("Parse of a %d-byte requests file did not return in 5s", len(data))
	}
}
