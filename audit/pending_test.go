package audit

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/internal/procfixture"
)

// TestPendingIRQMove: on x86 the kernel defers an IRQ's move while its
// previous one is incomplete: smp_affinity_list already leaves the held
// CPU out, effective_affinity_list still names it, and the IRQ's next
// interrupt lands there. audit reads both: such an IRQ is reported on the
// CPU, with both masks and the cause, and not judged (its one interrupt
// may never come: the CPU stays clean); a completed move is not listed; a
// kernel without the file is unknown, said once, and neither a finding
// nor an error; a file that is no CPU list is an error naming it.
func TestPendingIRQMove(t *testing.T) {
	// IRQ 30 was moved off the held CPUs 2-3 and 5 (its affinity says so).
	quiet := procfixture.IRQ{N: 30, Affinity: cpuset.New(0, 1, 4, 6, 7), Node: 0, Description: "PCI-MSI 49154-edge virtio5-requests"}
	for _, tc := range []struct {
		name               string
		effective          string
		noFile, unreadable bool
		wantErr, wantNote  string
		wantPending        bool
		wantCleanCPU2      bool
	}{
		{name: "pending: effective still names held CPU 2, reported, not judged", effective: "2", wantPending: true, wantCleanCPU2: true},
		{name: "completed: effective within the new affinity", effective: "0", wantCleanCPU2: true},
		{name: "missing effective_affinity_list: unknown, said once", noFile: true, wantCleanCPU2: true, wantNote: "effective_affinity_list"},
		{name: "unreadable effective_affinity_list: unknown, said once", unreadable: true, wantCleanCPU2: true, wantNote: "could not be read"},
		{name: "garbage in effective_affinity_list: an error naming it", effective: "2-x", wantErr: "irq/30/effective_affinity_list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMachine(t, cpuset.New(0, 1))
			irq := quiet
			irq.Effective, irq.NoEffective = tc.effective, tc.noFile
			m.spec.IRQs = append(m.spec.IRQs, irq)
			if tc.noFile {
				// A kernel without the file has it for no IRQ.
				for i := range m.spec.IRQs {
					m.spec.IRQs[i].NoEffective = true
				}
			}
			if tc.noFile {
				// Written by newMachine: gone too.
				for _, n := range []string{"25", "28"} {
					require.NoError(t, os.Remove(filepath.Join(m.proc, "irq", n, "effective_affinity_list")))
				}
			}
			procfixture.Write(t, m.proc, m.spec)
			if tc.unreadable {
				// A read fails (EISDIR here; EACCES or EIO on a node).
				path := filepath.Join(m.proc, "irq/30/effective_affinity_list")
				require.NoError(t, os.Remove(path))
				require.NoError(t, os.Mkdir(path, 0o755))
			}
			rep, err := Gather(holdings, m.options(m.fire(t, nil)))
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.ErrorContains(t, err, filepath.Join(m.proc, tc.wantErr))
				assert.ErrorContains(t, err, "malformed CPU list")
				return
			}
			require.NoError(t, err)
			require.Len(t, rep.CPUs, 3)
			c2 := rep.CPUs[0]
			assert.Equal(t, tc.wantCleanCPU2, c2.Clean, "CPU 2: %v", c2.Problems)
			assert.Equal(t, tc.wantCleanCPU2, rep.Clean)
			for _, c := range rep.CPUs[1:] {
				assert.True(t, c.Clean, "CPU %d: effective_affinity_list names only CPU 2: %v", c.CPU, c.Problems)
			}

			var out struct {
				Notes []string `json:"notes"`
				CPUs  []struct {
					Pending []map[string]string `json:"pendingIRQMoves"`
				} `json:"cpus"`
			}
			data, err := json.Marshal(rep)
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(data, &out))
			if tc.wantPending {
				require.Len(t, out.CPUs[0].Pending, 1, "%s", data)
				p := out.CPUs[0].Pending[0]
				assert.Equal(t, "30", p["id"])
				assert.Equal(t, "PCI-MSI 49154-edge virtio5-requests", p["description"])
				assert.Equal(t, "0-1,4,6-7", p["affinity"])
				assert.Equal(t, "2", p["effectiveAffinity"])
				assert.Contains(t, p["reason"], "fires")
			} else {
				assert.Empty(t, out.CPUs[0].Pending, "%s", data)
			}
			if tc.wantNote != "" {
				require.Len(t, out.Notes, 1, "said once, not once per IRQ: %s", data)
				assert.Contains(t, out.Notes[0], tc.wantNote)
				if tc.noFile {
					assert.Contains(t, out.Notes[0], "3 of 3 IRQs")
				}
			} else {
				assert.Empty(t, out.Notes)
			}

			var text bytes.Buffer
			require.NoError(t, WriteText(&text, rep))
			if tc.wantPending {
				assert.Contains(t, text.String(), "CPU 2  telco/dpdk/fwd (exclusive)  clean\n")
				assert.Contains(t, text.String(), "still routed to it until they next fire (the kernel deferred the move; that one interrupt lands here, not judged): "+
					"30 [PCI-MSI 49154-edge virtio5-requests, affinity 0-1,4,6-7, still routed to 2]")
			}
			if tc.wantNote != "" {
				assert.Equal(t, 1, strings.Count(text.String(), "note: "), text.String())
			}
		})
	}
}
