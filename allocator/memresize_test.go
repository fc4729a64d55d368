package allocator

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/numamem"
	"github.com/cpupool/nri-cpupool/pools"
)

// TestResizeMemory is an in-place resize of a running container's memory
// limit (issue 41, item 6) on the 2-node VM (4 GiB a node, node 1's 32
// pages of 2 MiB part of it): the new limit is counted in place of the old,
// on the nodes of its mems, which never change (its memory never moves);
// a growth its nodes cannot hold is counted there anyway with a warning, as
// a limit no set of nodes holds at a creation is; a shrink gives back from
// the last nodes first; its hugepages stay as they are.
func TestResizeMemory(t *testing.T) {
	const mib = int64(1) << 20
	type step struct {
		id    string
		limit int64
		held  []numamem.NodeMemory // the container's, after the step
		warn  string
		noop  bool
		err   string
	}
	cases := []struct {
		name  string
		setup func(t *testing.T, a *Allocator)
		steps []step
	}{
		{
			name: "grows and shrinks on its node, hugepages kept",
			setup: func(t *testing.T, a *Allocator) {
				res, err := a.Allocate(withMemory("a", 1, 64*mib, numamem.Pages{SizeKB: kb2M, Count: 16}))
				require.NoError(t, err)
				require.Equal(t, "1", res.Assignment.Mems.String())
			},
			steps: []step{
				{id: "a", limit: 3 * gib, held: []numamem.NodeMemory{{Node: 1, Memory: 3 * gib, HugePages: []numamem.Pages{{SizeKB: kb2M, Count: 16}}}}},
				{id: "a", limit: 3 * gib, noop: true, held: []numamem.NodeMemory{{Node: 1, Memory: 3 * gib, HugePages: []numamem.Pages{{SizeKB: kb2M, Count: 16}}}}},
				// 4 GiB − 64 MiB of pages: 960 MiB are left for it to grow.
				{id: "a", limit: 5 * gib, held: []numamem.NodeMemory{{Node: 1, Memory: 5 * gib, HugePages: []numamem.Pages{{SizeKB: kb2M, Count: 16}}}},
					warn: "memory: asked 2Gi, free node1 960Mi"},
				{id: "a", limit: 512 * mib, held: []numamem.NodeMemory{{Node: 1, Memory: 512 * mib, HugePages: []numamem.Pages{{SizeKB: kb2M, Count: 16}}}}},
				{id: "a", limit: 0, held: []numamem.NodeMemory{{Node: 1, HugePages: []numamem.Pages{{SizeKB: kb2M, Count: 16}}}}},
			},
		},
		{
			name: "no memory counted before: counted from now on, on its CPUs' node",
			setup: func(t *testing.T, a *Allocator) {
				res, err := a.Allocate(exclusive("a", 1))
				require.NoError(t, err)
				require.Equal(t, "0", res.Assignment.Mems.String())
			},
			steps: []step{
				{id: "a", limit: gib, held: []numamem.NodeMemory{{Node: 0, Memory: gib}}},
				{id: "a", limit: 0, held: nil},
			},
		},
		{
			name: "mems over two nodes: grows on its CPUs' node first, shrinks from the other first",
			setup: func(t *testing.T, a *Allocator) {
				// Node 1's CPUs are taken: CPUs on node 0, pages from node
				// 1, its memory limit on its CPUs' node.
				_, err := a.Allocate(exclusive("full", 2))
				require.NoError(t, err)
				res, err := a.Allocate(withMemory("a", 1, 3*gib, numamem.Pages{SizeKB: kb2M, Count: 32}))
				require.NoError(t, err)
				require.Equal(t, "0-1", res.Assignment.Mems.String())
				require.Equal(t, []numamem.NodeMemory{{Node: 0, Memory: 3 * gib}, {Node: 1, HugePages: []numamem.Pages{{SizeKB: kb2M, Count: 32}}}}, res.Assignment.Memory)
			},
			steps: []step{
				{id: "a", limit: 5 * gib, held: []numamem.NodeMemory{{Node: 0, Memory: 4 * gib}, {Node: 1, Memory: gib, HugePages: []numamem.Pages{{SizeKB: kb2M, Count: 32}}}}},
				{id: "a", limit: 3584 * mib, held: []numamem.NodeMemory{{Node: 0, Memory: 3584 * mib}, {Node: 1, HugePages: []numamem.Pages{{SizeKB: kb2M, Count: 32}}}}},
			},
		},
		{
			name: "mems the runtime runs it with, without its CPUs' node: counted there",
			setup: func(t *testing.T, a *Allocator) {
				// CPU 1 is on node 0; the runtime runs it with mems 1.
				res, how, err := a.Adopt(exclusive("a", 1), set(t, "1"), set(t, "1"))
				require.NoError(t, err)
				require.Equal(t, StaysWhereItRuns, how)
				require.Equal(t, "1", res.Assignment.Mems.String())
			},
			steps: []step{
				{id: "a", limit: gib, held: []numamem.NodeMemory{{Node: 1, Memory: gib}}},
				{id: "a", limit: 5 * gib, held: []numamem.NodeMemory{{Node: 1, Memory: 5 * gib}}, warn: "asked 4Gi, free node1 3008Mi"},
			},
		},
		{
			name:  "unknown container",
			setup: func(*testing.T, *Allocator) {},
			steps: []step{{id: "gone", limit: gib, err: "container gone is not known"}},
		},
		{
			name: "shared and infra members count no memory",
			setup: func(t *testing.T, a *Allocator) {
				r := exclusive("s", 0)
				r.Pool = pools.Infra
				_, err := a.Allocate(r)
				require.NoError(t, err)
			},
			steps: []step{{id: "s", limit: gib, noop: true}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newAllocator(t, "vm-2numa-hugepages", `pools: {exclusive: {cpus: "1-3"}}`)
			tc.setup(t, a)
			for i, s := range tc.steps {
				before, _ := a.Get(s.id)
				res, changed, err := a.ResizeMemory(s.id, s.limit)
				if s.err != "" {
					require.ErrorContains(t, err, s.err, "step %d", i)
					continue
				}
				require.NoError(t, err, "step %d", i)
				assert.Equal(t, !s.noop, changed, "step %d", i)
				assert.Equal(t, s.held, res.Assignment.Memory, "step %d", i)
				got, _ := a.Get(s.id)
				assert.Equal(t, s.held, got.Memory, "step %d: the allocator's record", i)
				assert.Equal(t, before.Mems, got.Mems, "step %d: its mems never change", i)
				assert.Equal(t, before.CPUs, got.CPUs, "step %d", i)
				if s.warn != "" {
					assert.Contains(t, res.Warning, s.warn, "step %d", i)
				} else {
					assert.Empty(t, res.Warning, "step %d", i)
				}
				checkMemoryAccount(t, a)
			}
		})
	}
}

// TestResizeMemoryOfAClaimsContainer: a container bound to a DRA claim
// takes its memory from the claim's reservation first, after a resize as
// at its creation: a growth within the reservation adds nothing to the
// node's count, one beyond it adds only what exceeds it, with no warning
// while the node has it; a shrink gives the reservation its part back.
func TestResizeMemoryOfAClaimsContainer(t *testing.T) {
	a := newAllocator(t, "vm-2numa-hugepages", `pools: {exclusive: {cpus: "1-3"}}`)
	req := withMemory("a", 1, gib)
	res, err := a.Allocate(req)
	require.NoError(t, err)
	node := res.Assignment.Memory[0].Node
	_, err = a.ReserveClaim(numamem.ClaimMemory{Key: "claim/r", PodUID: req.Pod.UID, Container: req.Container, Held: []numamem.NodeMemory{{Node: node, Memory: 2 * gib}}}, nil, false)
	require.NoError(t, err)
	onNode := func(memory int64) []numamem.NodeMemoryUse {
		return []numamem.NodeMemoryUse{{Node: node, Memory: memory, HugePages: map[int64]int64{}}}
	}
	require.Equal(t, onNode(2*gib), a.MemoryUse(), "the claim's 2 GiB, its container's 1 GiB among them")
	// Another claim takes the rest of the node (4 GiB).
	_, err = a.ReserveClaim(numamem.ClaimMemory{Key: "other/r", Held: []numamem.NodeMemory{{Node: node, Memory: 2 * gib}}}, nil, false)
	require.NoError(t, err)

	for _, s := range []struct {
		limit, use int64
		warn       string
	}{
		{limit: 2 * gib, use: 4 * gib},
		{limit: 3 * gib, use: 5 * gib, warn: "memory: asked 1Gi, free node" + fmt.Sprint(node) + " 0"},
		{limit: gib / 2, use: 4 * gib},
	} {
		res, changed, err := a.ResizeMemory("a", s.limit)
		require.NoError(t, err)
		require.True(t, changed)
		if s.warn == "" {
			assert.Empty(t, res.Warning, "limit %s: within its claim", numamem.Bytes(s.limit))
		} else {
			assert.Contains(t, res.Warning, s.warn)
		}
		assert.Equal(t, []numamem.NodeMemory{{Node: node, Memory: s.limit}}, res.Assignment.Memory)
		assert.Equal(t, onNode(s.use), a.MemoryUse(), "limit %s", numamem.Bytes(s.limit))
	}
}
