package allocator

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/sysfs"
)

// kubeletCase is one test case of the kubelet static policy
// (pkg/kubelet/cm/cpumanager: cpu_assignment_test.go and
// policy_static_test.go), as the kubelet states it: the CPUs it may take,
// the request, its options and its answer.
type kubeletCase struct {
	from    string // the kubelet test and case it replays, or "ours:" and how its answer was worked out
	fixture string
	// free is the kubelet's default CPU set: a CPU list in which
	// "socket:N" and "l3:N" (the N-th L3 group by lowest CPU, the kubelet's
	// uncore cache N on these shapes) may stand for CPUs, and " - " takes
	// CPUs away (CPUs its state gives to other containers).
	free     string
	reserved string // the kubelet's reserved CPUs, which it never gives
	n        []int  // CPUs requested by the pod's containers, in order
	opts     kubeletOptions
	// want is the kubelet's answer for the first container; empty when the
	// case gives only the uncore caches the pod's containers use (uncore).
	want string
	// later are the kubelet's answers for the containers after the first,
	// when the case gives them.
	later []string
	// uncore are the uncore caches the kubelet's answer uses, the pod's
	// containers together (its expUncoreCache), when the case gives them:
	// a list of the N of "l3:N".
	uncore  string
	refused bool // the kubelet refuses the request
}

// kubeletOptions are the static policy's options and the Topology
// Manager's hint.
type kubeletOptions struct {
	fullPCPUs  bool // full-pcpus-only, or cpuGroupSize 2 of takeByTopologyNUMADistributed
	distribute bool // distribute-cpus-across-numa
	uncore     bool // prefer-align-cpus-by-uncorecache: the kubelet's L3 groups are compared too
	spread     bool // distribute-cpus-across-cores: the kubelet touches as many cores as it can
	// hint is the Topology Manager's NUMA affinity (a preference, as in the
	// kubelet's allocateCPUs); with alignBySocket, every node of the hint's
	// sockets is preferred.
	hint          string
	alignBySocket bool
}

const (
	mn     = "kubelet-dual-socket-multi-numa-ht"
	dht    = "kubelet-dual-socket-ht"
	sht    = "kubelet-single-socket-ht"
	quad   = "kubelet-quad-socket-four-way-ht"
	smtU   = "kubelet-dual-socket-smt-uncore"
	smallU = "kubelet-single-socket-smt-small-uncore"
	monoU  = "kubelet-dual-socket-sub-numa-ht-monolithic-uncore"
)

// kubeletCases are the kubelet's placement test cases (kubernetes master,
// 2026: the in-place resize variants and the pod-level resources cases are
// not among them), followed by cases of our own whose kubelet answer was
// worked out by its packed algorithm.
func kubeletCases() []kubeletCase {
	one := func(n int) []int { return []int{n} }
	packed := "TestTakeByTopologyNUMAPacked: "
	common := "commonTakeByTopologyTestCases: "
	spread := "TestTakeByTopologyWithSpreadPhysicalCPUsPreferredOption: "
	dist := "TestTakeByTopologyNUMADistributed: "
	add := "TestStaticPolicyAdd: "
	uncore := "TestStaticPolicyAddWithUncoreAlignment: "
	full, dis, unc := kubeletOptions{fullPCPUs: true}, kubeletOptions{distribute: true}, kubeletOptions{uncore: true}
	fullUnc := kubeletOptions{fullPCPUs: true, uncore: true}
	dis2 := kubeletOptions{distribute: true, fullPCPUs: true}
	spr := kubeletOptions{spread: true}
	// cpu_assignment_test.go, the cases every take runs: packed, and through
	// takeByTopologyNUMADistributed with cpuGroupSize 1. "take zero cpus"
	// is left out: a request of no CPU is refused here (TestPlacementErrors).
	commonCases := []kubeletCase{
		{from: common + "take more cpus than are available from single socket with HT", fixture: sht, free: "0,2,4,6", n: one(5), refused: true},
		{from: common + "take one cpu from single socket with HT", fixture: sht, free: "0-7", n: one(1), want: "0"},
		{from: common + "take one cpu from single socket with HT, some cpus are taken", fixture: sht, free: "1,3,5,6,7", n: one(1), want: "6"},
		{from: common + "take two cpus from single socket with HT", fixture: sht, free: "0-7", n: one(2), want: "0,4"},
		{from: common + "take all cpus from single socket with HT", fixture: sht, free: "0-7", n: one(8), want: "0-7"},
		{from: common + "take two cpus from single socket with HT, only one core totally free", fixture: sht, free: "0-3,6", n: one(2), want: "2,6"},
		{from: common + "take a socket of cpus from dual socket with HT", fixture: dht, free: "0-11", n: one(6), want: "0,2,4,6,8,10"},
		{from: common + "take a socket of cpus from dual socket with multi-numa-per-socket with HT", fixture: mn, free: "0-79", n: one(40), want: "0-19,40-59"},
		{from: common + "take a NUMA node of cpus from dual socket with multi-numa-per-socket with HT", fixture: mn, free: "0-79", n: one(20), want: "0-9,40-49"},
		{from: common + "take a NUMA node of cpus from dual socket with multi-numa-per-socket with HT, with 1 NUMA node already taken", fixture: mn, free: "10-39,50-79", n: one(20), want: "10-19,50-59"},
		{from: common + "take a socket and a NUMA node of cpus from dual socket with multi-numa-per-socket with HT", fixture: mn, free: "0-79", n: one(60), want: "0-29,40-69"},
		{from: common + "take a socket and a NUMA node of cpus from dual socket with multi-numa-per-socket with HT, a core taken", fixture: mn, free: "1-39,41-79", n: one(60), want: "10-39,50-79"},
	}
	cases := append([]kubeletCase(nil), commonCases...)
	for _, tc := range commonCases {
		tc.from = dist + "common: " + strings.TrimPrefix(tc.from, common)
		tc.opts = dis
		cases = append(cases, tc)
	}
	return append(cases, []kubeletCase{
		// TestTakeByTopologyNUMAPacked.
		{from: packed + "take one cpu from dual socket with HT - core from Socket 0", fixture: dht, free: "1-5,7-11", n: one(1), want: "2"},
		{from: packed + "allocate 4 full cores with 3 coming from the first NUMA node (filling it up) and 1 coming from the second NUMA node", fixture: dht, free: "0-11", n: one(8), want: "0-2,4,6-8,10"},
		{from: packed + "allocate 32 full cores with 30 coming from the first 3 NUMA nodes (filling them up) and 2 coming from the fourth NUMA node", fixture: mn, free: "0-79", n: one(64), want: "0-31,40-71"},
		{from: packed + "take cpus from two full UncoreCaches and partial from a single UncoreCache", fixture: "kubelet-uncore-single-socket-no-smt", free: "1-15", n: one(10), opts: unc, want: "1,2,4-11"},
		{from: packed + "take one cpu from dual socket with HT - core from Socket 0 (uncore)", fixture: dht, free: "1-5,7-11", n: one(1), opts: unc, want: "1"},
		{from: packed + "take first available UncoreCache from first socket", fixture: "kubelet-uncore-dual-socket-no-smt", free: "0-15", n: one(4), opts: unc, want: "0-3"},
		{from: packed + "take all available UncoreCache from first socket", fixture: "kubelet-uncore-dual-socket-no-smt", free: "2-15", n: one(6), opts: unc, want: "2-7"},
		{from: packed + "take first available UncoreCache from second socket", fixture: "kubelet-uncore-dual-socket-no-smt", free: "8-15", n: one(4), opts: unc, want: "8-11"},
		{from: packed + "take first available UncoreCache from available NUMA", fixture: "kubelet-uncore-single-socket-multi-numa", free: "3,4-8,12", n: one(2), opts: unc, want: "4,5"},
		{from: packed + "take cpus from best available UncoreCache group of multi uncore cache single socket - SMT enabled", fixture: "kubelet-uncore-single-socket-smt", free: "2-3,10-11,4-7,12-15", n: one(6), opts: unc, want: "4-6,12-14"},
		{from: packed + "take cpus from multiple UncoreCache of single socket - SMT enabled", fixture: "kubelet-uncore-single-socket-smt", free: "1-7,9-15", n: one(10), opts: unc, want: "1,4-7,9,12-15"},

		// TestTakeByTopologyWithSpreadPhysicalCPUsPreferredOption: the
		// kubelet spreads over as many cores as it can; we do not, so only
		// nodes and sockets can be compared in earnest.
		{from: spread + "take a socket of cpus from single socket with HT, 3 cpus", fixture: sht, free: "0-7", n: one(3), opts: spr, want: "0-2"},
		{from: spread + "take a socket of cpus from dual socket with HT, 2 cpus", fixture: dht, free: "0-11", n: one(2), opts: spr, want: "0,2"},
		{from: spread + "take a socket of cpus from dual socket with HT, 3 cpus", fixture: dht, free: "0-11", n: one(3), opts: spr, want: "0,2,4"},
		{from: spread + "take a socket of cpus from dual socket with HT, 6 cpus", fixture: dht, free: "0-11", n: one(6), opts: spr, want: "0,2,4,6,8,10"},
		{from: spread + "take cpus from dual socket with HT, 8 cpus", fixture: dht, free: "0-11", n: one(8), opts: spr, want: "0-4,6,8,10"},
		{from: spread + "take a socket of cpus from dual socket without HT, 2 cpus", fixture: "kubelet-dual-socket-no-ht", free: "0-7", n: one(2), opts: spr, want: "0,1"},
		{from: spread + "take a socket of cpus from dual socket with multi numa per socket and HT, 12 cpus", fixture: mn, free: "0-79", n: one(8), opts: spr, want: "0-7"},
		{from: spread + "take a socket of cpus from quad socket four way with HT, 12 cpus", fixture: quad, free: "0-287", n: one(12), opts: spr, want: "0-2,9-10,13-14,21-22,25-26,33"},

		// TestTakeByTopologyNUMADistributed: cpuGroupSize 1 is
		// distribute-cpus-across-numa, cpuGroupSize 2 the same with
		// full-pcpus-only (whole cores on each node).
		{from: dist + "allocate 4 full cores with 2 distributed across each NUMA node", fixture: dht, free: "0-11", n: one(8), opts: dis, want: "0-3,6-9"},
		{from: dist + "allocate 32 full cores with 8 distributed across each NUMA node", fixture: mn, free: "0-79", n: one(64), opts: dis, want: "0-7,10-17,20-27,30-37,40-47,50-57,60-67,70-77"},
		{from: dist + "allocate 24 full cores with 8 distributed across the first 3 NUMA nodes", fixture: mn, free: "0-79", n: one(48), opts: dis, want: "0-7,10-17,20-27,40-47,50-57,60-67"},
		{from: dist + "allocate 24 full cores with 8 distributed across the first 3 NUMA nodes (taking all but 2 from the first NUMA node)", fixture: mn, free: "1-29,32-39,41-69,72-79", n: one(48), opts: dis, want: "1-8,10-17,20-27,41-48,50-57,60-67"},
		{from: dist + "allocate 24 full cores with 8 distributed across the last 3 NUMA nodes (even though all 8 could be allocated from the first NUMA node)", fixture: mn, free: "2-29,31-39,42-69,71-79", n: one(48), opts: dis, want: "10-17,20-27,31-38,50-57,60-67,71-78"},
		{from: dist + "allocate 8 full cores with 2 distributed across each NUMA node", fixture: mn, free: "0-2,10-12,20-22,30-32,40-41,50-51,60-61,70-71", n: one(16), opts: dis, want: "0-1,10-11,20-21,30-31,40-41,50-51,60-61,70-71"},
		{from: dist + "take one cpu from dual socket with HT - core from Socket 0", fixture: dht, free: "1-5,7-11", n: one(1), opts: dis, want: "1"},
		{from: dist + "take one cpu from dual socket with HT - core from Socket 0 - cpuGroupSize 2 (one CPU cannot be whole cores)", fixture: dht, free: "1-5,7-11", n: one(1), opts: dis, want: "2"},
		{from: dist + "allocate 13 full cores distributed across the first 2 NUMA nodes", fixture: mn, free: "0-79", n: one(26), opts: dis, want: "0-6,10-16,40-45,50-55"},
		{from: dist + "allocate 13 full cores distributed across the first 2 NUMA nodes (cpuGroupSize 2)", fixture: mn, free: "0-79", n: one(26), opts: dis2, want: "0-6,10-15,40-46,50-55"},
		{from: dist + "allocate 31 full cores with 15 CPUs distributed across each NUMA node and 1 CPU spilling over to each of NUMA 0, 1", fixture: mn, free: "0-79", n: one(62), opts: dis, want: "0-7,10-17,20-27,30-37,40-47,50-57,60-66,70-76"},
		{from: dist + "allocate 31 full cores with 14 CPUs distributed across each NUMA node and 2 CPUs spilling over to each of NUMA 0, 1, 2 (cpuGroupSize 2)", fixture: mn, free: "0-79", n: one(62), opts: dis2, want: "0-7,10-17,20-27,30-36,40-47,50-57,60-67,70-76"},
		{from: dist + "allocate 31 full cores with 15 CPUs distributed across each NUMA node and 1 CPU spilling over to each of NUMA 2, 3 (to keep balance)", fixture: mn, free: "0-8,10-18,20-39,40-48,50-58,60-79", n: one(62), opts: dis, want: "0-7,10-17,20-27,30-37,40-46,50-56,60-67,70-77"},
		{from: dist + "allocate 31 full cores with 14 CPUs distributed across each NUMA node and 2 CPUs spilling over to each of NUMA 0, 2, 3 (to keep balance with cpuGroupSize 2)", fixture: mn, free: "0-8,10-18,20-39,40-48,50-58,60-79", n: one(62), opts: dis2, want: "0-7,10-16,20-27,30-37,40-47,50-56,60-67,70-77"},
		{from: dist + "ensure bestRemainder chosen with NUMA nodes that have enough CPUs to satisfy the request", fixture: mn, free: "0-3,10-13,20-23,30-36,40-43,50-53,60-63,70-76", n: one(34), opts: dis, want: "0-3,10-13,20-23,30-34,40-43,50-53,60-63,70-74"},
		{from: dist + "ensure previous failure encountered on live machine has been fixed (1/1)", fixture: "kubelet-dual-socket-multi-numa-ht-large",
			free: "0,128,30,31,158,159,43-47,171-175,62,63,190,191,75-79,203-207,94,96,222,223,101-111,229-239,126,127,254,255", n: one(28), opts: dis,
			want: "43-47,75-79,96,101-105,171-174,203-206,229-232"},

		// policy_static_test.go TestStaticPolicyAdd: its options-insensitive
		// cases run with no option and with full-pcpus-only.
		{from: add + "GuPodMultipleCores, SingleSocketHT, ExpectAllocOneCore", fixture: sht, free: "0,1,4,5", reserved: "0", n: one(2), want: "1,5"},
		{from: add + "GuPodMultipleCores, SingleSocketHT, ExpectAllocOneCore (full-pcpus-only)", fixture: sht, free: "0,1,4,5", reserved: "0", n: one(2), opts: full, want: "1,5"},
		{from: add + "GuPodMultipleCores, DualSocketHT, ExpectAllocOneSocket", fixture: dht, free: "0-11 - 2", reserved: "0", n: one(6), want: "1,3,5,7,9,11"},
		{from: add + "GuPodMultipleCores, DualSocketHT, ExpectAllocOneSocket (full-pcpus-only)", fixture: dht, free: "0-11 - 2", reserved: "0", n: one(6), opts: full, want: "1,3,5,7,9,11"},
		// Issue 20's first example.
		{from: add + "GuPodMultipleCores, DualSocketHT, ExpectAllocThreeCores", fixture: dht, free: "0-11 - 1,5", reserved: "0", n: one(6), want: "2-4,8-10"},
		{from: add + "GuPodMultipleCores, DualSocketHT, ExpectAllocThreeCores (full-pcpus-only)", fixture: dht, free: "0-11 - 1,5", reserved: "0", n: one(6), opts: full, want: "2-4,8-10"},
		{from: add + "GuPodMultipleCores, DualSocketNoHT, ExpectAllocOneSocket", fixture: "kubelet-dual-socket-no-ht", free: "0,1,3-7", reserved: "0", n: one(4), want: "4-7"},
		{from: add + "GuPodMultipleCores, DualSocketNoHT, ExpectAllocFourCores", fixture: "kubelet-dual-socket-no-ht", free: "0,1,3,6,7", reserved: "0", n: one(4), want: "1,3,6,7"},
		{from: add + "GuPodMultipleCores, DualSocketHT, ExpectAllocOneSocketOneCore", fixture: dht, free: "0-11 - 2", reserved: "0", n: one(8), want: "1,3-5,7,9-11"},
		{from: add + "GuPodMultipleCores, topoQuadSocketFourWayHT, ExpectAllocSock0", fixture: quad, free: "0-287 - 3-7,11", n: one(72), want: "socket:0"},
		{from: add + "GuPodMultipleCores, topoQuadSocketFourWayHT, ExpectAllocAllFullCoresFromThreeSockets", fixture: quad,
			free: "1,25,13,38,2,9,11,35,23,48,12,51,53,173,113,233,54,61", n: one(12), want: "1,25,13,38,11,35,23,48,53,173,113,233"},
		{from: add + "GuPodMultipleCores, topoQuadSocketFourWayHT, ExpectAllocAllSock1+FullCore", fixture: quad,
			free: "socket:1,10,34,22,47,53,173,61,181,108,228,115,235", n: one(76), want: "socket:1,10,34,22,47"},
		{from: add + "GuPodMultipleCores, topoQuadSocketFourWayHT, ExpectAllocAllSock1+FullCore (full-pcpus-only)", fixture: quad,
			free: "socket:1,10,34,22,47,53,173,61,181,108,228,115,235", n: one(76), opts: full, want: "socket:1,10,34,22,47"},
		{from: add + "GuPodSingleCore, SingleSocketHT, ExpectAllocOneCPU", fixture: sht, free: "0-7", reserved: "0", n: one(1), want: "4"},
		{from: add + "GuPodMultipleCores, topoQuadSocketFourWayHT, ExpectAllocCPUs", fixture: quad, free: "10,11,53,67,52", n: one(5), want: "10,11,52,53,67"},
		{from: add + "GuPodSingleCore, SingleSocketHT, ExpectError", fixture: sht, free: "0-7", reserved: "0", n: one(8), refused: true},
		{from: add + "GuPodMultipleCores, DualSocketHT, NoAllocExpectError", fixture: dht, free: "0,4-11", reserved: "0", n: one(10), refused: true},
		{from: add + "GuPodMultipleCores, SingleSocketHT, NoAllocExpectError", fixture: sht, free: "0,7", reserved: "0", n: one(2), refused: true},
		{from: add + "GuPodMultipleCores, topoQuadSocketFourWayHT, NoAlloc", fixture: quad, free: "10,11,53,37,55,67,52", n: one(76), refused: true},
		{from: add + "smtalign: GuPodSingleCore, SingleSocketHT, ExpectAllocOneCPU", fixture: sht, free: "0-7", reserved: "0", n: one(1), opts: full, refused: true},
		{from: add + "smtalign: GuPodMultipleCores, topoQuadSocketFourWayHT, ExpectAllocOneCPUs", fixture: quad, free: "0-287", reserved: "0,169,109,229,50,170,110,230", n: one(15), opts: full, refused: true},
		{from: add + "smtalign: GuPodManyCores, topoDualSocketHT, ExpectDoNotAllocPartialCPU", fixture: dht, free: "0,2-5,7-11", reserved: "1,6", n: one(10), opts: full, refused: true},
		{from: add + "smtalign: GuPodManyCores, topoDualSocketHT, AutoReserve, ExpectAllocAllCPUs", fixture: dht, free: "1-5,7-11", reserved: "0,6", n: one(10), opts: full, want: "1-5,7-11"},
		{from: add + "Align by socket: true, cpu's within same socket of numa in hint are part of allocation", fixture: mn, free: "2,11,21,22", reserved: "0", n: one(2),
			opts: kubeletOptions{hint: "0,2", alignBySocket: true}, want: "2,11"},
		{from: add + "Align by socket: false, cpu's are taken strictly from NUMA nodes in hint", fixture: mn, free: "2,11,21,22", reserved: "0", n: one(2),
			opts: kubeletOptions{hint: "0,2"}, want: "2,21"},
		// TestTopologyAwareAllocateCPUs: the socket mask is a NUMA affinity.
		{from: "TestTopologyAwareAllocateCPUs: Request 2 CPUs, No BitMask", fixture: dht, free: "0-11", n: one(2), want: "0,6"},
		{from: "TestTopologyAwareAllocateCPUs: Request 2 CPUs, BitMask on Socket 0", fixture: dht, free: "0-11", n: one(2), opts: kubeletOptions{hint: "0"}, want: "0,6"},
		{from: "TestTopologyAwareAllocateCPUs: Request 2 CPUs, BitMask on Socket 1", fixture: dht, free: "0-11", n: one(2), opts: kubeletOptions{hint: "1"}, want: "1,7"},
		{from: "TestTopologyAwareAllocateCPUs: Request 8 CPUs, BitMask on Socket 0", fixture: dht, free: "0-11", n: one(8), opts: kubeletOptions{hint: "0"}, want: "0-2,4,6-8,10"},
		{from: "TestTopologyAwareAllocateCPUs: Request 8 CPUs, BitMask on Socket 1", fixture: dht, free: "0-11", n: one(8), opts: kubeletOptions{hint: "1"}, want: "0,1,3,5-7,9,11"},
		// TestStaticPolicyAddWithResvList.
		{from: "TestStaticPolicyAddWithResvList: GuPodSingleCore, SingleSocketHT, ExpectError", fixture: sht, free: "0-7", reserved: "0", n: one(8), refused: true},
		{from: "TestStaticPolicyAddWithResvList: GuPodSingleCore, SingleSocketHT, ExpectAllocOneCPU", fixture: sht, free: "0-7", reserved: "0,1", n: one(1), want: "4"},
		{from: "TestStaticPolicyAddWithResvList: GuPodMultipleCores, SingleSocketHT, ExpectAllocOneCore", fixture: sht, free: "0,1,4,5", reserved: "0,1", n: one(2), want: "4,5"},
		// TestStaticPolicyDoNotReuseCPUs: a restartable init container (a
		// sidecar) keeps its CPUs; the app container takes 2,6.
		{from: "TestStaticPolicyDoNotReuseCPUs: SingleSocketHT, Don't reuse CPUs of a restartable init container", fixture: sht, free: "0-7", n: []int{4, 2}, want: "0,1,4,5", later: []string{"2,6"}},

		// TestStaticPolicyAddWithUncoreAlignment: most cases give only the
		// uncore caches of the pod's containers.
		{from: uncore + "GuPodSingleContainerSaturating, DualSocketHTUncore, ExpectAllocOneUncore, FullUncoreAvail", fixture: smtU,
			free: "0-383 - l3:0,l3:12", reserved: "0,1,96,97,192,193,288,289", n: one(16), opts: fullUnc, uncore: "1"},
		{from: uncore + "GuPodMainAndSidecarContainer, DualSocketHTUncore, ExpectAllocOneUncore, FullUncoreAvail", fixture: smtU,
			free: "0-383 - l3:0,l3:12", reserved: "0,1,96,97,192,193,288,289", n: []int{12, 2}, opts: fullUnc, uncore: "1"},
		{from: uncore + "GuPodSidecarAndMainContainer, DualSocketHTUncore, ExpectAllocOneUncore, FullUncoreAvail", fixture: smtU,
			free: "0-383 - l3:0,l3:12", reserved: "0,1,96,97,192,193,288,289", n: []int{2, 12}, opts: fullUnc, uncore: "1"},
		{from: uncore + "GuPodMainAndManySidecarContainer, DualSocketHTUncore, ExpectAllocOneUncore, FullUncoreAvail", fixture: smtU,
			free: "0-383 - l3:0,l3:12", reserved: "0,1,96,97,192,193,288,289", n: []int{10, 2, 2, 2}, opts: fullUnc, uncore: "1"},
		{from: uncore + "GuPodMainAndSidecarContainer, DualSocketHTUncore, ExpectAllocTwoUncore", fixture: smtU,
			free: "0-383", reserved: "0,1,96,97,192,193,288,289", n: []int{12, 2}, opts: fullUnc, uncore: "0,1"},
		{from: uncore + "GuPodSingleContainer, SingleSocketSMTSmallUncore, ExpectAllocOneUncore", fixture: smallU,
			free: "0-127", reserved: "0,1,64,65", n: one(8), opts: fullUnc, uncore: "1"},
		{from: uncore + "GuPodSingleContainer, SingleSocketSMTSmallUncore, ExpectAllocTwoUncore", fixture: smallU,
			free: "0-127 - l3:1", reserved: "0,1,64,65", n: one(12), opts: fullUnc, uncore: "0,2"},
		{from: uncore + "GuPodSingleContainer, SingleSocketNoSMTSmallUncore, FragmentedUncore, ExpectAllocThreeUncore", fixture: "kubelet-single-socket-no-smt-small-uncore",
			free: "0-63 - l3:2,l3:3,l3:5", reserved: "0-3", n: one(12), opts: fullUnc, uncore: "1,4,6"},
		{from: uncore + "GuPodMultiContainer, DualSocketSMTUncore, FragmentedUncore, ExpectAllocOneUncore", fixture: "kubelet-small-dual-socket-no-smt-uncore",
			free: "0-63 - l3:1", reserved: "0,1,32,33", n: []int{4, 2}, opts: fullUnc, uncore: "0"},
		{from: uncore + "GuPodMultiContainer, DualSocketSMTUncore, FragmentedUncore, ExpectAllocTwoUncore", fixture: "kubelet-small-dual-socket-no-smt-uncore",
			free: "0-63 - l3:1", reserved: "0,1,32,33", n: []int{4, 4}, opts: fullUnc, uncore: "0,2"},
		{from: uncore + "GuPodMultiContainer, LargeSingleSocketSMTUncore, PartialUncoreFit, ExpectAllocTwoUncore", fixture: "kubelet-large-single-socket-smt-uncore",
			free: "0-255 - 8,9,136,137", reserved: "0,1,128,129", n: []int{12, 12}, opts: fullUnc, uncore: "0,1"},
		{from: uncore + "GuPodMultiContainer, LargeSingleSocketSMTUncore, PartialUncoreNoFit, ExpectAllocTwoUncore", fixture: "kubelet-large-single-socket-smt-uncore",
			free: "0-255 - 8,9,136,137", reserved: "0,1,128,129", n: []int{14, 14}, opts: fullUnc, uncore: "2,3"},
		{from: uncore + "GuPodLargeSingleContainer, DualSocketNoSMTUncore, FullNUMAsAvail, ExpectAllocFullNUMA", fixture: "kubelet-dual-socket-multi-numa-uncore",
			free: "0-191", reserved: "0-3", n: one(48), opts: fullUnc, uncore: "6-11"},
		{from: uncore + "GuPodSingleContainer, MonoUncoreCacheHT, ExpectAllocCPUSet", fixture: monoU,
			free: "0-239", reserved: "0,1,120,121", n: one(6), opts: fullUnc, want: "2-4,122-124"},
		{from: uncore + "GuPodSingleContainer, LargeSingleSocketUncore, ExpectAllocOneUncore", fixture: "kubelet-large-single-socket-uncore",
			free: "0-127", reserved: "0-3", n: one(8), opts: fullUnc, uncore: "1"},
		{from: uncore + "GuPodSingleContainer, MonoUncoreCacheHT, ExpectFragmentedAllocCPUSet", fixture: "kubelet-single-socket-uncore",
			free: "0-63 - 6-9,12-15,18,19", reserved: "0,1", n: one(12), opts: fullUnc, want: "2-5,10,11,16,17,20-23"},
		{from: uncore + "GuPodSingleContainer, SingleSocketUncore, PartialUncore, ExpectBestEffortAllocTwoUncore", fixture: "kubelet-small-single-socket-no-smt-uncore",
			free: "0-31 - 8-11,16-19,24-27", reserved: "0-3", n: one(8), opts: fullUnc, uncore: "0,1"},
		{from: uncore + "odd integer cpu required on smt-disabled", fixture: "kubelet-small-single-socket-no-smt-uncore",
			free: "0-31", reserved: "0-3", n: one(5), opts: fullUnc, want: "8-12"},
		{from: uncore + "odd integer required on smt-enabled", fixture: smallU, free: "0-127", reserved: "0,1,64,65", n: one(3), opts: unc, want: "2,3,66"},
		{from: uncore + "odd integer required on odd integer partial uncore", fixture: smallU, free: "0-127", reserved: "0,1,64", n: one(3), opts: unc, want: "2,65,66"},
		{from: uncore + "even integer required on odd integer partial uncore", fixture: smallU, free: "0-127", reserved: "0,1,64", n: one(4), opts: unc, want: "4,5,68,69"},
		{from: uncore + "large odd integer required on smt-enabled", fixture: smallU, free: "0-127", reserved: "0,1,64", n: one(11), opts: unc, want: "2,4-7,65,66,68-71"},
		// The kubelet's case takes its default CPUs from another topology
		// (0-127 of topoSingleSocketSingleNumaPerSocketSMTSmallUncore).
		{from: uncore + "odd integer required on HT monolithic uncore", fixture: monoU, free: "0-127", reserved: "0,1,120", n: one(5), opts: unc, want: "2,3,121-123"},
		{from: uncore + "even integer required on HT monolithic uncore", fixture: monoU, free: "0-127", reserved: "0,1,120", n: one(4), opts: unc, want: "2,3,122,123"},
		{from: uncore + "GuPodSingleContainer, SingleSocketSMTSmallUncore, StrictReserveCompatability", fixture: smallU, free: "0-127", reserved: "0,1,64,65", n: one(2), opts: unc, want: "2,66"},
		{from: uncore + "GuPodSingleContainer, DualSocketHTMonoUncore, StrictReserveCompatability", fixture: monoU, free: "0-239", reserved: "0,1,120,121", n: one(4), opts: unc, want: "2,3,122,123"},

		// Ours: the kubelet's answer worked out by its packed algorithm.
		{from: "ours: issue 11, two cpus, the only whole core is 1,5", fixture: sht, free: "1,4,5", n: one(2), want: "1,5"},
		{from: "ours: three cpus, a whole core and the fullest partial core", fixture: sht, free: "0,1,2,5,6", n: one(3), want: "1,2,5"},
		{from: "ours: dual socket, two cpus, a whole core besides half cores", fixture: dht, free: "0-4,8,10", n: one(2), want: "2,8"},
		{from: "ours: dual socket, three cpus, a whole core and a half core", fixture: dht, free: "0,2,4,6", n: one(3), want: "0,2,6"},
		{from: "ours: multi-numa, whole cores on the node that has them, not half cores on the fuller one", fixture: mn, free: "0-19,50-59", n: one(4), want: "10,11,50,51"},
		{from: "ours: distribute, an odd request: whole cores and one CPU", fixture: mn, free: "0-79", n: one(25), opts: dis, want: "0-6,10-15,40-45,50-55"},
		// One NUMA node spans sockets 0 and 1, and 4 CPUs fit socket 1's
		// whole cores; the kubelet takes free whole cores socket by socket,
		// the emptier socket first (0,40), then socket 1's first.
		{from: "ours: a NUMA node spanning two sockets", fixture: "kubelet-multi-socket-dual-socket-per-numa-ht", free: "0,40,10-19,50-59", n: one(4), want: "0,10,40,50"},
	}...)
}

// TestAtLeastAsGoodAsKubelet replays every kubelet placement case above on
// the kubelet's own topologies. For the kubelet an unavailable CPU is
// unavailable whatever the reason, so each case runs with the CPUs the
// kubelet may not take held by another exclusive container, outside the
// exclusive pool (infra), and half of each. Ours must touch no more NUMA
// nodes, sockets or cores, no more L3 groups when the case prefers aligned
// uncore caches, and leave no fewer whole free cores when it touches as
// many cores; where the kubelet refuses, so must we (full-pcpus-only and
// not enough CPUs). The kubelet's figures are measured on its answer: on
// each container's CPUs where the case gives them, on the uncore caches of
// the pod where it gives only those.
func TestAtLeastAsGoodAsKubelet(t *testing.T) {
	for _, tc := range kubeletCases() {
		for _, how := range []string{"held by a container", "outside the pool", "half held, half outside"} {
			t.Run(tc.from+"/"+how, func(t *testing.T) {
				replayKubelet(t, tc, how)
			})
		}
	}
}

func replayKubelet(t *testing.T, tc kubeletCase, how string) {
	topo := topology(t, tc.fixture)
	free := cpusOf(t, topo, tc.free).Difference(cpusOf(t, topo, tc.reserved))
	ours, theirs := kubeletPair(t, topo, free, how)
	wholeBefore := wholeFreeCores(theirs, "exclusive")
	// The kubelet's answers are compared where the case gives them: per
	// container when it names each container's CPUs (want, later), and
	// over the pod when it names only the uncore caches the pod's
	// containers use together (uncore, below).
	var wants []cpuset.CPUSet
	if tc.want != "" {
		for _, w := range append([]string{tc.want}, tc.later...) {
			wants = append(wants, cpusOf(t, topo, w))
		}
	}
	var first, all, kubeletAll cpuset.CPUSet
	for i, n := range tc.n {
		r := exclusive(fmt.Sprintf("x%d", i), n)
		r.Pod = PodRef{Namespace: "ns", Name: "pod", UID: "uid-pod"}
		r.Container = fmt.Sprintf("c%d", i)
		r.Options.FullPCPUsOnly = tc.opts.fullPCPUs
		r.Options.DistributeAcrossNUMA = tc.opts.distribute
		r.PreferNUMA = hintNodes(t, topo, tc.opts)
		res, err := ours.Allocate(r)
		if tc.refused {
			require.Error(t, err, "the kubelet refuses; we placed %s", res.Assignment.CPUs)
			return
		}
		require.NoError(t, err)
		got := res.Assignment.CPUs
		require.True(t, got.IsSubsetOf(free), "%s is within the kubelet's free CPUs %s", got, free)
		if i == 0 {
			first = got
		}
		all = all.Union(got)
		if i >= len(wants) {
			continue
		}
		// Container i against the kubelet's container i, each allocator
		// holding its own answers for the containers before it.
		want := wants[i]
		require.Equal(t, n, want.Size(), "the kubelet's answer for container %d has the size of its request", i)
		kubeletAll = kubeletAll.Union(want)
		if trade, ok := kubeletTrades[tc.from]; ok && i == 0 {
			assertTrade(t, measure(topo, got), measure(topo, want), trade, got, want)
			continue
		}
		_, err = theirs.restore(Assignment{ID: fmt.Sprintf("kubelet-x%d", i), Pool: "exclusive", CPUs: want})
		require.NoError(t, err)
		assertNotWorse(t, topo, ours, theirs, got, want)
	}
	if tc.opts.uncore && len(wants) == len(tc.n) {
		assert.LessOrEqual(t, measure(topo, all).l3Groups, measure(topo, kubeletAll).l3Groups, "L3 groups: ours %s, kubelet %s", all, kubeletAll)
	}
	if tc.opts.distribute && tc.opts.fullPCPUs {
		// The kubelet's whole-core spread is as balanced as can be: the
		// same number of CPUs on each node.
		assert.Equal(t, perNode(topo, cpusOf(t, topo, tc.want)), perNode(topo, first), "CPUs per NUMA node: ours %s", first)
	}
	if tc.uncore != "" {
		assertPodNotWorseThanUncore(t, topo, tc, ours, wholeBefore, all)
	}
}

// assertPodNotWorseThanUncore compares the pod's placement, its containers
// together, with a kubelet answer given as the uncore caches the pod's
// containers use (the kubelet's expUncoreCache is a statement about the
// pod, so the comparison is over the pod's union, not per container). The
// kubelet's CPUs touch each of those caches and no other, so its NUMA
// nodes and sockets are those of the caches (each cache lies in one node
// and one socket, which is checked). Under full-pcpus-only it takes whole
// cores only: it touches exactly the request's CPUs over threads per core,
// and leaves that many fewer whole free cores. Without full-pcpus-only
// (no such case gives only uncore caches) its cores are not known.
func assertPodNotWorseThanUncore(t *testing.T, topo *sysfs.Topology, tc kubeletCase, ours *Allocator, wholeBefore int, all cpuset.CPUSet) {
	t.Helper()
	groups := l3ByLowestCPU(topo)
	ids := set(t, tc.uncore)
	caches := cpuset.New()
	for _, id := range ids.List() {
		require.Less(t, id, len(groups), "uncore cache %d", id)
		g := measure(topo, groups[id])
		require.True(t, g.numaNodes == 1 && g.sockets == 1, "uncore cache %d (%s) lies in one NUMA node and one socket", id, groups[id])
		caches = caches.Union(groups[id])
	}
	o, k := measure(topo, all), measure(topo, caches)
	assert.LessOrEqual(t, o.numaNodes, k.numaNodes, "NUMA nodes of the pod: ours %s, the kubelet's uncore caches %s (%s)", all, tc.uncore, caches)
	assert.LessOrEqual(t, o.sockets, k.sockets, "sockets of the pod: ours %s, the kubelet's uncore caches %s (%s)", all, tc.uncore, caches)
	assert.LessOrEqual(t, o.l3Groups, ids.Size(), "L3 groups of the pod: ours %s, the kubelet's uncore caches %s", all, tc.uncore)
	if !tc.opts.fullPCPUs {
		return
	}
	c, _ := topo.CPU(caches.List()[0])
	tpc, total := c.Siblings.Size(), 0
	for _, n := range tc.n {
		require.Zero(t, n%tpc, "full-pcpus-only: the kubelet takes whole cores of %d threads", tpc)
		total += n
	}
	kubeletCores := total / tpc
	assert.LessOrEqual(t, o.cores, kubeletCores, "cores touched by the pod: ours %s, the kubelet's %d whole cores", all, kubeletCores)
	if o.cores == kubeletCores {
		assert.GreaterOrEqual(t, wholeFreeCores(ours, "exclusive"), wholeBefore-kubeletCores,
			"whole free cores left, with as many cores touched: ours %s, the kubelet's %d whole cores", all, kubeletCores)
	}
}

// assertNotWorse compares our placement with the kubelet's: its figures,
// and the whole free cores each leaves when both touch as many cores.
func assertNotWorse(t *testing.T, topo *sysfs.Topology, ours, theirs *Allocator, got, kubelet cpuset.CPUSet) {
	t.Helper()
	o, k := measure(topo, got), measure(topo, kubelet)
	assertFiguresNotWorse(t, o, k, got, kubelet)
	if o.cores == k.cores {
		assert.GreaterOrEqual(t, wholeFreeCores(ours, "exclusive"), wholeFreeCores(theirs, "exclusive"),
			"whole free cores left, with as many cores touched: ours %s, kubelet %s", got, kubelet)
	}
}

func assertFiguresNotWorse(t *testing.T, o, k shape, got, kubelet cpuset.CPUSet) {
	t.Helper()
	assert.LessOrEqual(t, o.numaNodes, k.numaNodes, "NUMA nodes: ours %s, kubelet %s", got, kubelet)
	assert.LessOrEqual(t, o.sockets, k.sockets, "sockets: ours %s, kubelet %s", got, kubelet)
	assert.LessOrEqual(t, o.cores, k.cores, "cores touched: ours %s, kubelet %s", got, kubelet)
}

// kubeletTrades are the cases where the kubelet's answer and ours do not
// dominate one another: ours is better by the first rule in which they
// differ, and worse on a figure of a later rule. The rules make these trades
// on purpose; each is named here, and checked to still be one.
var kubeletTrades = map[string]string{
	// 12 CPUs of KNL cores with 4 threads: the kubelet takes a whole core on
	// each of three sockets (3 NUMA nodes); two nodes hold 12 CPUs in 6
	// cores, and rule 1 (fewest NUMA nodes) outranks rule 4.
	"TestStaticPolicyAdd: GuPodMultipleCores, topoQuadSocketFourWayHT, ExpectAllocAllFullCoresFromThreeSockets": "fewer NUMA nodes, more cores",
}

// assertTrade checks a named trade: ours has fewer NUMA nodes, or as many
// and fewer sockets, and is worse on a later figure (else the entry is
// stale and the plain comparison applies).
func assertTrade(t *testing.T, o, k shape, trade string, got, kubelet cpuset.CPUSet) {
	t.Helper()
	better := o.numaNodes < k.numaNodes || (o.numaNodes == k.numaNodes && o.sockets < k.sockets)
	assert.True(t, better, "%s: ours %s is not better by rule 1 or 3 than the kubelet's %s", trade, got, kubelet)
	worse := o.sockets > k.sockets || o.cores > k.cores
	assert.True(t, worse, "%s: no longer a trade (ours %s, kubelet %s): remove it from kubeletTrades", trade, got, kubelet)
}

// perNode counts a placement's CPUs on each NUMA node.
func perNode(topo *sysfs.Topology, cpus cpuset.CPUSet) map[int]int {
	out := map[int]int{}
	for _, id := range cpus.List() {
		c, _ := topo.CPU(id)
		out[c.NUMA]++
	}
	return out
}

// hintNodes turns the kubelet's NUMA affinity into preferred nodes: with
// align-by-socket, every node of the hint's sockets.
func hintNodes(t *testing.T, topo *sysfs.Topology, o kubeletOptions) cpuset.CPUSet {
	t.Helper()
	if o.hint == "" {
		return cpuset.New()
	}
	nodes := set(t, o.hint)
	if !o.alignBySocket {
		return nodes
	}
	sockets := cpuset.New()
	for _, n := range nodes.List() {
		node, ok := topo.NUMANode(n)
		require.True(t, ok)
		for _, id := range node.CPUs.List() {
			c, _ := topo.CPU(id)
			sockets = sockets.Union(cpuset.New(c.Socket))
		}
	}
	return topo.NUMANodesOf(topo.CPUsWhere(func(c sysfs.CPU) bool { return sockets.Contains(c.Socket) }))
}

// cpusOf reads a kubeletCase CPU expression: a CPU list whose items may also
// be "socket:N" or "l3:N", and " - " before CPUs taken away.
func cpusOf(t *testing.T, topo *sysfs.Topology, expr string) cpuset.CPUSet {
	t.Helper()
	if expr == "" {
		return cpuset.New()
	}
	base, minus, _ := strings.Cut(expr, " - ")
	if minus != "" {
		return cpusOf(t, topo, base).Difference(cpusOf(t, topo, minus))
	}
	groups := l3ByLowestCPU(topo)
	out := cpuset.New()
	for _, item := range strings.Split(expr, ",") {
		kind, num, ok := strings.Cut(item, ":")
		if !ok {
			out = out.Union(set(t, item))
			continue
		}
		n, err := strconv.Atoi(num)
		require.NoError(t, err, "%q", item)
		switch kind {
		case "socket":
			out = out.Union(topo.CPUsWhere(func(c sysfs.CPU) bool { return c.Online && c.Socket == n }))
		case "l3":
			require.Less(t, n, len(groups), "%q", item)
			out = out.Union(groups[n])
		default:
			t.Fatalf("unknown item %q", item)
		}
	}
	return out
}

// l3ByLowestCPU lists the L3 groups' CPUs in the order of their lowest CPU,
// which is the kubelet's uncore cache numbering on its test shapes.
func l3ByLowestCPU(topo *sysfs.Topology) []cpuset.CPUSet {
	var groups []cpuset.CPUSet
	for _, g := range topo.L3Groups() {
		groups = append(groups, topo.CPUsWhere(func(c sysfs.CPU) bool { return c.Online && c.L3 == g }))
	}
	slices.SortFunc(groups, func(a, b cpuset.CPUSet) int { return a.List()[0] - b.List()[0] })
	return groups
}

// TestKubeletCasesAreFaithful checks the table against what the kubelet
// states: every case has an answer to compare with (CPUs, uncore caches or
// a refusal), every answer lies within the CPUs it may take, and the
// expressions name the groups the kubelet's comments describe.
func TestKubeletCasesAreFaithful(t *testing.T) {
	seen := map[string]bool{}
	for _, tc := range kubeletCases() {
		assert.False(t, seen[tc.from], "%s: one row per case", tc.from)
		seen[tc.from] = true
		assert.True(t, tc.want != "" || tc.uncore != "" || tc.refused, "%s: nothing to compare with", tc.from)
		assert.True(t, tc.want != "" || len(tc.later) == 0, "%s: later answers follow the first container's", tc.from)
		assert.LessOrEqual(t, len(tc.later), len(tc.n)-1, "%s: an answer per later container at most", tc.from)
		topo := topology(t, tc.fixture)
		free := cpusOf(t, topo, tc.free).Difference(cpusOf(t, topo, tc.reserved))
		for _, a := range append([]string{tc.want}, tc.later...) {
			if a == "" {
				continue
			}
			want := cpusOf(t, topo, a)
			assert.True(t, want.IsSubsetOf(free), "%s: answer %s within free %s", tc.from, want, free)
		}
		if tc.uncore != "" {
			groups := l3ByLowestCPU(topo)
			for _, id := range set(t, tc.uncore).List() {
				if assert.Less(t, id, len(groups), "%s: uncore cache %d", tc.from, id) {
					assert.False(t, groups[id].Intersection(free).IsEmpty(), "%s: uncore cache %d (%s) has free CPUs", tc.from, id, groups[id])
				}
			}
		}
	}
	topo := topology(t, smtU)
	assert.Equal(t, "96-103,288-295", cpusOf(t, topo, "l3:12").String(), "the kubelet's uncore cache 12: 4 of its CPUs are reserved (96,97,288,289)")
	quadTopo := topology(t, quad)
	assert.Equal(t, 72, cpusOf(t, quadTopo, "socket:0").Size())
	assert.True(t, cpusOf(t, quadTopo, "socket:0").Contains(169), "169 is on socket 0 in the kubelet's KNL")
}
