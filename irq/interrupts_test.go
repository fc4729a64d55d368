package irq

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// interruptsVM is /proc/interrupts of a 4-CPU qemu guest with CPU 2
// offline (no column for it), trimmed.
const interruptsVM = `           CPU0       CPU1       CPU3       
  0:         45          0          0   IO-APIC   2-edge      timer
  1:          0          9          0   IO-APIC   1-edge      i8042
 24:          0          0          0   PCI-MSI 49152-edge      virtio0-config
 25:       1200        300         17   PCI-MSI 49153-edge      virtio0-input.0
NMI:          0          0          0   Non-maskable interrupts
LOC:      51234      40123      39876   Local timer interrupts
ERR:          0
MIS:          0
`

func TestParseInterrupts(t *testing.T) {
	rows, err := ParseInterrupts([]byte(interruptsVM))
	require.NoError(t, err)
	require.Len(t, rows, 8)
	assert.Equal(t, Interrupt{ID: "25", Counts: map[int]uint64{0: 1200, 1: 300, 3: 17}, Description: "PCI-MSI 49153-edge virtio0-input.0"}, rows[3])
	assert.True(t, rows[3].Numbered())
	assert.Equal(t, "LOC", rows[5].ID)
	assert.False(t, rows[5].Numbered())
	assert.Equal(t, map[int]uint64{0: 0}, rows[6].Counts, "ERR has one count")

	_, err = ParseInterrupts([]byte("  CPU0 XPU1\n"))
	assert.ErrorContains(t, err, `"XPU1"`)
	_, err = ParseInterrupts(nil)
	assert.Error(t, err)
}

func TestDeltas(t *testing.T) {
	before, err := ParseInterrupts([]byte(interruptsVM))
	require.NoError(t, err)
	after, err := ParseInterrupts([]byte(`           CPU0       CPU1       CPU3
 25:       1200        310         20   PCI-MSI 49153-edge      virtio0-input.0
 26:          0          0          4   PCI-MSI 49154-edge      virtio0-output.0
LOC:      51234      40123      39900   Local timer interrupts
`))
	require.NoError(t, err)
	d := Deltas(before, after)
	require.Len(t, d, 3)
	assert.Equal(t, map[int]uint64{1: 10, 3: 3}, d[0].Fired)
	assert.Equal(t, map[int]uint64{3: 4}, d[1].Fired, "a new IRQ counts from 0")
	assert.Equal(t, map[int]uint64{3: 24}, d[2].Fired)
}
