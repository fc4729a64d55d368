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

// allButLowest are every core's threads but its lowest.
func allButLowest(full *sysfs.Topology) cpuset.CPUSet {
	lowest := map[int]int{}
	for _, c := range full.CPUs {
		if l, ok := lowest[c.Core]; !ok || c.ID < l {
			lowest[c.Core] = c.ID
		}
	}
	var out []int
	for _, c := range full.CPUs {
		if lowest[c.Core] != c.ID {
			out = append(out, c.ID)
		}
	}
	return cpuset.New(out...)
}

// With every second thread offline (SMT on), no online CPU lists an
// offline one as its sibling and the kernel shows no place of an offline
// CPU: nothing but the record of the CPUs seen online tells which core
// each joins when it comes online. WithRemembered tells it
// (OfflineCoreMates: the online threads of that core, as Discover reads
// them with every CPU online) and changes nothing the carving reads: the
// CPUs, their cores and the masks stay the kernel's. A 4-way core keeps
// its 4 threads.
func TestRememberedCoreOfOfflinePresentCPUsIsToldButTheirPlaceIsNotGiven(t *testing.T) {
	for _, name := range []string{"desktop-8c16t", "xeon-2s-snc2", "kubelet-quad-socket-four-way-ht"} {
		full, err := sysfs.Discover(fixture.Root(t, name))
		require.NoError(t, err)
		offline := allButLowest(full)
		require.False(t, offline.IsEmpty(), name)
		rec, _ := full.Remember(sysfs.Remembered{})
		now := discoverWithOffline(t, name, "", offline)
		back := now.WithRemembered(rec)
		assert.Equal(t, now.CPUs, back.CPUs, "%s: the kernel's CPUs and cores", name)
		assert.Empty(t, back.Absent.List(), name)
		assert.Equal(t, now.Offline.String(), back.Offline.String(), name)
		require.Len(t, back.OfflineCoreMates, offline.Size(), name)
		for _, id := range offline.List() {
			c, _ := full.CPU(id)
			assert.Equal(t, c.Siblings.Difference(offline).String(), back.OfflineCoreMates[id].String(), "%s cpu %d", name, id)
		}
		assert.Nil(t, now.OfflineCoreMates, "%s: Discover alone knows none", name)
		assert.Same(t, now, now.WithRemembered(sysfs.Remembered{}), "%s: no record, nothing to tell", name)
	}
}

// While SMT is disabled (smt/control off) the kernel keeps the second
// threads offline for good: the record tells no core for them.
func TestRememberedCoreIsNotToldWhileSMTIsDisabled(t *testing.T) {
	full, err := sysfs.Discover(fixture.Root(t, "desktop-8c16t"))
	require.NoError(t, err)
	rec, _ := full.Remember(sysfs.Remembered{})
	off := discoverWithOffline(t, "desktop-8c16t", "off", cpuset.New(8, 9, 10, 11, 12, 13, 14, 15))
	require.True(t, off.SMTDisabled())
	assert.Same(t, off, off.WithRemembered(rec))
}

// A stale record is used only where it agrees with the online CPUs: an
// entry whose siblings name an online CPU whose core now has another
// online thread, or more offline CPUs than the core's remembered list
// has room for, joins no core.
func TestRememberedCoreIsNotToldWhereTheRecordDisagreesWithTheOnlineCPUs(t *testing.T) {
	full, err := sysfs.Discover(fixture.Root(t, "desktop-8c16t"))
	require.NoError(t, err)
	rec, _ := full.Remember(sysfs.Remembered{})
	for i := range rec.CPUs {
		switch rec.CPUs[i].ID {
		case 12: // remembered beside 4 and 5, two cores now
			rec.CPUs[i].Siblings = "4-5,12"
		case 13, 14: // both remembered as 6's one sibling
			rec.CPUs[i].Siblings = "6," + map[int]string{13: "13", 14: "14"}[rec.CPUs[i].ID]
			rec.CPUs[i].CoreID = rec.CPUs[6].CoreID
		}
	}
	now := discoverWithOffline(t, "desktop-8c16t", "", cpuset.New(8, 9, 10, 11, 12, 13, 14, 15))
	mates := now.WithRemembered(rec).OfflineCoreMates
	assert.Equal(t, "3", mates[11].String(), "a true entry is used")
	assert.NotContains(t, mates, 12)
	assert.NotContains(t, mates, 13)
	assert.NotContains(t, mates, 14)
	assert.Equal(t, "7", mates[15].String())
}
