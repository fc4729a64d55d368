package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	nrilog "github.com/containerd/nri/pkg/log"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sirupsen/logrus"

	"github.com/cpupool/nri-cpupool/cmd/nri-cpupool/internal/logsink"
	"github.com/cpupool/nri-cpupool/cmd/nri-cpupool/internal/sdnotify"
	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/deviceplugin"
	"github.com/cpupool/nri-cpupool/dra/dracore"
	"github.com/cpupool/nri-cpupool/internal/plural"
	"github.com/cpupool/nri-cpupool/internal/proflabel"
	"github.com/cpupool/nri-cpupool/plugin"
	"github.com/cpupool/nri-cpupool/state"
	"github.com/cpupool/nri-cpupool/sysfs"
)

// logTimeFormat is the daemon's log lines' time: RFC 3339 in
// milliseconds.
const logTimeFormat = "2006-01-02T15:04:05.000Z07:00"

func runPlugin(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("run", "run [--config F] [--nri-socket S] [--state-file F] [--sysfs-root D] [--cgroup-root D] [--log-level L] [--pprof-address A] [--handler-clocks]", stderr)
	cfgPath := configFlag(fs, "configuration file; a missing default file means built-in defaults")
	socket := fs.String("nri-socket", "", "runtime's NRI socket (overrides nriSocket)")
	stateFile := fs.String("state-file", "", "state file (overrides stateFile)")
	sysfsRoot := fs.String("sysfs-root", "", "directory holding sys/ and proc/ (overrides sysfsRoot)")
	cgroupRoot := fs.String("cgroup-root", "", "cgroup hierarchy root (overrides cgroupRoot)")
	logLevel := keyFlagVar(fs, "log-level", "logLevel", "log `LEVEL`: trace, debug, info, warn or error (overrides logLevel)", func(c *config.Config, v string) { c.LogLevel = v })
	pprofAddr := fs.String("pprof-address", "", "serve Go profiles (/debug/pprof/) on this loopback HOST:PORT or unix:PATH; off when empty")
	handlerClocks := fs.Bool("handler-clocks", false, "time each creation's phases by wall and thread CPU clock, summarized as JSON on metricsAddress's "+handlerClocksPath+" (a diagnostic)")
	if err := parse(fs, args, stdout); err != nil {
		return err
	}
	// Paths given on the command line are the caller's, relative to where
	// it stands, as with the other commands (`topology --sysfs-root
	// fixture`); the config's must be absolute, so they are resolved here,
	// once: a reload reads them as they were at start.
	overrides := runOverrides{nriSocket: *socket, stateFile: *stateFile, sysfsRoot: *sysfsRoot, cgroupRoot: *cgroupRoot, logLevel: *logLevel}
	if err := overrides.resolve(); err != nil {
		return err
	}
	load := runConfigLoader(*cfgPath, overrides)
	cfg, err := load()
	if err != nil {
		return err
	}
	if *handlerClocks && cfg.MetricsAddress == "" {
		return fmt.Errorf("--handler-clocks: the summary is served on metricsAddress's %s, and metricsAddress is not set; set it in %s", handlerClocksPath, *cfgPath)
	}
	if cfg.NeedsKubernetes() && NewDriver == nil {
		return execDRA(args, kubernetesKey(cfg))
	}
	log, logOut := daemonLog(stderr, cfg.LogLevel)
	defer logOut.Close()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// SIGHUP (systemctl reload) reloads the config; caught from the start,
	// so that one sent early does not end the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	// The topology first: a process that waits for the lock is then
	// ready to take over at once.
	topo, err := sysfs.Discover(cfg.SysfsRoot)
	if err != nil {
		return err
	}
	lock, err := lockStateDir(ctx, cfg.StateFile, log)
	if err != nil || lock == nil {
		return err
	}
	p, err := plugin.New(cfg, topo, state.NewFileStore(cfg.StateFile), log)
	if err != nil {
		lock.Close()
		return err
	}
	p.KeepStateLock(lock)
	// Each creation's line is made by the log's goroutine, not the handler.
	p.LogDecisionsTo(logsink.NewDeferred(log, logOut))
	if *handlerClocks {
		p.TimeCreations(plugin.NewCreationClocks())
	}
	defer p.Close()
	log.Infof("nri-cpupool %s: %s, state %s, NRI socket %s", Version, plural.Count(topo.Online.Size(), "online CPU"), cfg.StateFile, cfg.NRISocket)
	driver, err := newDRA(cfg, p, log)
	if err != nil {
		return err
	}
	events := newPodEvents(cfg, p, log)
	if *pprofAddr != "" {
		stopPprof, where, err := servePprof(*pprofAddr, log)
		if err != nil {
			return err
		}
		defer stopPprof()
		log.Infof("serving Go profiles on %s/debug/pprof/ (--pprof-address)", where)
	}
	if cfg.MetricsAddress != "" {
		var extra []prometheus.Collector
		if events != nil {
			extra = append(extra, events.Collector())
		}
		stopMetrics, err := serveMetrics(cfg.MetricsAddress, p, driver, extra...)
		if err != nil {
			return err
		}
		defer stopMetrics()
		log.Infof("serving Prometheus metrics on http://%s/metrics, and /healthz and /readyz", cfg.MetricsAddress)
	}
	if cfg.Kubelet.DevicePlugin {
		dp := deviceplugin.New(p, cfg.Kubelet.DevicePluginDir, config.ResourceExclusive, log)
		proflabel.Go(proflabel.DevicePlugin, func() { dp.Run(ctx) }) //nolint:errcheck // it logs its own failures
		log.Infof("kubelet device plugin on: advertising %s through %s", config.ResourceExclusive, cfg.Kubelet.DevicePluginDir)
	}
	// The goroutines these start carry their label (it is inherited).
	var draDone, eventsDone <-chan struct{}
	proflabel.Worker(proflabel.DRA).Do(context.Background(), func() { draDone = serveDRA(ctx, driver) })
	proflabel.Worker(proflabel.PodEvents).Do(context.Background(), func() { eventsDone = servePodEvents(ctx, events) })
	proflabel.Go(proflabel.ConfigWatch, func() { p.WatchConfig(ctx, *cfgPath, hup, load) })
	err = p.Run(ctx, cfg.NRISocket, plugin.DefaultBackoff, systemdHooks(log))
	stop()
	// Within the way out's one bound, Run's last writes and Close's
	// included (5 s in all, below the chart's grace period of 10 s).
	p.WaitOnTheWayOut("the DRA driver's last claims write", draDone)
	p.WaitOnTheWayOut("the pod Events' poster", eventsDone)
	if _, nerr := sdnotify.Notify(sdnotify.Stopping); nerr != nil {
		log.Warnf("%v", nerr)
	}
	return err
}

// runOverrides are run's flags that override the config's keys; empty
// ones do not.
type runOverrides struct {
	nriSocket, stateFile, sysfsRoot, cgroupRoot, logLevel string
}

// resolve makes the paths absolute against the working directory.
func (o *runOverrides) resolve() error {
	for _, p := range []struct {
		flag string
		path *string
	}{{"--nri-socket", &o.nriSocket}, {"--state-file", &o.stateFile}, {"--sysfs-root", &o.sysfsRoot}, {"--cgroup-root", &o.cgroupRoot}} {
		if *p.path == "" {
			continue
		}
		abs, err := filepath.Abs(*p.path)
		if err != nil {
			return fmt.Errorf("%s %q: %w", p.flag, *p.path, err)
		}
		*p.path = abs
	}
	return nil
}

// runConfigLoader reads the config as run's flags amend it: at start, and
// again at each reload.
func runConfigLoader(cfgPath string, o runOverrides) func() (*config.Config, error) {
	return func() (*config.Config, error) {
		cfg, err := loadRunConfig(cfgPath)
		if err != nil {
			return nil, err
		}
		for _, v := range []struct {
			flag string
			dst  *string
		}{{o.nriSocket, &cfg.NRISocket}, {o.stateFile, &cfg.StateFile}, {o.sysfsRoot, &cfg.SysfsRoot}, {o.cgroupRoot, &cfg.CgroupRoot}, {o.logLevel, &cfg.LogLevel}} {
			if v.flag != "" {
				*v.dst = v.flag
			}
		}
		if problems := cfg.Check(); problems.HasErrors() {
			return nil, problems.Errors().In("flags and " + cfgPath)
		}
		return cfg, nil
	}
}

// daemonLog is the daemon's log on stderr, and the queue to close when
// run returns (after the plugin's last words). The NRI library logs into
// it too (logsink.NRILogger): through the queue, in the same time format,
// and a line its stub repeats at each reconnect at info only once. Set
// once per process, before the stub is made, as the library wants.
func daemonLog(stderr io.Writer, logLevel string) (*logrus.Logger, *logsink.Async) {
	log := logrus.New()
	// Lines are written off the handlers' path (see logsink).
	logOut := logsink.NewAsync(stderr, 4096)
	log.SetOutput(logOut)
	// Milliseconds: what a decision, a reload or a CPU going offline takes
	// is told by the lines' times (the VM suite measures the plugin's
	// reaction to a hotplug so); seconds would hide it.
	log.SetFormatter(&logrus.TextFormatter{FullTimestamp: true, TimestampFormat: logTimeFormat})
	level, _ := logrus.ParseLevel(logLevel)
	log.SetLevel(level)
	nrilog.Set(logsink.NRILogger(log))
	return log, logOut
}

// lockStateDir takes the state directory's lock before anything reads the
// directory's files, waiting while another daemon holds it (an upgrade
// that starts the new process before the old one is gone). A signal while
// waiting ends the run without an error and without a lock (nil). A
// state directory that cannot be written does not end it: the lock is
// taken read-only, or not at all, with a warning (state.TryLock).
func lockStateDir(ctx context.Context, stateFile string, log *logrus.Logger) (*state.DirLock, error) {
	waited := ""
	lock, err := state.Lock(ctx, stateFile, func(holder string) {
		waited = holder
		msg := fmt.Sprintf("another nri-cpupool holds the state directory lock %s (%s): waiting for it to exit", state.LockPath(stateFile), holder)
		log.Warn(msg)
		if _, err := sdnotify.Notify(sdnotify.Status(msg)); err != nil {
			log.Warnf("%v", err)
		}
	})
	switch {
	case err != nil && ctx.Err() != nil:
		log.Infof("stopped while waiting for the state directory lock")
		return nil, nil
	case err != nil:
		return nil, err
	case waited != "":
		log.Infof("took the state directory lock %s over from %s", lock.Path(), waited)
	}
	if w := lock.Warning(); w != "" {
		// A read-only state directory: pinning goes on (docs/state.md).
		log.Warn(w)
	}
	return lock, nil
}

// DRABinary is the binary with the DRA driver and the pod Events:
// nri-cpupool-dra, next to nri-cpupool, which runs it in its place when
// dra.enabled or kubernetes.events is set.
const DRABinary = "nri-cpupool-dra"

// Driver is the DRA driver as run starts it.
type Driver interface {
	// Collector returns the driver's metrics.
	Collector() prometheus.Collector
	// Status is the driver's state, for /readyz?verbose.
	Status() dracore.Status
	// Serve serves the kubelet until ctx ends; the channel closes when the
	// driver has written its last state.
	Serve(ctx context.Context) <-chan struct{}
}

// NewDriver makes the DRA driver of a run with dra.enabled, and lets it
// bind containers to their claims. nri-cpupool-dra sets it (package
// drarun); in nri-cpupool, which links no Kubernetes client, it is nil,
// and run execs nri-cpupool-dra instead (execDRA).
var NewDriver func(cfg *config.Config, p *plugin.Plugin, log *logrus.Logger) (Driver, error)

// execDRA runs nri-cpupool-dra in this process's place with the same
// arguments: the DRA driver's Kubernetes libraries cost every node that
// links them about 25 MiB of memory, DRA or not (issue 33), so they are in
// a binary of their own, and the one command (the unit's, the
// DaemonSet's) starts whichever the config needs. The process stays the
// same (systemd's main PID, the DaemonSet's container): only the program
// changes. It returns only when it cannot.
func execDRA(args []string, key string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("%s: finding %s: %w", key, DRABinary, err)
	}
	bin := filepath.Join(filepath.Dir(self), DRABinary)
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%s: the Kubernetes client (the DRA driver, the pod Events) is in %s, which should be next to %s: %w (the packages and the image install both; or set %s: false)", key, DRABinary, self, err, key)
	}
	argv := append([]string{bin, "run"}, args...)
	if err := syscall.Exec(bin, argv, os.Environ()); err != nil {
		return fmt.Errorf("%s: running %s: %w", key, bin, err)
	}
	return nil
}

// kubernetesKey names the key that needs the Kubernetes client, for
// execDRA's errors.
func kubernetesKey(cfg *config.Config) string {
	if cfg.DRA.Enabled {
		return "dra.enabled"
	}
	return "kubernetes.events"
}

// PodEvents posts Events on pods (package kubeevents) as run starts it.
type PodEvents interface {
	// Collector returns its metrics.
	Collector() prometheus.Collector
	// Serve posts Events in the background until ctx ends; the channel
	// closes when it has stopped.
	Serve(ctx context.Context) <-chan struct{}
}

// NewPodEvents makes the pod Events of a run with kubernetes.events, and
// hands them to the plugin. nri-cpupool-dra sets it; nri-cpupool, which
// links no Kubernetes client, never gets that far (execDRA).
var NewPodEvents func(cfg *config.Config, p *plugin.Plugin, log *logrus.Logger) PodEvents

// newPodEvents makes the pod Events when kubernetes.events is on; nil,
// and nothing of the Kubernetes client made, when it is off.
func newPodEvents(cfg *config.Config, p *plugin.Plugin, log *logrus.Logger) PodEvents {
	if !cfg.Kubernetes.Events || NewPodEvents == nil {
		return nil
	}
	return NewPodEvents(cfg, p, log)
}

// servePodEvents serves the pod Events, if any, until ctx ends.
func servePodEvents(ctx context.Context, e PodEvents) <-chan struct{} {
	if e == nil {
		done := make(chan struct{})
		close(done)
		return done
	}
	return e.Serve(ctx)
}

// newDRA makes the DRA driver when dra.enabled (NewDriver); nil when the
// driver is off.
func newDRA(cfg *config.Config, p *plugin.Plugin, log *logrus.Logger) (Driver, error) {
	if !cfg.DRA.Enabled {
		// A driver of an earlier run would otherwise still show in
		// `nri-cpupool status`.
		if err := os.Remove(dracore.StatusFile(cfg.StateFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
			log.Warnf("removing the DRA driver's status of an earlier run: %v", err)
		}
		return nil, nil
	}
	return NewDriver(cfg, p, log)
}

// serveDRA serves the kubelet with the driver, if there is one, until ctx
// ends (Driver.Serve): nothing it meets stops the daemon, which pins
// containers whatever the DRA side does. The channel closes when the
// driver has written its last state.
func serveDRA(ctx context.Context, d Driver) <-chan struct{} {
	if d == nil {
		done := make(chan struct{})
		close(done)
		return done
	}
	return d.Serve(ctx)
}

// systemdHooks report the connection to systemd (Type=notify): READY=1 once
// registered with the runtime, so `systemctl start` returns when containers
// are pinned, and a STATUS line while the runtime is away.
func systemdHooks(log *logrus.Logger) plugin.Hooks {
	notify := func(states ...string) {
		for _, s := range states {
			if _, err := sdnotify.Notify(s); err != nil {
				log.Warnf("%v", err)
			}
		}
	}
	return plugin.Hooks{
		Registered:   func() { notify(sdnotify.Ready, sdnotify.Status("registered with the runtime")) },
		Disconnected: func(reason string) { notify(sdnotify.Status(reason)) },
	}
}

// serveMetrics serves the metrics of the plugin and of the DRA driver (d,
// nil when off), and the health endpoints (health.go). It listens before
// returning, so a taken port is an error at start rather than a log line
// later.
func serveMetrics(addr string, p *plugin.Plugin, d Driver, extra ...prometheus.Collector) (func(), error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metricsAddress: %w", err)
	}
	srv := &http.Server{Handler: metricsHandler(p, d, extra...), ReadHeaderTimeout: 5 * time.Second}
	// A scrape's CPU shows as worker=metrics in a profile: the server's
	// connections inherit its goroutine's label.
	proflabel.Go(proflabel.Metrics, func() { srv.Serve(l) }) //nolint:errcheck // ErrServerClosed at stop
	return func() { srv.Close() }, nil
}

// handlerClocksPath is where the metrics address serves the creations'
// phase clocks when run has --handler-clocks (plugin.TimeCreations).
const handlerClocksPath = "/debug/handler-clocks"

// metricsHandler routes the metrics address: /metrics, /healthz, /readyz,
// and handlerClocksPath when creations are timed.
// extra are further collectors to serve (the pod Events' counters).
func metricsHandler(p *plugin.Plugin, d Driver, extra ...prometheus.Collector) http.Handler {
	reg := p.Registry()
	if d != nil {
		reg.MustRegister(d.Collector())
	}
	reg.MustRegister(extra...)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", healthz)
	mux.Handle("/readyz", readyz(readyChecks(p, d)))
	if clocks := p.CreationClocks(); clocks != nil {
		mux.Handle(handlerClocksPath, clocks)
	}
	return mux
}
