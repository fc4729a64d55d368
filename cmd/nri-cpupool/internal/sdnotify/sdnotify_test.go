package sdnotify

import (
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// listen returns a datagram socket standing in for systemd's.
func listen(t *testing.T, name string) *net.UnixConn {
	addr := &net.UnixAddr{Name: name, Net: "unixgram"}
	if name[0] == '@' {
		addr.Name = "\x00" + name[1:]
	}
	conn, err := net.ListenUnixgram("unixgram", addr)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return conn
}

func receive(t *testing.T, conn *net.UnixConn) string {
	buf := make([]byte, 256)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	n, err := conn.Read(buf)
	require.NoError(t, err)
	return string(buf[:n])
}

func TestNotify(t *testing.T) {
	for _, name := range []string{filepath.Join(t.TempDir(), "notify.sock"), "@nri-cpupool-test-" + t.Name()} {
		t.Run(name, func(t *testing.T) {
			conn := listen(t, name)
			t.Setenv(Socket, name)
			sent, err := Notify(Ready)
			require.NoError(t, err)
			assert.True(t, sent)
			assert.Equal(t, "READY=1", receive(t, conn))
			_, err = Notify(Status("waiting for the runtime"))
			require.NoError(t, err)
			assert.Equal(t, "STATUS=waiting for the runtime", receive(t, conn))
		})
	}
}

func TestNotifyWithoutSystemd(t *testing.T) {
	t.Setenv(Socket, "")
	sent, err := Notify(Ready)
	assert.NoError(t, err)
	assert.False(t, sent)
}

func TestNotifyToAMissingSocketIsAnError(t *testing.T) {
	t.Setenv(Socket, filepath.Join(t.TempDir(), "gone.sock"))
	_, err := Notify(Ready)
	assert.ErrorContains(t, err, "notifying systemd")
}
