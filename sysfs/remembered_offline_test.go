package sysfs_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/sysfs"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

// discoverWithOffline reads a fixture with offline CPUs (per-CPU hotplug)
// and smt/control as given ("" for the fixture's).
func discoverWithOffline(t *testing.T, name, smt string, offline cpuset.CPUSet) *sysfs.Topology {
	t.Helper()
	dir, err := fixture.SpecDir()
	require.NoError(t, err)
	spec, err := fixture.LoadSpec(filepath.Join(dir, name+".yaml"))
	require.NoError(t, err)
	spec.Offline = offline.String()
	if smt != "" {
		spec.SMT = smt
	}
	root := t.TempDir()
	require.NoError(t, spec.Write(root))
	topo, err := sysfs.Discover(root)
	require.NoError(t, err)
	return topo
}

// With every second thread offline (SMT on), no online CPU lists an
// offline one as its sibling and the kernel shows no place of an offline
// CPU: nothing but the record of the CPUs seen online tells which core
// each joins when it comes online. WithRemembered gives each offline CPU
// the core, socket and cache groups it had, as Discover reads them with
// every CPU online; it stays present, offline and not absent.
func TestRememberedPlaceIsGivenToOfflinePresentCPUs(t *testing.T) {
	for _, tc := range []struct {
		fixture string
		offline string
	}{{"desktop-8c16t", "8-15"}, {"xeon-2s-snc2", ""}} {
		full, err := sysfs.Discover(fixture.Root(t, tc.fixture))
		require.NoError(t, err)
		offline := cpuset.New()
		if tc.offline != "" {
			offline, err = cpuset.Parse(tc.offline)
			require.NoError(t, err)
		} else { // every core's threads but its lowest
			lowest := map[int]int{}
			for _, c := range full.CPUs {
				if l, ok := lowest[c.Core]; !ok || c.ID < l {
					lowest[c.Core] = c.ID
				}
			}
			for _, c := range full.CPUs {
				if lowest[c.Core] != c.ID {
					offline = offline.Union(cpuset.New(c.ID))
				}
			}
		}
		require.False(t, offline.IsEmpty())
		rec, _ := full.Remember(sysfs.Remembered{})
		now := discoverWithOffline(t, tc.fixture, "", offline)
		for _, id := range offline.List() {
			c, _ := now.CPU(id)
			require.Equal(t, sysfs.Unknown, c.Core, "%s: the kernel shows no place of offline CPU %d", tc.fixture, id)
		}
		back := now.WithRemembered(rec)
		assert.Empty(t, back.Absent.List(), tc.fixture)
		assert.Equal(t, now.Present.String(), back.Present.String(), tc.fixture)
		assert.Equal(t, offline.String(), back.Offline.String(), tc.fixture)
		require.Len(t, back.CPUs, len(full.CPUs))
		for i, want := range full.CPUs {
			got := back.CPUs[i]
			assert.Equal(t, !offline.Contains(want.ID), got.Online, "%s cpu %d", tc.fixture, want.ID)
			assert.Equal(t, []int{want.ID, want.Core, want.CoreID, want.Socket, want.NUMA, want.L2, want.L3},
				[]int{got.ID, got.Core, got.CoreID, got.Socket, got.NUMA, got.L2, got.L3}, "%s cpu %d", tc.fixture, want.ID)
		}
		for i, n := range now.NUMANodes {
			assert.Equal(t, n.CPUs.String(), back.NUMANodes[i].CPUs.String(), "%s node %d", tc.fixture, n.ID)
		}
		assert.Same(t, now, now.WithRemembered(sysfs.Remembered{}), "%s: no record, nothing to place", tc.fixture)
	}
}

// While SMT is disabled (smt/control off) the kernel keeps the second
// threads offline for good: they are carved as if absent from the node,
// and the record gives them no place.
func TestRememberedPlaceIsNotGivenWhileSMTIsDisabled(t *testing.T) {
	full, err := sysfs.Discover(fixture.Root(t, "desktop-8c16t"))
	require.NoError(t, err)
	rec, _ := full.Remember(sysfs.Remembered{})
	off := discoverWithOffline(t, "desktop-8c16t", "off", cpuset.New(8, 9, 10, 11, 12, 13, 14, 15))
	require.True(t, off.SMTDisabled())
	assert.Same(t, off, off.WithRemembered(rec))
}
