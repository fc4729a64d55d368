package dra

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/pools"
)

// After a restart, a request the claims file remembers that no container
// is bound to does not beat a running container on its CPUs (the file may
// hold a Prepare the kubelet was never answered); a container being
// created is still refused them, and so is a running one once the
// kubelet's next Prepare made the claim again: that Prepare, with no
// container on its CPUs, keeps its CPUs and token, as before.
func TestRememberedUnboundRequestDoesNotBeatARunningContainerUntilPreparedAgain(t *testing.T) {
	td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	claim := allocatedClaim("uid-1", "app", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 4)}, "pod-1")
	require.NoError(t, prepare(t, td.Driver, claim)["uid-1"].Err)
	cpus := cpusOf(t, td.Driver, "uid-1", "cpus")
	token := td.Claims()["uid-1"].Requests["cpus"].Token

	td.Driver = td.restart(t)
	prepared := preparedOn{"ns/app/cpus", cpus.String(), false}
	assert.Equal(t, preparedOn{"", "", false}, askPreparedOnRunning(td.Driver, cpus), "a running container keeps its CPUs")
	assert.Equal(t, prepared, askPreparedOn(td.Driver, cpus), "a container being created is refused them")

	require.NoError(t, prepare(t, td.Driver, claim)["uid-1"].Err, "the kubelet's next Prepare")
	assert.Equal(t, cpus, cpusOf(t, td.Driver, "uid-1", "cpus"), "kept")
	assert.Equal(t, token, td.Claims()["uid-1"].Requests["cpus"].Token, "kept")
	assert.Equal(t, prepared, askPreparedOnRunning(td.Driver, cpus), "prepared again: confirmed")
	assert.Equal(t, prepared, askPreparedOn(td.Driver, cpus))
}

// A request the claims file remembers bound to its container is that
// container's after a restart: still prepared for any other running
// container, as before.
func TestRememberedBoundRequestStaysPreparedForARunningContainer(t *testing.T) {
	td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	claim := allocatedClaim("uid-1", "app", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 4)}, "pod-1")
	require.NoError(t, prepare(t, td.Driver, claim)["uid-1"].Err)
	cpus := cpusOf(t, td.Driver, "uid-1", "cpus")
	_, ok, err := td.Bind(envWith(cdiEnv(t, td.cdi, "uid-1")[CDIDeviceID("uid-1", "cpus")]), Container{PodUID: "pod-1", Namespace: "ns", Pod: "app", Name: "c"})
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, td.save(), "the binding reaches the claims file")

	td.Driver = td.restart(t)
	require.Equal(t, "pod-1", td.Claims()["uid-1"].Requests["cpus"].PodUID, "remembered bound")
	prepared := preparedOn{"ns/app/cpus", cpus.String(), false}
	assert.Equal(t, prepared, askPreparedOnRunning(td.Driver, cpus))
	assert.Equal(t, prepared, askPreparedOn(td.Driver, cpus))
}

// A request remembered unbound that a container binds after the restart
// is that container's: prepared for any other running container.
func TestRememberedUnboundRequestIsConfirmedByItsContainersBinding(t *testing.T) {
	td := newTestDriver(t, static(t, "epyc-2s-384", epycConfig))
	claim := allocatedClaim("uid-1", "app", slots{"cpus": slotsOn(pools.Exclusive, 1, 0, 4)}, "pod-1")
	require.NoError(t, prepare(t, td.Driver, claim)["uid-1"].Err)
	cpus := cpusOf(t, td.Driver, "uid-1", "cpus")
	env := cdiEnv(t, td.cdi, "uid-1")[CDIDeviceID("uid-1", "cpus")]

	td.Driver = td.restart(t)
	_, ok, err := td.Bind(envWith(env), Container{PodUID: "pod-1", Namespace: "ns", Pod: "app", Name: "c"})
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, preparedOn{"ns/app/cpus", cpus.String(), false}, askPreparedOnRunning(td.Driver, cpus))
}

func askPreparedOnRunning(d *Driver, cpus cpuset.CPUSet) preparedOn {
	claim, on, maybe := d.PreparedOn(cpus, true)
	return preparedOn{claim, on.String(), maybe}
}
