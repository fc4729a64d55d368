package plugin

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A container Synchronize confined to infra (too big for exclusive while
// the plugin was away) whose pod asks for exclusive-only options. Its
// annotations were never applied (it runs in infra because they could not
// be), so an in-place CPU resize must not judge them against infra and
// refuse every resize: it stays in infra with its new request.
func TestResizeOfAConfinedContainerKeepsInfraWithoutJudgingItsAnnotations(t *testing.T) {
	for name, ann := range map[string]map[string]string{
		"numa":        {"pool.cpupool.dev": "exclusive", "numa.cpupool.dev": "0"},
		"shared-cpus": {"pool.cpupool.dev": "exclusive", "shared-cpus.cpupool.dev": "true"},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFakeRuntime(t, false)
			first := startPlugin(t, f, desktop, statePath(f))
			first.stop()
			big := f.runPod(podSpec{name: "big", namespace: "telco", annotations: ann})
			huge, _, err := f.createContainer(big, "c", 64000)
			require.NoError(t, err)
			rp := startPlugin(t, f, desktop, statePath(f))
			rp.p.mu.Lock()
			a, _ := rp.p.alloc.Get(huge.Id)
			rp.p.mu.Unlock()
			require.Equal(t, "infra", a.Pool, "confined")
			_, err = f.updateResources(big, huge, 32000, 0)
			require.NoError(t, err, "in-place CPU resize of a confined container")
			rp.p.mu.Lock()
			a, _ = rp.p.alloc.Get(huge.Id)
			rp.p.mu.Unlock()
			require.Equal(t, "infra", a.Pool, "still confined")
			require.Equal(t, int64(32000), a.MilliCPU)
		})
	}
}
