package plugin

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

// TestSystemdReadiness runs the real binary as systemd would for a
// Type=notify unit: it says READY=1 only once registered with the runtime,
// a STATUS line while the runtime is away, and STOPPING=1 on SIGTERM.
func TestSystemdReadiness(t *testing.T) {
	f := newFakeRuntime(t, false)
	f.r.Stop() // no runtime yet
	os.Remove(f.socket)

	notifyPath := filepath.Join(f.dir, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: notifyPath, Net: "unixgram"})
	require.NoError(t, err)
	defer conn.Close()
	messages := make(chan string, 64)
	go func() {
		buf := make([]byte, 512)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				close(messages)
				return
			}
			messages <- string(buf[:n])
		}
	}()
	next := func(timeout time.Duration) (string, bool) {
		select {
		case m, ok := <-messages:
			return m, ok
		case <-time.After(timeout):
			return "", false
		}
	}

	cfgFile := filepath.Join(f.dir, "config.yaml")
	require.NoError(t, os.WriteFile(cfgFile, []byte(fmt.Sprintf("isolatedCPUs: \"1\"\nsysfsRoot: %s\ncgroupRoot: %s\nstateFile: %s\n",
		fixture.Root(t, desktop.fixture), f.cgroupRoot, filepath.Join(f.dir, "state.json"))), 0o644))
	cmd := exec.Command(buildBinary(t), "run", "--config", cfgFile, "--nri-socket", f.socket)
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+notifyPath)
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	require.NoError(t, cmd.Start())
	defer cmd.Process.Kill()

	m, ok := next(10 * time.Second)
	require.True(t, ok, "no notification while the runtime is away; log:\n%s", logs.String())
	assert.True(t, strings.HasPrefix(m, "STATUS=cannot reach the runtime"), "first notification %q", m)
	// Still no runtime: never READY.
	for deadline := time.Now().Add(600 * time.Millisecond); time.Now().Before(deadline); {
		if m, ok := next(100 * time.Millisecond); ok {
			require.NotContains(t, m, "READY=1", "ready before any runtime answered")
		}
	}

	before := f.syncCount()
	f.start()
	t.Cleanup(f.r.Stop)
	ready := false
	for deadline := time.Now().Add(20 * time.Second); !ready && time.Now().Before(deadline); {
		m, ok := next(time.Until(deadline))
		ready = ok && m == "READY=1"
	}
	require.True(t, ready, "READY=1 never came after the runtime started; log:\n%s", logs.String())
	f.waitSynced(before)

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	stopping := false
	for deadline := time.Now().Add(10 * time.Second); !stopping && time.Now().Before(deadline); {
		m, ok := next(time.Until(deadline))
		stopping = ok && m == "STOPPING=1"
	}
	assert.True(t, stopping, "STOPPING=1 on SIGTERM")
	assert.NoError(t, cmd.Wait())
}
