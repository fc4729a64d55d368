package main

// What a phase creates and deletes: the claim template (CPUs on a NIC's
// NUMA node), the claims made before the pods (-release precreated), the
// pods, in parallel, and the namespace's cleanup.

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/cpupool/nri-cpupool/config"
)

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
