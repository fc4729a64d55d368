// Package drarun starts the DRA driver (package dra) in `run`: only
// nri-cpupool-dra links it, and with it the Kubernetes client libraries
// (issue 33: nri-cpupool, which the nodes without DRA run, stays small).
package drarun

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"k8s.io/client-go/kubernetes"

	"github.com/cpupool/nri-cpupool/cmd/nri-cpupool/internal/cli"
	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/dra"
	"github.com/cpupool/nri-cpupool/dra/dracore"
	"github.com/cpupool/nri-cpupool/kubeevents"
	"github.com/cpupool/nri-cpupool/plugin"
)

// New makes the DRA driver of a run with dra.enabled and lets it bind
// containers to their claims (cli.NewDriver). Its errors are the
// configuration's (no node name) only: a claims file that cannot be used
// starts the driver with no claims, counted (dra.New), and a kubeconfig
// that cannot be read yet makes the driver wait for it (Serve).
func New(cfg *config.Config, p *plugin.Plugin, log *logrus.Logger) (cli.Driver, error) {
	d, err := dra.New(p, dra.Options{NodeName: dra.NodeName(cfg.APINodeName()), Model: cfg.DRA.Devices,
		ClaimsFile: dra.ClaimsFile(cfg.StateFile), CDIDir: cfg.DRA.CDIDir, StatusFile: dra.StatusFile(cfg.StateFile), Log: log,
		Discarded: p.CountDiscardedClaims})
	if err != nil {
		return nil, err
	}
	p.UseClaims(d)
	return &driver{d: d, cfg: cfg, log: log}, nil
}

type driver struct {
	d   *dra.Driver
	cfg *config.Config
	log *logrus.Logger
}

// Collector implements cli.Driver.
func (r *driver) Collector() prometheus.Collector { return r.d.Collector() }

// Status implements cli.Driver.
func (r *driver) Status() dracore.Status { return r.d.Status() }

// Serve implements cli.Driver: it serves the kubelet until ctx ends. The
// driver waits for the kubelet and retries what fails by itself
// (dra.Driver.Serve): nothing it meets stops the daemon, which pins
// containers whatever the DRA side does. The channel closes when the
// driver has written its last state.
func (r *driver) Serve(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		connect := func() (kubernetes.Interface, error) { return dra.NewClient(r.cfg.APIKubeconfig()) }
		if err := r.d.Serve(ctx, connect, dra.Paths{PluginDir: r.cfg.DRA.PluginDir, RegistryDir: r.cfg.DRA.RegistryDir}); err != nil {
			r.log.Errorf("DRA: %v", err)
		}
	}()
	return done
}

// NewPodEvents makes the pod Events of a run with kubernetes.events
// (cli.NewPodEvents) and hands them to the plugin. The client is made in
// the background (kubeevents.Poster.Serve): the start does not wait for
// the API server, nor for a kubeconfig that is not there yet.
func NewPodEvents(cfg *config.Config, p *plugin.Plugin, log *logrus.Logger) cli.PodEvents {
	kubeconfig := cfg.APIKubeconfig()
	host, from := eventsHost(dra.NodeName(cfg.APINodeName()), os.Hostname)
	e := kubeevents.New(kubeevents.Options{
		Connect:  func() (kubernetes.Interface, error) { return kubeevents.NewClient(kubeconfig) },
		NodeName: host,
		Log:      log,
	})
	p.UsePodEvents(e)
	log.Infof("pod Events on: posted on the pods as %s from host %q (%s)", kubeevents.Component, host, from)
	return e
}

// eventsHost is the Events' source host: the node name configured
// (kubernetes.nodeName, dra.nodeName, $NODE_NAME), else the hostname as
// the kubelet takes it for its node name by default (trimmed, lower
// case), so that a systemd install without NODE_NAME does not post Events
// from no host (review 59). from says which, for the start's log line.
func eventsHost(configured string, hostname func() (string, error)) (host, from string) {
	if configured != "" {
		return configured, "kubernetes.nodeName, dra.nodeName or $NODE_NAME"
	}
	h, err := hostname()
	if err != nil {
		return "", fmt.Sprintf("no node name: kubernetes.nodeName, dra.nodeName and $NODE_NAME are unset, and the hostname is unknown (%v); set kubernetes.nodeName", err)
	}
	return strings.ToLower(strings.TrimSpace(h)), "the hostname, as the kubelet's default node name: kubernetes.nodeName, dra.nodeName and $NODE_NAME are unset"
}
