package dra

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/numamem"
)

// Claim is a prepared ResourceClaim: its requests of this driver and the
// pods it is reserved for.
type Claim struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Pods are the UIDs of the pods the claim was reserved for at Prepare
	// (status.reservedFor); only their containers may use it.
	Pods     []string            `json:"pods"`
	Requests map[string]*Request `json:"requests"`
	// Unanswered is set when a request is (Request.Unanswered), and
	// written so for a daemon of the release before, which reads only
	// this mark. A file of that release marks no request: its claim's
	// mark stands for every request (see loadMarks). Absent (false) in
	// files of older versions, whose claims were all answered or taken
	// back.
	Unanswered bool `json:"unanswered,omitempty"`
}

// Request is what one request of a claim got: CPUs of one pool, and once a
// container showed its token, that container.
type Request struct {
	Pool string `json:"pool"`
	// Slots counts the devices the scheduler allocated, by NUMA node; a
	// Prepare with other counts is a new allocation of the claim.
	Slots map[int]int `json:"slots"`
	CPUs  string      `json:"cpus"`
	// Memory is the memory and hugepages the scheduler allocated with the
	// CPUs (the consumed capacities cpupool.dev/memory and
	// cpupool.dev/hugepages<size>), by node, reserved from Prepare to
	// Unprepare; absent in files of older versions, which reserved none.
	Memory []NodeMemory `json:"memory,omitempty"`
	Token  string       `json:"token"`
	// PodUID and Container name the container bound to the request.
	PodUID    string `json:"podUID,omitempty"`
	Container string `json:"container,omitempty"`
	// Unanswered marks a request whose token is not known to have
	// reached the kubelet: set when a Prepare places it (the write
	// before its last look), kept while a Prepare keeps it, cleared when
	// a Prepare of the claim is answered or a container shows a token
	// that proves it (see answeredBy). A kill -9 before that leaves it,
	// and the restarted driver holds the request unconfirmed (see
	// PreparedOn, running).
	Unanswered bool `json:"unanswered,omitempty"`
	// Prepare numbers the claim's Prepare that made the token: 1 for
	// the first, and one more than any request of the record before for
	// each Prepare that places a request anew (see nextPrepare). 0
	// (absent) in files of older releases.
	Prepare uint64 `json:"prepare,omitempty"`
	// cpus is CPUs parsed, once.
	cpus *cpuset.CPUSet
}

// CPUSet returns the request's CPUs.
func (r *Request) CPUSet() cpuset.CPUSet {
	if r.cpus == nil {
		s, err := cpuset.Parse(r.CPUs)
		if err != nil {
			s = cpuset.New()
		}
		r.cpus = &s
	}
	return *r.cpus
}

func (r *Request) clone() *Request {
	c := *r
	c.Slots = maps.Clone(r.Slots)
	c.Memory = slices.Clone(r.Memory)
	for i := range c.Memory {
		c.Memory[i].HugePages = maps.Clone(r.Memory[i].HugePages)
	}
	return &c
}

// NodeMemory is what a request reserves of one NUMA node.
type NodeMemory struct {
	Node int `json:"node"`
	// Memory is in bytes.
	Memory int64 `json:"memory,omitempty"`
	// HugePages are pages by page size in KiB.
	HugePages map[int64]int64 `json:"hugePagesKB,omitempty"`
}

// held is the request's memory as the allocator counts it.
func (r *Request) held() []numamem.NodeMemory {
	out := make([]numamem.NodeMemory, 0, len(r.Memory))
	for _, nm := range r.Memory {
		am := numamem.NodeMemory{Node: nm.Node, Memory: nm.Memory}
		for _, size := range slices.Sorted(maps.Keys(nm.HugePages)) {
			if n := nm.HugePages[size]; n > 0 {
				am.HugePages = append(am.HugePages, numamem.Pages{SizeKB: size, Count: n})
			}
		}
		out = append(out, am)
	}
	return out
}

// memoryKey names a request's reservation (numamem.ClaimMemory.Key).
func memoryKey(claimUID, request string) string { return claimUID + "/" + request }

// reservation is what a request of a claim reserves.
func (r *Request) reservation(claimUID, request string) numamem.ClaimMemory {
	return numamem.ClaimMemory{Key: memoryKey(claimUID, request), PodUID: r.PodUID, Container: r.Container, Held: r.held()}
}

func (c *Claim) clone() *Claim {
	out := *c
	out.Pods = slices.Clone(c.Pods)
	out.Requests = make(map[string]*Request, len(c.Requests))
	for name, r := range c.Requests {
		out.Requests[name] = r.clone()
	}
	return &out
}

// unanswered tells whether a request of the claim is marked unanswered.
func (c *Claim) unanswered() bool {
	for _, r := range c.Requests {
		if r.Unanswered {
			return true
		}
	}
	return false
}

// answerAll clears every request's mark: a Prepare of the claim was
// answered, with every request's token.
func (c *Claim) answerAll() {
	for _, r := range c.Requests {
		r.Unanswered = false
	}
}

// answeredBy clears the marks a container showing request name's token
// proves answered, and tells whether it cleared one. The container got
// the token from a CDI spec the driver writes only once a Prepare passed
// its last look, one of the Prepares from the one that made the token to
// the latest (a token is kept, unchanged, by each Prepare until one
// places its request anew). Every request whose token is as old or
// older was in each of them, with that token: it reached the kubelet
// too. A request whose token is newer may not have: a container showing
// a kept request's old token proves nothing of a later Prepare.
func (c *Claim) answeredBy(name string) bool {
	shown := c.Requests[name]
	if shown == nil {
		return false
	}
	cleared := false
	for _, r := range c.Requests {
		if r.Unanswered && r.Prepare <= shown.Prepare {
			r.Unanswered = false
			cleared = true
		}
	}
	return cleared
}

// nextPrepare numbers a Prepare of the claim whose record was c (nil:
// none) that places a request anew (see Request.Prepare). It does not
// wrap: numbers are read from the file up to maxPrepare only, and one
// more per Prepare never reaches the uint64 limit.
func (c *Claim) nextPrepare() uint64 {
	var most uint64
	if c != nil {
		for _, r := range c.Requests {
			most = max(most, r.Prepare)
		}
	}
	return most + 1
}

// loadMarks reads the marks of a claim loaded from the file: a file of
// the release before marks the claim only, and its mark stands for every
// request, as that release read it (any container binding one answers
// them all: their Prepare numbers are all 0).
func (c *Claim) loadMarks() {
	if c.Unanswered && !c.unanswered() {
		for _, r := range c.Requests {
			r.Unanswered = true
		}
	}
}

// cpus returns every CPU of the claim.
func (c *Claim) cpus() cpuset.CPUSet {
	out := cpuset.New()
	for _, r := range c.Requests {
		out = out.Union(r.CPUSet())
	}
	return out
}

// EnvName is the variable a request's CDI spec sets.
func EnvName(claimUID, request string) string {
	repl := strings.NewReplacer("-", "_", ".", "_")
	return EnvPrefix + repl.Replace(claimUID) + "_" + repl.Replace(request)
}

func newToken() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // never fails on Linux
	}
	return hex.EncodeToString(b)
}
