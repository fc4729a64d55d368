package dra

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/numamem"
	"github.com/cpupool/nri-cpupool/pools"
)

// reserveFailsAsking are Static pools whose memory reservation fails, after
// asking PreparedOn what the plugin (under its lock, which ReserveMemory
// takes) would tell a grant container created right then.
type reserveFailsAsking struct {
	*Static
	d    *Driver
	node cpuset.CPUSet
	got  preparedOn
}

func (p *reserveFailsAsking) ReserveMemory(c numamem.ClaimMemory, check bool) (string, error) {
	p.got = askPreparedOn(p.d, p.node)
	return "", errors.New("not enough memory on NUMA node 1")
}

// Between Place and the record, PreparedOn answers a placed claim as
// prepared (maybe false), and the plugin tells a grant container "CPUs
// ... are prepared for DRA claim ...; delete the pod". The Prepare then
// fails (here: its memory does not fit) and the claim is prepared
// nowhere: the owner was told to delete a pod for a claim that does not
// exist, and the kubelet's next retry of that container succeeds.
// PreparedOn should say "being prepared" (maybe) until the claim is
// recorded.
func TestAClaimNotRecordedYetIsNotCalledPrepared(t *testing.T) {
	s := hugeXeon(t, 0, xeonConfig)
	ask := &reserveFailsAsking{Static: s}
	td := newTestDriver(t, ask)
	ask.d = td.Driver
	topo, _ := s.Layout()
	ask.node = mustNode(t, topo, 1)
	c := shareClaim("uid-1", "c", pools.Exclusive, 1, 2, "p")
	c.Status.Allocation.Devices.Results[0].ConsumedCapacity[CapacityMemory] = resource.MustParse("1Gi")
	res := prepare(t, td.Driver, c)[types.UID("uid-1")]
	require.ErrorContains(t, res.Err, "not enough memory")
	assert.Empty(t, td.Claims(), "nothing prepared")
	require.NotEmpty(t, ask.got.claim, "PreparedOn saw the placed claim")
	assert.True(t, ask.got.maybe, "a claim that is not recorded yet (and then failed) was answered as prepared: %+v", ask.got)
}
