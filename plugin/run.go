package plugin

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
)

// PluginName is the name the plugin registers with.
const PluginName = "cpupool"

// Backoff bounds the wait between attempts to reach the runtime.
type Backoff struct {
	Initial, Max time.Duration
}

// DefaultBackoff retries quickly first, then every 10 s.
var DefaultBackoff = Backoff{Initial: 250 * time.Millisecond, Max: 10 * time.Second}

// runtimeLaunched tells whether the runtime started this process (it then
// passes a connected socket in the environment and restarts the plugin).
func runtimeLaunched() bool { return os.Getenv(api.PluginSocketEnvVar) != "" }

// Hooks let the caller follow the connection, e.g. to tell systemd the
// service is ready. Unset hooks are skipped.
type Hooks struct {
	// Registered runs each time the plugin has registered with the runtime
	// (the runtime then synchronizes it).
	Registered func()
	// Disconnected runs when the connection is lost and before a retry.
	Disconnected func(reason string)
}

func (h Hooks) registered() {
	if h.Registered != nil {
		h.Registered()
	}
}

func (h Hooks) disconnected(reason string) {
	if h.Disconnected != nil {
		h.Disconnected(reason)
	}
}

// Run connects to the runtime and serves events until ctx ends. When the
// runtime goes away (restart, crash) it reconnects with backoff and is
// resynchronized by the runtime, so systemd need not restart it. At most one
// Hooks value is used.
func (p *Plugin) Run(ctx context.Context, socket string, backoff Backoff, hooks ...Hooks) error {
	var h Hooks
	if len(hooks) > 0 {
		h = hooks[0]
	}
	wait := backoff.Initial
	for {
		closed := make(chan struct{})
		opts := []stub.Option{stub.WithOnClose(func() { close(closed) })}
		if !runtimeLaunched() {
			// A runtime-launched plugin gets its name, index and connection
			// from the environment the runtime set up.
			opts = append(opts, stub.WithPluginName(PluginName), stub.WithPluginIdx(fmt.Sprintf("%02d", p.cfg.PluginIndex)), stub.WithSocketPath(socket))
		}
		s, err := stub.New(instrumented{p, p.metrics.handlers}, opts...)
		if err != nil {
			return fmt.Errorf("creating NRI stub: %w", err)
		}
		p.setNRIVersion(s.RuntimeNRIVersion)
		if err = s.Start(ctx); err == nil {
			p.setUpdater(s.UpdateContainers)
			p.log.Infof("registered with the runtime at %s as %s", socket, strconv.Quote(fmt.Sprintf("%02d-%s", p.cfg.PluginIndex, PluginName)))
			wait = backoff.Initial
			h.registered()
			select {
			case <-closed:
				p.log.Warn("lost the connection to the runtime; reconnecting")
				h.disconnected("lost the connection to the runtime; reconnecting")
			case <-ctx.Done():
				p.setUpdater(nil)
				s.Stop()
				return nil
			}
			p.setUpdater(nil)
			s.Stop()
			if runtimeLaunched() {
				return fmt.Errorf("runtime closed the connection")
			}
		} else {
			if runtimeLaunched() {
				return fmt.Errorf("starting plugin: %w", err)
			}
			p.log.Warnf("cannot reach the runtime at %s (%v); retrying in %s", socket, err, wait)
			h.disconnected(fmt.Sprintf("cannot reach the runtime at %s; retrying", socket))
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil
		}
		wait = min(wait*2, backoff.Max)
	}
}

func (p *Plugin) setUpdater(f func([]*api.ContainerUpdate) ([]*api.ContainerUpdate, error)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.updater = f
}

// setNRIVersion sets where Configure learns the runtime's NRI version: the
// stub knows it before it calls Configure.
func (p *Plugin) setNRIVersion(f func() string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.nriVersion = f
}
