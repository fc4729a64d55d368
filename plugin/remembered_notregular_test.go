package plugin

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/sysfs"
)

// A directory where present-cpus.json belongs (made by hand, by a
// mis-written volume mount) cannot be read nor replaced. The daemon must
// say so once, naming the path and the way out (remove it), and not at
// every write of the record (each CPU that comes online for the first
// time): every such write fails the same way. Pinning goes on as without
// the record. Once the directory is removed, the next write works again
// and says so.
func TestARememberedCPUsPathThatIsADirectoryIsSaidOnceAndPinningGoesOn(t *testing.T) {
	f := newFakeRuntime(t, true)
	root := f.sysfsRoot(desktop.fixture)
	for _, c := range []int{7, 13, 14, 15} {
		setOnlineAt(t, root, c, false)
	}
	recPath := sysfs.RememberedPath(statePath(f))
	require.NoError(t, os.MkdirAll(recPath, 0o700))
	rp := startPlugin(t, f, desktop, statePath(f), fastHotplug, func(p *Plugin) { p.log.SetLevel(logrus.DebugLevel) })

	pod := f.runPod(podSpec{name: "dpdk", namespace: "telco", annotations: map[string]string{"pool.cpupool.dev/container.fwd": "exclusive"}})
	fwd, _, err := f.createContainer(pod, "fwd", 2000)
	require.NoError(t, err)
	assert.Equal(t, "4,12", f.cpus(fwd), "pinned as without the record")

	// Each CPU seen online for the first time changes the record: a write.
	for _, step := range []struct {
		cpu    int
		layout string
	}{{13, "4-6,12-13"}, {14, "4-6,12-14"}, {15, "4-6,12-15"}} {
		setOnlineAt(t, root, step.cpu, true)
		waitLayout(t, rp, step.layout)
	}
	// The way out: the directory removed, the next change is written.
	require.NoError(t, os.Remove(recPath))
	setOnlineAt(t, root, 7, true)
	waitLayout(t, rp, "4-7,12-15")
	// The record is remembered after the layout changes: wait for its write.
	require.Eventually(t, func() bool { st, err := os.Stat(recPath); return err == nil && st.Mode().IsRegular() }, 3*time.Second, 5*time.Millisecond)
	rp.stop() // waits for the record's writes

	log := rp.log.String()
	said := grepLog(grepLog(log, "level=warning"), recPath)
	t.Logf("warnings naming %s:\n%s\nall lines naming it:\n%s", recPath, said, grepLog(log, recPath))
	assert.Equal(t, 1, strings.Count(said, "\n")+1, "one warning for the directory, not one per write")
	assert.Contains(t, said, recPath+": a directory, not a regular file")
	assert.Contains(t, said, "remove it, and the daemon writes the record there")
	assert.GreaterOrEqual(t, strings.Count(grepLog(log, "level=debug"), "remembering where the CPUs sit: "+recPath+": a directory"), 3,
		"the writes were tried, one per CPU seen online, and not said again")
	assert.Contains(t, log, "remembering where the CPUs sit: "+recPath+" written again")
	st, err := os.Stat(recPath)
	require.NoError(t, err)
	assert.True(t, st.Mode().IsRegular(), "the record is written once the directory is gone")
	rec, err := sysfs.ReadRemembered(recPath)
	require.NoError(t, err)
	assert.Len(t, rec.CPUs, 16)
}
