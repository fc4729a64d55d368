package cli

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/pools"
	"github.com/cpupool/nri-cpupool/sysfs"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

var plainLook = mapLook{width: 80}

func discover(t *testing.T, name string) *sysfs.Topology {
	t.Helper()
	topo, err := sysfs.Discover(fixture.Root(t, name))
	require.NoError(t, err)
	return topo
}

// cellPattern finds a cell's CPU id where every cell has a pool and an
// owner: the id, a space, a pool letter and a label. Titles never match.
var cellPattern = regexp.MustCompile(`(\d+) [esin?-][A-Z]`)

// busyMap is the widest map a node can need: every CPU in a pool and a
// container's own (more than 26 containers take two-letter labels), three
// marks on every CPU.
func busyMap(topo *sysfs.Topology) nodeMap {
	m := nodeMap{topo: topo, showOwners: true, pools: map[string]cpuset.CPUSet{pools.Exclusive: topo.Online}}
	for _, id := range topo.Online.List() {
		m.owners = append(m.owners, mapOwner{name: fmt.Sprintf("ns/pod-%d/c", id), pool: pools.Exclusive, cpus: cpuset.New(id)})
	}
	m.marks = append(nodeMarks(topo), markedCPUs{markHeld, topo.Online}, markedCPUs{markIdle, topo.Online})
	return m
}

// checkNodeMapFitsEightyColumns draws a machine shape at its widest, in
// ASCII and in UTF-8: every line fits 80 columns, every online CPU is drawn
// once, and a core's threads share a line (TestCommandsOnEveryFixture).
func checkNodeMapFitsEightyColumns(t *testing.T, root string) {
	topo, err := sysfs.Discover(root)
	require.NoError(t, err)
	for _, look := range []mapLook{plainLook, {width: 80, utf8: true}} {
		lines := drawNodeMap(busyMap(topo), look)
		lineOf := map[int]int{}
		for i, l := range lines {
			if strings.Contains(l, "ns/pod-") {
				continue // the legend
			}
			assert.LessOrEqual(t, utf8.RuneCountInString(l), 80, "line %d: %q", i, l)
			for _, m := range cellPattern.FindAllStringSubmatch(l, -1) {
				id, _ := strconv.Atoi(m[1])
				_, twice := lineOf[id]
				assert.False(t, twice, "CPU %d drawn twice", id)
				lineOf[id] = i
			}
		}
		for _, c := range topo.CPUs {
			if !c.Online {
				assert.NotContains(t, lineOf, c.ID, "offline CPU %d drawn", c.ID)
				continue
			}
			require.Contains(t, lineOf, c.ID, "CPU %d not drawn", c.ID)
			for _, sib := range c.Siblings.Intersection(topo.Online).List() {
				assert.Equal(t, lineOf[c.ID], lineOf[sib], "CPU %d and its sibling %d on one line", c.ID, sib)
			}
		}
	}
}

func TestNodeMapFitsANarrowWidth(t *testing.T) {
	lines := drawNodeMap(busyMap(discover(t, "kubelet-single-socket-ht")), mapLook{width: 20})
	assert.Contains(t, lines, "| [0 eA*_ 4 eB*_]          |", "one core a row, the box as wide as its title needs")
}

// cellsOf maps each CPU id to its cell's text after the id, from the boxes
// of a plain map with a pool column.
func cellsOf(lines []string) map[int]string {
	cells := map[int]string{}
	re := regexp.MustCompile(`(\d+) ([esin?-](?:[A-Z]+|[.+·])?[\^*_~]*)`)
	for _, l := range lines {
		if !strings.HasPrefix(l, "|") && !strings.HasPrefix(l, "│") {
			continue
		}
		for _, m := range re.FindAllStringSubmatch(l, -1) {
			id, _ := strconv.Atoi(m[1])
			cells[id] = m[2]
		}
	}
	return cells
}

func TestNodeMapCells(t *testing.T) {
	topo := discover(t, "kubelet-single-socket-ht") // cores [0 4] [1 5] [2 6] [3 7]
	m := nodeMap{topo: topo, showOwners: true, pools: map[string]cpuset.CPUSet{
		pools.Exclusive: cpuset.New(4, 5, 6), pools.Shared: cpuset.New(7), pools.Infra: cpuset.New(0, 1, 2, 3),
		pools.ExclusiveNonIsolcpus: cpuset.New(2, 3),
	}, owners: []mapOwner{
		{name: "ns/b/x", pool: pools.Shared, cpus: cpuset.New(7)},
		{name: "ns/a/x", pool: pools.Exclusive, cpus: cpuset.New(5)},
		{name: "ns/c/x", pool: pools.Infra, cpus: cpuset.New(0, 1)},
		{name: "ns/d/x", pool: pools.Infra, cpus: cpuset.New(1)},
		{name: "ns/e/x", pool: pools.Exclusive, cpus: cpuset.New(6), held: true, note: "exit 1"},
		{name: "ns/f/x", pool: pools.ExclusiveNonIsolcpus, cpus: cpuset.New(2)},
	}}
	lines := drawNodeMap(m, plainLook)
	assert.Equal(t, map[int]string{
		0: "iA", // one infra container: its label
		1: "i+", // two share it
		2: "nC", // lent out of infra
		3: "i.", // lendable, but infra runs there
		4: "e.",
		5: "eB", // labels go core by core: [0 4] [1 5] [2 6]
		6: "eD", // held
		7: "sE",
	}, cellsOf(lines), strings.Join(lines, "\n"))
	assert.Contains(t, lines, "key: e exclusive  s shared  i infra  n exclusive-non-isolcpus  . free")
	assert.Contains(t, lines, "     + several containers")
	assert.Contains(t, lines, "A  ns/c/x  infra                     0-1", "labelled in the order of the map, the pool and CPUs beside")
	assert.Contains(t, lines, "D  ns/e/x  exclusive, held (exit 1)  6")
	assert.Contains(t, lines, "+  ns/d/x  infra                     1", "only behind +: after the labels")
}

// Marks take a column each, only when some online CPU has the mark, and
// always the same column: adding a fact to the map is one entry.
func TestNodeMapMarksHaveColumnsOfTheirOwn(t *testing.T) {
	topo := discover(t, "kubelet-single-socket-ht")
	base := nodeMap{topo: topo, pools: map[string]cpuset.CPUSet{pools.Infra: topo.Online}}
	lines := drawNodeMap(base, plainLook)
	assert.Equal(t, "| [0 i 4 i] [1 i 5 i] [2 i 6 i] [3 i 7 i] |", lines[2], "no marks, no mark columns")

	irqFree := mark{"~", "no device interrupts"}
	marked := base
	marked.marks = []markedCPUs{{markIsolated, cpuset.New(1, 5)}, {irqFree, cpuset.New(5, 6)}, {markHeld, cpuset.New(99)}}
	lines = drawNodeMap(marked, plainLook)
	assert.Equal(t, "| [0 i   4 i  ] [1 i^  5 i^~] [2 i   6 i ~] [3 i   7 i  ] |", lines[2])
	assert.Contains(t, lines, "key: i infra  ^ isolated by the kernel  ~ no device interrupts", "a mark no online CPU has is left out")
}

func TestNodeMapLabelsGrowPastTheAlphabet(t *testing.T) {
	assert.Equal(t, []string{"A", "Z"}, []string{label(0, 1), label(25, 1)})
	assert.Equal(t, []string{"AA", "AZ", "BA", "ZZ"}, []string{label(0, 2), label(25, 2), label(26, 2), label(675, 2)})

	lines := drawNodeMap(busyMap(discover(t, "xeon-2s-interleaved")), plainLook) // 80 containers
	cells := cellsOf(lines)
	assert.Equal(t, "eAA", cells[0], "the first drawn; not isolated, the marks start with a blank")
	assert.Equal(t, "eAB", cells[40], "its sibling")
	assert.Equal(t, "eAC^*_", cells[2])
	assert.Equal(t, "eDB^*_", cells[79], "the 80th")
}

func TestNodeMapNamesWhatItCannotDraw(t *testing.T) {
	topo := discover(t, "server-offline-isolcpus") // 7, 15 and 31 offline
	m := nodeMap{topo: topo, showOwners: true, pools: map[string]cpuset.CPUSet{pools.Exclusive: cpuset.New(2, 7, 90)}, owners: []mapOwner{
		{name: "ns/a/x", pool: pools.Exclusive, cpus: cpuset.New(2, 7)},
		{name: "ns/b/x", pool: pools.Exclusive, cpus: cpuset.New(31, 90)},
	}}
	lines := drawNodeMap(m, plainLook)
	assert.Contains(t, lines, "offline, not drawn: 7,15,31")
	assert.Contains(t, lines, "A  ns/a/x  exclusive  2,7  (CPUs 7 not online here)")
	assert.Contains(t, lines, "-  ns/b/x  exclusive  31,90  (CPUs 31,90 not online here)")
	assert.Contains(t, lines, "pools name CPUs not online here: 7,90")
	cells := cellsOf(lines)
	assert.Equal(t, "-.", cells[23], "in no pool, free; its sibling 7 is offline")
	assert.NotContains(t, cells, 7)
}

// Colour changes how the map looks, never where anything is.
func TestNodeMapColourIsOnlyPaint(t *testing.T) {
	m := busyMap(discover(t, "xeon-2s-interleaved"))
	m.owners[40].held = true // CPU 40's
	plain := drawNodeMap(m, mapLook{width: 80, utf8: true})
	colored := drawNodeMap(m, mapLook{width: 80, utf8: true, color: true})
	sgr := regexp.MustCompile("\x1b\\[[0-9;]*m")
	require.Len(t, colored, len(plain))
	for i := range plain {
		assert.NotContains(t, plain[i], "\x1b")
		assert.Equal(t, plain[i], sgr.ReplaceAllString(colored[i], ""))
	}
	assert.Contains(t, colored[2], "\x1b[1;31m 0 eAA\x1b[0m", "a container's cell: bold, its pool's colour")
	assert.Contains(t, colored[2], "\x1b[1;33m40 eAB\x1b[0m", "a held cell: yellow")
	assert.Contains(t, colored[1], "\x1b[1msocket 0, NUMA 0, L3 0\x1b[0m", "titles bold")
}

// TestSummaryWrapsAtCommas: the lines above the boxes wrap after a comma
// when a sparse node's figures or offline list outgrow the width; nothing
// is lost.
func TestSummaryWrapsAtCommas(t *testing.T) {
	long := "offline, not drawn: 1030,1090,1150,1210,1270,1330,1390,1450,1510,1570,1630,1690,1750,1810,2050,3078,4095"
	lines := wrapAfterCommas(long, 40)
	for _, l := range lines {
		assert.LessOrEqual(t, len(l), 40, l)
	}
	assert.Equal(t, strings.ReplaceAll(long, " ", ""), strings.ReplaceAll(strings.Join(lines, ""), " ", ""), "every id kept, in order")
	assert.Equal(t, []string{"short, enough"}, wrapAfterCommas("short, enough", 80))
	assert.Equal(t, []string{"nocommasatalltoolong"}, wrapAfterCommas("nocommasatalltoolong", 5), "an unbreakable piece stays whole")
}
