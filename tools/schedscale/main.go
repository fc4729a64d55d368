// Command schedscale measures the scheduler on a cluster of kwok nodes
// that carry the cpupool.dev slices of real fixture shapes and a NIC
// driver's devices (test/k8s/scale.sh makes it; issue 33). In one run it
// schedules the same pods twice: without claims, then each with a claim
// for CPUs on a NIC's NUMA node (matchAttribute
// resource.kubernetes.io/numaNode), made before the pods (-release
// precreated) or by the resourceclaim controller from a template. For each phase it prints the pods bound
// per second, and the scheduler's memory from /proc; after the claims phase
// it checks the allocations themselves (check), and that the check fails on
// a broken copy of them (broken). It prints one JSON line per phase for
// the script to collect:
//
//	schedscale -kubeconfig K -pods 2000 -model numaNode -scheduler-pid PID
package main

// This file is the command's flags, its output (Phase) and the run of
// the phases; one phase's measurement is phase.go's, what it creates and
// deletes workload.go's, what it reads of the scheduler process
// scheduler.go's and metrics.go's, and the check of the allocations
// check.go's.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/dra/dracore"
)

const (
	cpuRequest = "cpus"
	nicRequest = "nic"
	template   = "cpus-near-nic"
)

type options struct {
	pods      int
	cpus      int
	model     string
	schedPID  int
	timeout   time.Duration
	workers   int
	nicFirst  bool
	namespace string
	// profile, when set, receives a CPU profile of the scheduler
	// (profileSecs long, from its resumption) in the claims phase, read
	// from schedURL's /debug/pprof with the client certificate.
	profile, schedURL, cert, key string
	profileSecs                  int
	// release is how a claims phase's claims come to be: "template"
	// (the resourceclaim controller makes them from the template as the
	// pods appear) or "precreated" (made before the pods, named by them).
	release string
	// trace prints the scheduler's queues every sample to stderr.
	trace bool
}

const (
	releaseTemplate   = "template"
	releasePrecreated = "precreated"
)

// Phase is one phase's figures, printed as a JSON line.
type Phase struct {
	Phase  string `json:"phase"`
	Model  string `json:"model"`
	Nodes  int    `json:"nodes"`
	Pods   int    `json:"pods"`
	Bound  int    `json:"bound"`
	Create string `json:"create"` // how long creating the pods took
	// PodsPerSecond is the pods bound over the time from the scheduler's
	// resumption, with all of them waiting, to the last binding; Median is
	// the median of the bindings counted in each whole second between the
	// first binding and the last.
	PodsPerSecond float64 `json:"podsPerSecond"`
	Median        float64 `json:"medianPerSecond"`
	// FirstHalf and SecondHalf are the rates of the first half of the
	// bindings (from the resumption) and of the second.
	FirstHalf  float64 `json:"firstHalfPerSecond"`
	SecondHalf float64 `json:"secondHalfPerSecond"`
	// RSSMiB and PeakMiB are the scheduler's VmRSS and VmHWM after the phase.
	RSSMiB  float64 `json:"schedulerRSSMiB"`
	PeakMiB float64 `json:"schedulerPeakMiB"`
	// CPUms is the scheduler's CPU time (user and system, /proc) from its
	// resumption to the last binding, per pod bound: what a pod costs it,
	// whatever share of the shared cores it got.
	CPUms float64 `json:"schedulerCPUmsPerPod,omitempty"`
	Check string  `json:"check,omitempty"`
	// Release is the claims phase's release (options.release).
	Release string `json:"release,omitempty"`
	// Queue is what the scheduler's metrics say of the phase, when its
	// port is given; Unschedulable counts the scheduler's reasons for pods
	// it found unschedulable (PodScheduled false), once per pod and reason.
	Queue         *Queue         `json:"queue,omitempty"`
	Unschedulable map[string]int `json:"unschedulable,omitempty"`
}

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster")
	var o options
	flag.IntVar(&o.pods, "pods", 100, "pods per phase")
	flag.IntVar(&o.cpus, "cpus", 2, "exclusive CPUs a claim asks for")
	flag.StringVar(&o.model, "model", config.DRADevicesNUMANode, "the slices' device model (numaNode or cpu): how the template asks for CPUs")
	flag.IntVar(&o.schedPID, "scheduler-pid", 0, "kube-scheduler's pid, for its memory")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "how long a phase may take")
	flag.IntVar(&o.workers, "workers", 8, "goroutines creating pods")
	flag.BoolVar(&o.nicFirst, "nic-first", true, "put the NIC request before the CPU request in the template (docs/dra.md: the cpu model's search)")
	flag.StringVar(&o.namespace, "namespace", "scale", "namespace prefix")
	flag.StringVar(&o.profile, "profile", "", "write a CPU profile of the scheduler in the claims phase to this file")
	flag.IntVar(&o.profileSecs, "profile-seconds", 20, "how long the profile runs")
	flag.StringVar(&o.schedURL, "scheduler-url", "", "the scheduler's secure port, https://127.0.0.1:PORT")
	flag.StringVar(&o.cert, "cert", "", "client certificate for the scheduler's port")
	flag.StringVar(&o.key, "key", "", "its key")
	flag.StringVar(&o.release, "release", releasePrecreated, "how the claims come to be: precreated (made before the pods, which name them) or template (the resourceclaim controller makes them as the pods appear; released at once, every pod waits gated for its claim)")
	flag.BoolVar(&o.trace, "trace", false, "print the scheduler's queues every second to stderr")
	phases := flag.String("phases", "plain,claims", "phases to run, in order")
	flag.Parse()
	if err := run(*kubeconfig, o, strings.Split(*phases, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "schedscale:", err)
		os.Exit(1)
	}
}

func run(kubeconfig string, o options, phases []string) error {
	// In the cpu model a CPU is one allocation result: the scheduler
	// refuses a claim of more than the API's 32, and every pod would wait.
	if o.model == config.DRADevicesCPU && o.cpus > dracore.MaxResultsPerClaim {
		return fmt.Errorf("-cpus %d: in the %s model a claim gets at most %d CPUs (the API's %d allocation results per claim); use -model %s",
			o.cpus, o.model, dracore.MaxResultsPerClaim, dracore.MaxResultsPerClaim, config.DRADevicesNUMANode)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 2000, 4000
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx := context.Background()
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "type=kwok"})
	if err != nil {
		return err
	}
	ready := 0
	for _, n := range nodes.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	if ready == 0 {
		return errors.New("no Ready kwok node")
	}
	fmt.Fprintf(os.Stderr, "schedscale: %d kwok nodes, %d Ready\n", len(nodes.Items), ready)
	failed := false
	for i, ph := range phases {
		p, err := runPhase(ctx, client, o, ph, ready)
		if err != nil {
			return fmt.Errorf("phase %s: %w", ph, err)
		}
		line, _ := json.Marshal(p)
		fmt.Println(string(line))
		failed = failed || strings.HasPrefix(p.Check, "FAIL")
		if i < len(phases)-1 {
			if err := cleanup(ctx, client, o.namespace+"-"+ph, ph == "claims"); err != nil {
				return err
			}
		}
	}
	if failed {
		return errors.New("the allocations broke a rule (see check)")
	}
	return nil
}
