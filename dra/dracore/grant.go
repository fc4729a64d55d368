package dracore

import "k8s.io/utils/cpuset"

// Container names the container that shows claim tokens.
type Container struct {
	PodUID, Namespace, Pod, Name string
}

func (c Container) String() string { return c.Namespace + "/" + c.Pod + "/" + c.Name }

// Grant is what a container gets from the claims it shows.
type Grant struct {
	Pool string
	CPUs cpuset.CPUSet
	// Claims names the claims and requests, "namespace/name/request", for
	// messages.
	Claims []string
	// Keys name the requests' memory reservations (numamem.ClaimMemory):
	// the container's memory comes from them first.
	Keys []string
	// Tokens are the claim tokens the container showed, which bind it
	// to their requests once it is placed (the driver's Commit).
	Tokens []string
}

// Pending is a request of a prepared claim that no container has shown
// yet: its CPUs are the claim's until its container starts, and a config
// reload must leave them in their pool (the container's creation would be
// refused otherwise).
type Pending struct {
	// Claim names the claim and request, "namespace/name/request".
	Claim string
	// Pods are the UIDs of the pods the claim is reserved for.
	Pods []string
	Pool string
	CPUs cpuset.CPUSet
}
