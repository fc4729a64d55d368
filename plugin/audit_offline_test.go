package plugin

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/audit"
)

// TestAuditMetricsSayWhichHeldCPUIsOffline: a held CPU the kernel took
// offline (CPU hotplug) is not clean (cpupool_exclusive_cpu_clean 0), but
// for no IRQ or thread: CpupoolExclusiveCPUNotClean fired beside
// CpupoolOfflineHeldCPUs with the wrong cause and remedy. The alert
// leaves out the CPUs cpupool_exclusive_cpu_offline says are offline.
func TestAuditMetricsSayWhichHeldCPUIsOffline(t *testing.T) {
	p := &Plugin{}
	a := &auditor{}
	a.last.Store(&audit.Report{CPUs: []audit.CPU{
		{CPU: 5, Pool: "exclusive", Offline: true, Problems: []string{"offline"}},
		{CPU: 6, Pool: "exclusive", Clean: true},
	}})
	p.auditor.Store(a)
	require.NoError(t, testutil.CollectAndCompare(newAuditMetrics(p), strings.NewReader(`
# HELP cpupool_exclusive_cpu_offline `+offlineHelp+`
# TYPE cpupool_exclusive_cpu_offline gauge
cpupool_exclusive_cpu_offline{cpu="5",pool="exclusive"} 1
cpupool_exclusive_cpu_offline{cpu="6",pool="exclusive"} 0
`), "cpupool_exclusive_cpu_offline"))
}
