// Command mkimage builds a minimal OCI image archive from a static busybox,
// for end-to-end tests on machines without an image registry:
//
//	go run ./tools/mkimage -busybox /bin/busybox -name docker.io/library/busybox:e2e -out busybox.tar
//
// The archive (an OCI image layout in a tar) imports with
// `ctr -n k8s.io images import`. Its entrypoint `sleep inf` also serves as
// the pod sandbox (pause) image.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"
)

// applets are the busybox commands the tests use.
var applets = []string{"sh", "sleep", "cat", "grep", "ls", "ps", "true", "echo", "nproc", "taskset"}

func main() {
	busybox := flag.String("busybox", "/bin/busybox", "a statically linked busybox binary")
	name := flag.String("name", "docker.io/library/busybox:e2e", "full image reference")
	out := flag.String("out", "busybox-e2e.tar", "archive to write")
	flag.Parse()
	if err := build(*busybox, *name, *out); err != nil {
		fmt.Fprintf(os.Stderr, "mkimage: %v\n", err)
		os.Exit(1)
	}
}

type blob struct {
	mediaType string
	data      []byte
}

func (b blob) digest() string {
	sum := sha256.Sum256(b.data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func (b blob) descriptor(annotations map[string]string) map[string]any {
	d := map[string]any{"mediaType": b.mediaType, "digest": b.digest(), "size": len(b.data)}
	if annotations != nil {
		d["annotations"] = annotations
	}
	return d
}

func build(busyboxPath, name, out string) error {
	bin, err := os.ReadFile(busyboxPath)
	if err != nil {
		return fmt.Errorf("reading busybox (apt-get install busybox-static): %w", err)
	}
	// The layer: /bin/busybox and one symlink per applet.
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	mtime := time.Unix(0, 0)
	entries := []*tar.Header{
		{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: mtime},
		{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777, ModTime: mtime},
		{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bin)), ModTime: mtime},
	}
	for _, h := range entries {
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(bin); err != nil {
				return err
			}
		}
	}
	for _, a := range applets {
		if err := tw.WriteHeader(&tar.Header{Name: "bin/" + a, Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777, ModTime: mtime}); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	diffSum := sha256.Sum256(layer.Bytes())
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(layer.Bytes()); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	layerBlob := blob{"application/vnd.oci.image.layer.v1.tar+gzip", gz.Bytes()}

	config, _ := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		// sleep as PID 1 ignores SIGTERM: without SIGKILL every stop would
		// wait out the runtime's whole timeout.
		"config": map[string]any{"Entrypoint": []string{"/bin/sleep", "inf"}, "Env": []string{"PATH=/bin"}, "StopSignal": "SIGKILL"},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(diffSum[:])}},
	})
	configBlob := blob{"application/vnd.oci.image.config.v1+json", config}
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        configBlob.descriptor(nil),
		"layers":        []any{layerBlob.descriptor(nil)},
	})
	manifestBlob := blob{"application/vnd.oci.image.manifest.v1+json", manifest}
	index, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.index.v1+json",
		"manifests": []any{manifestBlob.descriptor(map[string]string{
			"io.containerd.image.name":          name,
			"org.opencontainers.image.ref.name": name,
		})},
	})

	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	aw := tar.NewWriter(f)
	files := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
	}
	for _, b := range []blob{layerBlob, configBlob, manifestBlob} {
		files = append(files, struct {
			name string
			data []byte
		}{"blobs/sha256/" + b.digest()[len("sha256:"):], b.data})
	}
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := aw.WriteHeader(&tar.Header{Name: dir, Typeflag: tar.TypeDir, Mode: 0o755, ModTime: mtime}); err != nil {
			return err
		}
	}
	for _, file := range files {
		if err := aw.WriteHeader(&tar.Header{Name: file.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(file.data)), ModTime: mtime}); err != nil {
			return err
		}
		if _, err := aw.Write(file.data); err != nil {
			return err
		}
	}
	return aw.Close()
}
