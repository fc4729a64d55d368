// Command mkimage builds minimal OCI image archives without a registry or a
// container engine. Two kinds:
//
// A busybox image for end-to-end tests, whose entrypoint `sleep inf` also
// serves as the pod sandbox (pause) image:
//
//	go run ./tools/mkimage -busybox /bin/busybox -name docker.io/library/busybox:e2e -out busybox.tar
//
// with -add HOST=/bin/NAME (repeatable) for another static binary in it, as
// test/vm/e2e.sh adds tools/hugeprobe:
//
//	go run ./tools/mkimage -busybox /bin/busybox -add bin/hugeprobe=/bin/hugeprobe -out busybox.tar
//
// or a dynamically linked one with its shared libraries at the paths its
// loader looks for them (test/vm/noise.sh adds Debian's oslat so):
//
//	-add /usr/bin/oslat=/bin/oslat -add /lib/x86_64-linux-gnu/libc.so.6=/lib/x86_64-linux-gnu/libc.so.6 ...
//
// The nri-cpupool image for the DaemonSet (deploy/kubernetes), from the
// static binary (CGO_ENABLED=0) and nothing else:
//
//	go run ./tools/mkimage -plugin bin/nri-cpupool-static -name ghcr.io/cpupool/nri-cpupool:dev -out nri-cpupool.tar
//
// Each archive (an OCI image layout in a tar) imports with
// `ctr -n k8s.io images import`, or `skopeo copy oci-archive:...` into a registry.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path"
	"runtime"
	"strings"
	"time"
)

// applets are the busybox commands the tests use (cp, mv and basename:
// the Helm chart's init container that installs the runtime's drop-in,
// which test/k8s/chart.sh runs with this image).
var applets = []string{"sh", "sleep", "cat", "grep", "ls", "ps", "true", "echo", "nproc", "taskset", "cp", "mv", "basename"}

func main() {
	busybox := flag.String("busybox", "/bin/busybox", "a statically linked busybox binary")
	plugin := flag.String("plugin", "", "build the nri-cpupool image from this static binary instead of the busybox image")
	pluginDRA := flag.String("plugin-dra", "", "with -plugin: the static nri-cpupool-dra binary, which nri-cpupool runs when dra.enabled is set")
	name := flag.String("name", "docker.io/library/busybox:e2e", "full image reference")
	out := flag.String("out", "busybox-e2e.tar", "archive to write")
	var extras extraFiles
	flag.Var(&extras, "add", "HOST=/PATH: also put the file HOST into the busybox image at /PATH (a binary in /bin, or a shared library it needs), executable (repeatable)")
	flag.Parse()
	var err error
	if *plugin != "" {
		if len(extras) > 0 {
			err = errors.New("-add is for the busybox image only")
		} else {
			err = buildPlugin(*plugin, *pluginDRA, *name, *out)
		}
	} else if *pluginDRA != "" {
		err = errors.New("-plugin-dra goes with -plugin")
	} else {
		err = buildBusybox(*busybox, extras, *name, *out)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "mkimage: %v\n", err)
		os.Exit(1)
	}
}

// extraFiles are the -add flags: host file, path in the image.
type extraFiles [][2]string

func (e *extraFiles) String() string { return fmt.Sprint(*e) }

func (e *extraFiles) Set(v string) error {
	host, dst, ok := strings.Cut(v, "=")
	// A clean absolute path: the layer's entries are relative to its root,
	// and "../" would leave it.
	if !ok || host == "" || !path.IsAbs(dst) || path.Clean(dst) != dst || dst == "/" || dst == "/bin/busybox" {
		return fmt.Errorf("%q: want HOST=/PATH (a clean absolute path in the image, e.g. /bin/NAME; not /bin/busybox itself)", v)
	}
	*e = append(*e, [2]string{host, dst[1:]})
	return nil
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

// mtime is every file's time: the same input gives the same image digest.
var mtime = time.Unix(0, 0)

// entry is one file of the image's single layer.
type entry struct {
	header *tar.Header
	data   []byte
}

func dir(name string, mode int64) entry {
	return entry{&tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: mode, ModTime: mtime}, nil}
}

func file(name string, mode int64, data []byte) entry {
	return entry{&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: mode, Size: int64(len(data)), ModTime: mtime}, data}
}

func symlink(name, target string) entry {
	return entry{&tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: target, Mode: 0o777, ModTime: mtime}, nil}
}

// buildBusybox: /bin/busybox, one symlink per applet and the extra files,
// `sleep inf`.
func buildBusybox(busyboxPath string, extras extraFiles, name, out string) error {
	bin, err := os.ReadFile(busyboxPath)
	if err != nil {
		return fmt.Errorf("reading busybox (apt-get install busybox-static): %w", err)
	}
	entries := []entry{dir("bin/", 0o755), dir("tmp/", 0o1777), file("bin/busybox", 0o755, bin)}
	for _, a := range applets {
		entries = append(entries, symlink("bin/"+a, "busybox"))
	}
	// Each directory of an extra file once, parents first, before the file.
	dirs := map[string]bool{"bin": true, "tmp": true}
	for _, x := range extras {
		data, err := os.ReadFile(x[0])
		if err != nil {
			return fmt.Errorf("-add: %w", err)
		}
		var parents []string
		for d := path.Dir(x[1]); d != "." && !dirs[d]; d = path.Dir(d) {
			parents = append(parents, d)
			dirs[d] = true
		}
		for i := len(parents) - 1; i >= 0; i-- {
			entries = append(entries, dir(parents[i]+"/", 0o755))
		}
		entries = append(entries, file(x[1], 0o755, data))
	}
	// sleep as PID 1 ignores SIGTERM: without SIGKILL every stop would wait
	// out the runtime's whole timeout.
	return writeImage(entries, map[string]any{"Entrypoint": []string{"/bin/sleep", "inf"}, "Env": []string{"PATH=/bin"}, "StopSignal": "SIGKILL"}, name, out)
}

// buildPlugin: the static nri-cpupool binary as /usr/bin/nri-cpupool, run
// with the config the DaemonSet mounts at /etc/nri-cpupool/config.yaml, and
// nri-cpupool-dra next to it when draPath is set (nri-cpupool runs it in
// its place when the config sets dra.enabled; without it, such a config
// fails to start with a message that says so).
func buildPlugin(binPath, draPath, name, out string) error {
	bin, err := os.ReadFile(binPath)
	if err != nil {
		return fmt.Errorf("reading the plugin binary (make image builds it with CGO_ENABLED=0): %w", err)
	}
	entries := []entry{dir("usr/", 0o755), dir("usr/bin/", 0o755), file("usr/bin/nri-cpupool", 0o755, bin)}
	if draPath != "" {
		dra, err := os.ReadFile(draPath)
		if err != nil {
			return fmt.Errorf("reading the nri-cpupool-dra binary (make image builds it with CGO_ENABLED=0): %w", err)
		}
		entries = append(entries, file("usr/bin/nri-cpupool-dra", 0o755, dra))
	}
	entries = append(entries, dir("etc/", 0o755), dir("etc/nri-cpupool/", 0o755), dir("tmp/", 0o1777))
	return writeImage(entries, map[string]any{
		"Entrypoint": []string{"/usr/bin/nri-cpupool"},
		"Cmd":        []string{"run", "--config", "/etc/nri-cpupool/config.yaml"},
		"Env":        []string{"PATH=/usr/bin"},
		"StopSignal": "SIGTERM",
	}, name, out)
}

// writeImage packs entries as the only layer of an image with the given
// runtime config, and writes the OCI layout as a tar to out.
func writeImage(entries []entry, runConfig map[string]any, name, out string) error {
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	for _, e := range entries {
		if err := tw.WriteHeader(e.header); err != nil {
			return err
		}
		if e.data != nil {
			if _, err := tw.Write(e.data); err != nil {
				return err
			}
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
		"config":       runConfig,
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(diffSum[:])}},
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
