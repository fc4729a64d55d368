package plugin

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"

	"github.com/cpupool/nri-cpupool/internal/proflabel"
)

// PluginName is the name the plugin registers with.
const PluginName = "cpupool"

// Backoff bounds the wait between attempts to reach the runtime.
type Backoff struct {
	Initial, Max time.Duration
}

// DefaultBackoff retries quickly first, then every 10 s.
var DefaultBackoff = Backoff{Initial: 250 * time.Millisecond, Max: 10 * time.Second}

// subscribed are the NRI events the plugin asks for: exactly those whose
// handler it implements, derived the way the NRI stub derives its own
// subscription, so that a handler added or removed needs no mask kept by
// hand.
var subscribed = handledEvents(&Plugin{})

// eventHandlers pairs each NRI event with the stub interface that handles
// it (stub.setupHandlers).
var eventHandlers = []struct {
	event   api.Event
	handler reflect.Type
}{
	{api.Event_RUN_POD_SANDBOX, reflect.TypeFor[stub.RunPodInterface]()},
	{api.Event_UPDATE_POD_SANDBOX, reflect.TypeFor[stub.UpdatePodInterface]()},
	{api.Event_POST_UPDATE_POD_SANDBOX, reflect.TypeFor[stub.PostUpdatePodInterface]()},
	{api.Event_STOP_POD_SANDBOX, reflect.TypeFor[stub.StopPodInterface]()},
	{api.Event_REMOVE_POD_SANDBOX, reflect.TypeFor[stub.RemovePodInterface]()},
	{api.Event_CREATE_CONTAINER, reflect.TypeFor[stub.CreateContainerInterface]()},
	{api.Event_START_CONTAINER, reflect.TypeFor[stub.StartContainerInterface]()},
	{api.Event_UPDATE_CONTAINER, reflect.TypeFor[stub.UpdateContainerInterface]()},
	{api.Event_STOP_CONTAINER, reflect.TypeFor[stub.StopContainerInterface]()},
	{api.Event_REMOVE_CONTAINER, reflect.TypeFor[stub.RemoveContainerInterface]()},
	{api.Event_POST_CREATE_CONTAINER, reflect.TypeFor[stub.PostCreateContainerInterface]()},
	{api.Event_POST_START_CONTAINER, reflect.TypeFor[stub.PostStartContainerInterface]()},
	{api.Event_POST_UPDATE_CONTAINER, reflect.TypeFor[stub.PostUpdateContainerInterface]()},
	{api.Event_VALIDATE_CONTAINER_ADJUSTMENT, reflect.TypeFor[stub.ValidateContainerAdjustmentInterface]()},
}

// handledEvents is the mask of the events whose handler plugin implements.
func handledEvents(plugin any) api.EventMask {
	var mask api.EventMask
	t := reflect.TypeOf(plugin)
	for _, h := range eventHandlers {
		if t.Implements(h.handler) {
			mask.Set(h.event)
		}
	}
	return mask
}

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
//
// When it returns, the state file holds every decision (see Flush), unless
// the way out's bound (exitbudget.go) cut the last write short: a handler
// stuck under the plugin's lock or a hung disk. The file on disk is then
// whole but older, and the next start takes the rest from the runtime.
func (p *Plugin) Run(ctx context.Context, socket string, backoff Backoff, hooks ...Hooks) error {
	watchCtx, stopWatching := context.WithCancel(ctx)
	hotplugDone := make(chan struct{})
	proflabel.Go(proflabel.Hotplug, func() {
		defer close(hotplugDone)
		p.watchHotplug(watchCtx)
	})
	defer func() {
		stopWatching()
		// Bounded, with Close, by one budget (exitbudget.go): a handler
		// stuck under the plugin's lock (the hotplug watcher and the
		// last write take it), or a write that never returns (a hung
		// disk), must not keep the daemon from exiting; see
		// stateWriter.Close. The status "stopped" comes first and takes
		// no lock: `nri-cpupool status` tells the daemon is gone even
		// when the rest is cut short.
		if err := p.onTheWayOut("writing state on the way out", func() error {
			p.noteRuntimeNow(RuntimeStopped, socket, "")
			<-hotplugDone
			if err := p.Flush(); err != nil {
				return fmt.Errorf("writing state on the way out: %w", err)
			}
			return nil
		}); err != nil {
			p.log.Errorf("%v", err)
		}
		if err := p.hugePages.Close(); err != nil {
			p.log.Warnf("%v", err)
		}
	}()
	var h Hooks
	if len(hooks) > 0 {
		h = hooks[0]
	}
	// Read once, without the lock: a handler stuck under it must not keep
	// Run from its bounded way out (exitbudget.go). configure stores it,
	// and a reload does not change it (keepRestartOnly).
	index := p.pluginIndex.Load()
	wait := backoff.Initial
	for {
		closed := make(chan struct{})
		opts := []stub.Option{stub.WithOnClose(func() { close(closed) })}
		if !runtimeLaunched() {
			// A runtime-launched plugin gets its name, index and connection
			// from the environment the runtime set up.
			opts = append(opts, stub.WithPluginName(PluginName), stub.WithPluginIdx(fmt.Sprintf("%02d", index)), stub.WithSocketPath(socket))
		}
		s, err := stub.New(newInstrumented(p), opts...)
		if err != nil {
			return fmt.Errorf("creating NRI stub: %w", err)
		}
		p.setNRIVersion(s.RuntimeNRIVersion)
		// Before Start: the runtime may synchronize the plugin before
		// Start returns, and that Synchronize belongs to this attempt.
		p.conn.attempt.Add(1)
		if err = p.start(ctx, s); err == nil {
			wait = backoff.Initial
			h.registered()
			p.log.Infof("registered with the runtime at %s as %s", socket, strconv.Quote(fmt.Sprintf("%02d-%s", index, PluginName)))
			p.setPush(s.UpdateContainers)
			// The runtime's timeout for a reply, which its Configure (done
			// in Start) told the stub: past it readiness fails while a
			// handler is still under way.
			p.conn.requestTimeout.Store(int64(s.RequestTimeout()))
			// After setPush: a reload the first Synchronize applies pushes
			// its updates at once, not at the next reply.
			p.noteRuntime(RuntimeRegistered, socket, "")
			select {
			case <-closed:
				p.setPush(nil)
				p.log.Warn("lost the connection to the runtime; reconnecting")
				h.disconnected("lost the connection to the runtime; reconnecting")
				p.noteRuntime(RuntimeWaiting, socket, "lost the connection to the runtime; reconnecting")
			case <-ctx.Done():
				p.setPush(nil)
				s.Stop()
				return nil
			}
			s.Stop()
			if runtimeLaunched() {
				return fmt.Errorf("runtime closed the connection")
			}
		} else {
			if ctx.Err() != nil {
				return nil
			}
			if runtimeLaunched() {
				return fmt.Errorf("starting plugin: %w", err)
			}
			p.log.Warnf("cannot reach the runtime at %s (%v); retrying in %s", socket, err, wait)
			h.disconnected(fmt.Sprintf("cannot reach the runtime at %s; retrying", socket))
			// Beside the state file, which is not written until the
			// runtime synchronizes: status tells why it is missing.
			p.noteRuntime(RuntimeWaiting, socket, fmt.Sprintf("cannot reach the runtime at %s (%v); retrying", socket, err))
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil
		}
		wait = min(wait*2, backoff.Max)
	}
}

// setNRIVersion sets where Configure learns the runtime's NRI version: the
// stub knows it before it calls Configure. It takes no lock (see
// Plugin.nriVersion).
func (p *Plugin) setNRIVersion(f func() string) {
	p.nriVersion.Store(&f)
}

// start is s.Start(ctx), given up when ctx ends first. The stub's Start
// ignores ctx once it has registered: it waits for the runtime's
// Configure, which waits for the plugin's lock, so a handler stuck under
// the lock (the runtime has then dropped the plugin, and Run reconnects)
// would keep the daemon from its bounded way out. Given up, the Start
// goes on alone, like a late step of the way out (exitbudget.go): the
// process's exit ends it, and a Configure it lets through after the way
// out began changes nothing (Configure); should it still succeed, its
// connection is closed.
func (p *Plugin) start(ctx context.Context, s stub.Stub) error {
	started := make(chan error)
	givenUp := make(chan struct{})
	p.exit.late.Add(1)
	go func() {
		defer p.exit.late.Done()
		err := s.Start(ctx)
		select {
		case started <- err:
		case <-givenUp:
			if err == nil {
				s.Stop()
			}
		}
	}()
	select {
	case err := <-started:
		return err
	case <-ctx.Done():
		// Run returns next and its way out begins: the guard is set
		// before the Start goes on alone, so that no Configure it lets
		// through slips in before the way out's first step sets it.
		p.exit.begun.Store(true)
		close(givenUp)
		return fmt.Errorf("starting plugin: %w", ctx.Err())
	}
}
