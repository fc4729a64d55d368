package irq

import (
	"path/filepath"
	"strings"
	"testing"

	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/internal/procfixture"
	"github.com/cpupool/nri-cpupool/sysfs"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

// TestMasksOfTheBigShapes moves IRQs off half of every NUMA node of the
// big and sparse shapes (issue 33) and back: default_smp_affinity keeps
// the kernel's width (nr_cpu_ids bits, 32 a group) and loses no CPU at or
// above 1024, the lists name every sparse id, and the originals come back
// byte for byte. runc and crun lost CPUs at or above 1024 in their masks
// until 2026; this is where ours would.
func TestMasksOfTheBigShapes(t *testing.T) {
	for _, tc := range []struct {
		shape    string
		possible int // nr_cpu_ids: the kernel's mask width
		groups   int // the 32-bit groups default_smp_affinity has
	}{
		{"epyc-2s-turin-nps4", 768, 24},
		{"epyc-2s-1024", 1024, 32},
		{"sparse-4096", 4096, 128},
	} {
		t.Run(tc.shape, func(t *testing.T) {
			topo, err := sysfs.Discover(fixture.Root(t, tc.shape))
			require.NoError(t, err)
			online := topo.Online
			high := online.List()[online.Size()-1]
			nodeCPUs := map[int]cpuset.CPUSet{}
			banned := cpuset.New()
			for _, n := range topo.NUMANodes {
				nodeCPUs[n.ID] = n.CPUs
				l := n.CPUs.Intersection(online).List()
				banned = banned.Union(cpuset.New(l[len(l)/2:]...)) // each node's upper half, its highest CPU included
			}
			dir := procfixture.Write(t, t.TempDir(), procfixture.Spec{CPUs: online, PossibleCPUs: tc.possible, IRQs: []procfixture.IRQ{
				{N: 30, Affinity: online, Node: -1},
				{N: 31, Affinity: cpuset.New(high), Node: topo.NUMANodes[len(topo.NUMANodes)-1].ID},
			}})
			defPath := filepath.Join(dir, "irq/default_smp_affinity")
			original := strings.TrimSpace(read(t, defPath))
			require.Len(t, strings.Split(original, ","), tc.groups, "the fixture prints the kernel's width")

			log, _ := logtest.NewNullLogger()
			j, _, err := hostfiles.OpenJournal(hostfiles.OS{}, filepath.Join(t.TempDir(), hostfiles.JournalFile), boot)
			require.NoError(t, err)
			src := NewSource(Config{ProcRoot: dir, Online: online, NodeCPUs: nodeCPUs}, log)
			r := hostfiles.NewReconciler(hostfiles.OS{}, j, log, hostfiles.DefaultTiming, src)
			t.Cleanup(r.Close)
			src.SetBanned(banned)
			require.NoError(t, r.Flush())
			require.Empty(t, r.Status().Failures)

			want := online.Difference(banned)
			written := strings.TrimSpace(read(t, defPath))
			assert.Len(t, written, len(original), "default_smp_affinity is written in the width the kernel printed")
			assert.Equal(t, procfixture.Mask(want, tc.possible), written)
			got, err := ParseMask(written)
			require.NoError(t, err)
			assert.Equal(t, want.String(), got.String(), "every allowed CPU, those at and above 1024 too")
			assert.Equal(t, want.String(), strings.TrimSpace(read(t, filepath.Join(dir, "irq/30/smp_affinity_list"))))
			last := topo.NUMANodes[len(topo.NUMANodes)-1].CPUs.Intersection(want)
			assert.Equal(t, last.String(), strings.TrimSpace(read(t, filepath.Join(dir, "irq/31/smp_affinity_list"))),
				"an IRQ on a banned CPU moves to the rest of its device's node")

			src.SetBanned(cpuset.New())
			require.NoError(t, r.Flush())
			assert.Equal(t, original, strings.TrimSpace(read(t, defPath)), "restored byte for byte")
			assert.Equal(t, cpuset.New(high).String(), strings.TrimSpace(read(t, filepath.Join(dir, "irq/31/smp_affinity_list"))))
		})
	}
}

// TestMaskAtTheEdgesOf4096: the ids at group and 1024 boundaries survive a
// format and a parse in a 4,096-CPU mask (irqbalance's BANNED answer and
// IRQBALANCE_BANNED_CPUS are such masks too).
func TestMaskAtTheEdgesOf4096(t *testing.T) {
	all := make([]int, 4096)
	for i := range all {
		all[i] = i
	}
	like := procfixture.Mask(cpuset.New(all...), 4096)
	for _, ids := range [][]int{{0}, {31, 32}, {1023, 1024}, {1024}, {2047, 2048}, {4095}, {0, 1030, 2050, 3078, 4095}} {
		set := cpuset.New(ids...)
		m, err := FormatMask(set, like)
		require.NoError(t, err, set.String())
		assert.Len(t, strings.Split(m, ","), 128)
		back, err := ParseMask(m)
		require.NoError(t, err)
		assert.Equal(t, set.String(), back.String())
	}
	_, err := FormatMask(cpuset.New(4096), like)
	assert.ErrorContains(t, err, "does not fit a mask of 4096 CPUs")
}
