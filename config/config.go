// Package config loads and checks the operator's YAML configuration.
// Unknown keys are rejected so that a typo never silently changes pinning.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/internal/cpulist"
	"github.com/cpupool/nri-cpupool/pools"
)

// DefaultPath is where the daemon looks for its configuration.
const DefaultPath = "/etc/nri-cpupool/config.yaml"

// Pool names, kept for code written before the vocabulary moved to package
// pools.
//
// Deprecated: use pools.Exclusive, pools.Shared, pools.Infra,
// pools.ExclusiveNonIsolcpus, pools.Names and pools.IsExclusive.
const (
	PoolExclusive            = pools.Exclusive
	PoolShared               = pools.Shared
	PoolInfra                = pools.Infra
	PoolExclusiveNonIsolcpus = pools.ExclusiveNonIsolcpus
)

// Config is the whole configuration file.
type Config struct {
	// IsolatedCPUs overrides the kernel's isolated set (isolcpus=) when set.
	IsolatedCPUs *string `yaml:"isolatedCPUs"`
	// ReservedCPUs always stay in infra and are never handed out exclusively.
	ReservedCPUs string `yaml:"reservedCPUs"`
	Pools        Pools  `yaml:"pools"`
	// KeepHostOffIsolcpus keeps host processes and unbound kernel work off
	// the CPUs that isolcpus= takes out of the scheduler's domains and the
	// exclusive or shared pool has (the isolated CPUs no pool lends to
	// host work), as isolcpus= promised at boot: on cgroup v2 the
	// runtime's enabling of the cpuset controller at the root resets every
	// host process's affinity to every CPU (housekeeping.go). On by
	// default.
	KeepHostOffIsolcpus bool `yaml:"keepHostOffIsolcpus"`
	// DefaultPool is the pool of containers without a pool annotation.
	DefaultPool string `yaml:"defaultPool"`
	// GuaranteedExclusive applies the kubelet static policy's rule:
	// containers of Guaranteed pods with whole-CPU requests go to exclusive.
	GuaranteedExclusive bool       `yaml:"guaranteedExclusive"`
	Allocation          Allocation `yaml:"allocation"`
	// AllowedNamespaces restricts, per pool, which namespaces may ask for it
	// by annotation; a pool that is not listed is open to every namespace.
	AllowedNamespaces map[string][]string `yaml:"allowedNamespaces"`
	// PinMemory also sets cpuset.mems to the NUMA nodes of the CPUs.
	PinMemory bool `yaml:"pinMemory"`
	// Memory keeps memory and hugepages of every NUMA node for the host:
	// pinned containers are counted against the rest (numamem).
	Memory Memory `yaml:"memory"`
	// PinSandboxes writes the infra pool into pod sandbox cgroups.
	PinSandboxes bool `yaml:"pinSandboxes"`
	// SandboxAffinity also sets the sandbox process's CPU affinity.
	SandboxAffinity bool   `yaml:"sandboxAffinity"`
	StateFile       string `yaml:"stateFile"`
	NRISocket       string `yaml:"nriSocket"`
	PluginIndex     int    `yaml:"pluginIndex"`
	CgroupRoot      string `yaml:"cgroupRoot"`
	SysfsRoot       string `yaml:"sysfsRoot"`
	// ProcRoot is where procfs is mounted: /proc/irq is written and
	// /proc/interrupts read there (IRQ isolation, the audit).
	ProcRoot string `yaml:"procRoot"`
	// IRQ configures how IRQs are kept off CPUs (pools.*.irqIsolation).
	IRQ      IRQ    `yaml:"irq"`
	LogLevel string `yaml:"logLevel"`
	// Kubelet makes the exclusive pool visible to the scheduler through the
	// kubelet's device plugin API.
	Kubelet Kubelet `yaml:"kubelet"`
	// Power gives pools and containers power classes (power.go).
	Power Power `yaml:"power"`
	// KernelWork keeps RPS and unbound workqueues off held CPUs
	// (kernelwork.go).
	KernelWork KernelWork `yaml:"kernelWork"`
	// DRA makes the daemon the cpupool.dev DRA driver: the scheduler then
	// allocates exclusive CPUs by NUMA node through ResourceClaims.
	DRA DRA `yaml:"dra"`
	// Kubernetes is the connection to the API server, for the pod Events
	// and the DRA driver (docs/kubernetes.md).
	Kubernetes Kubernetes `yaml:"kubernetes"`
	// MetricsAddress serves Prometheus metrics on /metrics when set
	// ("127.0.0.1:9464"); empty turns them off.
	MetricsAddress string `yaml:"metricsAddress"`
}

// ResourceExclusive is the extended resource that advertises the exclusive
// pool, one device per CPU.
const ResourceExclusive = "cpupool.dev/exclusive"

// Kubelet configures the device plugin.
type Kubelet struct {
	// DevicePlugin registers cpupool.dev/exclusive with the kubelet. With it
	// on, exclusive CPUs are given only through that resource.
	DevicePlugin bool `yaml:"devicePlugin"`
	// DevicePluginDir holds the kubelet's registration socket (kubelet.sock)
	// and the plugin's own socket.
	DevicePluginDir string `yaml:"devicePluginDir"`
}

// DRA configures the DRA driver (docs/dra.md).
type DRA struct {
	// Enabled makes the daemon the DRA driver cpupool.dev. With it on, the
	// exclusive pools are given only through ResourceClaims.
	Enabled bool `yaml:"enabled"`
	// Devices is the device model the node publishes: DRADevicesNUMANode
	// or DRADevicesCPU.
	Devices string `yaml:"devices"`
	// NodeName is this node's Node name; empty takes $NODE_NAME.
	NodeName string `yaml:"nodeName"`
	// Kubeconfig is the API server's kubeconfig file; empty uses the pod's
	// service account (in-cluster credentials).
	Kubeconfig string `yaml:"kubeconfig"`
	// CDIDir is where the runtime reads CDI specs.
	CDIDir string `yaml:"cdiDir"`
	// PluginDir holds the driver's socket for the kubelet; RegistryDir is
	// the kubelet's plugin registration directory.
	PluginDir   string `yaml:"pluginDir"`
	RegistryDir string `yaml:"registryDir"`
}

// Kubernetes configures the connection to the API server. Nothing uses it
// unless kubernetes.events or dra.enabled is on: pinning never depends on
// the API server.
type Kubernetes struct {
	// Kubeconfig is the API server's kubeconfig file; empty uses the pod's
	// service account (in-cluster credentials). dra.kubeconfig, its
	// older name, is read when this is empty.
	Kubeconfig string `yaml:"kubeconfig"`
	// NodeName is this node's Node name; empty takes dra.nodeName, then
	// $NODE_NAME.
	NodeName string `yaml:"nodeName"`
	// Events posts Kubernetes Events on the pods whose containers are
	// refused, placed degraded or pinned exclusive (docs/kubernetes.md).
	Events bool `yaml:"events"`
}

// APIKubeconfig is the kubeconfig file the API clients use:
// kubernetes.kubeconfig, else dra.kubeconfig (the key DRA had before
// kubernetes.kubeconfig existed, still read); empty means in-cluster
// credentials.
func (c *Config) APIKubeconfig() string {
	if c.Kubernetes.Kubeconfig != "" {
		return c.Kubernetes.Kubeconfig
	}
	return c.DRA.Kubeconfig
}

// APINodeName is the configured node name: kubernetes.nodeName, else
// dra.nodeName; empty means $NODE_NAME.
func (c *Config) APINodeName() string {
	if c.Kubernetes.NodeName != "" {
		return c.Kubernetes.NodeName
	}
	return c.DRA.NodeName
}

// NeedsKubernetes tells whether the daemon talks to the API server: the
// Kubernetes client libraries are then needed (nri-cpupool-dra).
func (c *Config) NeedsKubernetes() bool { return c.DRA.Enabled || c.Kubernetes.Events }

// The DRA device models (dra.devices).
const (
	// DRADevicesNUMANode publishes one device per pool and NUMA node,
	// shared by claims through the consumable capacity cpupool.dev/cpus.
	DRADevicesNUMANode = "numaNode"
	// DRADevicesCPU publishes one device per CPU: what the
	// extended-resource alias cpupool.dev/exclusive: N counts.
	DRADevicesCPU = "cpu"
)

// Pools carves the node's CPUs; infra is always what the others leave.
type Pools struct {
	Exclusive            PoolSpec                 `yaml:"exclusive"`
	Shared               PoolSpec                 `yaml:"shared"`
	ExclusiveNonIsolcpus ExclusiveNonIsolcpusSpec `yaml:"exclusive-non-isolcpus"`
}

// PoolSpec sizes an isolated pool by an explicit list or by a count of
// logical CPUs (not cores, unlike CMK's --num-exclusive-cores).
type PoolSpec struct {
	CPUs  string `yaml:"cpus"`
	Count int    `yaml:"count"`
	// IRQIsolation keeps device IRQs off the pool's CPUs: one of the
	// IRQIsolation* values ("" is off).
	IRQIsolation string `yaml:"irqIsolation"`
	// IsolatedPartition makes containers' cgroups isolated cgroup v2
	// partitions (no load balancing onto their CPUs): off, optIn or
	// optOut; exclusive pools only.
	IsolatedPartition string `yaml:"isolatedPartition"`
	// Housekeeping keeps host processes and unbound kernel work off the
	// pool's CPUs: one of the Housekeeping* values ("" is off).
	Housekeeping string `yaml:"housekeeping"`
}

// ExclusiveNonIsolcpusSpec enables exclusive CPUs taken from infra.
type ExclusiveNonIsolcpusSpec struct {
	Enabled bool `yaml:"enabled"`
	// MinInfraCPUs is how many CPUs infra keeps however many
	// exclusive-non-isolcpus containers run.
	MinInfraCPUs int `yaml:"minInfraCPUs"`
	// IRQIsolation: as PoolSpec's, without always (the pool's CPUs are
	// infra's until lent).
	IRQIsolation string `yaml:"irqIsolation"`
	// IsolatedPartition: as PoolSpec's.
	IsolatedPartition string `yaml:"isolatedPartition"`
	// Housekeeping: as PoolSpec's, without always (the pool's CPUs are
	// infra's until lent).
	Housekeeping string `yaml:"housekeeping"`
}

// Values of pools.<pool>.irqIsolation.
const (
	// IRQIsolationOff never moves IRQs for the pool (the default).
	IRQIsolationOff = "off"
	// IRQIsolationOptIn moves IRQs off the CPUs of the pool's containers
	// whose pod or container annotation asks for it.
	IRQIsolationOptIn = "optIn"
	// IRQIsolationOptOut moves IRQs off the CPUs of every container of the
	// pool, unless its annotation says false.
	IRQIsolationOptOut = "optOut"
	// IRQIsolationAlways keeps the pool's CPUs free of IRQs whether or not
	// a container holds them.
	IRQIsolationAlways = "always"
)

// Values of pools.<pool>.housekeeping (housekeeping.go).
const (
	// HousekeepingOff leaves host processes where they are (the default).
	HousekeepingOff = "off"
	// HousekeepingHeld keeps host processes off the CPUs the pool's
	// containers hold (and holds for their stopped runs), for as long as
	// they hold them.
	HousekeepingHeld = "held"
	// HousekeepingAlways keeps host processes off the pool's CPUs whether
	// or not a container holds them.
	HousekeepingAlways = "always"
)

// IRQ configures IRQ isolation for every pool.
type IRQ struct {
	// RescanInterval is how often IRQs are listed again, to move IRQs
	// that appeared since (a driver loaded, a VF created) and to undo
	// other programs' writes.
	RescanInterval Duration `yaml:"rescanInterval"`
	// Irqbalance is "socket" (tell a running irqbalance the banned CPUs
	// through its control socket) or "off" (leave irqbalance alone).
	Irqbalance string `yaml:"irqbalance"`
	// IrqbalanceDir holds irqbalance's control sockets.
	IrqbalanceDir string `yaml:"irqbalanceDir"`
}

// Duration is a time.Duration written as "10s" in YAML.
type Duration struct{ time.Duration }

// UnmarshalYAML reads "10s", "1m30s".
func (d *Duration) UnmarshalYAML(node *yaml.Node) error {
	var s string
	if err := node.Decode(&s); err != nil {
		return err
	}
	v, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration; write e.g. \"10s\"", node.Line, s)
	}
	d.Duration = v
	return nil
}

// MarshalYAML writes the duration as text.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// IRQIsolation returns a pool's irqIsolation value ("" reads as off).
func (c *Config) IRQIsolation(pool string) string {
	return poolValue(pool, c.Pools.Exclusive.IRQIsolation, c.Pools.Shared.IRQIsolation, c.Pools.ExclusiveNonIsolcpus.IRQIsolation, IRQIsolationOff)
}

// IsolatedPartition returns a pool's isolatedPartition value ("" reads
// as off).
func (c *Config) IsolatedPartition(pool string) string {
	return poolValue(pool, c.Pools.Exclusive.IsolatedPartition, "", c.Pools.ExclusiveNonIsolcpus.IsolatedPartition, IRQIsolationOff)
}

// IRQIsolationEnabled tells whether any pool may move IRQs.
func (c *Config) IRQIsolationEnabled() bool {
	return anyPool(c.IRQIsolation, IRQIsolationOff)
}

// poolValue picks a per-pool setting by pool name: the exclusive, shared
// or exclusive-non-isolcpus pool's value, off for an empty one or another
// pool.
func poolValue(pool, exclusive, shared, nonIsolcpus, off string) string {
	var v string
	switch pool {
	case pools.Exclusive:
		v = exclusive
	case pools.Shared:
		v = shared
	case pools.ExclusiveNonIsolcpus:
		v = nonIsolcpus
	}
	if v == "" {
		return off
	}
	return v
}

// anyPool tells whether a per-pool setting is other than off for any pool.
func anyPool(setting func(pool string) string, off string) bool {
	for _, pool := range []string{pools.Exclusive, pools.Shared, pools.ExclusiveNonIsolcpus} {
		if setting(pool) != off {
			return true
		}
	}
	return false
}

// Allocation holds placement options; pods may override them by annotation.
type Allocation struct {
	// FullPCPUsOnly refuses exclusive requests that are not whole cores.
	FullPCPUsOnly bool `yaml:"fullPCPUsOnly"`
	// HideHyperthreads gives one thread per core and keeps its siblings idle.
	HideHyperthreads bool `yaml:"hideHyperthreads"`
	// DistributeAcrossNUMA spreads a request evenly over the NUMA nodes it needs.
	DistributeAcrossNUMA bool `yaml:"distributeAcrossNUMA"`
	// DisableCPUQuota lifts the CFS quota of containers with exclusive
	// CPUs: their cpuset already bounds them, so the quota could only
	// throttle them (the kubelet's DisableCPUQuotaWithExclusiveCPUs).
	DisableCPUQuota bool `yaml:"disableCPUQuota"`
}

// Default returns the configuration used when a key is absent.
func Default() *Config {
	return &Config{
		DefaultPool: pools.Infra,
		// isolcpus= CPUs stay free of host processes, as at boot.
		KeepHostOffIsolcpus: true,
		PinMemory:           true,
		PinSandboxes:        true,
		StateFile:           "/var/lib/nri-cpupool/state.json",
		NRISocket:           "/var/run/nri/nri.sock",
		PluginIndex:         10,
		CgroupRoot:          "/sys/fs/cgroup",
		SysfsRoot:           "/",
		ProcRoot:            "/proc",
		IRQ:                 IRQ{RescanInterval: Duration{10 * time.Second}, Irqbalance: "socket", IrqbalanceDir: "/run/irqbalance"},
		LogLevel:            "info",
		Pools:               Pools{ExclusiveNonIsolcpus: ExclusiveNonIsolcpusSpec{MinInfraCPUs: 1}},
		Allocation:          Allocation{DisableCPUQuota: true},
		Kubelet:             Kubelet{DevicePluginDir: "/var/lib/kubelet/device-plugins"},
		Power:               Power{Unsupported: PowerUnsupportedWarn},
		DRA: DRA{Devices: DRADevicesNUMANode, CDIDir: "/var/run/cdi", PluginDir: "/var/lib/kubelet/plugins/cpupool.dev",
			RegistryDir: "/var/lib/kubelet/plugins_registry"},
	}
}

// Load reads a file, applies defaults and runs the checks that need no
// topology. A missing file is an error: the daemon must not guess.
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	defer f.Close()
	return Parse(f, path)
}

// Parse decodes YAML strictly on top of the defaults; name is used in errors.
func Parse(r io.Reader, name string) (*Config, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("reading config %s: %w", name, err)
	}
	cfg := Default()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	err = dec.Decode(cfg)
	if err == nil {
		err = OnlyDocument(dec, "the daemon", "key")
	}
	found := findDocProblems(data)
	if err == nil && len(found.typed) > 0 {
		// What the decoder took without a word: a fraction for a whole
		// number (it truncates count: 1.5 to 1).
		err = errSilentlyConverted
	}
	if err == nil && found.exhausted {
		// The walk looks for what the decoder took without a word; what
		// it could not look at is not trusted.
		err = errNotChecked
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("config %s: %s (keys are documented in docs/configuration.md and packaging/config.yaml)", name, decodeError(err, found))
	}
	if problems := cfg.Check(); problems.HasErrors() {
		return nil, problems.Errors().In(name)
	}
	return cfg, nil
}

// ErrSecondDocument is what OnlyDocument's error for a second document
// with content wraps; its other errors are the decoder's own.
var ErrSecondDocument = errors.New("a second YAML document starts here (after \"---\")")

// OnlyDocument reads what follows the first YAML document of a file whose
// reader takes one: the daemon reads one config document and simulate
// one requests document, and a second one ("---", as a concatenated file
// has it) was ignored without a word, its keys never applied (review B9)
// or its steps never run. An empty one (a trailing "---", one of comments
// only, or "{}") changes nothing and is let be; one with content is an
// error naming the line it starts on, who would ignore it (reader: "the
// daemon", "simulate") and what to put in the first document instead
// (entry: "key", "step"); it wraps ErrSecondDocument. An error of the
// decoder on what follows is returned as the decoder said it, for the
// caller to word as it words the first document's.
func OnlyDocument(dec *yaml.Decoder, reader, entry string) error {
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(doc.Content) == 1 && emptyDocument(doc.Content[0]) {
			continue
		}
		return fmt.Errorf("line %d: %w, which %s would ignore: put every %s in the first document", doc.Line, ErrSecondDocument, reader, entry)
	}
}

// emptyDocument tells whether a document's root is nothing (null) or a
// mapping without a key ("--- {}", as tools that emit one document per
// object write an empty one): either changes nothing.
func emptyDocument(root *yaml.Node) bool {
	switch root.Kind {
	case yaml.ScalarNode:
		return root.Tag == "!!null"
	case yaml.MappingNode:
		return len(root.Content) == 0
	}
	return false
}

// errSilentlyConverted stands for the decoder's error where it took a value
// that findDocProblems finds of the wrong kind; its typeError says what it is.
var errSilentlyConverted = errors.New("a value does not fit its key")

// errNotChecked stands for the decoder's error where it took a file that
// findDocProblems could not walk to the end; decodeError says why.
var errNotChecked = errors.New("not checked")

// decodeError says what the strict decoder refused, naming unknown keys by
// their YAML path with the nearest known key, and values of the wrong kind
// by their key path with the kind the key takes, instead of the decoder's
// Go type names ("cannot unmarshal !!str `4` into int"); its other
// findings follow, those on a line already explained left out.
func decodeError(err error, found docFindings) string {
	unknown, typed := found.unknown, found.typed
	if len(unknown) == 0 && len(typed) == 0 && !found.exhausted {
		return strings.TrimPrefix(err.Error(), "yaml: ")
	}
	rest := []string{strings.TrimPrefix(err.Error(), "yaml: ")}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		rest = te.Errors
	} else if errors.Is(err, errSilentlyConverted) || errors.Is(err, errNotChecked) {
		rest = nil
	}
	lines := make([]string, 0, len(unknown)+len(typed)+len(rest))
	explained := map[string]bool{}
	for _, u := range unknown {
		lines = append(lines, u.String())
		if u.inInlineMap {
			explained[fmt.Sprintf("line %d: ", u.Line)] = true
		}
	}
	for _, e := range typed {
		lines = append(lines, e.String())
		explained[fmt.Sprintf("line %d: ", e.Line)] = true
	}
	for _, e := range rest {
		if strings.Contains(e, " not found in type ") || explained[ownLine.FindString(e)] {
			continue
		}
		lines = append(lines, e)
	}
	if found.exhausted {
		lines = append(lines, tooManyAliasedValues)
	}
	return strings.Join(lines, "\n  ")
}

// Check validates what can be judged without the node's topology.
func (c *Config) Check() Problems {
	var p Problems
	lists := map[string]string{"reservedCPUs": c.ReservedCPUs, "pools.exclusive.cpus": c.Pools.Exclusive.CPUs, "pools.shared.cpus": c.Pools.Shared.CPUs}
	if c.IsolatedCPUs != nil {
		lists["isolatedCPUs"] = *c.IsolatedCPUs
	}
	for _, key := range slices.Sorted(maps.Keys(lists)) {
		if _, err := ParseCPUList(lists[key]); err != nil {
			p.Errorf(key, "%v; write a list such as \"2-5,34-37\"", err)
		}
	}
	for _, ps := range []struct {
		name string
		spec PoolSpec
	}{{"pools.exclusive", c.Pools.Exclusive}, {"pools.shared", c.Pools.Shared}} {
		name, spec := ps.name, ps.spec
		if spec.CPUs != "" && spec.Count != 0 {
			p.Errorf(name, "both cpus and count are set; give one of them")
		}
		if spec.Count < 0 {
			p.Errorf(name+".count", "%d is negative; give a number of CPUs ≥ 0", spec.Count)
		}
	}
	if c.Pools.ExclusiveNonIsolcpus.MinInfraCPUs < 1 {
		p.Errorf("pools.exclusive-non-isolcpus.minInfraCPUs", "%d: infra needs at least 1 CPU", c.Pools.ExclusiveNonIsolcpus.MinInfraCPUs)
	}
	if !pools.Known(c.DefaultPool) {
		p.Errorf("defaultPool", "unknown pool %q; use one of %s", c.DefaultPool, strings.Join(pools.Names(), ", "))
	} else if pools.IsExclusive(c.DefaultPool) {
		p.Warnf("defaultPool", "%q makes every container without a CPU request fail; infra or shared is the usual default", c.DefaultPool)
	}
	for _, pool := range slices.Sorted(maps.Keys(c.AllowedNamespaces)) {
		if !pools.Known(pool) {
			p.Errorf("allowedNamespaces."+pool, "unknown pool; use one of %s", strings.Join(pools.Names(), ", "))
		} else if len(c.AllowedNamespaces[pool]) == 0 {
			// A key left with nothing after it (null, e.g. its only
			// namespace commented out) or []: present, so the pool is
			// restricted, to no namespace (review B10).
			p.Warnf("allowedNamespaces."+pool, "lists no namespace, so no namespace may use pool %s; remove the key to open it to every namespace, or list the namespaces (\"*\" for any)", pool)
		}
	}
	if c.PluginIndex < 0 || c.PluginIndex > 99 {
		p.Errorf("pluginIndex", "%d is out of range; NRI plugin indexes are 0-99", c.PluginIndex)
	}
	if c.Kubelet.DevicePlugin && c.GuaranteedExclusive && !c.Pools.ExclusiveNonIsolcpus.Enabled {
		p.Warnf("guaranteedExclusive", "with kubelet.devicePlugin on, the exclusive pool is given only through %s, so Guaranteed containers that do not request it go to exclusive-non-isolcpus, which is not enabled: they go to defaultPool (%s)", ResourceExclusive, c.DefaultPool)
	}
	c.checkIRQ(&p)
	c.checkHousekeeping(&p)
	c.checkKernelWork(&p)
	c.checkPower(&p)
	c.checkMemory(&p)
	if c.DRA.Enabled && c.Kubelet.DevicePlugin {
		p.Errorf("dra.enabled", "the DRA driver and the kubelet device plugin (kubelet.devicePlugin) would both hand out the exclusive pool; turn one off (pods that request %s are served by DRA through a DeviceClass with extendedResourceName, see docs/dra.md)", ResourceExclusive)
	}
	if c.DRA.Devices != DRADevicesNUMANode && c.DRA.Devices != DRADevicesCPU {
		p.Errorf("dra.devices", "unknown device model %q; use %s (one device per NUMA node and pool) or %s (one device per CPU)", c.DRA.Devices, DRADevicesNUMANode, DRADevicesCPU)
	}
	if c.DRA.Enabled && c.GuaranteedExclusive {
		p.Warnf("guaranteedExclusive", "with dra.enabled, the exclusive pools are given only through ResourceClaims, so Guaranteed containers without a claim go to defaultPool (%s)", c.DefaultPool)
	}
	paths := map[string]string{"stateFile": c.StateFile, "nriSocket": c.NRISocket, "cgroupRoot": c.CgroupRoot, "sysfsRoot": c.SysfsRoot,
		"procRoot": c.ProcRoot, "irq.irqbalanceDir": c.IRQ.IrqbalanceDir, "kubelet.devicePluginDir": c.Kubelet.DevicePluginDir,
		"dra.cdiDir": c.DRA.CDIDir, "dra.pluginDir": c.DRA.PluginDir, "dra.registryDir": c.DRA.RegistryDir}
	if c.DRA.Kubeconfig != "" {
		paths["dra.kubeconfig"] = c.DRA.Kubeconfig
	}
	if c.Kubernetes.Kubeconfig != "" {
		paths["kubernetes.kubeconfig"] = c.Kubernetes.Kubeconfig
	}
	// One API server connection: two different files would leave one
	// of them unused without a word.
	if k, d := c.Kubernetes.Kubeconfig, c.DRA.Kubeconfig; k != "" && d != "" && k != d {
		p.Errorf("kubernetes.kubeconfig", "%q differs from dra.kubeconfig %q; the daemon has one API server connection: set kubernetes.kubeconfig only (dra.kubeconfig is its older name)", k, d)
	}
	if k, d := c.Kubernetes.NodeName, c.DRA.NodeName; k != "" && d != "" && k != d {
		p.Errorf("kubernetes.nodeName", "%q differs from dra.nodeName %q; set kubernetes.nodeName only (dra.nodeName is its older name)", k, d)
	}
	for _, key := range slices.Sorted(maps.Keys(paths)) {
		if path := paths[key]; !filepath.IsAbs(path) {
			p.Errorf(key, "%q is not an absolute path", path)
		}
	}
	c.checkMetricsAddress(&p)
	if _, err := ParseLogLevel(c.LogLevel); err != nil {
		p.Errorf("logLevel", "%v", err)
	}
	return p
}

// checkIRQ validates the IRQ isolation keys.
func (c *Config) checkIRQ(p *Problems) {
	for _, pk := range []struct {
		pool  string
		value string
		modes []string
		why   string
	}{
		{pools.Exclusive, c.Pools.Exclusive.IRQIsolation, []string{IRQIsolationOff, IRQIsolationOptIn, IRQIsolationOptOut, IRQIsolationAlways}, ""},
		{pools.Shared, c.Pools.Shared.IRQIsolation, []string{IRQIsolationOff, IRQIsolationAlways},
			"; a shared pool's CPUs are not any one container's, so only the whole pool can be kept free of IRQs"},
		{pools.ExclusiveNonIsolcpus, c.Pools.ExclusiveNonIsolcpus.IRQIsolation, []string{IRQIsolationOff, IRQIsolationOptIn, IRQIsolationOptOut},
			"; the pool's CPUs belong to infra until lent, so they cannot always be free of IRQs"},
	} {
		if pk.value != "" && !slices.Contains(pk.modes, pk.value) {
			p.Errorf("pools."+pk.pool+".irqIsolation", "%q is not one of %s%s", pk.value, strings.Join(pk.modes, ", "), pk.why)
		}
	}
	for _, pk := range []struct{ pool, value string }{
		{pools.Exclusive, c.Pools.Exclusive.IsolatedPartition},
		{pools.ExclusiveNonIsolcpus, c.Pools.ExclusiveNonIsolcpus.IsolatedPartition},
		{pools.Shared, c.Pools.Shared.IsolatedPartition},
	} {
		modes := []string{IRQIsolationOff, IRQIsolationOptIn, IRQIsolationOptOut}
		why := ""
		if pk.pool == pools.Shared {
			modes, why = modes[:1], "; a partition belongs to one container, so only exclusive pools can have them"
		}
		if pk.value != "" && !slices.Contains(modes, pk.value) {
			p.Errorf("pools."+pk.pool+".isolatedPartition", "%q is not one of %s%s", pk.value, strings.Join(modes, ", "), why)
		}
	}
	if c.IRQ.RescanInterval.Duration < time.Second {
		p.Errorf("irq.rescanInterval", "%s is shorter than 1s; each rescan reads every IRQ's affinity", c.IRQ.RescanInterval.Duration)
	}
	if c.IRQ.Irqbalance != "socket" && c.IRQ.Irqbalance != "off" {
		p.Errorf("irq.irqbalance", "%q is not socket or off", c.IRQ.Irqbalance)
	}
}

// ParseCPUList parses a CPU list as written in the config ("0-3, 8"):
// the kernel's syntax, tolerating spaces.
func ParseCPUList(s string) (cpuset.CPUSet, error) {
	return cpulist.ParseSpaced(s)
}

// ParseLogLevel accepts the logrus level names.
func ParseLogLevel(s string) (string, error) {
	switch strings.ToLower(s) {
	case "trace", "debug", "info", "warn", "warning", "error":
		return strings.ToLower(s), nil
	}
	return "", fmt.Errorf("unknown level %q; use trace, debug, info, warn or error", s)
}
