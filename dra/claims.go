package dra

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/allocator"
)

// EnvPrefix starts the environment variable that the CDI spec of a prepared
// request sets: CPUPOOL_CLAIM_<claim uid>_<request>=<token>. The token is
// random and remembered with the CPUs it stands for, so the CPUs come from
// the daemon's memory, never from the container: a variable written by
// hand carries no known token and gets nothing.
const EnvPrefix = "CPUPOOL_CLAIM_"

// maxTokenValue bounds what is parsed of a tenant-visible value.
const maxTokenValue = 64

// Claim is a prepared ResourceClaim: its requests of this driver and the
// pods it is reserved for.
type Claim struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Pods are the UIDs of the pods the claim was reserved for at Prepare
	// (status.reservedFor); only their containers may use it.
	Pods     []string            `json:"pods"`
	Requests map[string]*Request `json:"requests"`
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
func (r *Request) held() []allocator.NodeMemory {
	out := make([]allocator.NodeMemory, 0, len(r.Memory))
	for _, nm := range r.Memory {
		am := allocator.NodeMemory{Node: nm.Node, Memory: nm.Memory}
		for _, size := range slices.Sorted(maps.Keys(nm.HugePages)) {
			if n := nm.HugePages[size]; n > 0 {
				am.HugePages = append(am.HugePages, allocator.Pages{SizeKB: size, Count: n})
			}
		}
		out = append(out, am)
	}
	return out
}

// memoryKey names a request's reservation (allocator.ClaimMemory.Key).
func memoryKey(claimUID, request string) string { return claimUID + "/" + request }

// reservation is what a request of a claim reserves.
func (r *Request) reservation(claimUID, request string) allocator.ClaimMemory {
	return allocator.ClaimMemory{Key: memoryKey(claimUID, request), PodUID: r.PodUID, Container: r.Container, Held: r.held()}
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

// Tokens finds the claim tokens in a container's environment: the values
// of every variable named EnvPrefix…, as the runtime applied the CDI specs
// the kubelet named. A variable set twice (by the pod spec as well as by
// CDI) and a value longer than a token are errors; values are bounded
// before anything else looks at them.
func Tokens(env []string) ([]string, error) {
	var tokens []string
	seen := map[string]bool{}
	for _, e := range env {
		if !strings.HasPrefix(e, EnvPrefix) {
			continue
		}
		k, v, _ := strings.Cut(e, "=")
		if seen[k] {
			return nil, fmt.Errorf("%s is set more than once; it is set by the %s driver for the container's claims and must not be set in the pod spec", echo(k), DriverName)
		}
		seen[k] = true
		if len(v) > maxTokenValue {
			return nil, fmt.Errorf("%s=%q...: not a claim token", echo(k), v[:16])
		}
		tokens = append(tokens, v)
	}
	return tokens, nil
}

// echo quotes a tenant's variable name for a message, shortened: a claim's
// variable name fits whole.
func echo(s string) string {
	if len(s) > 128 {
		return strconv.Quote(s[:128]) + "..."
	}
	return strconv.Quote(s)
}
