package audit

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"
)

// kernelMasks writes rps_cpus and workqueue masks below the machine's
// sysfs root: eth0's queue steered to CPUs 0-3 (held CPUs 2 and 3), a
// veth with RPS off, the global workqueue mask on every CPU and
// writeback's off the held ones.
func (m *machine) kernelMasks(t *testing.T) {
	t.Helper()
	for rel, content := range map[string]string{
		"sys/devices/pci0000:00/0000:00:03.0/net/eth0/queues/rx-0/rps_cpus": "0f",
		"sys/devices/virtual/net/veth1/queues/rx-0/rps_cpus":                "00",
		"sys/devices/virtual/workqueue/cpumask":                             "ff",
		"sys/devices/virtual/workqueue/writeback/cpumask":                   "d3",
	} {
		p := filepath.Join(m.sys, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content+"\n"), 0o644))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(m.sys, "sys/class/net"), 0o755))
	for name, dir := range map[string]string{"eth0": "sys/devices/pci0000:00/0000:00:03.0/net/eth0", "veth1": "sys/devices/virtual/net/veth1"} {
		require.NoError(t, os.Symlink(filepath.Join(m.sys, dir), filepath.Join(m.sys, "sys/class/net", name)))
	}
}

// TestKernelMasks: a held CPU named by an rps_cpus or workqueue mask is a
// problem when the plugin keeps that work off held CPUs (the knob is
// on: the mask should not name it), and information when it does not.
func TestKernelMasks(t *testing.T) {
	m := newMachine(t, cpuset.New(0, 1))
	m.kernelMasks(t)
	noIRQ := m.fire(t, map[string]map[int]uint64{"LOC": {2: 250}})

	rep, err := Gather(holdings, m.options(noIRQ))
	require.NoError(t, err)
	assert.True(t, rep.Clean, "knobs off: information only")
	c2, c5 := rep.CPUs[0], rep.CPUs[2]
	assert.Equal(t, &MaskUse{Count: 1, Masks: []string{"eth0 rx-0"}}, c2.RPS, "veth1 has RPS off")
	assert.Equal(t, &MaskUse{Count: 1, Masks: []string{"cpumask"}}, c2.Workqueues)
	assert.Nil(t, c5.RPS)
	assert.Equal(t, &MaskUse{Count: 1, Masks: []string{"cpumask"}}, c5.Workqueues, "writeback's mask leaves CPU 5 out")
	var text bytes.Buffer
	require.NoError(t, WriteText(&text, rep))
	assert.Contains(t, text.String(), "  receive packet steering masks (rps_cpus) naming it: 1 (kernelWork.receivePacketSteering is off): eth0 rx-0\n")

	opt := m.options(noIRQ)
	opt.RPSKept, opt.WorkqueuesKept = true, true
	rep, err = Gather(holdings, opt)
	require.NoError(t, err)
	assert.False(t, rep.Clean)
	assert.Equal(t, []string{
		"1 receive packet steering masks (rps_cpus) name it although kernelWork.receivePacketSteering is held: eth0 rx-0",
		"1 unbound workqueue masks name it although kernelWork.workqueues is held: cpumask",
	}, rep.CPUs[0].Problems)
	assert.Equal(t, []string{"1 unbound workqueue masks name it although kernelWork.workqueues is held: cpumask"}, rep.CPUs[2].Problems)

	// Narrowed as the plugin narrows them: clean.
	for rel, content := range map[string]string{
		"sys/class/net/eth0/queues/rx-0/rps_cpus": "03", "sys/devices/virtual/workqueue/cpumask": "d3",
	} {
		require.NoError(t, os.WriteFile(filepath.Join(m.sys, rel), []byte(content+"\n"), 0o644))
	}
	rep, err = Gather(holdings, opt)
	require.NoError(t, err)
	assert.True(t, rep.Clean, "%+v", rep.CPUs)
	assert.Nil(t, rep.CPUs[0].RPS)
	assert.Nil(t, rep.CPUs[0].Workqueues)
}

// TestKernelMasksDefault: net.core.rps_default_mask, which new network
// devices start with, is a mask like the queues': naming a held CPU, a
// problem while kernelWork.receivePacketSteering is held.
func TestKernelMasksDefault(t *testing.T) {
	m := newMachine(t, cpuset.New(0, 1))
	def := filepath.Join(m.proc, "sys/net/core/rps_default_mask")
	require.NoError(t, os.MkdirAll(filepath.Dir(def), 0o755))
	require.NoError(t, os.WriteFile(def, []byte("0c\n"), 0o644))
	noIRQ := m.fire(t, map[string]map[int]uint64{"LOC": {2: 250}})
	opt := m.options(noIRQ)
	opt.RPSKept = true
	rep, err := Gather(holdings, opt)
	require.NoError(t, err)
	assert.False(t, rep.Clean)
	assert.Equal(t, &MaskUse{Count: 1, Masks: []string{"default (rps_default_mask)"}, Kept: true}, rep.CPUs[0].RPS)

	require.NoError(t, os.WriteFile(def, []byte("03\n"), 0o644))
	rep, err = Gather(holdings, opt)
	require.NoError(t, err)
	assert.True(t, rep.Clean, "%+v", rep.CPUs)
}
