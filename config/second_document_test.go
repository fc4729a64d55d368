package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
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
