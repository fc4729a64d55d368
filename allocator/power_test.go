package allocator

import (
	"maps"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/pools"
)

const powerConfig = `
power:
  classes:
    low-latency: {resumeLatencyUS: n/a}
    turbo: {governor: performance}
    saver: {governor: powersave}
    balanced: {resumeLatencyUS: 50}
  pools:
    exclusive: {class: low-latency, allowed: [turbo], idleClass: saver}
    exclusive-non-isolcpus: {allowed: [turbo]}
    shared: {class: balanced}
    infra: {class: saver}
`

// TestPolicyPowerClass: an exclusive container gets its pool's class, or
// one its annotation chooses among those the pool allows; anything else is
// refused with what the pool offers.
func TestPolicyPowerClass(t *testing.T) {
	const key = "power-class.cpupool.dev"
	for _, tc := range []struct {
		name, pool string
		ann        map[string]string
		refuse     map[string]string
		want, err  string
	}{
		{"the pool's class", pools.Exclusive, nil, nil, "low-latency", ""},
		{"chosen by the container", pools.Exclusive, map[string]string{key + "/container.c": "turbo", key + "/pod": "nope"}, nil, "turbo", ""},
		{"the pool's class named", pools.Exclusive, map[string]string{key: " low-latency "}, nil, "low-latency", ""},
		{"not allowed", pools.Exclusive, map[string]string{key: "saver"}, nil, "", `annotation power-class.cpupool.dev="saver": pool exclusive offers the power classes low-latency, turbo (power.pools.exclusive)`},
		{"unknown", pools.Exclusive, map[string]string{key: "fast"}, nil, "", "offers the power classes low-latency, turbo"},
		{"a pool without a class", pools.ExclusiveNonIsolcpus, nil, nil, "", ""},
		{"a pool's allowed class", pools.ExclusiveNonIsolcpus, map[string]string{key: "turbo"}, nil, "turbo", ""},
		{"shared container", pools.Shared, map[string]string{key: "turbo"}, nil, "", "a power class is chosen for a container's exclusive CPUs, and the container goes to shared, whose CPUs have the pool's class balanced"},
		{"shared container without", pools.Shared, nil, nil, "", ""},
		{"refused on this node", pools.Exclusive, map[string]string{key: "turbo"}, map[string]string{"turbo": "governor: no cpufreq"}, "", "this node cannot apply the class: governor: no cpufreq (power.unsupported: refuse)"},
		{"pool's class refused on this node", pools.Exclusive, nil, map[string]string{"low-latency": "resumeLatencyUS: no PM QoS"}, "", "the power class low-latency of pool exclusive (power.pools.exclusive.class) cannot be applied on this node: resumeLatencyUS: no PM QoS (power.unsupported: refuse)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPolicy(parseConfig(t, powerConfig+"pools: {exclusive-non-isolcpus: {enabled: true}, shared: {cpus: \"2\"}}\n"), nil)
			p.SetPowerRefusals(tc.refuse)
			ann := map[string]string{"pool.cpupool.dev": tc.pool}
			maps.Copy(ann, tc.ann)
			req, err := p.Request(Container{Name: "c", Pod: PodRef{Namespace: "telco"}, MilliCPU: 1000, Annotations: ann}, nil)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				if tc.refuse != nil {
					assert.Equal(t, ReasonPower, ReasonOf(err), "counted as power")
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, req.PowerClass)
		})
	}
	p := NewPolicy(parseConfig(t, ""), nil)
	_, err := p.Request(Container{Name: "c", Pod: PodRef{Namespace: "telco"}, MilliCPU: 1000,
		Annotations: map[string]string{"pool.cpupool.dev": "exclusive", key: "turbo"}}, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pool exclusive offers no power classes (power.pools.exclusive); the node's operator can add some")
}

// TestPowerClassAnnotationIsBounded: a class name is checked before the
// lock like every value of the domain.
func TestPowerClassAnnotationIsBounded(t *testing.T) {
	err := CheckAnnotations(map[string]string{"power-class.cpupool.dev": strings.Repeat("x", 64)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not a power class name (1 to 63 bytes)")
	require.Error(t, CheckAnnotations(map[string]string{"power-class.cpupool.dev/pod": " "}))
	require.NoError(t, CheckAnnotations(map[string]string{"power-class.cpupool.dev/container.c": "turbo"}))
}

// TestPowerClassesOfCPUs: on the desktop (siblings N and N+8), every
// online CPU has its pool's class, except the CPUs of exclusive containers
// and holds, which have their own (hidden siblings and CPUs added by a
// resize included) until the pod releases them; a lent
// exclusive-non-isolcpus CPU leaves infra's class for its container's.
func TestPowerClassesOfCPUs(t *testing.T) {
	a, pc := powerDesktop(t)
	byClass := func() map[string]string {
		out := map[string][]int{}
		for cpu, class := range a.PowerClasses(pc) {
			out[class] = append(out[class], cpu)
		}
		s := map[string]string{}
		for class, cpus := range out {
			s[class] = cpuset.New(cpus...).String()
		}
		return s
	}
	assert.Equal(t, map[string]string{"saver": "0-1,4-9,12-15", "balanced": "2-3,10-11"}, byClass(), "nothing held: idle and infra are both saver")

	req := exclusive("fast", 1)
	req.PowerClass, req.Options.HideHyperthreads = "turbo", true
	fast, err := a.Allocate(req)
	require.NoError(t, err)
	plain := exclusive("plain", 2)
	plain.PowerClass = "low-latency"
	_, err = a.Allocate(plain)
	require.NoError(t, err)
	eni := exclusive("eni", 1)
	eni.Pool, eni.PowerClass = pools.ExclusiveNonIsolcpus, ""
	lent, err := a.Allocate(eni)
	require.NoError(t, err)
	got := byClass()
	turbo := fast.Assignment.Held()
	assert.Equal(t, 2, turbo.Size(), "the CPU and its hidden sibling")
	assert.Equal(t, turbo.String(), got["turbo"])
	assert.Equal(t, 2, set(t, got["low-latency"]).Size())
	assert.False(t, set(t, got["saver"]).Contains(lent.Assignment.CPUs.List()[0]), "a lent CPU without a class: as the node has it")
	assert.NotContains(t, slices.Collect(maps.Keys(a.PowerClasses(pc))), lent.Assignment.CPUs.List()[0])

	// A resize adds CPUs of the container's class.
	grown, err := a.Resize(Request{ID: "plain", MilliCPU: 3000, NUMANodes: cpuset.New(), PreferNUMA: cpuset.New()})
	require.NoError(t, err)
	assert.Equal(t, grown.Assignment.CPUs.String(), byClass()["low-latency"])

	// Stopped, its CPUs are held for the pod with its class; released,
	// they are idle again.
	code := int32(1)
	a.Stop("fast", &code)
	assert.Equal(t, turbo.String(), byClass()["turbo"])
	a.ReleasePod("uid-fast")
	assert.NotContains(t, byClass(), "turbo")
	assert.True(t, turbo.IsSubsetOf(set(t, byClass()["saver"])))
}

// TestPowerClassesAndHeldCPUsFollowTheDecisions: PowerClasses walks the
// CPUs and their owners, HeldCPUs and IRQIsolated the exclusive
// containers' index; after
// any sequence of decisions (creations with and without a class and a
// hidden sibling, resizes, stops whose CPUs stay held, releases, pods'
// ends) they must give what a walk of every container and hold gives
// (powerClassesOfEveryHolder, the walk PowerClasses replaced; the
// assignments' and holds' Held sets).
func TestPowerClassesAndHeldCPUsFollowTheDecisions(t *testing.T) {
	a, pc := powerDesktop(t)
	classes := []string{"", "turbo", "low-latency"}
	var withHolds, withIRQs int
	dress := func(r *Request, rng *rand.Rand) {
		r.PowerClass = classes[rng.Intn(len(classes))]
		r.Options.HideHyperthreads = rng.Intn(3) == 0
		r.IsolateIRQs = rng.Intn(2) == 0
	}
	walkDecisions(a, rand.New(rand.NewSource(45)), 400, dress, func(step int) {
		require.Equal(t, powerClassesOfEveryHolder(a, pc), a.PowerClasses(pc), "step %d", step)
		irqs := cpuset.New()
		for _, as := range a.Assignments() {
			if as.IsolateIRQs {
				irqs = irqs.Union(as.Held())
			}
		}
		for _, h := range a.Holds() {
			if h.IsolateIRQs {
				irqs = irqs.Union(h.Held())
			}
		}
		require.Equal(t, irqs.String(), a.IRQIsolated().String(), "step %d: IRQ isolated", step)
		if len(a.Holds()) > 0 {
			withHolds++
		}
		if !irqs.IsEmpty() {
			withIRQs++
		}
		for _, pool := range []string{pools.Exclusive, pools.ExclusiveNonIsolcpus} {
			want := cpuset.New()
			for _, as := range a.Assignments() {
				if as.Pool == pool {
					want = want.Union(as.Held())
				}
			}
			for _, h := range a.Holds() {
				if h.Pool == pool {
					want = want.Union(h.Held())
				}
			}
			got := a.HeldCPUs(func(p string) bool { return p == pool })
			require.Equal(t, want.String(), got.String(), "step %d: %s held", step, pool)
		}
		// Rebase (a reload, a hotplug) builds a new allocator, and its
		// indexes, from the receiver's containers: it must answer alike.
		if step%10 == 0 {
			n, _ := a.Rebase(a.x.topo, a.layout)
			require.Equal(t, a.PowerClasses(pc), n.PowerClasses(pc), "step %d: rebased power classes", step)
			require.Equal(t, a.IRQIsolated().String(), n.IRQIsolated().String(), "step %d: rebased IRQ isolated", step)
			every := func(string) bool { return true }
			require.Equal(t, a.HeldCPUs(every).String(), n.HeldCPUs(every).String(), "step %d: rebased held", step)
			require.Equal(t, a.Usage(), n.Usage(), "step %d: rebased usage", step)
		}
	})
	assert.Positive(t, withHolds, "some steps had CPUs held for stopped containers")
	assert.Positive(t, withIRQs, "some steps had CPUs kept free of IRQs")
}

// powerDesktop is the desktop (siblings N and N+8) with every pool and
// powerConfig's classes.
func powerDesktop(t *testing.T) (*Allocator, PoolPowerClasses) {
	t.Helper()
	cfg := parseConfig(t, powerConfig+`
isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "4-7,12-15"}
  shared: {cpus: "2-3,10-11"}
  exclusive-non-isolcpus: {enabled: true}
`)
	topo := topology(t, "desktop-8c16t")
	layout, problems := BuildLayout(topo, cfg)
	require.False(t, problems.HasErrors(), "%v", problems)
	a := New(topo, layout, true)
	pc := PoolPowerClassesOf(cfg)
	return a, pc
}

// powerClassesOfEveryHolder is PowerClasses as it was before it walked
// the owners: every hold, then every container, then the CPUs nobody holds.
func powerClassesOfEveryHolder(a *Allocator, pc PoolPowerClasses) map[int]string {
	out := make(map[int]string, len(a.owner))
	owned := make([]bool, len(a.owner))
	set := func(as *Assignment) {
		if !pools.IsExclusive(as.Pool) {
			return
		}
		for _, cpu := range as.Held().UnsortedList() {
			if cpu < len(owned) && a.owner[cpu] == as.ID {
				owned[cpu] = true
				if as.PowerClass != "" {
					out[cpu] = as.PowerClass
				}
			}
		}
	}
	for _, h := range a.holds {
		set(&h.Assignment)
	}
	for _, c := range a.containers {
		set(c)
	}
	for _, cpu := range a.layout.Online.UnsortedList() {
		if cpu >= len(owned) || owned[cpu] {
			continue
		}
		if class := a.poolClass(cpu, pc); class != "" {
			out[cpu] = class
		}
	}
	return out
}
