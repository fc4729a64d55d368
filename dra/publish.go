package dra

// Publishing: what the node offers now (the pools less what containers
// hold outside the claims), and the loop that publishes it as
// ResourceSlices whenever the pools or the claims change. How a slice
// looks is slices.go's.

import (
	"context"
	"reflect"

	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/pools"
)

// Resources computes the ResourceSlices of the node as it is now.
func (d *Driver) Resources() resourceslice.DriverResources {
	return Resources(d.nodeName, d.model, d.Offer())
}

// Offer computes the node's slots: the pools, less the CPUs containers
// hold outside any prepared claim.
func (d *Driver) Offer() []Group {
	topo, layout := d.pools.Layout()
	held := map[string]cpuset.CPUSet{}
	for _, pool := range []string{pools.Exclusive, pools.ExclusiveNonIsolcpus} {
		held[pool] = d.pools.Held(pool)
	}
	d.mu.Lock()
	claimed := cpuset.New()
	for _, c := range d.claims {
		claimed = claimed.Union(c.cpus())
	}
	memoryHeld := d.memoryHeldLocked()
	d.mu.Unlock()
	for pool, cpus := range held {
		held[pool] = cpus.Difference(claimed)
	}
	return WithMemoryHeld(Offer(topo, layout, held), d.pools.MemoryOffer(), memoryHeld)
}

// memoryHeldLocked names, by NUMA node, the pool of the device the prepared
// claims that hold some of the node's memory were allocated it on: the
// node's memory stays on that device while they do (WithMemoryHeld). Were
// claims of both pools to hold some (a file from another layout), the
// first pool in pool order keeps it, as the layout's rule would.
func (d *Driver) memoryHeldLocked() map[int]string {
	var out map[int]string
	for _, c := range d.claims {
		for _, r := range c.Requests {
			for _, nm := range r.Memory {
				if cur, ok := out[nm.Node]; ok && (cur == pools.Exclusive || cur == r.Pool) {
					continue
				}
				if out == nil {
					out = map[int]string{}
				}
				out[nm.Node] = r.Pool
			}
		}
	}
	return out
}

// Run publishes the slices whenever the pools or the claims change, until
// ctx ends, once the daemon has synchronized with the runtime (Synced).
// Serve writes the bindings (keepWritten).
func (d *Driver) Run(ctx context.Context, publish func(resourceslice.DriverResources) error) {
	var last []Group
	republish := func() {
		if !d.pools.Synced() {
			// Every CPU would look free: the slices wait for the
			// runtime's first Synchronize, which signals Changed.
			return
		}
		groups := d.Offer()
		if last != nil && reflect.DeepEqual(groups, last) {
			return
		}
		if err := publish(Resources(d.nodeName, d.model, groups)); err != nil {
			d.log.Errorf("DRA: publishing ResourceSlices: %v", err)
			return
		}
		last = groups
	}
	republish()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.pools.Changed():
			republish()
		case <-d.changed:
			republish()
		}
	}
}
