package main

import (
	"archive/tar"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExtraFilesSet: -add takes a binary in /bin or a shared library at the
// absolute path its loader looks in, and refuses what would leave the
// layer's root or replace busybox.
func TestExtraFilesSet(t *testing.T) {
	for _, tc := range []struct {
		arg, want string // want: the path in the layer, "" for refused
	}{
		{"bin/hugeprobe=/bin/hugeprobe", "bin/hugeprobe"},
		{"/usr/bin/oslat=/bin/oslat", "bin/oslat"},
		{"/lib/x86_64-linux-gnu/libc.so.6=/lib/x86_64-linux-gnu/libc.so.6", "lib/x86_64-linux-gnu/libc.so.6"},
		{"/lib64/ld-linux-x86-64.so.2=/lib64/ld-linux-x86-64.so.2", "lib64/ld-linux-x86-64.so.2"},
		{"x=bin/x", ""},
		{"x=/lib/../../etc/x", ""},
		{"x=/", ""},
		{"x=/bin/busybox", ""},
		{"=/bin/x", ""},
		{"/bin/x", ""},
	} {
		var e extraFiles
		err := e.Set(tc.arg)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("-add %s: accepted as %v, want refused", tc.arg, e)
		case tc.want != "" && err != nil:
			t.Errorf("-add %s: %v", tc.arg, err)
		case tc.want != "" && e[0][1] != tc.want:
			t.Errorf("-add %s: in the layer at %q, want %q", tc.arg, e[0][1], tc.want)
		}
	}
}

// TestBusyboxImageHasTheLibrariesDirectories: a library's directories are
// in the layer once each, before the file, so that the runtime unpacks it.
func TestBusyboxImageHasTheLibrariesDirectories(t *testing.T) {
	dir := t.TempDir()
	bb, lib := filepath.Join(dir, "busybox"), filepath.Join(dir, "lib.so")
	for _, f := range []string{bb, lib} {
		if err := os.WriteFile(f, []byte("x"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var e extraFiles
	for _, a := range []string{lib + "=/lib/x86_64-linux-gnu/libc.so.6", lib + "=/lib/x86_64-linux-gnu/libnuma.so.1", lib + "=/lib64/ld.so"} {
		if err := e.Set(a); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "img.tar")
	if err := buildBusybox(bb, e, "x:y", out); err != nil {
		t.Fatal(err)
	}
	names := layerNames(t, out)
	want := "bin/ tmp/ bin/busybox"
	for _, n := range []string{"lib/", "lib/x86_64-linux-gnu/", "lib/x86_64-linux-gnu/libc.so.6", "lib/x86_64-linux-gnu/libnuma.so.1", "lib64/", "lib64/ld.so"} {
		want += " " + n
	}
	var got []string
	for _, n := range names {
		if !strings.HasPrefix(n, "bin/") || n == "bin/" || n == "bin/busybox" {
			got = append(got, n)
		}
	}
	if strings.Join(got, " ") != want {
		t.Errorf("layer (applets aside):\n got %s\nwant %s", strings.Join(got, " "), want)
	}
}

// layerNames: the entries of the image's one layer (the gzip blob).
func layerNames(t *testing.T, archive string) []string {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("no layer in %s: %v", archive, err)
		}
		zr, err := gzip.NewReader(tr)
		if err != nil {
			continue // not the gzip layer
		}
		lr := tar.NewReader(zr)
		var names []string
		for {
			lh, err := lr.Next()
			if err == io.EOF {
				return names
			}
			if err != nil {
				t.Fatalf("layer %s: %v", h.Name, err)
			}
			names = append(names, lh.Name)
		}
	}
}
