package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sirupsen/logrus"

	"github.com/cpupool/nri-cpupool/cmd/nri-cpupool/internal/logsink"
	"github.com/cpupool/nri-cpupool/cmd/nri-cpupool/internal/sdnotify"
	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/deviceplugin"
	"github.com/cpupool/nri-cpupool/dra"
	"github.com/cpupool/nri-cpupool/plugin"
	"github.com/cpupool/nri-cpupool/state"
	"github.com/cpupool/nri-cpupool/sysfs"
)

func runPlugin(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("run", "run [--config F] [--nri-socket S] [--state-file F] [--sysfs-root D] [--cgroup-root D] [--log-level L]", stderr)
	cfgPath := fs.String("config", config.DefaultPath, "configuration file; a missing default file means built-in defaults")
	socket := fs.String("nri-socket", "", "runtime's NRI socket (overrides nriSocket)")
	stateFile := fs.String("state-file", "", "state file (overrides stateFile)")
	sysfsRoot := fs.String("sysfs-root", "", "directory holding sys/ and proc/ (overrides sysfsRoot)")
	cgroupRoot := fs.String("cgroup-root", "", "cgroup hierarchy root (overrides cgroupRoot)")
	logLevel := fs.String("log-level", "", "trace, debug, info, warn or error (overrides logLevel)")
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, err := loadRunConfig(*cfgPath)
	if err != nil {
		return err
	}
	for _, o := range []struct {
		flag string
		dst  *string
	}{{*socket, &cfg.NRISocket}, {*stateFile, &cfg.StateFile}, {*sysfsRoot, &cfg.SysfsRoot}, {*cgroupRoot, &cfg.CgroupRoot}, {*logLevel, &cfg.LogLevel}} {
		if o.flag != "" {
			*o.dst = o.flag
		}
	}
	if problems := cfg.Check(); problems.HasErrors() {
		return problems.Errors().In("flags and " + *cfgPath)
	}
	log := logrus.New()
	// Lines are written off the handlers' path (see logsink); the queue is
	// written out when run returns, after the plugin's last words.
	logOut := logsink.NewAsync(stderr, 4096)
	defer logOut.Close()
	log.SetOutput(logOut)
	log.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
	level, _ := logrus.ParseLevel(cfg.LogLevel)
	log.SetLevel(level)

	topo, err := sysfs.Discover(cfg.SysfsRoot)
	if err != nil {
		return err
	}
	p, err := plugin.New(cfg, topo, state.NewFileStore(cfg.StateFile), log)
	if err != nil {
		return err
	}
	defer p.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log.Infof("nri-cpupool %s: %d online CPUs, state %s, NRI socket %s", Version, topo.Online.Size(), cfg.StateFile, cfg.NRISocket)
	if cfg.MetricsAddress != "" {
		stopMetrics, err := serveMetrics(cfg.MetricsAddress, p)
		if err != nil {
			return err
		}
		defer stopMetrics()
		log.Infof("serving Prometheus metrics on http://%s/metrics", cfg.MetricsAddress)
	}
	if cfg.Kubelet.DevicePlugin {
		dp := deviceplugin.New(p, cfg.Kubelet.DevicePluginDir, config.ResourceExclusive, log)
		go dp.Run(ctx)
		log.Infof("kubelet device plugin on: advertising %s through %s", config.ResourceExclusive, cfg.Kubelet.DevicePluginDir)
	}
	draDone, err := startDRA(ctx, stop, cfg, p, log)
	if err != nil {
		return err
	}
	err = p.Run(ctx, cfg.NRISocket, plugin.DefaultBackoff, systemdHooks(log))
	stop()
	<-draDone // the driver's last claims write
	if _, nerr := sdnotify.Notify(sdnotify.Stopping); nerr != nil {
		log.Warnf("%v", nerr)
	}
	return err
}

// startDRA makes the daemon the DRA driver when dra.enabled: it binds
// containers to their claims and serves the kubelet until ctx ends. A
// driver that stops on its own (it cannot serve the kubelet) stops the
// daemon, so that systemd or the DaemonSet restarts it. The channel closes
// when the driver has written its last state.
func startDRA(ctx context.Context, stop func(), cfg *config.Config, p *plugin.Plugin, log *logrus.Logger) (<-chan struct{}, error) {
	done := make(chan struct{})
	if !cfg.DRA.Enabled {
		close(done)
		return done, nil
	}
	client, err := dra.NewClient(cfg.DRA.Kubeconfig)
	if err != nil {
		return nil, err
	}
	d, err := dra.New(p, dra.Options{NodeName: dra.NodeName(cfg.DRA.NodeName), Model: cfg.DRA.Devices,
		ClaimsFile: dra.ClaimsFile(cfg.StateFile), CDIDir: cfg.DRA.CDIDir, Log: log})
	if err != nil {
		return nil, err
	}
	p.UseClaims(d)
	go func() {
		defer close(done)
		if err := d.Serve(ctx, client, dra.Paths{PluginDir: cfg.DRA.PluginDir, RegistryDir: cfg.DRA.RegistryDir}); err != nil {
			log.Errorf("%v; stopping", err)
			stop()
		}
	}()
	return done, nil
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

// serveMetrics listens before returning, so a taken port is an error at
// start rather than a log line later.
func serveMetrics(addr string, p *plugin.Plugin) (func(), error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metricsAddress: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(p.Registry(), promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(l)
	return func() { srv.Close() }, nil
}

// loadRunConfig reads the config; only the default path may be absent.
func loadRunConfig(path string) (*config.Config, error) {
	if _, err := os.Stat(path); os.IsNotExist(err) && path == config.DefaultPath {
		return config.Default(), nil
	}
	return config.Load(path)
}
