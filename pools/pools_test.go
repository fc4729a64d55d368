package pools

import "testing"

func TestVocabulary(t *testing.T) {
	for _, tc := range []struct {
		name             string
		known, exclusive bool
	}{
		{Exclusive, true, true},
		{Shared, true, false},
		{Infra, true, false},
		{ExclusiveNonIsolcpus, true, true},
		{"exclusiv", false, false},
		{"", false, false},
	} {
		if got := Known(tc.name); got != tc.known {
			t.Errorf("Known(%q) = %v, want %v", tc.name, got, tc.known)
		}
		if got := IsExclusive(tc.name); got != tc.exclusive {
			t.Errorf("IsExclusive(%q) = %v, want %v", tc.name, got, tc.exclusive)
		}
	}
	names := Names()
	names[0] = "changed"
	if Names()[0] != Exclusive {
		t.Error("Names returns a copy the caller may change")
	}
}
