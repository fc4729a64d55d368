package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// docs/configuration.md refuses a second document "with keys in it" and
// lets an empty one be. "--- {}" (an empty mapping, as tools that emit one
// document per object write an empty one) has no key and changes nothing;
// a mapping with a key after it is still refused.
func TestSecondYAMLDocumentOfAnEmptyMappingIsLetBe(t *testing.T) {
	for _, in := range []string{"pinMemory: false\n--- {}\n", "pinMemory: false\n---\n{}\n", "pinMemory: false\n--- {}\n---\n"} {
		cfg, err := Parse(strings.NewReader(in), "config.yaml")
		if assert.NoError(t, err, "%q", in) {
			assert.False(t, cfg.PinMemory, "%q: the first document applies", in)
		}
	}
	_, err := Parse(strings.NewReader("pinMemory: false\n--- {}\n--- {pinMemory: true}\n"), "config.yaml")
	if assert.Error(t, err, "a document with a key after an empty mapping") {
		assert.Contains(t, err.Error(), "line 3: a second YAML document")
	}
}

// OnlyDocument serves validate and simulate: its error names the line, who
// would ignore the document and what belongs in the first one, in the
// words each caller gives, and wraps ErrSecondDocument; the decoder's own
// error on what follows is returned unwrapped, for the caller to word.
func TestOnlyDocumentWordsItsCallersError(t *testing.T) {
	onlyDocument := func(in string) error {
		dec := yaml.NewDecoder(strings.NewReader(in))
		var first yaml.Node
		require.NoError(t, dec.Decode(&first))
		return OnlyDocument(dec, "simulate", "step")
	}
	assert.NoError(t, onlyDocument("steps: []\n---\n--- {}\n# a comment\n"), "empty documents are let be")
	err := onlyDocument("steps: []\n--- {}\n---\nsteps: []\n")
	require.Error(t, err)
	assert.Equal(t, `line 3: a second YAML document starts here (after "---"), which simulate would ignore: put every step in the first document`, err.Error())
	assert.True(t, errors.Is(err, ErrSecondDocument))
	err = onlyDocument("steps: []\n---\nfoo: [1\n")
	require.Error(t, err)
	assert.False(t, errors.Is(err, ErrSecondDocument), "the decoder's error: %v", err)
	assert.True(t, strings.HasPrefix(err.Error(), "yaml: "), "as the decoder said it: %v", err)
}
