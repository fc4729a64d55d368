package plugin

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/utils/ptr"

	"github.com/cpupool/nri-cpupool/dra"
	"github.com/cpupool/nri-cpupool/pools"
)

// How many ResourceSlice writes a node's driver makes under pod churn
// (issue 33: the scheduler reads every write of every node). The plugin
// with its driver, as `run` wires them, publishes through the real
// ResourceSlice controller of k8s.io/dynamic-resource-allocation (the one
// the kubelet plugin helper starts) into a fake API server that counts the
// writes. Each cycle is a pod with a claim of 4 CPUs, in the two orders
// the kubelet's calls can come in:
//   - kubelet: the pod's container stops, its sandbox stops, the kubelet
//     unprepares the claim, the pod is removed;
//   - unprepare first: the claim is unprepared while its container still
//     runs (the kubelet unprepares when the pod ends, a moment before its
//     container has stopped), then the container stops and the pod goes.
//
// Every step waits for the publisher to settle, so changes that Run would
// coalesce are each written: an upper bound. The slices offer the pools
// less what containers hold outside claims; the
// scheduler counts the claims' CPUs itself, so a claim's Prepare and
// Unprepare change nothing in the slices. Only CPUs a container holds
// after its claim was unprepared leave the offer, and come back.
func TestDRASliceWritesUnderChurn(t *testing.T) {
	const cycles = 3
	big := testNode{fixture: bigNode.fixture, config: bigNode.config + "\ndra: {enabled: true}\n"}
	type churnCase struct {
		node         testNode
		model, order string
	}
	var cases []churnCase
	for _, model := range dra.Models() {
		for _, order := range []string{"kubelet", "unprepare first"} {
			cases = append(cases, churnCase{xeonDRA, model, order})
		}
		// 1,022 slots: 8 slices in the cpu model.
		cases = append(cases, churnCase{big, model, "unprepare first"})
	}
	for _, tc := range cases {
		model, order := tc.model, tc.order
		{
			t.Run(tc.node.fixture+"/"+model+"/"+order, func(t *testing.T) {
				f := newFakeRuntime(t, false)
				n := &draNode{f: f, cdi: f.dir + "/cdi"}
				n.runningPlugin = startPluginWith(t, f, tc.node, statePath(f), func(rp *runningPlugin) {
					d, err := dra.New(rp.p, dra.Options{NodeName: "node-a", Model: model, ClaimsFile: dra.ClaimsFile(statePath(f)), CDIDir: n.cdi, Log: rp.p.log})
					require.NoError(t, err)
					rp.p.UseClaims(d)
					n.driver = d
				})
				w := startPublishing(t, n.driver)
				// Every slice of the first publication created before
				// anything is counted: on a loaded machine the
				// controller's creations can pause longer than settle's
				// quiet time (seen in CI: 2 of 8 counted as the start).
				require.Eventually(t, func() bool { return w.firstSlices() > 0 && w.count() >= w.firstSlices() }, 30*time.Second, 10*time.Millisecond,
					"the first publication creates the slices")
				initial := w.settle(t)

				before, publishedBefore := w.count(), w.publications()
				offers, last := 0, n.driver.Offer()
				step := func() {
					w.settle(t)
					if now := n.driver.Offer(); !reflect.DeepEqual(now, last) {
						offers++
						last = now
					}
				}
				for i := range cycles {
					uid := fmt.Sprintf("uid-%d", i)
					pod := f.runPod(podSpec{name: "churn-" + uid, namespace: "telco"})
					env := n.prepareModel(t, model, uid, i%2, 4, pod)
					step()
					ctr, _, err := f.createWithEnv(pod, "c", 10, env...)
					require.NoError(t, err)
					step()
					unprepare := func() {
						res, err := n.driver.UnprepareResourceClaims(context.Background(), []kubeletplugin.NamespacedObject{{UID: types.UID(uid)}})
						require.NoError(t, err)
						require.NoError(t, res[types.UID(uid)])
						step()
					}
					if order == "unprepare first" {
						unprepare()
					}
					f.stopContainer(ctr)
					step()
					if order == "kubelet" {
						f.stopPod(pod)
						step()
						unprepare()
					}
					f.removePod(pod)
					step()
				}
				writes, published := w.count()-before, w.publications()-publishedBefore
				t.Logf("%s, %s, %s: %d writes to create the slices, then %d ResourceSlice writes (%d changes of the offer between steps, %d published) in %d pod cycles: %.1f a pod; all writes by verb: %s",
					tc.node.fixture, model, order, initial, writes, offers, published, cycles, float64(writes)/cycles, w.byVerb())
				report(t, tc.node.fixture+", "+model, order, initial, writes, cycles)
				switch {
				case order == "kubelet":
					assert.Zero(t, writes, "the kubelet's order changes nothing the scheduler does not count itself")
				case model == dra.ModelNUMANode:
					assert.Equal(t, 2*cycles, offers, "the CPUs out of the offer and back: twice a pod")
					assert.GreaterOrEqual(t, published, offers, "every change between steps was published")
					// One slice, so one write an offer published, as a quiet
					// machine shows; but the controller is upstream's, and
					// once in CI under load it wrote 7 times for 6 offers
					// (which verb was not recorded then; the log now says).
					assert.LessOrEqual(t, writes, 2*published, "at most two writes an offer published")
				default:
					// The slots are renamed 0..n-1 when their count
					// changes and shift across the slices: a change
					// writes each slice, and some are replaced (seen:
					// 2.3 writes a pod on one slice, 24 on 8 slices). The
					// bound counts the offers the driver published, not
					// the changes seen between steps: on a loaded machine
					// the publisher also takes an offer of the middle of
					// a step (seen in CI: 38 writes for 6 changes between
					// steps on 8 slices), which is published and written
					// like any other.
					assert.LessOrEqual(t, writes, 2*initial*published, "at most every slice replaced at each offer published")
					assert.GreaterOrEqual(t, published, offers, "every change between steps was published")
				}
			})
		}
	}
}

// prepareModel prepares a claim the scheduler allocated in a model: cpus
// CPUs of the exclusive pool on a NUMA node, reserved for pods.
func (n *draNode) prepareModel(t testing.TB, model, uid string, numa, cpus int, pods ...*api.PodSandbox) []string {
	t.Helper()
	claim := n.claim(uid, numa, cpus, pods...)
	if model == dra.ModelCPU {
		var results []resourceapi.DeviceRequestAllocationResult
		for i := range cpus {
			results = append(results, resourceapi.DeviceRequestAllocationResult{Request: "cpus", Driver: dra.DriverName, Pool: "node-a",
				Device: dra.SlotName(pools.Exclusive, numa, i)})
		}
		claim.Status.Allocation.Devices.Results = results
	}
	res, err := n.driver.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{claim})
	require.NoError(t, err)
	require.NoError(t, res[claim.UID].Err)
	return n.cdiEnv(t, uid)
}

// sliceWrites counts the creates, updates and deletes of ResourceSlices
// that the driver's publisher makes, and the offers the driver handed it
// after the first (published).
type sliceWrites struct {
	mu        sync.Mutex
	n         int
	verbs     map[string]int // n by verb, for the log
	published int
	// first is the number of slices of the first publication, which the
	// controller creates one by one.
	first int
}

// firstSlices is the number of slices of the driver's first publication.
func (w *sliceWrites) firstSlices() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.first
}

// publications is how many offers the driver handed the controller after
// its first: each is a change of the offer the controller writes.
func (w *sliceWrites) publications() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.published
}

// byVerb is how many writes of each verb were made, as text.
func (w *sliceWrites) byVerb() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return fmt.Sprint(w.verbs)
}

func (w *sliceWrites) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// settle waits until no write came for 100 ms (the controller syncs 10 ms
// after a change), and returns the count.
func (w *sliceWrites) settle(t testing.TB) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	last, since := w.count(), time.Now()
	for time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		if now := w.count(); now != last {
			last, since = now, time.Now()
		} else if time.Since(since) > 100*time.Millisecond {
			return now
		}
	}
	t.Fatal("the slices' writes did not settle in 10 s")
	return 0
}

// startPublishing runs the driver's Run with the ResourceSlice controller
// the kubelet plugin helper uses (PublishResources), on a fake clientset.
func startPublishing(t *testing.T, d *dra.Driver) *sliceWrites {
	t.Helper()
	w := &sliceWrites{verbs: map[string]int{}}
	client := fake.NewClientset()
	client.PrependReactor("*", "resourceslices", func(a k8stesting.Action) (bool, runtime.Object, error) {
		switch a.GetVerb() {
		case "create", "update", "patch", "delete":
			w.mu.Lock()
			w.n++
			w.verbs[a.GetVerb()]++
			// The fake API server does not fill in generateName.
			if c, ok := a.(k8stesting.CreateAction); ok {
				if s, ok := c.GetObject().(*resourceapi.ResourceSlice); ok && s.Name == "" {
					s.Name = fmt.Sprintf("%s%d", s.GenerateName, w.n)
				}
			}
			w.mu.Unlock()
		}
		return false, nil, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	var ctrl *resourceslice.Controller
	var mu sync.Mutex
	publish := func(r resourceslice.DriverResources) error {
		mu.Lock()
		defer mu.Unlock()
		if ctrl != nil {
			w.mu.Lock()
			w.published++
			w.mu.Unlock()
			ctrl.Update(&r)
			return nil
		}
		w.mu.Lock()
		for _, pool := range r.Pools {
			w.first += len(pool.Slices)
		}
		w.mu.Unlock()
		var err error
		ctrl, err = resourceslice.StartController(ctx, resourceslice.Options{DriverName: dra.DriverName, KubeClient: client,
			Owner: &resourceslice.Owner{APIVersion: "v1", Kind: "Node", Name: "node-a", UID: "node-a-uid"}, Resources: &r,
			SyncDelay:    ptr.To(10 * time.Millisecond),
			ErrorHandler: func(_ context.Context, err error, msg string) { t.Logf("ResourceSlice controller: %s: %v", msg, err) }})
		return err
	}
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx, publish) }()
	t.Cleanup(func() {
		cancel()
		<-done
		mu.Lock()
		if ctrl != nil {
			ctrl.Stop()
		}
		mu.Unlock()
	})
	return w
}

// report adds the figures to CPUPOOL_PROPERTY_REPORT (make unit prints it).
func report(t *testing.T, model, order string, initial, writes, cycles int) {
	path := os.Getenv("CPUPOOL_PROPERTY_REPORT")
	if path == "" {
		return
	}
	fh, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Logf("report: %v", err)
		return
	}
	defer fh.Close()
	fmt.Fprintf(fh, "DRA slice writes under churn (%s, %s): %d to publish, then %d in %d pod cycles\n",
		model, strings.ReplaceAll(order, " ", "-"), initial, writes, cycles)
}
