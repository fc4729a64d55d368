package sysfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
)

// HugePages is one NUMA node's pool of one hugepage size, as the kernel
// counts it in nodeN/hugepages/hugepages-<kB>kB/.
type HugePages struct {
	// SizeKB is the page size in KiB (2048, 1048576).
	SizeKB int64 `json:"sizeKB"`
	// Total is nr_hugepages: the pages reserved on the node, free or not.
	Total int64 `json:"total"`
	// Free is free_hugepages: the pages no process has faulted in. A page
	// a process mapped but has not touched yet still counts as free.
	Free int64 `json:"free"`
	// Seq orders readings (ReadHugePages's caller numbers them): a reading
	// begun later has a higher Seq, so that one read before another but
	// handed over after it (two decisions racing for a lock) can be told
	// older. Discovery's counts have 0.
	Seq uint64 `json:"-"`
}

// maxHugePageSizes bounds the sizes read per node: architectures have a
// handful (x86: 2 MiB and 1 GiB; arm64 with 4k pages: 64 KiB, 2 MiB, 32 MiB,
// 1 GiB).
const maxHugePageSizes = 8

// readNodeHugePages reads every hugepage size of one node directory, sorted
// by size; a kernel without hugetlbfs has no hugepages directory.
func readNodeHugePages(r reader, dir string) ([]HugePages, error) {
	entries, err := os.ReadDir(r.path(dir + "/hugepages"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", r.path(dir+"/hugepages"), err)
	}
	var out []HugePages
	for _, e := range entries {
		size, ok := hugePageDirSize(e.Name())
		if !ok {
			continue
		}
		if len(out) == maxHugePageSizes {
			break
		}
		hp := HugePages{SizeKB: size}
		sub := dir + "/hugepages/" + e.Name()
		for _, f := range []struct {
			name string
			dst  *int64
		}{{"nr_hugepages", &hp.Total}, {"free_hugepages", &hp.Free}} {
			v, _, err := r.integer(sub + "/" + f.name)
			if err != nil {
				return nil, err
			}
			*f.dst = max(v, 0)
		}
		out = append(out, hp)
	}
	slices.SortFunc(out, func(a, b HugePages) int { return int(a.SizeKB - b.SizeKB) })
	return out, nil
}

// hugePageDirSize parses "hugepages-2048kB".
func hugePageDirSize(name string) (int64, bool) {
	s, ok := strings.CutPrefix(name, "hugepages-")
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, "kB")
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v <= 0 {
		return 0, false
	}
	return v, true
}

// ReadHugePages reads the hugepage counts of the given nodes again, by node
// id: what a decision about a container that asks for hugepages needs,
// since pages are reserved and taken at run time by processes the plugin
// does not know. It is a few small sysfs reads per node. The counts carry
// seq, which the caller makes larger for every later reading.
func ReadHugePages(root string, nodes []int, seq uint64) (map[int][]HugePages, error) {
	r := reader{root: root}
	out := make(map[int][]HugePages, len(nodes))
	for _, n := range nodes {
		hp, err := readNodeHugePages(r, fmt.Sprintf("%s/node%d", nodeDir, n))
		if err != nil {
			return nil, err
		}
		for i := range hp {
			hp[i].Seq = seq
		}
		out[n] = hp
	}
	return out, nil
}

// HugePageSizeName names a page size the Kubernetes way, as in the resource
// hugepages-2Mi: "2Mi", "1Gi", "64Ki".
func HugePageSizeName(sizeKB int64) string {
	switch {
	case sizeKB >= 1<<20 && sizeKB%(1<<20) == 0:
		return strconv.FormatInt(sizeKB>>20, 10) + "Gi"
	case sizeKB >= 1<<10 && sizeKB%(1<<10) == 0:
		return strconv.FormatInt(sizeKB>>10, 10) + "Mi"
	}
	return strconv.FormatInt(sizeKB, 10) + "Ki"
}
