package dra

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/internal/atomicfile"
	"github.com/cpupool/nri-cpupool/pools"
)

// The container's environment as the runtime builds it: the pod spec's
// variables and the CDI edits of the devices the kubelet named.
func envWith(extra ...[]string) []string {
	env := []string{"PATH=/usr/bin", "HOSTNAME=p"}
	for _, e := range extra {
		env = append(env, e...)
	}
	return env
}

func TestBindGivesTheClaimsCPUsToItsContainerOnly(t *testing.T) {
	td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	prepare(t, td.Driver,
		allocatedClaim("uid-1", "app", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 4), "more": slotsOn(pools.Exclusive, 2, 0, 2),
			"eni": slotsOn(pools.ExclusiveNonIsolcpus, 0, 0, 1)}, "pod-1"),
		allocatedClaim("uid-2", "other", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 2)}, "pod-2"))
	env := cdiEnv(t, td.cdi, "uid-1")
	cpus, more, eni := env[CDIDeviceID("uid-1", "cpus")], env[CDIDeviceID("uid-1", "more")], env[CDIDeviceID("uid-1", "eni")]
	app := Container{PodUID: "pod-1", Namespace: "ns", Pod: "app", Name: "c"}

	// No token: not a claim's container.
	_, ok, err := td.Bind(envWith(), app)
	require.NoError(t, err)
	assert.False(t, ok)

	g, ok, err := td.Bind(envWith(cpus), app)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, pools.Exclusive, g.Pool)
	assert.Equal(t, cpusOf(t, td.Driver, "uid-1", "cpus"), g.CPUs)
	assert.Equal(t, []string{"ns/app/cpus"}, g.Claims)

	// The same container again (a restart, a repeated event): same answer.
	again, _, err := td.Bind(envWith(cpus), app)
	require.NoError(t, err)
	assert.Equal(t, g, again)

	// A second container of the pod that shows the same request.
	_, _, err = td.Bind(envWith(cpus), Container{PodUID: "pod-1", Namespace: "ns", Pod: "app", Name: "sidecar"})
	assert.EqualError(t, err, "claim ns/app request cpus already gives its CPUs to container c of pod pod-1; a request of cpupool.dev gives its CPUs to one container: give each container its own claim (a ResourceClaimTemplate) or its own request (resources.claims[].request)")

	// Two requests of one pool in one container: all their CPUs.
	both, _, err := td.Bind(envWith(cpus, more), app)
	require.NoError(t, err)
	assert.Equal(t, cpusOf(t, td.Driver, "uid-1", "cpus").Union(cpusOf(t, td.Driver, "uid-1", "more")), both.CPUs)

	// Requests of two pools in one container.
	_, _, err = td.Bind(envWith(cpus, eni), app)
	assert.ErrorContains(t, err, "uses claims of pools exclusive and exclusive-non-isolcpus")

	// A pod the claim is not reserved for gets nothing from a request
	// nobody uses yet, even with the token (a CDI device named by
	// annotation, a copied variable). A request in use tells who uses it
	// (TestBindOfAClaimSharedByTwoPods).
	_, _, err = td.Bind(envWith(eni), Container{PodUID: "pod-2", Namespace: "ns", Pod: "other", Name: "c"})
	assert.EqualError(t, err, "claim ns/app is reserved for other pods (pod-1), not for pod ns/other (pod-2); its CPUs cannot be used here")
}

// A tenant who writes the variable by hand gets nothing: an unknown token
// is refused, and so is the variable set twice (by the pod spec as well as
// by CDI), or a value longer than a token.
func TestBindRefusesHandWrittenVariables(t *testing.T) {
	td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	prepare(t, td.Driver, allocatedClaim("uid-1", "app", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 4)}, "pod-1"))
	real := cdiEnv(t, td.cdi, "uid-1")[CDIDeviceID("uid-1", "cpus")][0]
	app := Container{PodUID: "pod-1", Namespace: "ns", Pod: "app", Name: "c"}
	for name, env := range map[string][]string{
		"guessed token":      {"CPUPOOL_CLAIM_uid_1_cpus=00000000000000000000000000000000"},
		"made-up name":       {"CPUPOOL_CLAIM_mine=0123"},
		"set twice":          {"CPUPOOL_CLAIM_uid_1_cpus=abc", real},
		"too long":           {"CPUPOOL_CLAIM_x=" + string(make([]byte, 65))},
		"empty value":        {"CPUPOOL_CLAIM_x="},
		"real and a made-up": {real, "CPUPOOL_CLAIM_y=1"},
		"no equals sign":     {"CPUPOOL_CLAIM_uid_1_cpus"},
	} {
		_, ok, err := td.Bind(envWith(env), app)
		assert.Error(t, err, name)
		assert.True(t, ok, name)
	}
	assert.Empty(t, td.Claims()["uid-1"].Requests["cpus"].PodUID, "nothing was bound")

	// A pool annotation-like variable name that is not ours is ignored.
	_, ok, err := td.Bind(envWith([]string{"CPUPOOL_CLAIMS=1", "CPUPOOL_GRANT=x"}), app)
	require.NoError(t, err)
	assert.False(t, ok)
}

// The kubelet prepares a claim once on a node, for the first pod that
// uses it; a second pod sharing it (a resourceClaimName claim) calls no
// Prepare, so the driver's pods are the first pod's only. That pod's
// container showing a request another container owns is told so; a
// request nobody owns yet stays refused to a pod that is not recorded.
func TestBindOfAClaimSharedByTwoPods(t *testing.T) {
	td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	prepare(t, td.Driver, allocatedClaim("uid-1", "app", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 4), "spare": slotsOn(pools.Exclusive, 1, 0, 2)}, "pod-1"))
	env := cdiEnv(t, td.cdi, "uid-1")
	cpus, spare := env[CDIDeviceID("uid-1", "cpus")], env[CDIDeviceID("uid-1", "spare")]
	_, _, err := td.Bind(envWith(cpus), Container{PodUID: "pod-1", Namespace: "ns", Pod: "first", Name: "c"})
	require.NoError(t, err)

	second := Container{PodUID: "pod-2", Namespace: "ns", Pod: "second", Name: "c"}
	_, _, err = td.Bind(envWith(cpus), second)
	assert.EqualError(t, err, "claim ns/app request cpus already gives its CPUs to container c of pod pod-1; a request of cpupool.dev gives its CPUs to one container: give each container its own claim (a ResourceClaimTemplate) or its own request (resources.claims[].request)")
	_, _, err = td.Bind(envWith(spare), second)
	assert.EqualError(t, err, "claim ns/app is reserved for other pods (pod-1), not for pod ns/second (pod-2); its CPUs cannot be used here")
	assert.Empty(t, td.Claims()["uid-1"].Requests["spare"].PodUID, "nothing was bound")
}

// A binding whose write fails is written again (issue 30, defect 7): the
// background writer retries with backoff until the write lands, so a
// restarted driver still knows which container owns the request. Before,
// the failure was logged and the binding stayed in memory only.
func TestABindingWhoseWriteFailsIsWrittenAgain(t *testing.T) {
	td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	prepare(t, td.Driver, allocatedClaim("uid-1", "app", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 4)}, "pod-1", "pod-2"))
	env := cdiEnv(t, td.cdi, "uid-1")[CDIDeviceID("uid-1", "cpus")]

	var (
		mu       sync.Mutex
		attempts int
	)
	writes := make(chan int, 16)
	td.store.replace = func(path string, data []byte, durable bool) error {
		mu.Lock()
		attempts++
		n := attempts
		mu.Unlock()
		defer func() { writes <- n }()
		if n == 1 {
			return errors.New("disk full")
		}
		return atomicfile.Replace(path, data, durable)
	}
	td.retry = retry{initial: time.Millisecond, max: 10 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	written := make(chan error, 1)
	go func() { written <- td.keepWritten(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-written)
	}()

	_, _, err := td.Bind(envWith(env), Container{PodUID: "pod-1", Namespace: "ns", Pod: "app", Name: "c"})
	require.NoError(t, err)
	require.Equal(t, 1, <-writes, "the binding's write, which fails")
	select {
	case n := <-writes:
		require.Equal(t, 2, n)
	case <-time.After(30 * time.Second): // not a threshold: the retry comes within milliseconds, or never
		t.Fatal("the failed write was never retried")
	}
	r := td.restart(t).Claims()["uid-1"].Requests["cpus"]
	assert.Equal(t, "pod-1", r.PodUID, "a restarted driver knows the owner")
	assert.Equal(t, "c", r.Container)

	// The other pod the claim is reserved for is refused by that driver.
	_, _, err = td.restart(t).Bind(envWith(env), Container{PodUID: "pod-2", Namespace: "ns", Pod: "other", Name: "c"})
	assert.ErrorContains(t, err, "already gives its CPUs to container c of pod pod-1")
}
