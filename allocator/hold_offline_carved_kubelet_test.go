package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/pools"
)

// A container of the kubelet's devices (cpupool.dev/exclusive) or of a
// DRA claim stopped holding CPUs 4-5; the plugin restarts with a config
// that gives CPU 4, offline, to the shared pool. The kubelet's allocation
// does not change while the pod lives: its next run asks for CPUs 4-5
// again, and placeExact accepts the offline CPU 4 only as the pod's own
// hold's ("a restart never waits for a CPU to come back"). Let go, the run
// would be refused as "given CPU 4 by the kubelet, which is not online"
// for as long as CPU 4 is offline, and once it is online as outside the
// pool: the container could never run again in this pod. The hold keeps
// CPU 4, and the warning says the conflict and how to end it.
func TestAKubeletDecidedHoldKeepsAnOfflineCPUTheConfigGaveAnotherPool(t *testing.T) {
	for _, rule := range []Rule{
		{Kind: RuleDevicePlugin, Detail: "resources.limits cpupool.dev/exclusive"},
		{Kind: RuleClaim, Detail: "ResourceClaims telco/cpus"},
	} {
		t.Run(rule.Kind, func(t *testing.T) {
			a := offlineUnder(t, sharedTookCore4, 4)
			pod := PodRef{Namespace: "ns", Name: "dpdk", UID: "uid-dpdk"}
			held := Assignment{ID: "run1", Pod: pod, Container: "app", Pool: pools.Exclusive, MilliCPU: 2000,
				CPUs: cpuset.New(4, 5), Reserved: cpuset.New(), Rule: rule}
			res, err := a.RestoreHold(Hold{Assignment: held})
			require.NoError(t, err)
			t.Logf("hold restored: CPUs %s; warning: %s", res.Assignment.CPUs, res.Warning)
			assert.Equal(t, "4-5", res.Assignment.CPUs.String(), "the kubelet's CPUs stay the pod's")
			assert.Contains(t, res.Warning, "hold uid-dpdk/app: offline CPU 4 is pool shared's as now configured, not pool exclusive's")
			assert.Contains(t, res.Warning, "("+rule.Kind+": "+rule.Detail+")")
			assert.Contains(t, res.Warning, "once online it stays the pod's, and pool shared runs without it until the pod ends")
			assert.Contains(t, res.Warning, "delete the pod (its replacement gets CPUs of pool exclusive) or give CPU 4 back to pool exclusive in the config")

			as, err := a.Allocate(Request{ID: "run2", Pod: pod, Container: "app", Pool: pools.Exclusive, CPUs: cpuset.New(4, 5)})
			require.NoError(t, err, "the kubelet's allocation of the pod's own hold: the container restarts")
			assert.Equal(t, "4-5", as.Assignment.CPUs.String(), "CPU 4 stays its own, offline")

			// Once CPU 4 is online it is the pod's, and the shared pool
			// runs without it until the pod ends, then with it.
			full := topology(t, "desktop-8c16t")
			back, _ := a.Rebase(full, mustHotplug(t, a, full, sharedTookCore4))
			assert.False(t, back.MembersCPUs(pools.Shared).Contains(4), "shared runs on %s", back.MembersCPUs(pools.Shared))
			back.ReleasePod(pod.UID)
			assert.True(t, back.MembersCPUs(pools.Shared).Contains(4), "shared runs on %s", back.MembersCPUs(pools.Shared))
		})
	}
}

// A hold no kubelet decides (an annotation placed it) still lets the
// offline CPU go: a new run is placed by the plugin, in the pool as now
// configured.
func TestAHoldTheKubeletDoesNotDecideLetsAnOfflineCPUTheConfigGaveAnotherPoolGo(t *testing.T) {
	a := offlineUnder(t, sharedTookCore4, 4)
	h := remembered(t, "x", "4-5", "")
	h.Rule = Rule{Kind: RuleAnnotation, Detail: "pool.cpupool.dev=exclusive"}
	res, err := a.RestoreHold(Hold{Assignment: h})
	require.NoError(t, err)
	assert.Equal(t, "5", res.Assignment.CPUs.String())
	assert.Contains(t, res.Warning, "they leave the hold")
}
