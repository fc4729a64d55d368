package config

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDefaults(t *testing.T) {
	cfg, err := Parse(strings.NewReader(""), "empty.yaml")
	require.NoError(t, err)
	assert.Equal(t, Default(), cfg)
	assert.Equal(t, PoolInfra, cfg.DefaultPool)
	assert.True(t, cfg.PinMemory)
	assert.Equal(t, "/var/lib/nri-cpupool/state.json", cfg.StateFile)
	assert.Equal(t, 10, cfg.PluginIndex)
	assert.False(t, cfg.DRA.Enabled, "the DRA driver is off by default")
	assert.Equal(t, DRA{Devices: "numaNode", CDIDir: "/var/run/cdi", PluginDir: "/var/lib/kubelet/plugins/cpupool.dev", RegistryDir: "/var/lib/kubelet/plugins_registry"}, cfg.DRA)
}

func TestParseFull(t *testing.T) {
	cfg, err := Parse(strings.NewReader(`
isolatedCPUs: "2-7"
reservedCPUs: "0"
pools:
  exclusive: {count: 4}
  shared: {cpus: "6-7"}
  exclusive-non-isolcpus: {enabled: true, minInfraCPUs: 2}
defaultPool: shared
guaranteedExclusive: true
allocation: {fullPCPUsOnly: true, hideHyperthreads: false, distributeAcrossNUMA: true}
allowedNamespaces: {exclusive: [telco]}
pinMemory: false
stateFile: /tmp/s.json
logLevel: debug
`), "full.yaml")
	require.NoError(t, err)
	assert.Equal(t, "2-7", *cfg.IsolatedCPUs)
	assert.Equal(t, 4, cfg.Pools.Exclusive.Count)
	assert.True(t, cfg.Pools.ExclusiveNonIsolcpus.Enabled)
	assert.Equal(t, 2, cfg.Pools.ExclusiveNonIsolcpus.MinInfraCPUs)
	assert.Equal(t, []string{"telco"}, cfg.AllowedNamespaces[PoolExclusive])
	assert.False(t, cfg.PinMemory)
	assert.True(t, cfg.Allocation.DistributeAcrossNUMA)
}

func TestIRQIsolationKeys(t *testing.T) {
	cfg, err := Parse(strings.NewReader(`
procRoot: /host/proc
pools:
  exclusive: {irqIsolation: optOut}
  shared: {cpus: "6-7", irqIsolation: always}
  exclusive-non-isolcpus: {enabled: true, irqIsolation: optIn}
irq: {rescanInterval: 30s, irqbalance: "off", irqbalanceDir: /host/run/irqbalance}
`), "irq.yaml")
	require.NoError(t, err)
	assert.Equal(t, "/host/proc", cfg.ProcRoot)
	assert.Equal(t, IRQIsolationOptOut, cfg.IRQIsolation(PoolExclusive))
	assert.Equal(t, IRQIsolationAlways, cfg.IRQIsolation(PoolShared))
	assert.Equal(t, IRQIsolationOptIn, cfg.IRQIsolation(PoolExclusiveNonIsolcpus))
	assert.Equal(t, IRQIsolationOff, cfg.IRQIsolation(PoolInfra))
	assert.Equal(t, 30*time.Second, cfg.IRQ.RescanInterval.Duration)
	assert.Equal(t, "off", cfg.IRQ.Irqbalance)
	assert.True(t, cfg.IRQIsolationEnabled())
	assert.Equal(t, IRQIsolationOff, cfg.IsolatedPartition(PoolExclusive))
	cfg, err = Parse(strings.NewReader("pools: {exclusive: {isolatedPartition: optIn}, exclusive-non-isolcpus: {isolatedPartition: optOut}}"), "p.yaml")
	require.NoError(t, err)
	assert.Equal(t, IRQIsolationOptIn, cfg.IsolatedPartition(PoolExclusive))
	assert.Equal(t, IRQIsolationOptOut, cfg.IsolatedPartition(PoolExclusiveNonIsolcpus))
	assert.Equal(t, IRQIsolationOff, cfg.IsolatedPartition(PoolShared))

	def := Default()
	assert.False(t, def.IRQIsolationEnabled(), "off unless a pool asks for it")
	assert.Equal(t, IRQIsolationOff, def.IRQIsolation(PoolExclusive))
	assert.Equal(t, "/proc", def.ProcRoot)
	assert.Equal(t, 10*time.Second, def.IRQ.RescanInterval.Duration)
	assert.Equal(t, "socket", def.IRQ.Irqbalance)
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown key", "pools:\n  exclusiv: {count: 2}\n", []string{"bad.yaml", "line 2", "exclusiv", "docs/configuration.md"}},
		{"infra is not configurable", "pools: {infra: {cpus: \"0\"}}", []string{"infra"}},
		{"wrong type", "pinMemory: sometimes", []string{"line 1", "sometimes"}},
		{"malformed list", "reservedCPUs: \"0-\"", []string{"error: reservedCPUs: malformed CPU list \"0-\""}},
		{"cpus and count", "pools: {exclusive: {cpus: \"1\", count: 2}}", []string{"pools.exclusive: both cpus and count"}},
		{"negative count", "pools: {shared: {count: -1}}", []string{"pools.shared.count: -1 is negative"}},
		{"unknown default pool", "defaultPool: fast", []string{"defaultPool: unknown pool \"fast\""}},
		{"unknown pool in namespaces", "allowedNamespaces: {turbo: [a]}", []string{"allowedNamespaces.turbo: unknown pool"}},
		{"plugin index", "pluginIndex: 100", []string{"pluginIndex: 100 is out of range"}},
		{"relative state file", "stateFile: state.json", []string{"stateFile: \"state.json\" is not an absolute path"}},
		{"log level", "logLevel: loud", []string{"logLevel: unknown level \"loud\""}},
		{"metrics address", "metricsAddress: 9464", []string{"metricsAddress: \"9464\" is not host:port"}},
		{"metrics port out of range", "metricsAddress: 127.0.0.1:99999", []string{`metricsAddress: port "99999" of "127.0.0.1:99999" is neither a number from 0 to 65535 nor a service name of /etc/services; write e.g. "127.0.0.1:9464"`}},
		{"metrics port not a number", "metricsAddress: \":abcnosuchservice\"", []string{`metricsAddress: port "abcnosuchservice" of ":abcnosuchservice" is neither a number from 0 to 65535 nor a service name`}},
		{"metrics port negative", "metricsAddress: 127.0.0.1:-1", []string{`metricsAddress: port "-1"`}},
		{"metrics host", "metricsAddress: \"a b:9464\"", []string{`metricsAddress: host "a b" of "a b:9464" is neither an IP address nor a host name`}},
		{"metrics host zone on IPv4", "metricsAddress: \"[127.0.0.1%eth0]:9464\"", []string{`metricsAddress: host "127.0.0.1%eth0"`}},
		{"min infra", "pools: {exclusive-non-isolcpus: {minInfraCPUs: 0}}", []string{"minInfraCPUs: 0: infra needs at least 1 CPU"}},
		{"every problem at once", "logLevel: loud\npluginIndex: -1", []string{"logLevel", "pluginIndex"}},
		{"irq isolation value", "pools: {exclusive: {irqIsolation: yes}}", []string{`pools.exclusive.irqIsolation: "yes" is not one of off, optIn, optOut, always`}},
		{"irq isolation of shared containers", "pools: {shared: {irqIsolation: optIn}}", []string{`pools.shared.irqIsolation: "optIn" is not one of off, always; a shared pool's CPUs are not any one container's`}},
		{"irq isolation always of lent CPUs", "pools: {exclusive-non-isolcpus: {irqIsolation: always}}", []string{"pools.exclusive-non-isolcpus.irqIsolation", "belong to infra until lent"}},
		{"rescan too often", "irq: {rescanInterval: 100ms}", []string{"irq.rescanInterval: 100ms is shorter than 1s"}},
		{"rescan not a duration", "irq: {rescanInterval: often}", []string{`"often" is not a duration`}},
		{"irqbalance", "irq: {irqbalance: restart}", []string{`irq.irqbalance: "restart" is not socket or off`}},
		{"partition value", "pools: {exclusive: {isolatedPartition: always}}", []string{`pools.exclusive.isolatedPartition: "always" is not one of off, optIn, optOut`}},
		{"partition of shared", "pools: {shared: {isolatedPartition: optIn}}", []string{`pools.shared.isolatedPartition: "optIn" is not one of off; a partition belongs to one container`}},
		{"relative proc root", "procRoot: proc", []string{`procRoot: "proc" is not an absolute path`}},
		{"DRA and the device plugin", "dra: {enabled: true}\nkubelet: {devicePlugin: true}", []string{"dra.enabled: the DRA driver and the kubelet device plugin (kubelet.devicePlugin) would both hand out the exclusive pool; turn one off"}},
		{"DRA device model", "dra: {devices: cores}", []string{`dra.devices: unknown device model "cores"; use numaNode`}},
		{"DRA relative kubeconfig", "dra: {kubeconfig: kubeconfig}", []string{`dra.kubeconfig: "kubeconfig" is not an absolute path`}},
		{"relative kubeconfig", "kubernetes: {kubeconfig: kubeconfig}", []string{`kubernetes.kubeconfig: "kubeconfig" is not an absolute path`}},
		{"two kubeconfigs", "kubernetes: {kubeconfig: /a}\ndra: {kubeconfig: /b}", []string{`kubernetes.kubeconfig: "/a" differs from dra.kubeconfig "/b"; the daemon has one API server connection`}},
		{"two node names", "kubernetes: {nodeName: a}\ndra: {nodeName: b}", []string{`kubernetes.nodeName: "a" differs from dra.nodeName "b"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.yaml), "bad.yaml")
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// TestKubernetesKeys: kubernetes.kubeconfig and kubernetes.nodeName are
// the API connection of the Events and of DRA; dra.kubeconfig and
// dra.nodeName, their older names, still work (config keys are
// contracts), and the same value under both names is no conflict.
func TestKubernetesKeys(t *testing.T) {
	for _, tc := range []struct{ yaml, kubeconfig, node string }{
		{"{}", "", ""},
		{"dra: {kubeconfig: /etc/k.conf, nodeName: n1}", "/etc/k.conf", "n1"},
		{"kubernetes: {kubeconfig: /etc/k.conf, nodeName: n1}", "/etc/k.conf", "n1"},
		{"kubernetes: {kubeconfig: /etc/k.conf, nodeName: n1}\ndra: {kubeconfig: /etc/k.conf, nodeName: n1}", "/etc/k.conf", "n1"},
	} {
		cfg, err := Parse(strings.NewReader(tc.yaml), "test")
		require.NoError(t, err, tc.yaml)
		assert.Equal(t, tc.kubeconfig, cfg.APIKubeconfig(), tc.yaml)
		assert.Equal(t, tc.node, cfg.APINodeName(), tc.yaml)
		assert.False(t, cfg.NeedsKubernetes(), "a kubeconfig alone starts no client: %s", tc.yaml)
	}
	cfg, err := Parse(strings.NewReader("kubernetes: {events: true}"), "test")
	require.NoError(t, err)
	assert.True(t, cfg.NeedsKubernetes())
}

// TestUnknownKeysNameTheirPath: an unknown key is named by its YAML path,
// with the known key it is probably a typo of, never by Go type names
// (issue 43, item 5).
func TestUnknownKeysNameTheirPath(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"swapped letters", "pools:\n  sahred: {count: 2}\n", []string{"line 2: unknown key pools.sahred; did you mean pools.shared?"}},
		{"top level, wrong case", "isolatedcpus: \"2-5\"\n", []string{"line 1: unknown key isolatedcpus; did you mean isolatedCPUs?"}},
		{"deep", "pools:\n  exclusive:\n    irqIsolaton: optIn\n", []string{"line 3: unknown key pools.exclusive.irqIsolaton; did you mean pools.exclusive.irqIsolation?"}},
		{"under a map", "power:\n  classes:\n    fast: {goveror: performance}\n", []string{"unknown key power.classes.fast.goveror; did you mean power.classes.fast.governor?"}},
		{"nothing close", "frobnicate: true\n", []string{"line 1: unknown key frobnicate ("}},
		{"every one, and other errors too", "pools: {exclusiv: {count: 2}}\npinMemory: sometimes\nlogLevl: info\n",
			[]string{"unknown key pools.exclusiv; did you mean pools.exclusive?", "unknown key logLevl; did you mean logLevel?", "sometimes"}},
		{"a hostile key is bounded", "? " + strings.Repeat("k", 5000) + "\n: 1\n", []string{"… (5000 bytes)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.yaml), "bad.yaml")
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.NotContains(t, err.Error(), "not found in type")
			assert.NotContains(t, err.Error(), "type config.")
			assert.Less(t, len(err.Error()), 1000)
		})
	}
	assert.NotContains(t, mustFail(t, "frobnicate: true\n"), "did you mean")
}

// TestParseMessageThroughMergesAndAliases pins Parse's whole message for a
// file whose keys reach the Config type through an anchor, a merge, a map
// and lists: the one walk behind it finds unknown keys and values of the
// wrong kind at once, and the message lists all unknown keys first, then
// the values, each in the order of the file.
func TestParseMessageThroughMergesAndAliases(t *testing.T) {
	doc := "pools:\n  exclusive: &ex\n    count: \"4\"\n    cuont: 2\n  shared:\n    <<: *ex\n    cpus: [1]\n" +
		"allowedNamespaces: {shared: [a, {b: 1}], exclusive: x}\npinMemory: sometimes\nlogLevl: info\n"
	assert.Equal(t, "config bad.yaml: line 4: unknown key pools.exclusive.cuont; did you mean pools.exclusive.count?\n"+
		"  line 4: unknown key pools.shared.cuont; did you mean pools.shared.count?\n"+
		"  line 10: unknown key logLevl; did you mean logLevel?\n"+
		"  line 3: pools.exclusive.count: the string \"4\", want a whole number (write it without quotes)\n"+
		"  line 3: pools.shared.count: the string \"4\", want a whole number (write it without quotes)\n"+
		"  line 7: pools.shared.cpus: a list, want a string\n"+
		"  line 8: allowedNamespaces.shared[1]: a mapping, want a string\n"+
		"  line 8: allowedNamespaces.exclusive: the string \"x\", want a list ([a, b], or one \"- item\" a line)\n"+
		"  line 9: pinMemory: the string \"sometimes\", want true or false"+
		" (keys are documented in docs/configuration.md and packaging/config.yaml)", mustFail(t, doc))
}

func mustFail(t *testing.T, yaml string) string {
	t.Helper()
	_, err := Parse(strings.NewReader(yaml), "bad.yaml")
	require.Error(t, err)
	return err.Error()
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"shared", "shared", 0}, {"sahred", "shared", 1}, {"exclusiv", "exclusive", 1}, {"infra", "shared", 5}, {"", "abc", 3}} {
		assert.Equal(t, tc.want, EditDistance(tc.a, tc.b), "%q %q", tc.a, tc.b)
		assert.Equal(t, tc.want, EditDistance(tc.b, tc.a), "%q %q", tc.b, tc.a)
	}
}

func TestLoad(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "missing.yaml"))
	assert.ErrorContains(t, err, "missing.yaml")
	p := filepath.Join(t.TempDir(), "c.yaml")
	require.NoError(t, os.WriteFile(p, []byte("defaultPool: shared\n"), 0o644))
	cfg, err := Load(p)
	require.NoError(t, err)
	assert.Equal(t, PoolShared, cfg.DefaultPool)
}

// TestPackagedConfigIsValid keeps the documented example loadable.
func TestPackagedConfigIsValid(t *testing.T) {
	cfg, err := Load("../packaging/config.yaml")
	require.NoError(t, err)
	assert.Equal(t, Default().StateFile, cfg.StateFile)
	assert.Equal(t, Default().Allocation, cfg.Allocation, "the packaged config shows the defaults")
	assert.True(t, cfg.Allocation.DisableCPUQuota, "no CFS quota on exclusive CPUs by default")
}

// Config CPU lists are bounded: a range to the largest int64 returned never,
// "0-3000000" built a set of three million CPUs, and "+1" was accepted.
func TestConfigCPUListsAreBounded(t *testing.T) {
	for _, list := range []string{"0-9223372036854775807", "0-3000000", "+1", "1-+3"} {
		t.Run(list, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				_, err := Parse(strings.NewReader("reservedCPUs: \""+list+"\""), "bad.yaml")
				done <- err
			}()
			select {
			case err := <-done:
				require.Error(t, err)
				assert.Contains(t, err.Error(), "reservedCPUs")
			case <-time.After(10 * time.Second):
				t.Fatal("parsing the list did not return")
			}
		})
	}
}

func TestMemoryReserve(t *testing.T) {
	cfg, err := Parse(strings.NewReader("memory: {reservedPerNode: 2Gi, reservedHugePagesPerNode: {2Mi: 64, 1Gi: 1}}\n"), "t")
	require.NoError(t, err)
	assert.Equal(t, int64(2<<30), cfg.Memory.ReservedBytes())
	assert.Equal(t, map[int64]int64{2048: 64, 1048576: 1}, cfg.Memory.ReservedPages())
	assert.Zero(t, Default().Memory.ReservedBytes(), "no reserve by default")

	for _, bad := range []string{"memory: {reservedPerNode: lots}", "memory: {reservedPerNode: -1Gi}",
		"memory: {reservedHugePagesPerNode: {3Mi: 1}}", "memory: {reservedHugePagesPerNode: {2Mi: -1}}"} {
		_, err := Parse(strings.NewReader(bad), "t")
		assert.ErrorContains(t, err, "memory.reserved", bad)
	}
}

// TestMetricsAddressListenable: addresses of every form net.Listen takes
// pass the check (the errors above are forms it refuses). Whether a host
// name resolves, or a zone names an interface, is the node's: the check
// does not ask, and run's net.Listen says so if not.
// Review 58: ":0", "localhost:http" and "node_1:9464" start, and were
// refused.
func TestMetricsAddressListenable(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:9464", ":9464", "0.0.0.0:1", "[::1]:65535", "[::]:9464", "[fe80::1%eth0]:9464", "localhost:9464", "node-1.example.com.:9464",
		":0", "127.0.0.1:", "localhost:http", ":HTTPS", "127.0.0.1:+80", "node_1:9464", "_metrics.node-1:9464"} {
		_, err := Parse(strings.NewReader("metricsAddress: \""+addr+"\"\n"), "ok.yaml")
		assert.NoError(t, err, addr)
	}
}

// TestMetricsAddressAsNetResolves: for addresses whose host is empty or
// an IP literal (so that nothing asks DNS), the check refuses exactly what
// net.ResolveTCPAddr, the parsing net.Listen does, refuses.
func TestMetricsAddressAsNetResolves(t *testing.T) {
	for _, addr := range []string{":9464", ":0", ":", "127.0.0.1:", ":+80", ":-0", ":-1", ":65535", ":65536", ":99999999999", ":http", ":HTTP", ":https",
		":nosuchservice", ":0x50", ": 80", "[::1]:9464", "[fe80::1%eth0]:9464", "::1:9464", "127.0.0.1", "[::1]", "127.0.0.1:9464:1"} {
		cfg := Default()
		cfg.MetricsAddress = addr
		var refused []string
		for _, e := range cfg.Check().Errors() {
			if e.Key == "metricsAddress" {
				refused = append(refused, e.Message)
			}
		}
		_, netErr := net.ResolveTCPAddr("tcp", addr)
		assert.Equal(t, netErr != nil, len(refused) > 0, "%q: net says %v, the check %q", addr, netErr, refused)
	}
}

// TestMetricsAddressPortZeroWarns: port 0 starts, on a port picked at
// random: a warning, not an error.
func TestMetricsAddressPortZeroWarns(t *testing.T) {
	for _, addr := range []string{":0", "127.0.0.1:", "[::1]:-0"} {
		cfg := Default()
		cfg.MetricsAddress = addr
		problems := cfg.Check()
		assert.False(t, problems.HasErrors(), addr)
		var warned []string
		for _, w := range problems.Warnings() {
			if w.Key == "metricsAddress" {
				warned = append(warned, w.Message)
			}
		}
		if assert.Len(t, warned, 1, addr) {
			assert.Contains(t, warned[0], "picked anew at each start, which no probe or Prometheus scrape can find", addr)
		}
	}
}

// TestTypeErrorsNameTheirKey: a value of the wrong kind is named by its
// key path and the kind the key takes, never by the decoder's words
// ("cannot unmarshal !!str `4` into int"); a fraction for a whole number,
// which the decoder truncates without a word, is refused too.
func TestTypeErrorsNameTheirKey(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"quoted count", "pools:\n  exclusive:\n    count: \"4\"\n", `line 3: pools.exclusive.count: the string "4", want a whole number (write it without quotes)`},
		{"word for a count", "pools: {shared: {count: four}}", `line 1: pools.shared.count: the string "four", want a whole number`},
		{"fraction", "pools: {exclusive: {count: 1.5}}", `line 1: pools.exclusive.count: the number "1.5", want a whole number`},
		{"boolean", "pinMemory: sometimes", `line 1: pinMemory: the string "sometimes", want true or false`},
		{"quoted boolean", "pinMemory: \"true\"", `pinMemory: the string "true", want true or false (write it without quotes)`},
		{"list for a string", "logLevel: [info]", "line 1: logLevel: a list, want a string"},
		{"string for a list", "allowedNamespaces: {shared: kube-system}", `allowedNamespaces.shared: the string "kube-system", want a list`},
		{"list for a section", "kernelWork: [rps]", "line 1: kernelWork: a list, want a mapping of keys"},
		{"list for the file", "- pinMemory: true\n", "line 1: the file: a list, want a mapping of keys"},
		{"list for a duration", "irq: {rescanInterval: [1]}", "irq.rescanInterval: a list, want a single value"},
		{"a type's own words", "irq:\n  rescanInterval: often\n", `line 2: irq.rescanInterval: "often" is not a duration`},
		{"pages by size", "memory: {reservedHugePagesPerNode: {2Mi: many}}", `memory.reservedHugePagesPerNode.2Mi: the string "many", want a whole number`},
		{"with an unknown key", "pools: {sahred: {}, exclusive: {count: \"4\"}}", "unknown key pools.sahred"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := mustFail(t, tc.yaml)
			assert.Contains(t, msg, tc.want)
			assert.NotContains(t, msg, "cannot unmarshal")
			assert.NotContains(t, msg, "!!")
		})
	}
	for _, ok := range []string{"pools: {exclusive: {count: 2.0}}", "pools: {exclusive: {count: 4}}", "pools: {exclusive: {count: ~}}", "isolatedCPUs: 2"} {
		_, err := Parse(strings.NewReader(ok), "ok.yaml")
		assert.NoError(t, err, ok)
	}
}

// TestSecondYAMLDocumentRefused: a second YAML document ("---") was
// ignored without a word, its keys never applied (review B9). One with
// content is refused, naming its line; an empty one (a trailing "---", a
// document of comments) changes nothing and is let be.
func TestSecondYAMLDocumentRefused(t *testing.T) {
	_, err := Parse(strings.NewReader("pools:\n  shared: {count: 2}\n---\ndefaultPool: shared\n"), "config.yaml")
	require.Error(t, err, "the second document's defaultPool would never apply")
	assert.Contains(t, err.Error(), "config config.yaml: line 3: a second YAML document starts here")
	assert.Contains(t, err.Error(), "put every key in the first document")
	for _, in := range []string{"pinMemory: false\n---\n", "pinMemory: false\n---\n# nothing\n", "pinMemory: false\n---\n---\n~\n", "---\npinMemory: false\n"} {
		cfg, err := Parse(strings.NewReader(in), "config.yaml")
		if assert.NoError(t, err, "%q", in) {
			assert.False(t, cfg.PinMemory, "%q: the first document applies", in)
		}
	}
	_, err = Parse(strings.NewReader("pinMemory: false\n---\n---\npinMemory: true\n"), "config.yaml")
	if assert.Error(t, err, "a document with content after an empty one") {
		assert.Contains(t, err.Error(), "line 3: a second YAML document")
	}
}

// TestEmptyAllowedNamespacesWarns: allowedNamespaces.<pool> present with
// no namespace (null: its only entry commented out; or []) restricts the
// pool to no namespace, unlike an absent key (open to all): a warning
// says so (review B10), which validate, the start and a reload show.
func TestEmptyAllowedNamespacesWarns(t *testing.T) {
	for _, in := range []string{"allowedNamespaces:\n  exclusive:\n  # - telco\n", "allowedNamespaces: {exclusive: []}\n"} {
		cfg, err := Parse(strings.NewReader(in), "config.yaml")
		require.NoError(t, err, "a warning, not an error: %q", in)
		allowed, restricted := cfg.AllowedNamespaces["exclusive"]
		require.True(t, restricted, "%q: the key is there", in)
		require.Empty(t, allowed, in)
		var warned []string
		for _, w := range cfg.Check().Warnings() {
			if w.Key == "allowedNamespaces.exclusive" {
				warned = append(warned, w.Message)
			}
		}
		if assert.Len(t, warned, 1, in) {
			assert.Contains(t, warned[0], "no namespace may use pool exclusive; remove the key to open it to every namespace")
		}
	}
	cfg, err := Parse(strings.NewReader("allowedNamespaces: {exclusive: [telco], shared: [\"*\"]}\n"), "config.yaml")
	require.NoError(t, err)
	for _, w := range cfg.Check().Warnings() {
		assert.NotContains(t, w.Key, "allowedNamespaces", "a list with namespaces warns of nothing: %s", w.Message)
	}
}
