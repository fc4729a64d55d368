package e2e

// Not tagged e2e: the scripts' output needs no root and no runtime.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestScriptsColourOnlyATerminal: the test scripts' steps (say, so `make
// demo`) are bold on a terminal only: a demo written to a file or a CI log
// has no ANSI escapes, and NO_COLOR turns them off on a terminal too
// (issue 43, item 5).
func TestScriptsColourOnlyATerminal(t *testing.T) {
	for _, script := range []string{"../say.sh", "lib.sh", "../k8s/cluster.sh"} {
		t.Run(filepath.Base(script), func(t *testing.T) {
			assert.Equal(t, "==> step\n", say(t, script, nil, "TERM=xterm"), "into a pipe: plain")
			pty := openPTY(t)
			assert.Equal(t, "\x1b[1m==> step\x1b[0m\r\n", say(t, script, pty, "TERM=xterm"), "on a terminal: bold")
			assert.Equal(t, "==> step\r\n", say(t, script, openPTY(t), "TERM=xterm", "NO_COLOR=1"), "NO_COLOR: plain")
			assert.Equal(t, "==> step\r\n", say(t, script, openPTY(t), "TERM=dumb"), "a dumb terminal: plain")
		})
	}
}

// say sources script in bash and runs `say step` with stdout on the
// terminal tty (its output read back from the terminal's ptm side) or,
// when tty is nil, into a pipe.
func say(t *testing.T, script string, tty *ptyPair, env ...string) string {
	t.Helper()
	cmd := exec.Command("bash", "-c", `source "$1" && say step`, "bash", script)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	if tty == nil {
		out, err := cmd.Output()
		require.NoError(t, err)
		return string(out)
	}
	cmd.Stdout = tty.pts
	require.NoError(t, cmd.Run())
	tty.pts.Close()
	var out bytes.Buffer
	buf := make([]byte, 4096)
	for {
		n, err := tty.ptm.Read(buf)
		out.Write(buf[:n])
		if err != nil || n == 0 {
			break
		}
	}
	return out.String()
}

type ptyPair struct{ ptm, pts *os.File }

// openPTY opens a pseudo-terminal: the master side (ptm), to read what was written,
// and the slave side (pts), a terminal for the script's stdout.
func openPTY(t *testing.T) *ptyPair {
	t.Helper()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { ptm.Close() })
	require.NoError(t, unix.IoctlSetPointerInt(int(ptm.Fd()), unix.TIOCSPTLCK, 0))
	n, err := unix.IoctlGetInt(int(ptm.Fd()), unix.TIOCGPTN)
	require.NoError(t, err)
	pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { pts.Close() })
	return &ptyPair{ptm, pts}
}
