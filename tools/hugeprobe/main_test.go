package main

import (
	"syscall"
	"testing"
)

func TestStatusField(t *testing.T) {
	status := "Name:\thugeprobe\nCpus_allowed:\tc0\nCpus_allowed_list:\t6-7\nMems_allowed:\t00000002\nMems_allowed_list:\t1\n"
	for key, want := range map[string]string{
		"Mems_allowed_list": "1",   // not Mems_allowed
		"Cpus_allowed_list": "6-7", // not Cpus_allowed
		"Mems_allowed":      "00000002",
		"Nope":              "?",
	} {
		if got := statusField(status, key); got != want {
			t.Errorf("statusField(%q) = %q, want %q", key, got, want)
		}
	}
}

// TestTouch runs touch on ordinary memory: every page written, and the
// page count returned.
func TestTouch(t *testing.T) {
	mem, err := syscall.Mmap(-1, 0, 4*4096, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(mem)
	n, err := touch(mem, 4096)
	if n != 4 || err != nil {
		t.Fatalf("touch = %d, %v; want 4, nil", n, err)
	}
	for i := 0; i < 4; i++ {
		if mem[i*4096] != 1 {
			t.Errorf("page %d not touched", i)
		}
	}
}

// TestTouchFault: a page the kernel cannot give (here: one without access)
// is an error naming the page, not a crash.
func TestTouchFault(t *testing.T) {
	mem, err := syscall.Mmap(-1, 0, 2*4096, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(mem)
	if err := syscall.Mprotect(mem[4096:], syscall.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	n, err := touch(mem, 4096)
	if n != 1 || err == nil {
		t.Fatalf("touch = %d, %v; want 1 and an error", n, err)
	}
}
