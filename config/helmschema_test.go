package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// helmSchema is the chart's values schema, which helm checks the values
// against before it renders anything.
const helmSchema = "../deploy/helm/nri-cpupool/values.schema.json"

// TestHelmSchemaConfigIsTheBinarys keeps the schema of the chart's config
// value in step with this package, so that neither drifts: every key the
// config package accepts (Config's yaml fields, at every level) is in the
// schema with a type the decoder takes there, and no other key; and every
// mapping of named keys refuses others (additionalProperties: false), as
// the strict decoder does, while the mappings of free names (power.classes,
// allowedNamespaces) describe their values. Before the schema, helm
// rendered pools.sahred and a crash-looping pod (review 58, item 4).
func TestHelmSchemaConfigIsTheBinarys(t *testing.T) {
	schema := readSchema(t)
	config, ok := props(schema)["config"].(map[string]any)
	require.True(t, ok, "the schema has no config property")
	problems := schemaProblems(config, reflect.TypeFor[Config](), "config")
	assert.Empty(t, problems, "values.schema.json's config differs from the config package:\n  %s", strings.Join(problems, "\n  "))
}

// TestHelmSchemaTopLevelIsTheChartsValues: the schema's top-level values
// are values.yaml's (and Helm's global), and others are refused.
func TestHelmSchemaTopLevelIsTheChartsValues(t *testing.T) {
	schema := readSchema(t)
	assert.Equal(t, false, schema["additionalProperties"])
	data, err := os.ReadFile("../deploy/helm/nri-cpupool/values.yaml")
	require.NoError(t, err)
	var values map[string]any
	require.NoError(t, yaml.Unmarshal(data, &values))
	want := slices.Sorted(maps.Keys(values))
	got := slices.DeleteFunc(slices.Sorted(maps.Keys(props(schema))), func(k string) bool { return k == "global" })
	assert.Equal(t, want, got, "values.yaml's top-level keys and values.schema.json's")
}

func readSchema(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile(helmSchema)
	require.NoError(t, err)
	var schema map[string]any
	require.NoError(t, json.Unmarshal(data, &schema))
	return schema
}

func props(s map[string]any) map[string]any {
	p, _ := s["properties"].(map[string]any)
	return p
}

// schemaTypes are the JSON types a schema node allows.
func schemaTypes(s map[string]any) []string {
	switch v := s["type"].(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			if str, ok := e.(string); ok {
				out = append(out, str)
			}
		}
		return out
	}
	return nil
}

// schemaProblems compares a schema node with the Go type the decoder
// fills from the same place of the file.
func schemaProblems(s map[string]any, t reflect.Type, path string) []string {
	var out []string
	fail := func(format string, args ...any) {
		out = append(out, path+": "+fmt.Sprintf(format, args...))
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	types := schemaTypes(s)
	if t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
		if !slices.Contains(types, "string") {
			fail("type %v, want string (the key reads its own text)", types)
		}
		return out
	}
	switch t.Kind() {
	case reflect.Struct:
		if !slices.Equal(types, []string{"object"}) {
			fail("type %v, want object", types)
		}
		if s["additionalProperties"] != false {
			fail("additionalProperties is %v, want false: the binary refuses unknown keys here", s["additionalProperties"])
		}
		fields := yamlFields(t)
		p := props(s)
		for _, name := range slices.Sorted(maps.Keys(fields)) {
			sub, ok := p[name].(map[string]any)
			if !ok {
				fail("key %s of the config package is not in the schema", name)
				continue
			}
			out = append(out, schemaProblems(sub, fields[name], path+"."+name)...)
		}
		for _, name := range slices.Sorted(maps.Keys(p)) {
			if _, ok := fields[name]; !ok {
				fail("key %s is in the schema but not in the config package, which refuses it", name)
			}
		}
	case reflect.Map:
		if !slices.Equal(types, []string{"object"}) {
			fail("type %v, want object", types)
		}
		elem, ok := s["additionalProperties"].(map[string]any)
		if !ok {
			fail("a mapping of free names: additionalProperties must describe the values")
			return out
		}
		out = append(out, schemaProblems(elem, t.Elem(), path+".*")...)
	case reflect.Slice:
		if !slices.Equal(types, []string{"array"}) {
			fail("type %v, want array", types)
		}
		if items, ok := s["items"].(map[string]any); ok {
			out = append(out, schemaProblems(items, t.Elem(), path+"[]")...)
		}
	case reflect.String:
		if !slices.Contains(types, "string") {
			fail("type %v, want string among them", types)
		}
	case reflect.Bool:
		if !slices.Equal(types, []string{"boolean"}) {
			fail("type %v, want boolean", types)
		}
	case reflect.Int, reflect.Int64:
		if !slices.Equal(types, []string{"integer"}) {
			fail("type %v, want integer", types)
		}
	default:
		fail("Go kind %s: teach this test its JSON type", t.Kind())
	}
	return out
}
