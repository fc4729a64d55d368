package housekeeping

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/allocator"
	"github.com/cpupool/nri-cpupool/config"
)

// desktopLayout is a 16-CPU desktop's pools: infra 0-1,8-9 of which
// reserved may not be lent.
func desktopLayout(reserved cpuset.CPUSet) *allocator.Layout {
	infra := cpuset.New(0, 1, 8, 9)
	return &allocator.Layout{Online: cpuset.New(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
		Isolated: cpuset.New(2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 14, 15), Reserved: reserved,
		Exclusive: cpuset.New(4, 5, 6, 7, 12, 13, 14, 15), Shared: cpuset.New(2, 3, 10, 11), Infra: infra,
		ExclusiveNonIsolcpus: infra.Difference(reserved), MinInfraCPUs: 1}
}

func TestCheckWarnsWhenTheHostIsLeftLittle(t *testing.T) {
	parse := func(yaml string) *config.Config {
		cfg, err := config.Parse(strings.NewReader(yaml), "hk.yaml")
		require.NoError(t, err)
		return cfg
	}
	held := parse("pools: {exclusive: {housekeeping: held}, exclusive-non-isolcpus: {enabled: true, housekeeping: held}}")
	assert.Empty(t, Check(parse("pools: {exclusive-non-isolcpus: {enabled: true}}"), desktopLayout(cpuset.New(0))), "off: nothing to say")
	assert.Empty(t, Check(held, desktopLayout(cpuset.New(0, 8))), "reserved 0 and 8 stay the host's")
	problems := Check(held, desktopLayout(cpuset.New(0)))
	require.Len(t, problems, 1)
	assert.True(t, problems[0].Warning)
	assert.Equal(t, "pools.exclusive.housekeeping", problems[0].Key)
	assert.Contains(t, problems[0].Message, "host processes may be left 5 of this node's 16 CPUs once every CPU the pools may keep is held, 1 of them not isolated; fewer than 2")
}
