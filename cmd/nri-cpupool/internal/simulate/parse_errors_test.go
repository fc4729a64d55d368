package simulate

import (
	"strings"
	"testing"
)

// TestParseErrorsSayWhatWhereAndHowToFix: a requests file that is empty or
// does not fit the format is refused with the file, the line and the YAML
// path of what is wrong and what to write instead, in the words validate
// uses for the config, never the decoder's Go types ("simulate.Create",
// "!!str") or a bare EOF.
func TestParseErrorsSayWhatWhereAndHowToFix(t *testing.T) {
	tests := []struct {
		name, data string
		want       []string
	}{
		{"empty", "", []string{"requests rq.yaml: no steps", "steps:", "create, remove or resize"}},
		{"comments only", "# nothing yet\n", []string{"requests rq.yaml: no steps", "steps:"}},
		{"a string for create", "steps:\n  - create: dpdk\n", []string{
			"requests rq.yaml: line 2: steps[0].create: the string \"dpdk\", want a mapping of keys",
			"docs/commands.md"}},
		{"a key of create one level up", "steps:\n  - create: {pod: a, container: b}\n    cpus: \"2\"\n", []string{
			"requests rq.yaml: line 3: unknown key steps[0].cpus", "docs/commands.md"}},
		{"a misspelt key", "step:\n  - create: {pod: a, container: b}\n", []string{
			"line 1: unknown key step; did you mean steps?"}},
		{"a list for annotations", "steps:\n  - create: {pod: a, container: b, annotations: [x]}\n", []string{
			"line 2: steps[0].create.annotations: a list, want a mapping (name: value)"}},
		{"a misspelt key of resize", "steps:\n  - resize: {pod: a, container: b, cpu: \"2\"}\n", []string{
			"line 2: unknown key steps[0].resize.cpu; did you mean steps[0].resize.cpus?"}},
		// A misspelt key of create is unknown, with the key meant, though
		// the hugepage limits' map takes every key create does not name:
		// the key did not "want a string".
		{"a misspelt key of create with a mapping", "steps:\n  - create: {pod: a, container: b, annotation: {cpupool.dev/pool: shared}}\n", []string{
			"line 2: unknown key steps[0].create.annotation; did you mean steps[0].create.annotations?"}},
		{"a misspelt key of create with a list", "steps:\n  - create: {pod: a, container: b, device: [/sys/devices/x]}\n", []string{
			"line 2: unknown key steps[0].create.device; did you mean steps[0].create.devices?"}},
		{"a list for a hugepage limit", "steps:\n  - create: {pod: a, container: b, hugepages-2Mi: [64Mi]}\n", []string{
			"line 2: steps[0].create.hugepages-2Mi: a list, want a string"}},
		// Steps all commented out, or none, run nothing: say so.
		{"steps commented out", "steps:\n# - create: {pod: a, container: b}\n", []string{
			"requests rq.yaml: no steps, the file lists none", "create, remove or resize"}},
		{"an empty list of steps", "steps: []\n", []string{"requests rq.yaml: no steps, the file lists none"}},
		// The second document's steps would never run (validate refuses
		// one in the config, for the daemon would ignore it).
		{"a second document", "steps:\n  - create: {pod: a, container: b}\n---\nsteps:\n  - create: {pod: c, container: d}\n", []string{
			"requests rq.yaml: line 3: a second YAML document starts here (after \"---\"), which simulate would ignore: put every step in the first document"}},
		{"a list for the file", "- create: {pod: a, container: b}\n", []string{
			"line 1: the file: a list, want a mapping of keys", "steps:"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.data), "rq.yaml")
			if err == nil {
				t.Fatal("parsed")
			}
			msg := err.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not say %q", msg, w)
				}
			}
			bads := []string{"simulate.", "!!", "EOF", "not found in type", "unmarshal"}
			if strings.HasPrefix(tc.name, "a misspelt key") {
				bads = append(bads, "want a")
			}
			for _, bad := range bads {
				if strings.Contains(msg, bad) {
					t.Errorf("error %q says %q", msg, bad)
				}
			}
		})
	}
}

// TestParseLetsAnEmptySecondDocumentBe: a trailing "---", or one of an
// empty mapping, runs nothing that is lost, as validate lets it be.
func TestParseLetsAnEmptySecondDocumentBe(t *testing.T) {
	for _, data := range []string{
		"steps:\n  - create: {pod: a, container: b}\n---\n",
		"steps:\n  - create: {pod: a, container: b}\n--- {}\n# more later\n",
	} {
		f, err := Parse([]byte(data), "rq.yaml")
		if err != nil {
			t.Errorf("%q: %v", data, err)
		} else if len(f.Steps) != 1 {
			t.Errorf("%q: %d steps, want 1", data, len(f.Steps))
		}
	}
}
