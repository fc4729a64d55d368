package main

// One phase: its namespace and claims made ready, the pods created while
// the scheduler is stopped, then timed as they are bound once it resumes,
// and the rates, the scheduler's costs and the check gathered into its
// Phase; and why pods stay pending when the phase times out.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

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
