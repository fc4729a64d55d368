package plugin

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDRARefusedCreationTakesNoClaim: a creation refused after its claims
// were looked up (here by the policy: an annotation asks for a NUMA node,
// which the claim's CPUs decide) binds nothing, as a refused creation with
// a kubelet grant binds nothing. Were the request bound at the lookup, the
// container that never ran would own it, and the other pod the claim is
// reserved for would be refused for as long as the claim is prepared.
func TestDRARefusedCreationTakesNoClaim(t *testing.T) {
	f := newFakeRuntime(t, false)
	n := startDRA(t, f)
	owner := f.runPod(podSpec{name: "owner", namespace: "telco"})
	// Reserved for both pods (a resourceClaimName claim), as in
	// TestDRABindingLostToAKillIsMadeAgainAtSynchronize.
	other := f.runPod(podSpec{name: "other", namespace: "telco", annotations: map[string]string{"numa.cpupool.dev": "0"}})
	env := n.prepare(t, "uid-1", 1, 2, owner, other)
	_, _, err := f.createWithEnv(other, "app", 10, env...)
	require.ErrorContains(t, err, "the CPUs come from the container's ResourceClaim", "refused by the policy, after the claim was attached")
	if r := n.driver.Claims()["uid-1"].Requests["cpus"]; r.PodUID != "" {
		t.Errorf("the refused container %s/%s owns the claim's request (pod %s, container %s): it never ran", other.Namespace, other.Name, r.PodUID, r.Container)
	}
	_, _, err = f.createWithEnv(owner, "app", 10, env...)
	if err != nil {
		t.Errorf("the claim's other pod cannot use it after a refused creation took it: %v", err)
	}
}

// TestDRARefusedCreationLendsNoClaimMemory: the memory of a claim is lent
// to the container being placed (its decision counts the container's
// hugepages from the reservation first), and a creation refused after that
// gives it back: the reservation is bound to no container, in the
// allocator and in the plugin's own copy that every new allocator counts
// again.
func TestDRARefusedCreationLendsNoClaimMemory(t *testing.T) {
	f := newFakeRuntime(t, false)
	n := startDRAOn(t, f, vmHugePagesDRA)
	pod := f.runPod(podSpec{name: "a", namespace: "telco", qos: "besteffort", annotations: map[string]string{"numa.cpupool.dev": "0"}})
	env, err := n.prepareHugePages(t, "uid-a", 1, 1, 16, pod)
	require.NoError(t, err)
	withHugePages(f, 16)
	_, _, err = f.createWithEnv(pod, "fwd", 10, env...)
	require.ErrorContains(t, err, "the CPUs come from the container's ResourceClaim", "refused by the policy, after the claim was looked up")
	n.p.mu.Lock()
	res := n.p.alloc.ClaimReservations()["uid-a/cpus"]
	kept := n.p.claimMemory["uid-a/cpus"]
	n.p.mu.Unlock()
	if res.PodUID != "" || res.Container != "" || kept.PodUID != "" || kept.Container != "" {
		t.Errorf("the reservation of claim uid-a is still lent to the refused container: allocator %s/%s, plugin %s/%s", res.PodUID, res.Container, kept.PodUID, kept.Container)
	}
	require.Equal(t, pagesOn1(16, 0), n.memoryUse(), "the claim's pages stay reserved, once")
}
