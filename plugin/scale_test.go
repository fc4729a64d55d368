package plugin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/internal/procfixture"
)

// sparseNode is sparse-4096 (issue 33): present CPUs among ids 0-4095,
// offline ones inside cores; the exclusive pool is NUMA node 1 but for its
// last CPUs, all of it at or above 1024, with IRQs kept off its
// containers and isolated partitions; infra has the rest, up to 4094.
var sparseNode = testNode{fixture: "sparse-4096", config: `
isolatedCPUs: "2-47,1024-1029,1031-1055,2032-2047,2051-2095,3072-3077,3079-3103"
reservedCPUs: "0,2048"
pools:
  exclusive: {cpus: "` + sparseExclusive + `", irqIsolation: optOut, isolatedPartition: optIn}
`}

const (
	sparseExclusive = "1024-1029,1031-1055,2032-2047,3072-3077,3079-3103"
	sparseInfra     = "0-47,2048-2049,2051-2095,4080-4094" // the rest of the online CPUs
)

// TestSparseIdsReachEveryFile follows containers pinned to CPUs from 1024
// to 4094 through every place their CPUs become text or a mask: the
// runtime's cpusets, the state file, the cgroup files of an isolated
// partition and of a sandbox, default_smp_affinity (4,096 bits wide) and
// the IRQs' lists, and back from the state file after a restart. runc and
// crun lost CPUs at or above 1024 until 2026; none of ours may.
func TestSparseIdsReachEveryFile(t *testing.T) {
	f := newFakeRuntime(t, true)
	topoOnline := mustParse("0-47,1024-1029,1031-1055,2032-2049,2051-2095,3072-3077,3079-3103,4080-4094")
	irqs := procfixture.Spec{CPUs: topoOnline, PossibleCPUs: 4096, BootID: bootID, IRQs: []procfixture.IRQ{
		{N: 40, Affinity: topoOnline, Node: -1, Description: "PCI-MSI edge nvme0q1"},
		{N: 41, Affinity: cpuset.New(4094), Node: 1, Description: "PCI-MSI edge mlx5_comp0"},
	}}
	procfixture.Write(t, f.procRoot(), irqs)
	defPath := filepath.Join(f.procRoot(), "irq", "default_smp_affinity")
	original, err := os.ReadFile(defPath)
	require.NoError(t, err)

	first := startPlugin(t, f, sparseNode, statePath(f))
	pod := f.runPod(podSpec{name: "upf", namespace: "telco", annotations: map[string]string{
		"pool.cpupool.dev": "exclusive", "isolated-partition.cpupool.dev": "true"}})
	ctr, _, err := f.createContainer(pod, "dataplane", 60000)
	require.NoError(t, err)
	cpus := mustParse(f.cpus(ctr))
	require.Equal(t, 60, cpus.Size(), "the runtime's cpuset has every CPU: %s", f.cpus(ctr))
	assert.True(t, cpus.IsSubsetOf(mustParse(sparseExclusive)), "within the pool: %s", cpus)
	assert.Equal(t, cpus.String(), first.savedState(t).Containers[ctr.Id].CPUs, "the state file lists them in full")

	assert.Equal(t, sparseInfra, f.sandboxCPUs(pod), "the sandbox's cgroup: infra, up to 4094")
	web := f.runPod(podSpec{name: "web"})
	infraCtr, _, err := f.createContainer(web, "app", 500)
	require.NoError(t, err)
	assert.Equal(t, sparseInfra, f.cpus(infraCtr), "an infra member's cpuset, up to 4094")

	dir := runcCreates(t, f, ctr)
	require.NoError(t, first.p.FlushIsolation())
	assert.Equal(t, "isolated", cgroupFile(t, f, dir, "cpuset.cpus.partition"))
	assert.Equal(t, cpus.String(), cgroupFile(t, f, dir, "cpuset.cpus.exclusive"))
	assert.Equal(t, cpus.String(), cgroupFile(t, f, "/kubepods", "cpuset.cpus.exclusive"))
	require.NoError(t, irqsAvoid(f, irqs, cpus))
	written, err := os.ReadFile(defPath)
	require.NoError(t, err)
	assert.Len(t, strings.TrimSpace(string(written)), len(strings.TrimSpace(string(original))), "the kernel's mask width, 4,096 bits")

	first.kill()
	second := startPlugin(t, f, sparseNode, statePath(f))
	assert.Equal(t, cpus.String(), f.cpus(ctr), "kept across a restart")
	assert.Equal(t, cpus.String(), second.savedState(t).Containers[ctr.Id].CPUs)
	require.NoError(t, second.p.FlushIsolation())
	assert.Equal(t, cpus.String(), cgroupFile(t, f, dir, "cpuset.cpus.exclusive"))
	require.NoError(t, irqsAvoid(f, irqs, cpus))

	f.stopContainer(ctr)
	require.NoError(t, os.RemoveAll(filepath.Join(f.cgroupRoot, dir)))
	f.removeContainer(ctr)
	f.removePod(pod)
	require.NoError(t, second.p.FlushIsolation())
	assert.Equal(t, "", cgroupFile(t, f, "/kubepods", "cpuset.cpus.exclusive"))
	back, err := os.ReadFile(defPath)
	require.NoError(t, err)
	assert.Equal(t, strings.TrimSpace(string(original)), strings.TrimSpace(string(back)), "default_smp_affinity restored, every group")
}
