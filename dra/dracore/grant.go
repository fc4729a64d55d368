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
	// Keys name the requests' memory reservations (allocator.ClaimMemory):
	// the container's memory comes from them first.
	Keys []string
}
