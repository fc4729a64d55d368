package config

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPackagedConfigDocumentsEveryKey keeps docs/configuration.md's word
// that packaging/config.yaml documents every key: each key of Config
// (by its yaml name) is set or shown in a comment there. It lacked
// pools.<pool>.isolatedPartition and memory.* (issue 43, item 7).
func TestPackagedConfigDocumentsEveryKey(t *testing.T) {
	data, err := os.ReadFile("../packaging/config.yaml")
	require.NoError(t, err)
	text := string(data)
	var keys []string
	var walk func(t reflect.Type, prefix string)
	walk = func(typ reflect.Type, prefix string) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" || name == "-" || !f.IsExported() {
				continue
			}
			keys = append(keys, prefix+name)
			if ft := f.Type; ft.Kind() == reflect.Struct && ft.PkgPath() == typ.PkgPath() {
				walk(ft, prefix+name+".")
			}
		}
	}
	walk(reflect.TypeFor[Config](), "")
	require.Greater(t, len(keys), 40, "the walk found Config's keys")
	for _, key := range keys {
		leaf := key[strings.LastIndex(key, ".")+1:]
		// A key is written "name:" after its indentation (and a "#"
		// when it is only shown), or inside a flow mapping ("{class: …").
		re := regexp.MustCompile(`(?m)(^|[\s#{,])` + regexp.QuoteMeta(leaf) + `:`)
		assert.True(t, re.MatchString(text), "packaging/config.yaml does not document %s", key)
	}
}

// TestCountZeroIsDocumentedAsNotSet: pools.<pool>.count: 0, the default,
// means "not set" (the allocator's TestCountZeroIsNotSet holds the
// behaviour); a reader of any of the three places that show the key with
// its 0 must learn it there (review 58, item 11).
func TestCountZeroIsDocumentedAsNotSet(t *testing.T) {
	re := regexp.MustCompile(`(?s)count: 0.{0,40}not set`)
	for _, path := range []string{"../docs/configuration.md", "../packaging/config.yaml", "../deploy/helm/nri-cpupool/values.yaml"} {
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.True(t, re.Match(data), "%s does not say that count: 0 means not set", path)
	}
}
