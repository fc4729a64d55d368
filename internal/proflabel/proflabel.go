// Package proflabel is the one home of the pprof labels the daemon's
// goroutines carry, so that a CPU profile of the real daemon splits its CPU
// by what runs: an NRI event's handler, or one of the background workers
// that events start (docs/commands.md, "Profiling the daemon", says how to
// read them). A label costs nothing until a profile samples it, and the
// sets below are made once: putting one on a goroutine does not allocate.
//
// Labels are inherited: a goroutine started by a labelled one carries the
// same labels until it sets its own, so each worker sets its label where
// it starts (a worker started from a handler would otherwise count as
// that handler).
package proflabel

import (
	"context"
	"runtime/pprof"
)

// The label keys.
const (
	// KeyNRI names the NRI event whose handler runs (its method name:
	// CreateContainer, RunPodSandbox, ...).
	KeyNRI = "nri"
	// KeyWorker names the background worker that runs (the constants
	// below).
	KeyWorker = "worker"
	// KeySource names, within the host files' worker, the Source whose
	// part of a pass runs (its owner: irq, partition, housekeeping,
	// power, ...); absent for the pass's shared steps.
	KeySource = "source"
	// KeyStep names, within the host files' worker, the step of a pass
	// (the Step constants).
	KeyStep = "step"
)

// The workers (values of KeyWorker).
const (
	// SandboxPinner pins sandboxes' cgroups and lifts their quotas.
	SandboxPinner = "sandbox-pinner"
	// StateWriter collects, encodes and writes the state file.
	StateWriter = "state-writer"
	// StatusWriter writes the connection's state to the daemon's status
	// file, in the background.
	StatusWriter = "status-writer"
	// HostFiles is the host files' reconciler: its passes and rescans.
	HostFiles = "host-files"
	// Audit is the periodic audit of the held CPUs.
	Audit = "audit"
	// Metrics serves /metrics, /healthz and /readyz: a scrape.
	Metrics = "metrics"
	// Pprof serves the profiles themselves (--pprof-address).
	Pprof = "pprof"
	// Log writes the queued log lines.
	Log = "log"
	// Hotplug watches the online CPUs.
	Hotplug = "hotplug"
	// Push sends containers' new cpusets to the runtime outside a reply.
	Push = "push"
	// Reload applies a config reload started in the background (a
	// queued one, or its measure after a push).
	Reload = "reload"
	// ConfigWatch watches the config file and SIGHUP.
	ConfigWatch = "config-watch"
	// StartCheck checks new containers' cgroups after their start.
	StartCheck = "start-check"
	// IsolationRestart makes the host files' reconciler anew (a hotplug).
	IsolationRestart = "isolation-restart"
	// DevicePlugin is the kubelet device plugin.
	DevicePlugin = "device-plugin"
	// PodEvents posts Kubernetes Events about pods.
	PodEvents = "pod-events"
	// DRA is the DRA driver.
	DRA = "dra"
)

// The steps of a host files' pass (values of KeyStep).
const (
	// StepRescan is the Sources' Rescan at the start of a full pass.
	StepRescan = "rescan"
	// StepPlan is a Source's Plan and the reads and checks of its changes.
	StepPlan = "plan"
	// StepRestore gives back what no owner wants any more.
	StepRestore = "restore"
	// StepJournal commits the journal (originals recorded, records
	// dropped).
	StepJournal = "journal"
	// StepHooks runs the Sources' Before and After hooks.
	StepHooks = "hooks"
	// StepWrite writes the wanted values (with their reads back).
	StepWrite = "write"
	// StepPublish is the end of a pass: what is known forgotten, the
	// refusals kept, the Status published.
	StepPublish = "publish"
)

// Set is a set of labels made once. The zero Set is no labels: Do with
// it only runs f.
type Set struct{ ctx context.Context }

// Worker is the set of worker=name.
func Worker(name string) Set { return of(context.Background(), KeyWorker, name) }

// NRI is the set of nri=event.
func NRI(event string) Set { return of(context.Background(), KeyNRI, event) }

// With is s and key=value (replacing a value of key in s).
func (s Set) With(key, value string) Set {
	if s.ctx == nil {
		return s
	}
	return of(s.ctx, key, value)
}

func of(parent context.Context, key, value string) Set {
	return Set{pprof.WithLabels(parent, pprof.Labels(key, value))}
}

// Context is a context carrying s (for pprof.Label).
func (s Set) Context() context.Context {
	if s.ctx == nil {
		return context.Background()
	}
	return s.ctx
}

// Apply puts s on the calling goroutine, replacing its labels, and on the
// goroutines it starts from now on. For a goroutine that is a worker from
// its start to its end.
func (s Set) Apply() {
	if s.ctx != nil {
		pprof.SetGoroutineLabels(s.ctx)
	}
}

// Do runs f with the calling goroutine labelled s, then gives it back the
// labels of ctx (those it had when ctx is the one the goroutine was
// labelled with, or none).
func (s Set) Do(ctx context.Context, f func()) {
	if s.ctx == nil {
		f()
		return
	}
	pprof.SetGoroutineLabels(s.ctx)
	defer pprof.SetGoroutineLabels(ctx)
	f()
}

// Go runs f in a new goroutine labelled worker=name.
func Go(name string, f func()) {
	s := Worker(name)
	go func() {
		s.Apply()
		f()
	}()
}
