package plugin

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/internal/procfixture"
)

// exported says whether the registry exports the metric.
func exported(t *testing.T, reg *prometheus.Registry, name string) bool {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			return true
		}
	}
	return false
}

// TestAFailingAuditIsWarnedOnceAndExported (review 59b, M1): a background
// audit that fails (here: the proc root has no interrupts file) was logged
// at debug only and exported nothing, so no alert could fire. Its first
// failure is a warning, the next ones are not (one a minute would flood
// the log), cpupool_audit_failing is 1, and when it works again an info
// line says so and the gauge is 0.
func TestAFailingAuditIsWarnedOnceAndExported(t *testing.T) {
	f := newFakeRuntime(t, false) // its proc root has no interrupts file
	rp := startPlugin(t, f, desktop, statePath(f))
	reg := rp.p.Registry() // serving the metrics starts the audits
	a := rp.p.auditor.Load()
	require.Eventually(t, func() bool { return exported(t, reg, "cpupool_audit_failing") }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, 1.0, gauge(t, rp.p, "cpupool_audit_failing"))
	assert.False(t, exported(t, reg, "cpupool_audit_timestamp_seconds"), "no audit worked yet")
	a.once(rp.p)
	a.once(rp.p)
	log := rp.log.String()
	assert.Equal(t, 1, strings.Count(log, `level=warning msg="audit: reading interrupts: `), "one warning, not one per audit:\n%s", log)
	assert.Contains(t, log, "the audit metrics of the held exclusive CPUs are not updated until it works again (cpupool_audit_failing is 1)")

	procfixture.Write(t, f.procRoot(), desktopIRQs())
	a.once(rp.p)
	assert.Equal(t, 0.0, gauge(t, rp.p, "cpupool_audit_failing"))
	assert.True(t, exported(t, reg, "cpupool_audit_timestamp_seconds"))
	assert.Contains(t, rp.log.String(), `level=info msg="audit: works again"`)
}

// TestTheFirstAuditFollowsTheFirstSynchronize (review 59b, M1): the
// metrics are served before the runtime connects (the daemon starts its
// HTTP server first), so the audit loop's first pass found the plugin not
// synchronized and the first audit came a minute later. Synchronize asks
// for one now.
func TestTheFirstAuditFollowsTheFirstSynchronize(t *testing.T) {
	f := newFakeRuntime(t, false)
	var reg *prometheus.Registry
	startPluginWith(t, f, desktop, statePath(f), func(rp *runningPlugin) { reg = rp.p.Registry() })
	assert.Eventually(t, func() bool { return exported(t, reg, "cpupool_audit_failing") }, 10*time.Second, 20*time.Millisecond,
		"an audit within 10 s of Synchronize, not a minute later")
}
