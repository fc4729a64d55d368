package plugin

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"testing"

	"github.com/containerd/nri/pkg/stub"
	"github.com/stretchr/testify/require"
)

// noopProcess runs the no-op plugin of
// BenchmarkCreateContainerRoundTripAllFeaturesProcess in a process of its
// own too, by default: with the no-op in the runtime's process, a
// creation behind nri-cpupool wakes another process and one behind the
// no-op does not, and the added time would include that switch; with
// both plugins out of the runtime's process, as on a node, the pair
// differs by the plugin alone. -noop.process=false keeps the no-op in.
var noopProcess = flag.Bool("noop.process", true, "run the no-op plugin of the AllFeaturesProcess benchmark as its own process, as the daemon is (false: in the runtime's process)")

// noopSocketEnv names the runtime socket the no-op plugin connects to;
// the test binary re-executed with it set runs TestNoopPluginProcess and
// nothing else.
const noopSocketEnv = "NRI_CPUPOOL_NOOP_SOCKET"

// startNoopProcess connects the no-op plugin to f from another process
// (this test binary, re-executed), and waits until the runtime has
// synchronized it.
func startNoopProcess(b *testing.B, f *fakeRuntime) {
	b.Helper()
	before := f.syncCount()
	cmd := exec.Command(os.Args[0], "-test.run=^TestNoopPluginProcess$")
	cmd.Env = append(os.Environ(), noopSocketEnv+"="+f.socket)
	cmd.Stderr = os.Stderr
	require.NoError(b, cmd.Start())
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	f.waitSynced(before)
}

// TestNoopPluginProcess is the no-op plugin's process: it runs only when
// re-executed by startNoopProcess, until killed or disconnected.
func TestNoopPluginProcess(t *testing.T) {
	socket := os.Getenv(noopSocketEnv)
	if socket == "" {
		t.Skip("runs as the benchmarks' no-op plugin process only")
	}
	s, err := stub.New(noopPlugin{}, stub.WithPluginName("noop"), stub.WithPluginIdx("10"), stub.WithSocketPath(socket))
	require.NoError(t, err)
	require.NoError(t, s.Run(context.Background()))
}
