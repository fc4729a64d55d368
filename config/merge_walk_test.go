package config

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mergeChain is a small file whose mappings each merge the one before k
// times (duplicate "<<" keys), l deep; the first holds base. Following
// every merge visits k^(l-1) mappings.
func mergeChain(k, l int, base string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "x0: &x0 {%s}\n", base)
	for i := 1; i < l; i++ {
		fmt.Fprintf(&b, "x%d: &x%d {%s}\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("<<: *x%d, ", i-1), k), ", "))
	}
	fmt.Fprintf(&b, "<<: *x%d\n", l-1)
	return b.String()
}

// parseWithin is Parse of doc, failing the test if it takes more than d
// (the goroutine is left behind then: run such tests narrowly).
func parseWithin(t *testing.T, doc string, d time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { _, err := Parse(strings.NewReader(doc), "c.yaml"); done <- err }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("Parse of a %d-byte config did not return in %v", len(doc), d)
		return nil
	}
}

// TestParseOfAMergeBombIsRefusedQuickly: a 1 KiB config whose mappings
// merge the one before six times, 18 deep, which the decoder refuses at
// once (duplicate "<<" keys), was walked for its explanation through all
// 6^17 merges: validate and the daemon's load and reload hung. The same
// mapping merged again at the same place adds nothing, so the walk now
// visits it once, and names what is wrong in it once (14 deep, within the
// walk's depth, so that the base is reached: 6^13 merges).
func TestParseOfAMergeBombIsRefusedQuickly(t *testing.T) {
	for _, l := range []int{14, 18} {
		err := parseWithin(t, mergeChain(6, l, "logLevl: info"), 5*time.Second)
		require.Error(t, err)
		msg := err.Error()
		assert.Contains(t, msg, `mapping key "<<" already defined`)
		assert.NotContains(t, msg, "anchors and aliases")
		assert.Less(t, len(msg), 32<<10)
		if l == 14 {
			assert.Equal(t, 1, strings.Count(msg, "unknown key logLevl; did you mean logLevel?"), msg)
		}
	}
}

// aliasedLists is a config whose allowedNamespaces name the same list of
// m namespaces under k keys, after a plain list of pad more: walked once
// for each key, k*m values from a file of k+m+pad.
func aliasedLists(k, m, pad int) string {
	var b strings.Builder
	b.WriteString("allowedNamespaces:\n  pad: [" + strings.TrimSuffix(strings.Repeat("b, ", pad), ", ") + "]\n")
	b.WriteString("  k: &l [" + strings.TrimSuffix(strings.Repeat("a, ", m), ", ") + "]\n")
	for i := range k {
		fmt.Fprintf(&b, "  k%d: *l\n", i)
	}
	return b.String()
}

// TestParseOfAliasesBeyondTheWalkBudgetSaysSo: aliases that are not
// merges (the same list under many keys, each a path of its own) still
// multiply the walk; past a budget no real file comes near it stops and
// says so, as the decoder stops at "excessive aliasing", and a file the
// decoder took is refused: what the walk did not look at is not trusted.
func TestParseOfAliasesBeyondTheWalkBudgetSaysSo(t *testing.T) {
	for _, pad := range []int{0, 3000} { // the decoder refuses, takes
		err := parseWithin(t, aliasedLists(400, 400, pad), 5*time.Second)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "anchors and aliases (&name, *name, <<: *name) expand it by more than 100000 values")
		assert.Less(t, len(err.Error()), 4096)
	}
	// Well below the budget the same aliases are walked to the end (and
	// refused by the checks after, as k0... name no pool).
	err := parseWithin(t, aliasedLists(20, 20, 0), 5*time.Second)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "allowedNamespaces.k0: unknown pool")
	assert.NotContains(t, err.Error(), "anchors and aliases")
}

// TestParseTakesAListOfMerges: "<<: [*a, *b]" merges each mapping of the
// list, as YAML has it and the decoder does; the walk took the list for
// the mapping itself and refused a valid config ("pools.shared: a list,
// want a mapping of keys"). A misspelt key in a merged mapping is still
// named at the place it is merged.
func TestParseTakesAListOfMerges(t *testing.T) {
	cfg, err := Parse(strings.NewReader("pools:\n  exclusive: &a {count: 2}\n  shared:\n    <<: [*a, {cpus: \"\"}]\n"), "c.yaml")
	require.NoError(t, err)
	assert.Equal(t, 2, cfg.Pools.Shared.Count)
	msg := mustFail(t, "pools:\n  exclusive: &a {count: 2, cuont: 3}\n  shared:\n    <<: [*a]\n")
	assert.Contains(t, msg, "unknown key pools.shared.cuont; did you mean pools.shared.count?")
	assert.NotContains(t, msg, "a list, want")
}

// TestParseOfAListMergeThatHoldsItselfEnds: a merged list that holds
// itself is refused, not walked round for ever.
func TestParseOfAListMergeThatHoldsItselfEnds(t *testing.T) {
	err := parseWithin(t, "pools:\n  shared:\n    <<: &l [*l, {count: 1}]\n", 5*time.Second)
	require.Error(t, err)
}
