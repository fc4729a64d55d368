package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/pools"
)

// A hide-hyperthreads hold on cores 4 and 5 (CPUs 4-5, idle siblings
// 12-13). The config in force gives CPU 4 alone to the shared pool, and
// CPU 4 is offline: it leaves the hold. CPU 12 is the idle sibling of CPU
// 4, a CPU the hold no longer has: it is no hidden sibling of anything
// the hold keeps, and stays held idle for nothing (an exclusive CPU no
// one may be given while the pod lives, beside the shared pool's load
// once CPU 4 is online). The hold's Reserved should be the siblings of
// the CPUs it keeps.
func TestRestoreHoldLetsGoTheIdleSiblingOfACPUThatLeftIt(t *testing.T) {
	const core4SharedThread12Exclusive = `isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "5-7,12-15"}
  shared: {cpus: "2-4,10-11"}
`
	a := offlineUnder(t, core4SharedThread12Exclusive, 4)
	h := remembered(t, "x", "4-5", "12-13")
	h.HideHyperthreads = true
	res, err := a.RestoreHold(Hold{Assignment: h})
	require.NoError(t, err)
	assert.Equal(t, "5", res.Assignment.CPUs.String())
	t.Logf("warning: %s", res.Warning)
	assert.Equal(t, "13", res.Assignment.Reserved.String(), "12 is the idle sibling of CPU 4, which left the hold")
	assert.Empty(t, a.owner[12], "no one holds CPU 12 for a core the hold no longer has")
}

// A completed init container's hide-hyperthreads hold on cores 4 and 5
// (CPUs 4-5, idle siblings 12-13); the pod's app container is given CPU 4
// by the kubelet, reused from the hold. The hold keeps CPU 5 and its
// sibling 13; CPU 12, the idle sibling of a core the hold no longer has,
// is free: held, it was an exclusive CPU no one could be given while the
// pod lived.
func TestAPodsContainerTakingAHeldCPULetsItsIdleSiblingGo(t *testing.T) {
	const cfgYAML = `isolatedCPUs: "2-7,10-15"
reservedCPUs: "0,8"
pools:
  exclusive: {cpus: "4-7,12-15"}
  shared: {cpus: "2-3,10-11"}
`
	a := offlineUnder(t, cfgYAML)
	h := remembered(t, "init", "4-5", "12-13")
	h.HideHyperthreads = true
	zero := int32(0)
	_, err := a.RestoreHold(Hold{Assignment: h, ExitCode: &zero})
	require.NoError(t, err)

	_, err = a.Allocate(Request{ID: "app", Pod: h.Pod, Container: "app", Pool: pools.Exclusive, MilliCPU: 1000, CPUs: set(t, "4")})
	require.NoError(t, err)
	holds := a.Holds()
	require.Len(t, holds, 1)
	assert.Equal(t, "5", holds[0].CPUs.String())
	assert.Equal(t, "13", holds[0].Reserved.String(), "12 is the idle sibling of CPU 4, which the app container took")
	assert.Empty(t, a.owner[12], "no one holds CPU 12 for a core the hold no longer has")
}
