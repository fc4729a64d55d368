package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHelperListsTheDaemonSetsMounts: the chart helper nri-cpupool.check
// (templates/_helpers.tpl) refuses two of the plugin container's mounts at
// one path, at helm install, from its own list of the mount paths
// templates/daemonset.yaml writes. Nothing compared the two: an entry
// dropped from the list (config.dra.pluginDir and .registryDir
// taken out) passed every test while --set config.dra.registryDir
// at the pluginDir rendered a pod the API server refuses ("must be
// unique"). Each mount path expression of the container, under its if,
// is one entry of the list, under the same if, and no entry is of no
// mount.
func TestHelperListsTheDaemonSetsMounts(t *testing.T) {
	templates := filepath.Join("..", "..", "deploy", "helm", "nri-cpupool", "templates")
	mounts := daemonSetMounts(t, filepath.Join(templates, "daemonset.yaml"))
	listed := helperMounts(t, filepath.Join(templates, "_helpers.tpl"))
	// The mounts every release has and those of DRA: a parser that stopped
	// reading early must not pass on two empty lists.
	for _, m := range []string{`"/host/sys"`, "dir $c.stateFile", "$c.dra.enabled: $c.dra.registryDir"} {
		require.Contains(t, mounts, m, "daemonset.yaml: update this test")
	}
	assert.ElementsMatch(t, mounts, listed, "daemonset.yaml's volumeMounts of container nri-cpupool (first) against nri-cpupool.check's $mounts in _helpers.tpl (second): a path missing from the helper is not refused at one path with another, so the API server refuses the pod at install")
}

// mountPathAt is a volume mount of daemonset.yaml: "- {name: N,
// mountPath: PATH...}", PATH a literal or one {{ expression }}.
var mountPathAt = regexp.MustCompile(`^- \{name: [a-z0-9-]+, mountPath: (\{\{ [^{}]+ \}\}|[^{},\s]+)[,}]`)

// helperEntry is an entry of the helper's list: (list PATH "WHAT"), PATH a
// quoted literal, (dir E) or (toString E), the first of the list's lines
// or appended by {{- $mounts = append $mounts ... }}.
var helperEntry = regexp.MustCompile(`^(?:\{\{- \$mounts = append \$mounts )?\(list ("[^"]*"|\(dir [^()]+\)|\(toString [^()]+\)) "[^"]+"\)(?: \}\})?$`)

// templateIf is a template line "{{- if COND }}".
var templateIf = regexp.MustCompile(`^\{\{- if (.+) \}\}$`)

// daemonSetMounts returns the mount paths of the container nri-cpupool in
// daemonset.yaml, as helper expressions ("/etc/nri-cpupool" quoted, the
// template's expressions as written), each after "COND: " when under
// {{- if COND }}. A line of the list it does not know fails the test.
func daemonSetMounts(t *testing.T, file string) []string {
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	var out, guards []string
	in, container := false, false
	for line := range bytes.Lines(data) {
		line := strings.TrimSpace(string(line))
		switch {
		case line == "- name: nri-cpupool":
			container = true
		case container && line == "volumeMounts:":
			in = true
		case !in:
		case line == "volumes:" || strings.HasPrefix(line, "- name:"):
			require.Empty(t, guards, "%s: an if of the volumeMounts not ended", file)
			return out
		case line == "" || strings.HasPrefix(line, "#"):
		case templateIf.MatchString(line):
			guards = append(guards, templateIf.FindStringSubmatch(line)[1])
		case line == "{{- end }}":
			require.NotEmpty(t, guards, "%s: {{- end }} of no if in the volumeMounts", file)
			guards = guards[:len(guards)-1]
		case mountPathAt.MatchString(line):
			path := mountPathAt.FindStringSubmatch(line)[1]
			if expr, ok := strings.CutPrefix(path, "{{ "); ok {
				path = strings.TrimSuffix(expr, " }}")
			} else {
				path = `"` + path + `"`
			}
			out = append(out, guarded(guards, path))
		default:
			require.Fail(t, "unknown line", "%s: volumeMounts of container nri-cpupool: %q: update this test", file, line)
		}
	}
	require.Fail(t, "no volumeMounts", "%s: no volumeMounts of a container nri-cpupool ended by volumes:", file)
	return nil
}

// helperMounts returns the entries of nri-cpupool.check's $mounts in
// _helpers.tpl, as daemonSetMounts has them: (dir E) as "dir E", and
// (toString E) as E (the helper's string of a value the daemonset writes
// as it is). A line of the list it does not know fails the test.
func helperMounts(t *testing.T, file string) []string {
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	var out, guards []string
	in := false
	for line := range bytes.Lines(data) {
		line := strings.TrimSpace(string(line))
		switch {
		case line == "{{- $mounts := list":
			in = true
		case !in:
		case strings.HasPrefix(line, "{{- $seen :="):
			require.Empty(t, guards, "%s: an if of $mounts not ended", file)
			return out
		case line == "}}": // the end of the first list, on a line of its own
		case templateIf.MatchString(line):
			guards = append(guards, templateIf.FindStringSubmatch(line)[1])
		case line == "{{- end }}":
			require.NotEmpty(t, guards, "%s: {{- end }} of no if in $mounts", file)
			guards = guards[:len(guards)-1]
		case helperEntry.MatchString(line):
			path := helperEntry.FindStringSubmatch(line)[1]
			if expr, ok := strings.CutPrefix(path, "(toString "); ok {
				path = strings.TrimSuffix(expr, ")")
			} else if expr, ok := strings.CutPrefix(path, "(dir "); ok {
				path = "dir " + strings.TrimSuffix(expr, ")")
			}
			out = append(out, guarded(guards, path))
		default:
			require.Fail(t, "unknown line", "%s: nri-cpupool.check's $mounts: %q: update this test", file, line)
		}
	}
	require.Fail(t, "no $mounts", "%s: no {{- $mounts := list ... {{- $seen := dict }}", file)
	return nil
}

// guarded is a mount path after the conditions it is under, if any.
func guarded(guards []string, path string) string {
	if len(guards) == 0 {
		return path
	}
	return strings.Join(guards, " && ") + ": " + path
}
