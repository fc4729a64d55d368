//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Runtime is a container runtime started privately for the suite: every
// path, socket and state directory below its own work directory.
type Runtime interface {
	// Name is the runtime and its version, e.g. "containerd v2.4.2".
	Name() string
	// Start starts it and imports the test image; Restart stops and starts
	// it again with the same state, as a node's service manager would.
	Start(t testing.TB)
	Restart(t testing.TB)
	Stop()
	// CRISocket and NRISocket are the paths of its sockets.
	CRISocket() string
	NRISocket() string
	// CgroupsPath is where the runtime puts a container or sandbox (cgroupfs
	// driver) below its pod's cgroup parent.
	CgroupsPath(parent, id string) string
	// HasInfraContainer tells whether a pod with this PID namespace mode gets
	// an infra (pause) process.
	HasInfraContainer(pid runtimeapi.NamespaceMode) bool
	// LogTail is the end of its log, for failure reports.
	LogTail() string
}

// daemon is a runtime process the suite starts and stops.
type daemon struct {
	argv []string
	env  []string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
}

func (d *daemon) start(t testing.TB, socket string) {
	t.Helper()
	f, err := os.OpenFile(d.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(d.argv[0], d.argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), d.env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", d.argv[0], err)
	}
	d.cmd, d.done = cmd, make(chan struct{})
	go func() { cmd.Wait(); close(d.done) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if criAnswers(socket) {
			return
		}
		select {
		case <-d.done:
			t.Fatalf("%s exited:\n%s", d.argv[0], tail(d.log, 30))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer on %s:\n%s", d.argv[0], socket, tail(d.log, 30))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (d *daemon) stop() {
	if d.cmd == nil {
		return
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		d.cmd.Process.Kill()
		<-d.done
	}
	d.cmd = nil
}

func criAnswers(socket string) bool {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return false
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = runtimeapi.NewRuntimeServiceClient(conn).Version(ctx, &runtimeapi.VersionRequest{})
	return err == nil
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// run runs a command, failing the test with its output on error.
func run(t testing.TB, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// cleanupDir stops every process started from a path inside dir (shims,
// conmon, the containers' init processes), unmounts what is mounted below it
// and removes it.
func cleanupDir(dir string) {
	for i := 0; i < 50; i++ {
		pids := processesUnder(dir)
		if len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, m := range mountsUnder(dir) {
		syscall.Unmount(m, syscall.MNT_DETACH)
	}
	os.RemoveAll(dir)
}

func processesUnder(dir string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), dir+"/") {
			pids = append(pids, pid)
		}
	}
	return pids
}

func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/mounts")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 1 && strings.HasPrefix(fields[1], dir+"/") {
			out = append(out, fields[1])
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(out))) // deepest first
	return out
}

// removeCgroupTree removes a cgroup tree (children first) from every
// controller's hierarchy.
func removeCgroupTree(root, top string) {
	dirs, _ := filepath.Glob(filepath.Join(root, "*", top))
	if _, err := os.Stat(filepath.Join(root, top)); err == nil {
		dirs = append(dirs, filepath.Join(root, top))
	}
	for _, d := range dirs {
		var all []string
		filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				all = append(all, p)
			}
			return nil
		})
		for i := len(all) - 1; i >= 0; i-- {
			os.Remove(all[i])
		}
	}
}

func mustWrite(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
