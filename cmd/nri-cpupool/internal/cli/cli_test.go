package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/plugin"
	"github.com/cpupool/nri-cpupool/state"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(args, &out, &errb)
	return code, out.String(), errb.String()
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f.yaml")
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

// checkTopologyOnFixture runs topology on a machine shape, as text and as
// JSON with a config (TestCommandsOnEveryFixture).
func checkTopologyOnFixture(t *testing.T, root string) {
	code, out, errOut := run(t, "topology", "--sysfs-root", root)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "NUMA nodes:")
	assert.Contains(t, out, "CORE  SOCKET")

	code, out, errOut = run(t, "topology", "--sysfs-root", root, "--json", "--config", writeFile(t, "reservedCPUs: \"0\"\n"))
	require.Equal(t, 0, code, errOut)
	var r struct {
		CPUs  []map[string]any  `json:"cpus"`
		Pools map[string]string `json:"pools"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	require.NotEmpty(t, r.CPUs)
	for _, key := range []string{"id", "online", "isolated", "socket", "die", "numa", "core", "l3"} {
		assert.Contains(t, r.CPUs[0], key, "documented JSON field")
	}
	for _, pool := range []string{"exclusive", "shared", "infra", "exclusive-non-isolcpus"} {
		assert.Contains(t, r.Pools, pool)
	}
	assert.Contains(t, r.Pools["infra"], "0")
}

// checkValidateOnFixture validates a config that fits every machine shape
// (TestCommandsOnEveryFixture).
func checkValidateOnFixture(t *testing.T, root string) {
	cfg := writeFile(t, "reservedCPUs: \"0\"\npools: {exclusive-non-isolcpus: {enabled: true}}\n")
	code, out, errOut := run(t, "validate", "--sysfs-root", root, "--config", cfg)
	assert.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "valid for this node")
}

func TestValidateAndTopologyOnThisMachine(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads this machine's /sys")
	}
	code, out, errOut := run(t, "validate", "--sysfs-root", "/", "--config", "../../../../packaging/config.yaml")
	assert.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "valid for this node")
	code, out, errOut = run(t, "topology", "--sysfs-root", "/", "--json")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, `"cpus"`)
}

func TestTopologyJSONIsolatedAndCoreIndex(t *testing.T) {
	root := fixture.Root(t, "xeon-2s-interleaved")
	code, out, _ := run(t, "topology", "--sysfs-root", root, "--json", "--config", writeFile(t, "pools: {exclusive: {count: 4}, shared: {cpus: \"3,43\"}}"))
	require.Equal(t, 0, code)
	var r TopologyReport
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	cores := map[int]bool{}
	for _, c := range r.CPUs {
		if c.ID < 40 {
			assert.False(t, cores[c.Core], "core %d unique across sockets", c.Core)
			cores[c.Core] = true
		}
		assert.Equal(t, c.ID >= 2 && c.ID != 40 && c.ID != 41, c.Isolated, "CPU %d isolated", c.ID)
	}
	assert.Equal(t, "3,43", r.Pools["shared"])
	assert.Equal(t, 4, len(strings.Split(r.Pools["exclusive"], ",")), r.Pools["exclusive"])
}

func TestTopologyWithAConfigThatDoesNotFit(t *testing.T) {
	code, out, errOut := run(t, "topology", "--sysfs-root", fixture.Root(t, "vm-2cpu"), "--config", writeFile(t, "isolatedCPUs: \"1-3\""))
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "error: isolatedCPUs: CPUs 2-3 do not exist", "problems are listed with the layout")
	assert.Contains(t, errOut, "does not fit this node: 1 error above")
}

func TestValidate(t *testing.T) {
	root := fixture.Root(t, "desktop-8c16t")
	code, out, errOut := run(t, "validate", "--sysfs-root", root, "--config", writeFile(t, "isolatedCPUs: \"2-7,10-15\"\npools: {shared: {count: 4}, exclusive: {count: 8}}"))
	assert.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "valid for this node")
	assert.Contains(t, out, "exclusive:")

	code, _, errOut = run(t, "validate", "--sysfs-root", root, "--config", writeFile(t, "isolatedCPUs: \"2-20\"\npools: {exclusive: {cpus: \"2-5\"}, shared: {cpus: \"5-6\"}}"))
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "error: isolatedCPUs: CPUs 16-20 do not exist")
	assert.Contains(t, errOut, "error: pools.exclusive.cpus: overlaps pools.shared.cpus on CPU 5")
	assert.Contains(t, errOut, "2 errors")

	// A shared pool on CPUs isolcpus= takes out of load balancing.
	xeon := fixture.Root(t, "xeon-2s-interleaved")
	code, out, errOut = run(t, "validate", "--sysfs-root", xeon, "--config", writeFile(t, "pools: {shared: {count: 4}}"))
	assert.Equal(t, 0, code, errOut)
	assert.Contains(t, out+errOut, "warning: pools.shared: CPUs 2-3,42-43 are taken out of the scheduler's load balancing")
	code, out, errOut = run(t, "topology", "--sysfs-root", xeon, "--config", writeFile(t, "pools: {shared: {count: 4}}"))
	assert.Equal(t, 0, code, errOut)
	assert.Contains(t, out+errOut, "isolcpus=managed_irq,2-3,42-43 nohz_full=2-3,42-43")

	code, _, errOut = run(t, "validate", "--sysfs-root", root, "--config", writeFile(t, "pools: {exclusiv: {}}"))
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "exclusiv")

	code, _, errOut = run(t, "validate", "--sysfs-root", root, "--config", "/nonexistent.yaml")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "/nonexistent.yaml")
}

func TestSimulateReadmeExample(t *testing.T) {
	root := fixture.Root(t, "xeon-2s-interleaved")
	code, out, errOut := run(t, "simulate", "--sysfs-root", root, "--requests", "../../../../testdata/requests/readme.yaml", "--json")
	require.Equal(t, 0, code, errOut)
	var r struct {
		Steps []map[string]any `json:"steps"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	require.Len(t, r.Steps, 3)
	for _, key := range []string{"pod", "container", "pool", "cpus", "mems", "error"} {
		assert.Contains(t, r.Steps[0], key)
	}
	assert.Equal(t, "exclusive", r.Steps[0]["pool"])
	assert.Equal(t, "2,4,42,44", r.Steps[0]["cpus"])
	assert.Equal(t, "0", r.Steps[0]["mems"])
	assert.Equal(t, "infra", r.Steps[1]["pool"])
	assert.Equal(t, "0-1,40-41", r.Steps[1]["cpus"])
	assert.Equal(t, "", r.Steps[2]["error"])

	code, out, _ = run(t, "simulate", "--sysfs-root", root, "--requests", "../../../../testdata/requests/readme.yaml")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "default/dpdk/fwd")
}

func TestSimulateCapacityPlanning(t *testing.T) {
	root := fixture.Root(t, "xeon-2s-interleaved")
	code, out, errOut := run(t, "simulate", "--sysfs-root", root, "--config", "../../../../testdata/configs/xeon.yaml",
		"--requests", "../../../../testdata/requests/capacity.yaml", "--json")
	require.Equal(t, 0, code, errOut)
	var r struct {
		Steps []struct {
			Pool, CPUs, Mems, Error string
		} `json:"steps"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	assert.Equal(t, "1", r.Steps[0].Mems, "the NIC's NUMA node")
	assert.Equal(t, "0", r.Steps[1].Mems, "the GPU's NUMA node")
	assert.Len(t, strings.Split(r.Steps[2].CPUs, ","), 3)
	assert.Contains(t, r.Steps[5].Error, "asks for 80 CPUs")
	assert.Empty(t, r.Steps[6].Error)
}

func TestSimulateResize(t *testing.T) {
	root := fixture.Root(t, "xeon-2s-interleaved")
	code, out, errOut := run(t, "simulate", "--sysfs-root", root, "--requests", "../../../../testdata/requests/resize.yaml", "--json")
	require.Equal(t, 0, code, errOut)
	var r struct {
		Steps []struct {
			Action, Pool, CPUs, Error string
			Pools                     map[string]struct{ FreeSize *int }
		} `json:"steps"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	require.Len(t, r.Steps, 6)
	assert.Equal(t, "2,4,42,44", r.Steps[0].CPUs)
	assert.Equal(t, "resize", r.Steps[1].Action)
	assert.Equal(t, "2,4,6,42,44,46", r.Steps[1].CPUs, "grows next to its CPUs")
	assert.Equal(t, 70, *r.Steps[1].Pools["exclusive"].FreeSize)
	assert.Equal(t, "2,4,42,44", r.Steps[2].CPUs)
	assert.Contains(t, r.Steps[3].Error, "never gives back the 4 CPUs it was created with")
	assert.Equal(t, 72, *r.Steps[3].Pools["exclusive"].FreeSize, "a refused resize changes nothing")
	assert.Equal(t, "infra", r.Steps[5].Pool)
	assert.Equal(t, r.Steps[4].CPUs, r.Steps[5].CPUs)
}

// TestSimulateMemoryResize: a resize step with memory replays an in-place
// resize of the memory limit (issue 41, item 6): counted in place of the
// old limit on the container's node, which the next step sees, and with a
// warning when the node cannot hold it; a bad quantity fails the step.
func TestSimulateMemoryResize(t *testing.T) {
	root := fixture.Root(t, "vm-2numa-hugepages")
	cfg := writeFile(t, "isolatedCPUs: \"1-3\"\npools: {exclusive: {cpus: \"1-3\"}}\n")
	requests := writeFile(t, `steps:
  - create: {pod: dpdk, container: fwd, cpus: "1", memory: 64Mi, hugepages-2Mi: 32Mi, annotations: {pool.cpupool.dev: exclusive}}
  - resize: {pod: dpdk, container: fwd, memory: 3Gi}
  - resize: {pod: dpdk, container: fwd, cpus: "1", memory: 5Gi}
  - resize: {pod: dpdk, container: fwd, memory: lots}
`)
	code, out, errOut := run(t, "simulate", "--sysfs-root", root, "--config", cfg, "--requests", requests, "--json")
	require.Equal(t, 0, code, errOut)
	var r struct {
		Steps []struct {
			Mems, Error, Warning string
			Memory               []struct {
				Node   int
				Memory int64
			}
			NUMAMemory []struct {
				Node   int
				Memory struct{ Free *int64 }
			} `json:"numaMemory"`
		} `json:"steps"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	require.Len(t, r.Steps, 4)
	require.Equal(t, "1", r.Steps[0].Mems)
	require.Len(t, r.Steps[1].Memory, 1)
	assert.Equal(t, int64(3<<30), r.Steps[1].Memory[0].Memory)
	assert.Equal(t, "1", r.Steps[1].Mems, "its memory never moves")
	assert.Equal(t, int64(960<<20), *r.Steps[1].NUMAMemory[1].Memory.Free, "4Gi less 64Mi of pages and 3Gi")
	assert.Empty(t, r.Steps[1].Warning)
	assert.Equal(t, int64(5<<30), r.Steps[2].Memory[0].Memory)
	assert.Contains(t, r.Steps[2].Warning, "memory: asked 2Gi, free node1 960Mi")
	assert.Contains(t, r.Steps[3].Error, `memory "lots" is not a quantity of memory`)
}

func TestSimulateBadInput(t *testing.T) {
	root := fixture.Root(t, "vm-2cpu")
	tests := []struct{ requests, want string }{
		{"steps:\n  - create: {pod: a, container: b, cpus: lots}", "cpus \"lots\" is not a CPU quantity"},
		{"steps:\n  - create: {pod: a, container: b, cpus: \"2\", limit: \"1\"}", "larger than limit"},
		{"steps:\n  - create: {pod: a, container: b, qos: platinum}", "qos \"platinum\""},
		{"steps:\n  - remove: {pod: ghost}", "no pod default/ghost: no container of it runs"},
		// Finding 8: a request near the largest int64 made placement panic.
		{"steps:\n  - create: {pod: a, container: b, cpus: \"9223372036854775807\", annotations: {pool.cpupool.dev: exclusive-non-isolcpus}}", "larger than any node"},
		{"steps:\n  - create: {pod: a, container: b, cpus: \"9223372036854775807\", annotations: {pool.cpupool.dev: exclusive}}", "larger than any node"},
		{"steps:\n  - create: {pod: a, container: b, cpus: \"1e300\", annotations: {pool.cpupool.dev: exclusive-non-isolcpus}}", "larger than any node"},
		{"steps:\n  - resize: {pod: ghost, container: c, cpus: \"2\"}", "no pod default/ghost: no container of it runs"},
		{"steps:\n  - create: {pod: a, container: b}\n  - resize: {pod: a, container: b, cpus: lots}", "cpus \"lots\" is not a CPU quantity"},
	}
	for _, tc := range tests {
		code, out, errOut := run(t, "simulate", "--sysfs-root", root, "--requests", writeFile(t, tc.requests), "--json")
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, strings.ReplaceAll(tc.want, `"`, `\"`))
	}
	code, _, errOut := run(t, "simulate", "--sysfs-root", root, "--requests", writeFile(t, "steps:\n  - create: {pod: a}\n"))
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "step 1: create needs pod and container")
	code, _, errOut = run(t, "simulate", "--sysfs-root", root, "--requests", writeFile(t, "steps:\n  - resize: {pod: a, container: b}\n"))
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "step 1: resize needs pod, container and cpus or memory")
	code, _, errOut = run(t, "simulate", "--sysfs-root", root, "--requests", writeFile(t, "steps:\n  - crate: {pod: a}\n"))
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "crate")
	code, _, _ = run(t, "simulate", "--sysfs-root", root)
	assert.Equal(t, 2, code)
}

// TestSimulateWording: a step names what is missing as the user wrote it
// (review 58, item 15): an unknown pod as a pod (not `no container * in
// pod default/zz`), a device path as given (not below the temporary tree
// a --topology is rendered in), and one CPU in the singular.
func TestSimulateWording(t *testing.T) {
	requests := writeFile(t, "steps:\n  - remove: {pod: zz}\n  - create: {pod: a, container: b, cpus: \"1\"}\n  - remove: {pod: a, container: x}\n"+
		"  - resize: {pod: a, container: x, cpus: \"2\"}\n  - create: {pod: a, container: c, cpus: \"1\", devices: [\"/sys/bus/pci/devices/0000:99:00.0\"]}\n")
	code, out, errOut := run(t, "simulate", "--topology", "desktop-8c16t", "--requests", requests)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "error: no pod default/zz: no container of it runs\n")
	assert.Contains(t, out, "error: no container x in pod default/a\n")
	assert.Equal(t, 2, strings.Count(out, "error: no container x in pod default/a\n"), "remove and resize alike")
	assert.Contains(t, out, `error: device "/sys/bus/pci/devices/0000:99:00.0" does not exist on this node`+"\n")
	assert.NotContains(t, out, "nri-cpupool-simulate-")
	assert.NotContains(t, out, "no container *")

	code, _, errOut = run(t, "simulate", "--topology", "desktop-8c16t", "--isolated-cpus", "200", "--requests", requests)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "error: --isolated-cpus: CPU 200 does not exist on this node (present: 0-15)")
	code, _, errOut = run(t, "simulate", "--topology", "server-offline-isolcpus", "--isolated-cpus", "6-7", "--requests", requests)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "error: --isolated-cpus: CPU 7 is offline (online: 0-6,8-14,16-30); bring it online or remove it from the list")
}

// TestSimulateFailOnRefusal: a failing step leaves the exit status 0
// unless --fail-on-refusal asks for 3 (for CI), with or without --json; a
// run whose steps all pass stays 0 with it.
func TestSimulateFailOnRefusal(t *testing.T) {
	root := fixture.Root(t, "vm-2cpu")
	failing := writeFile(t, "steps:\n  - create: {pod: a, container: b, cpus: \"1\"}\n  - remove: {pod: ghost}\n")
	passing := writeFile(t, "steps:\n  - create: {pod: a, container: b, cpus: \"1\"}\n")
	code, _, errOut := run(t, "simulate", "--sysfs-root", root, "--requests", failing)
	assert.Equal(t, 0, code, errOut)
	for _, extra := range [][]string{nil, {"--json"}} {
		code, out, errOut := run(t, append([]string{"simulate", "--sysfs-root", root, "--requests", failing, "--fail-on-refusal"}, extra...)...)
		assert.Equal(t, 3, code, errOut)
		assert.Contains(t, out, "no pod default/ghost: no container of it runs", "the steps are printed first")
		assert.Equal(t, "nri-cpupool simulate: 1 of 2 steps failed (--fail-on-refusal)\n", errOut)
	}
	code, _, errOut = run(t, "simulate", "--sysfs-root", root, "--requests", passing, "--fail-on-refusal")
	assert.Equal(t, 0, code, errOut)
}

func TestUsageAndHelp(t *testing.T) {
	code, _, errOut := run(t)
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "simulate")
	code, _, errOut = run(t, "frobnicate")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, `unknown command "frobnicate"`)
	for _, c := range commands() {
		code, out, _ := run(t, c.name, "--help")
		assert.Equal(t, 0, code, c.name)
		assert.Contains(t, out, "Usage: nri-cpupool "+c.name, c.name)
	}
	code, out, _ := run(t, "version")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "nri-cpupool")
}

// TestValidateRecommendsKubeletSettings: with the device plugin on, validate
// tells how to reserve so that exclusive CPUs are counted once (as the
// resource) and allocatable cpu is infra (the worked example of docs/kubernetes.md).
func TestValidateRecommendsKubeletSettings(t *testing.T) {
	root := fixture.Root(t, "xeon-2s-interleaved")
	cfg := writeFile(t, "pools: {exclusive: {count: 64}, shared: {count: 12}}\nreservedCPUs: \"0,40\"\nkubelet: {devicePlugin: true}\n")
	code, out, errOut := run(t, "validate", "--sysfs-root", root, "--config", cfg)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "kubelet: advertises cpupool.dev/exclusive = 64 (CPUs 2-33,42-73)")
	assert.Contains(t, out, "\n    kubeReserved: {cpu: \"76\"}\n")
	assert.Contains(t, out, "\n    topologyManagerPolicy: best-effort\n")
	assert.Contains(t, out, "allocatable cpu = 80 online - 64 exclusive - 12 shared = 4 (infra 0-1,40-41)")

	code, out, _ = run(t, "validate", "--sysfs-root", root, "--config", writeFile(t, "pools: {exclusive: {count: 8}}\n"))
	require.Equal(t, 0, code)
	assert.Contains(t, out, "the device plugin is off")
	assert.NotContains(t, out, "kubeReserved")
}

func TestStatusShowsHeldCPUs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	st := state.NewState()
	st.Containers["0123456789abcdef"] = state.ContainerState{PodUID: "u1", PodNamespace: "telco", PodName: "dpdk", Container: "fwd", Pool: "exclusive", MilliCPU: 2000, CPUs: "4,12", Mems: "0"}
	code := int32(137)
	st.Held["u2/app"] = state.HeldState{ContainerID: "fedcba9876543210", ExitCode: &code,
		ContainerState: state.ContainerState{PodUID: "u2", PodNamespace: "telco", PodName: "crash", Container: "app", Pool: "exclusive", MilliCPU: 1000, CPUs: "5", Reserved: "13", Mems: "0"}}
	st.Held["u3/init"] = state.HeldState{ContainerID: "init1",
		ContainerState: state.ContainerState{PodUID: "u3", PodNamespace: "ml", PodName: "job", Container: "init", Pool: "exclusive-non-isolcpus", MilliCPU: 1000, CPUs: "1", Mems: "0"}}
	store := state.NewFileStore(path)
	require.NoError(t, store.Save(st))
	store.Close() // no spare temporary file left behind in t.TempDir()

	code2, out, errOut := run(t, "status", "--state-file", path)
	require.Equal(t, 0, code2, errOut)
	assert.Contains(t, out, "HELD FOR STOPPED CONTAINERS (until the pod's sandbox stops)")
	assert.Regexp(t, `telco\s+crash\s+app\s+exclusive\s+5 \(\+13 idle\)\s+137\s+fedcba987654`, out)
	assert.Regexp(t, `ml\s+job\s+init\s+exclusive-non-isolcpus\s+1\s+-\s+init1`, out)
	assert.Regexp(t, `\n1 container, 2 stopped holding CPUs\nState file: .*state.json, written at [^\n]*\n$`, out)

	code2, out, errOut = run(t, "status", "--state-file", path, "--json")
	require.Equal(t, 0, code2, errOut)
	var back struct {
		Containers map[string]map[string]any `json:"containers"`
		Held       map[string]map[string]any `json:"held"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &back))
	assert.Equal(t, "4,12", back.Containers["0123456789abcdef"]["cpus"], "existing fields unchanged")
	require.Contains(t, back.Held, "u2/app")
	assert.Equal(t, "5", back.Held["u2/app"]["cpus"])
	assert.Equal(t, "fedcba9876543210", back.Held["u2/app"]["containerID"])
	assert.EqualValues(t, 137, back.Held["u2/app"]["exitCode"])
	assert.NotContains(t, back.Held["u3/init"], "exitCode", "absent when the runtime did not say")
}

// TestEveryCommandReadsTheConfigsSysfsRoot: without --sysfs-root, every
// command that reads the node reads it where the config says, and the flag
// wins over the config.
func TestEveryCommandReadsTheConfigsSysfsRoot(t *testing.T) {
	root := fixture.Root(t, "xeon-2s-interleaved") // 80 CPUs; this machine has fewer
	cfg := writeFile(t, "sysfsRoot: "+root+"\nreservedCPUs: \"79\"\n")
	requests := writeFile(t, "steps:\n  - create: {pod: p, container: c, cpus: \"1\"}\n")
	for _, args := range [][]string{
		{"topology", "--config", cfg},
		{"validate", "--config", cfg},
		{"simulate", "--config", cfg, "--requests", requests},
	} {
		code, out, errOut := run(t, args...)
		require.Equal(t, 0, code, "%v: %s", args, errOut)
		switch args[0] {
		case "topology":
			assert.Contains(t, out, "CPUs: 80 online")
		case "validate":
			assert.Contains(t, out, "80 online CPUs")
		case "simulate":
			assert.Contains(t, out, "default/p/c")
		}
		code, _, errOut = run(t, append(args, "--sysfs-root", filepath.Join(t.TempDir(), "nothing"))...)
		assert.Equal(t, 1, code, "%v: the flag wins over the config", args)
		assert.Contains(t, errOut, "is \"", args)
	}
}

// TestValidateWarnsOfNodesWithoutHugePages: the warning is for a node of
// the exclusive pools only, and only while the plugin pins memory (it
// counts no pages otherwise).
func TestValidateWarnsOfNodesWithoutHugePages(t *testing.T) {
	root := fixture.Root(t, "vm-2numa-hugepages")
	for _, tc := range []struct {
		config string
		warns  bool
	}{
		{"isolatedCPUs: \"1-3\"\npools: {exclusive: {cpus: \"1-3\"}}\n", true},
		{"isolatedCPUs: \"1-3\"\npools: {exclusive: {cpus: \"1-3\"}}\npinMemory: false\n", false},
		{"isolatedCPUs: \"2-3\"\npools: {exclusive: {cpus: \"2-3\"}}\n", false}, // node 1 only
	} {
		code, out, errOut := run(t, "validate", "--sysfs-root", root, "--config", writeFile(t, tc.config))
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, "NUMA node 1:            memory 4Gi, hugepages-2Mi 32, hugepages-1Gi 0", tc.config)
		assert.Equal(t, tc.warns, strings.Contains(errOut, "NUMA node 0 has exclusive CPUs 1 but no hugepages"), "%s\n%s", tc.config, errOut)
	}
}

// TestValidateWarnsOfASmallHousekeepingSet: on a 2-CPU VM that lends its
// second CPU, host processes may be left one CPU: validate warns, and the
// config stays valid.
func TestValidateWarnsOfASmallHousekeepingSet(t *testing.T) {
	cfg := writeFile(t, "pools: {exclusive-non-isolcpus: {enabled: true, housekeeping: held}}\n")
	code, out, errOut := run(t, "validate", "--sysfs-root", fixture.Root(t, "vm-2cpu"), "--config", cfg)
	assert.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "valid for this node")
	assert.Contains(t, errOut, "warning: pools.exclusive-non-isolcpus.housekeeping: host processes may be left 1 of this node's 2 CPUs")
}

// TestRunWithDRANeedsItsSibling: nri-cpupool (NewDriver nil) runs
// nri-cpupool-dra from its own directory for dra.enabled (issue 33), and
// for kubernetes.events, whose client is there too (issue 43); where there
// is none, run says which binary is missing and where, before it touches
// the state directory.
func TestRunWithDRANeedsItsSibling(t *testing.T) {
	require.Nil(t, NewDriver, "the test binary links no driver")
	require.Nil(t, NewPodEvents, "nor any Kubernetes client")
	self, err := os.Executable()
	require.NoError(t, err)
	for key, yaml := range map[string]string{
		"dra.enabled":       "dra: {enabled: true, nodeName: node-a}\n",
		"kubernetes.events": "kubernetes: {events: true}\n",
	} {
		dir := t.TempDir()
		cfg := writeFile(t, yaml)
		code, _, errOut := run(t, "run", "--config", cfg, "--state-file", filepath.Join(dir, "state.json"), "--nri-socket", filepath.Join(dir, "nri.sock"))
		assert.Equal(t, 1, code)
		assert.Contains(t, errOut, key+": the Kubernetes client (the DRA driver, the pod Events) is in nri-cpupool-dra, which should be next to "+self)
		assert.Contains(t, errOut, "or set "+key+": false")
		assert.NoFileExists(t, filepath.Join(dir, "state.json"))
	}
}

// TestNoPodEventsUnlessConfigured: without kubernetes.events, run makes
// nothing of the Kubernetes client for Events, even in nri-cpupool-dra
// (NewPodEvents set): not even with a kubeconfig given to DRA.
func TestNoPodEventsUnlessConfigured(t *testing.T) {
	made := 0
	NewPodEvents = func(*config.Config, *plugin.Plugin, *logrus.Logger) PodEvents { made++; return nil }
	t.Cleanup(func() { NewPodEvents = nil })
	cfg := config.Default()
	cfg.DRA.Kubeconfig = "/etc/kubernetes/kubelet.conf"
	assert.Nil(t, newPodEvents(cfg, nil, logrus.New()))
	assert.Zero(t, made)
	cfg.Kubernetes.Events = true
	newPodEvents(cfg, nil, logrus.New())
	assert.Equal(t, 1, made, "made when configured")
}

// TestValidateWarnsOfTheCPUModelsClaimLimit: in dra.devices: cpu a CPU is
// one allocation result, and the API allows 32 a claim (issue 33):
// validate says so where a pool offers more, and not in the numaNode model
// or where no claim could ask for more.
func TestValidateWarnsOfTheCPUModelsClaimLimit(t *testing.T) {
	root := fixture.Root(t, "epyc-2s-384")
	for _, tc := range []struct {
		config string
		warns  bool
	}{
		{"isolatedCPUs: \"4-191\"\ndra: {enabled: true, devices: cpu}\n", true},
		{"isolatedCPUs: \"4-191\"\ndra: {enabled: true, devices: numaNode}\n", false},
		{"isolatedCPUs: \"4-35\"\ndra: {enabled: true, devices: cpu}\n", false},
		{"isolatedCPUs: \"4-191\"\ndra: {devices: cpu}\n", false}, // DRA off
	} {
		code, _, errOut := run(t, "validate", "--sysfs-root", root, "--config", writeFile(t, tc.config))
		require.Equal(t, 0, code, errOut)
		assert.Equal(t, tc.warns, strings.Contains(errOut,
			"warning: dra.devices: in the cpu model a claim gets at most 32 CPUs (the API's 32 allocation results per claim, one per CPU here), and a container's cpupool.dev/exclusive at most 32, of the 188 exclusive CPUs this node offers"),
			"%s\n%s", tc.config, errOut)
	}
}
