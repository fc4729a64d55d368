package sysfs_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/sysfs"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

// hotRemove takes cpu out of a fake tree as a vCPU unplug does: out of
// the present and online masks, its directory and the node's list gone,
// and out of its siblings' and caches' lists.
func hotRemove(t *testing.T, root string, topo *sysfs.Topology, cpu int) {
	t.Helper()
	dir := filepath.Join(root, "sys/devices/system/cpu")
	gone := cpuset.New(cpu)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "present"), []byte(topo.Present.Difference(gone).String()+"\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "online"), []byte(topo.Online.Difference(gone).String()+"\n"), 0o644))
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "cpu"+strconv.Itoa(cpu))))
	for _, n := range topo.NUMANodes {
		f := filepath.Join(root, "sys/devices/system/node", "node"+strconv.Itoa(n.ID), "cpulist")
		require.NoError(t, os.WriteFile(f, []byte(n.CPUs.Difference(gone).String()+"\n"), 0o644))
	}
	for _, c := range topo.CPUs {
		if c.ID == cpu {
			continue
		}
		cd := filepath.Join(dir, "cpu"+strconv.Itoa(c.ID))
		for _, f := range []string{"topology/core_cpus_list", "topology/thread_siblings_list", "cache/index2/shared_cpu_list", "cache/index3/shared_cpu_list"} {
			data, err := os.ReadFile(filepath.Join(cd, f))
			if err != nil {
				continue
			}
			set, err := cpuset.Parse(string(data[:len(data)-1]))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(cd, f), []byte(set.Difference(gone).String()+"\n"), 0o644))
		}
	}
}

// TestRememberedCPUsArePutBackWhereTheySat: a CPU hot-removed from the
// node is put back, from the record made while it was present, as an
// offline CPU with the core, cache group, socket and NUMA node it had, and
// every other CPU keeps its indexes: the pools are carved as before. A
// CPU outside the possible mask is not put back.
func TestRememberedCPUsArePutBackWhereTheySat(t *testing.T) {
	for _, tc := range []struct {
		fixture string
		cpu     int
	}{{"desktop-8c16t", 15}, {"desktop-8c16t", 3}, {"xeon-2s-snc2", 21}, {"vm-2numa-hugepages", 2}, {"epyc-1s-nps4", 8}} {
		root := fixture.Root(t, tc.fixture)
		full, err := sysfs.Discover(root)
		require.NoError(t, err)
		rec, changed := full.Remember(sysfs.Remembered{})
		require.True(t, changed)
		_, again := full.Remember(rec)
		assert.False(t, again, "%s: the same node remembered again is no change", tc.fixture)

		hotRemove(t, root, full, tc.cpu)
		now, err := sysfs.Discover(root)
		require.NoError(t, err)
		require.False(t, now.Present.Contains(tc.cpu))
		back := now.WithRemembered(rec)
		assert.Equal(t, cpuset.New(tc.cpu).String(), back.Absent.String(), tc.fixture)
		assert.Equal(t, full.Present.String(), back.Present.String(), tc.fixture)
		assert.True(t, back.Offline.Contains(tc.cpu), tc.fixture)
		require.Len(t, back.CPUs, len(full.CPUs))
		for i, want := range full.CPUs {
			got := back.CPUs[i]
			assert.Equal(t, want.ID != tc.cpu, got.Online, "%s cpu %d", tc.fixture, want.ID)
			assert.Equal(t, []int{want.ID, want.Core, want.CoreID, want.Socket, want.NUMA, want.L2, want.L3},
				[]int{got.ID, got.Core, got.CoreID, got.Socket, got.NUMA, got.L2, got.L3}, "%s cpu %d", tc.fixture, want.ID)
			assert.Equal(t, want.BaseFreqKHz, got.BaseFreqKHz)
		}
		for i, n := range full.NUMANodes {
			assert.Equal(t, n.CPUs.String(), back.NUMANodes[i].CPUs.String(), "%s node %d", tc.fixture, n.ID)
		}

		// A record of a CPU the kernel can no longer hot-add: not put back.
		now.Possible = now.Present
		assert.Same(t, now, now.WithRemembered(rec), "%s: a CPU outside possible is put back", tc.fixture)
	}
}

// TestRememberedFileRoundTrip: the record is written atomically and read
// back the same; a missing file is an empty record; another version is an
// error naming the file.
func TestRememberedFileRoundTrip(t *testing.T) {
	topo, err := sysfs.Discover(fixture.Root(t, "desktop-8c16t"))
	require.NoError(t, err)
	path := sysfs.RememberedPath(filepath.Join(t.TempDir(), "state.json"))
	none, err := sysfs.ReadRemembered(path)
	require.NoError(t, err)
	assert.Empty(t, none.CPUs)
	rec, _ := topo.Remember(none)
	require.NoError(t, sysfs.WriteRemembered(path, rec))
	got, err := sysfs.ReadRemembered(path)
	require.NoError(t, err)
	assert.Equal(t, rec, got)
	require.NoError(t, os.WriteFile(path, []byte(`{"version":99}`), 0o600))
	_, err = sysfs.ReadRemembered(path)
	assert.ErrorContains(t, err, path)
}
