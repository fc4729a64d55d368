// Command hugeprobe is the workload of the VM suite's hugepage check (issue
// 31, test/vm/scenarios.sh). Run in a container, it maps hugepages with
// MAP_HUGETLB, touches every page, prints where its memory may come from and
// whether the mapping worked, then holds the pages until it is stopped, so
// that the node's free_hugepages show them taken while the test looks.
//
//	hugeprobe [-size BYTES] [-page BYTES]
//
// It prints two lines:
//
//	cpus=<Cpus_allowed_list> mems=<Mems_allowed_list>
//	hugepages ok <pages>                (or: hugepages failed: <why>)
//
// and exits 1 at once on a failure. The kernel refuses the mmap with ENOMEM
// when the nodes in the process's mems have too few free hugepages: that is
// the failure a container pinned to the wrong node meets. It is built static
// (CGO_ENABLED=0): the test image has busybox and no libc. test/vm/e2e.sh
// builds it and puts it into that image (tools/mkimage -add).
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
)

func main() {
	size := flag.Int("size", 32<<20, "bytes to map (a multiple of -page)")
	page := flag.Int("page", 2<<20, "hugepage size in bytes: the kernel's default size, which MAP_HUGETLB without a size flag gets")
	flag.Parse()

	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		fmt.Printf("hugepages failed: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("cpus=%s mems=%s\n", statusField(string(status), "Cpus_allowed_list"), statusField(string(status), "Mems_allowed_list"))

	mem, err := syscall.Mmap(-1, 0, *size, syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS|syscall.MAP_HUGETLB) // MAP_HUGETLB = 0x40000
	if err != nil {
		fmt.Printf("hugepages failed: mmap %d bytes: %v\n", *size, err)
		os.Exit(1)
	}
	if n, err := touch(mem, *page); err != nil {
		fmt.Printf("hugepages failed: touching page %d: %v\n", n, err)
		os.Exit(1)
	}
	fmt.Printf("hugepages ok %d\n", *size / *page)

	// Hold the pages until the runtime stops the container.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}

// touch writes one byte in every page of mem, which makes the kernel give
// each page its hugepage. A page the kernel cannot give raises SIGBUS;
// SetPanicOnFault turns that into an error here instead of a crash without
// the second line. It returns the page it stopped at.
func touch(mem []byte, page int) (n int, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	for n = 0; n*page < len(mem); n++ {
		mem[n*page] = 1
	}
	return n, nil
}

// statusField returns the value of KEY in /proc/<pid>/status text ("Key:\tvalue"
// lines), or "?" when there is no such line.
func statusField(status, key string) string {
	for _, line := range strings.Split(status, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == key {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}
