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

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

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

func runPhase(ctx context.Context, client kubernetes.Interface, o options, phase string, nodes int) (Phase, error) {
	claims := phase == "claims"
	if !claims && phase != "plain" {
		return Phase{}, fmt.Errorf("unknown phase (plain or claims)")
	}
	ns := o.namespace + "-" + phase
	p := Phase{Phase: phase, Model: o.model, Nodes: nodes, Pods: o.pods}
	if claims {
		p.Release = o.release
		if o.release != releaseTemplate && o.release != releasePrecreated {
			return p, fmt.Errorf("-release %q: template or precreated", o.release)
		}
	}
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return p, err
	}
	if _, err := client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"},
		AutomountServiceAccountToken: ptr.To(false)}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return p, err
	}
	if claims {
		tmpl := claimTemplate(o)
		if _, err := client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
			return p, err
		}
		if o.release == releasePrecreated {
			// With the scheduler running: its claim cache holds them all
			// before the first pod arrives.
			if err := createClaims(ctx, client, o, ns, tmpl.Spec.Spec); err != nil {
				return p, err
			}
			if err := waitClaims(ctx, client, ns, o.pods, o.timeout); err != nil {
				return p, err
			}
		}
	}

	// Bindings are seen through an informer, timed as they arrive.
	var mu sync.Mutex
	bound := map[string]time.Time{}
	reasons := map[string]int{}
	reasonOf := map[string]string{} // pod → its last counted reason
	seen := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if pod.Spec.NodeName == "" {
			for _, c := range pod.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && reasonOf[pod.Name] != c.Message {
					reasonOf[pod.Name] = c.Message
					reasons[shorten(c.Message)]++
				}
			}
			return
		}
		if _, ok := bound[pod.Name]; !ok {
			bound[pod.Name] = time.Now()
		}
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seen, UpdateFunc: func(_, n any) { seen(n) }}); err != nil {
		return p, err
	}
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	if !cache.WaitForCacheSync(stop, inf.HasSynced) {
		return p, errors.New("pod informer did not sync")
	}

	// The scheduler is stopped (SIGSTOP) while the pods, and the claims
	// the controller makes from the template, are created: on 2 cores
	// creating them is slower than scheduling them, and would be measured
	// instead. It resumes with every pod waiting, as the upstream
	// scheduler_perf's pods do.
	var sc *scraper
	var before map[string]map[string]float64
	if o.schedURL != "" {
		var err error
		if sc, err = newScraper(o); err != nil {
			return p, err
		}
		if before, err = sc.scrape(); err != nil {
			return p, err
		}
	}
	if o.schedPID != 0 {
		if err := syscall.Kill(o.schedPID, syscall.SIGSTOP); err != nil {
			return p, fmt.Errorf("stopping the scheduler: %w", err)
		}
		defer syscall.Kill(o.schedPID, syscall.SIGCONT) //nolint:errcheck // resumed below; again on an error path
	}
	created := time.Now()
	if err := createPods(ctx, client, o, ns, claims); err != nil {
		return p, err
	}
	p.Create = time.Since(created).Round(time.Millisecond).String()
	if claims && o.release == releaseTemplate {
		if err := waitClaims(ctx, client, ns, o.pods, o.timeout); err != nil {
			return p, err
		}
	}
	start := time.Now()
	cpu0 := cpuTime(o.schedPID)
	if o.schedPID != 0 {
		if err := syscall.Kill(o.schedPID, syscall.SIGCONT); err != nil {
			return p, fmt.Errorf("resuming the scheduler: %w", err)
		}
	}
	var queue func() Queue
	sampling := make(chan struct{})
	if sc != nil {
		var trace io.Writer
		if o.trace {
			trace = os.Stderr
		}
		queue = sc.watchQueue(before, sampling, time.Second, trace)
	}
	profiled := make(chan error, 1)
	if claims && o.profile != "" {
		go func() { profiled <- profile(o) }()
	} else {
		profiled <- nil
	}
	deadline := start.Add(o.timeout)
	for {
		mu.Lock()
		n := len(bound)
		mu.Unlock()
		if n == o.pods {
			break
		}
		if time.Now().After(deadline) {
			close(sampling)
			return p, fmt.Errorf("%d of %d pods bound after %s; %s", n, o.pods, o.timeout, pendingReason(ctx, client, ns))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if cpu0 > 0 {
		p.CPUms = round1((cpuTime(o.schedPID) - cpu0).Seconds() * 1000 / float64(o.pods))
	}
	close(sampling)
	if queue != nil {
		q := queue()
		p.Queue = &q
	}
	mu.Lock()
	p.Unschedulable = reasons
	times := make([]time.Time, 0, len(bound))
	for _, t := range bound {
		times = append(times, t)
	}
	mu.Unlock()
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	p.Bound = len(times)
	last := times[len(times)-1]
	p.PodsPerSecond = round1(float64(p.Bound) / last.Sub(start).Seconds())
	p.Median = medianPerSecond(times)
	half := times[len(times)/2]
	p.FirstHalf = round1(float64(len(times)/2) / half.Sub(start).Seconds())
	p.SecondHalf = round1(float64(len(times)-len(times)/2) / last.Sub(half).Seconds())
	if err := <-profiled; err != nil {
		fmt.Fprintf(os.Stderr, "schedscale: profiling the scheduler: %v\n", err)
	}
	p.RSSMiB, p.PeakMiB = memory(o.schedPID)

	if claims {
		verdict, err := checkClaims(ctx, client, ns)
		if err != nil {
			return p, err
		}
		p.Check = verdict
	}
	return p, nil
}

// waitClaims waits until the controller made a claim for each pod.
func waitClaims(ctx context.Context, client kubernetes.Interface, ns string, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		cl, err := client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(cl.Items) >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d claims made by the controller after %s", len(cl.Items), n, timeout)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func round1(f float64) float64 { return float64(int64(f*10+0.5)) / 10 }

// medianPerSecond is the median count of bindings in each whole second
// from the first binding to the last (as scheduler_perf's throughput).
func medianPerSecond(times []time.Time) float64 {
	first := times[0]
	secs := int(times[len(times)-1].Sub(first) / time.Second)
	if secs == 0 {
		return float64(len(times))
	}
	counts := make([]int, secs)
	for _, t := range times {
		if i := int(t.Sub(first) / time.Second); i < secs {
			counts[i]++
		}
	}
	slices.Sort(counts)
	if secs%2 == 1 {
		return float64(counts[secs/2])
	}
	return float64(counts[secs/2-1]+counts[secs/2]) / 2
}

// cpuTime is a process's user and system time so far (/proc/PID/stat,
// fields 14 and 15, in clock ticks of 1/100 s on Linux), 0 when unknown.
func cpuTime(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name, field 2, may hold spaces: count from its ')'.
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// memory reads the scheduler's VmRSS and VmHWM in MiB.
func memory(pid int) (rss, peak float64) {
	if pid == 0 {
		return 0, 0
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			rss = round1(kb / 1024)
		case "VmHWM:":
			peak = round1(kb / 1024)
		}
	}
	return rss, peak
}

// claimTemplate asks for o.cpus exclusive CPUs and one NIC on one NUMA
// node, as docs/dra.md's "cpus-near-nic", in the model's form.
func claimTemplate(o options) *resourceapi.ResourceClaimTemplate {
	cpus := resourceapi.DeviceRequest{Name: cpuRequest, Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "cpupool-exclusive"}}
	if o.model == config.DRADevicesCPU {
		cpus.Exactly.AllocationMode = resourceapi.DeviceAllocationModeExactCount
		cpus.Exactly.Count = int64(o.cpus)
	} else {
		cpus.Exactly.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
			"cpupool.dev/cpus": *resource.NewQuantity(int64(o.cpus), resource.DecimalSI)}}
	}
	nic := resourceapi.DeviceRequest{Name: nicRequest, Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "nic", Count: 1,
		AllocationMode: resourceapi.DeviceAllocationModeExactCount}}
	requests := []resourceapi.DeviceRequest{cpus, nic}
	if o.nicFirst {
		requests = []resourceapi.DeviceRequest{nic, cpus}
	}
	return &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: template},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: requests,
			Constraints: []resourceapi.DeviceConstraint{{Requests: []string{cpuRequest, nicRequest},
				MatchAttribute: ptr.To(resourceapi.FullyQualifiedName("resource.kubernetes.io/numaNode"))}},
		}}},
	}
}

// createPods makes o.pods pods, o.workers at a time; with claims each has
// a claim, from the template or precreated.
func createPods(ctx context.Context, client kubernetes.Interface, o options, ns string, claims bool) error {
	return parallel(o.pods, o.workers, func(i int) error {
		_, err := client.CoreV1().Pods(ns).Create(ctx, pod(i, claims, o.release), metav1.CreateOptions{})
		return err
	})
}

// parallel runs do(0) to do(n-1), workers at a time, and returns the first
// error; after one, the items not started are skipped.
func parallel(n, workers int, do func(i int) error) error {
	next := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := do(i); err != nil {
					errs <- err
					for range next {
					}
					return
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	return <-errs
}

func pod(i int, claims bool, release string) *corev1.Pod {
	ctr := corev1.Container{Name: "app", Image: "registry.example/app:1",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}}}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%05d", i)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{ctr}, TerminationGracePeriodSeconds: ptr.To(int64(0))}}
	if claims {
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "dev", ResourceClaimTemplateName: ptr.To(template)}}
		if release == releasePrecreated {
			p.Spec.ResourceClaims[0] = corev1.PodResourceClaim{Name: "dev", ResourceClaimName: ptr.To(claimName(i))}
		}
		p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "dev"}}
	}
	return p
}

func claimName(i int) string { return fmt.Sprintf("claim-%05d", i) }

// createClaims makes the claims of o.pods pods, as the template would,
// o.workers at a time.
func createClaims(ctx context.Context, client kubernetes.Interface, o options, ns string, spec resourceapi.ResourceClaimSpec) error {
	return parallel(o.pods, o.workers, func(i int) error {
		c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: claimName(i)}, Spec: spec}
		if _, err := client.ResourceV1().ResourceClaims(ns).Create(ctx, c, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating claim %s: %w", c.Name, err)
		}
		return nil
	})
}

// shorten keeps a scheduler message's first 160 bytes: enough to tell
// its kind, few enough to count.
func shorten(msg string) string {
	if len(msg) > 160 {
		return msg[:160] + "..."
	}
	return msg
}

// pendingReason counts the pods not bound and gives one's scheduler message.
func pendingReason(ctx context.Context, client kubernetes.Interface, ns string) string {
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName="})
	if err != nil {
		return err.Error()
	}
	for _, p := range pods.Items {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Message != "" {
				return fmt.Sprintf("%d pending, e.g. %s: %s", len(pods.Items), p.Name, c.Message)
			}
		}
	}
	return fmt.Sprintf("%d pending, with no scheduler message", len(pods.Items))
}

// checkClaims checks the namespace's allocations against every slice, then
// that the same check fails on a broken copy of them.
func checkClaims(ctx context.Context, client kubernetes.Interface, ns string) (string, error) {
	sl, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	cl, err := client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	v := check(sl.Items, cl.Items, cpuRequest, nicRequest)
	fmt.Fprintf(os.Stderr, "schedscale: check: %s\n", v)
	if v.Failed() || v.Unallocated > 0 {
		return "FAIL: " + v.String(), nil
	}
	bad, err := broken(sl.Items, cl.Items, cpuRequest, nicRequest)
	if err != nil {
		return "", err
	}
	bv := check(sl.Items, bad, cpuRequest, nicRequest)
	if len(bv.OverAllocated) == 0 || len(bv.Misaligned) == 0 {
		return "FAIL: the check passes a broken copy of the allocations: " + bv.String(), nil
	}
	return fmt.Sprintf("ok: %d claims, 0 over-allocations, 0 misaligned, fullest NUMA node %.0f%%; on a broken copy: %d over-allocations, %d misaligned",
		v.Claims, 100*v.Fullest, len(bv.OverAllocated), len(bv.Misaligned)), nil
}

// cleanup deletes the phase's namespace and waits for its pods (kwok
// deletes them at once) and claims to be gone, so that the next phase
// starts on empty nodes.
func cleanup(ctx context.Context, client kubernetes.Interface, ns string, claims bool) error {
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		// One request for them all, again while some are left: a
		// request that outlives the API server's 60 s limit is cut,
		// its deletions done so far stay.
		if err := client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}, metav1.ListOptions{}); err != nil {
			fmt.Fprintf(os.Stderr, "schedscale: deleting the pods of %s: %v; again\n", ns, err)
		}
		if claims {
			// Precreated claims have no owner for the garbage collector;
			// one still reserved for a pod waits for it to go.
			if err := client.ResourceV1().ResourceClaims(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
				fmt.Fprintf(os.Stderr, "schedscale: deleting the claims of %s: %v; again\n", ns, err)
			}
		}
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return err
		}
		n := len(pods.Items)
		if claims && n == 0 {
			cl, err := client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{Limit: 1})
			if err != nil {
				return err
			}
			n = len(cl.Items)
		}
		if n == 0 {
			return client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("namespace %s: pods or claims still there after 5 minutes", ns)
}

// profile fetches a CPU profile from the scheduler's /debug/pprof.
func profile(o options) error {
	cert, err := tls.LoadX509KeyPair(o.cert, o.key)
	if err != nil {
		return err
	}
	// The scheduler's serving certificate is self-signed, on loopback.
	client := &http.Client{Timeout: time.Duration(o.profileSecs+30) * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true}}} //nolint:gosec // loopback, our own cluster
	resp, err := client.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", o.schedURL, o.profileSecs))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", o.schedURL, resp.Status)
	}
	fh, err := os.Create(o.profile)
	if err != nil {
		return err
	}
	if _, err := io.Copy(fh, resp.Body); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}
