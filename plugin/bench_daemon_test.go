package plugin

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/internal/handlerclock"
)

// daemonSpec is how a benchmark runs the real binary (`nri-cpupool run`)
// against a fake runtime.
type daemonSpec struct {
	bin  string   // nri-cpupool, from buildBinary or buildBinaries
	node testNode // its config and the sysfs fixture it reads
	// config is added to node's config (the DRA driver's keys, ...).
	config   string
	logLevel string
	// procRoot gives the daemon the fake runtime's /proc fixture
	// (procRoot in the config: run has no flag for it), as startPlugin
	// gives the plugin in this process.
	procRoot bool
	// metrics serves the daemon's metrics on a free local port
	// (metricsAddress), for benchDaemon.gather.
	metrics bool
	// pprof serves the daemon's Go profiles on a free local port
	// (--pprof-address), for benchDaemon.profile.
	pprof bool
	// clocks times the daemon's creations by phase (--handler-clocks,
	// served on its metrics address), for benchDaemon.clockRounds.
	clocks bool
}

// benchDaemon is the real binary running as its own process.
type benchDaemon struct {
	cmd       *exec.Cmd
	stateFile string
	log       string // its stderr
	metrics   string // host:port of its metrics, "" when not served
	pprof     string // host:port of its profiles, "" when not served
}

// startDaemon runs spec's binary with f's cgroup root, state file and
// sysfs tree, waits until the runtime has synchronized it, and kills it
// (kill -9) when the benchmark ends. f.settle waits, as it does for a
// plugin in this process, for the daemon's sandbox pins, here read from
// the sandboxes' cgroups (waitSandboxCgroups).
//
// The daemon's stdout and stderr are a pipe that another process (cat)
// reads into a file, as journald reads a node's: its log goroutine's
// writes are pipe writes that wake a reader outside both the daemon and
// the runtimes. The file is in a directory of its own, not the config
// file's, whose directory the daemon watches (each line written there
// woke its config watcher). Its last lines are logged when the benchmark
// failed.
func startDaemon(b *testing.B, f *fakeRuntime, spec daemonSpec) *benchDaemon {
	b.Helper()
	d := &benchDaemon{stateFile: statePath(f), log: filepath.Join(b.TempDir(), "daemon.log")}
	require.NoError(b, os.MkdirAll(filepath.Dir(d.stateFile), 0o750))
	config := spec.node.config + "\n" + spec.config
	if spec.procRoot {
		config += fmt.Sprintf("\nprocRoot: %q\n", f.procRoot())
	}
	if spec.metrics {
		d.metrics = freeLocalAddr(b)
		config += fmt.Sprintf("\nmetricsAddress: %q\n", d.metrics)
	}
	cfgFile := filepath.Join(f.dir, "config.yaml")
	require.NoError(b, os.WriteFile(cfgFile, []byte(config), 0o644))
	logFile, err := os.Create(d.log)
	require.NoError(b, err)
	defer logFile.Close()
	journal, logPipe := startLogReader(b, logFile)
	defer logPipe.Close()
	before := f.syncCount()
	args := []string{"run", "--config", cfgFile, "--nri-socket", f.socket, "--state-file", d.stateFile,
		"--sysfs-root", f.sysfsRoot(spec.node.fixture), "--cgroup-root", f.cgroupRoot, "--log-level", spec.logLevel}
	if spec.pprof {
		d.pprof = freeLocalAddr(b)
		args = append(args, "--pprof-address", d.pprof)
	}
	if spec.clocks {
		require.True(b, spec.metrics, "--handler-clocks is served on the metrics address: set daemonSpec.metrics")
		args = append(args, "--handler-clocks")
	}
	d.cmd = exec.Command(spec.bin, args...)
	if len(daemonEnv) > 0 {
		d.cmd.Env = append(os.Environ(), daemonEnv...)
	}
	d.cmd.Stdout, d.cmd.Stderr = logPipe, logPipe
	require.NoError(b, d.cmd.Start())
	b.Cleanup(func() {
		d.cmd.Process.Kill()
		d.cmd.Wait()
		stopLogReader(journal)
		if b.Failed() {
			out, _ := os.ReadFile(d.log)
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			b.Logf("the daemon's last log lines:\n%s", strings.Join(lines[max(0, len(lines)-30):], "\n"))
		}
	})
	f.mu.Lock()
	f.settle = func() { waitSandboxCgroups(b, f) }
	f.mu.Unlock()
	f.waitSynced(before)
	return d
}

// startLogReader starts cat copying a pipe to out and returns it and the
// pipe's write end, for the daemon's output; the caller closes its copy of
// the write end once the daemon has it.
func startLogReader(b *testing.B, out *os.File) (*exec.Cmd, *os.File) {
	b.Helper()
	r, w, err := os.Pipe()
	require.NoError(b, err)
	defer r.Close()
	cat := exec.Command("cat")
	cat.Stdin, cat.Stdout = r, out
	if err := cat.Start(); err != nil {
		w.Close()
		b.Fatalf("starting cat to read the daemon's log pipe: %v", err)
	}
	return cat, w
}

// stopLogReader waits for cat to read the log pipe to its end, which
// comes once the daemon is gone, and kills it if a process the daemon
// left behind keeps the pipe open.
func stopLogReader(cat *exec.Cmd) {
	done := make(chan struct{})
	go func() { cat.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cat.Process.Kill()
		<-done
	}
}

// daemonEnv is added to the environment of every daemon the benchmarks
// start (startDaemon), and of nothing else: not the test process, which
// runs the runtimes, nor the no-op plugin's process. It is how the Go
// runtime's settings (GOGC, GOMEMLIMIT, GODEBUG) are tried on the real
// binary alone (issue 45: a GOGC or GOMEMLIMIT setting only with its
// memory cost shown); …AllFeaturesProcess reports the GOGC and memory
// limit the daemon then ran with (daemon-gogc-percent,
// daemon-gomemlimit-MiB) and fails when they are not the ones given.
// Repeat the flag for more than one variable.
var daemonEnv []string

func init() {
	flag.Func("daemon.env", "`NAME=value` added to the environment of the real binary the benchmarks run, and of nothing else (repeatable; e.g. GOGC=400)", func(v string) error {
		if name, _, ok := strings.Cut(v, "="); !ok || name == "" {
			return fmt.Errorf("want NAME=value, got %q", v)
		}
		daemonEnv = append(daemonEnv, v)
		return nil
	})
}

// reportMemory reports, after the measured rounds, the daemon's resident
// memory (daemon-rss-MiB, process_resident_memory_bytes) and its peak
// since it started (daemon-peak-RSS-MiB, VmHWM: the fill included), what a
// GOGC setting costs; and the GOGC and memory limit it ran with
// (daemon-gogc-percent, -1 for off; daemon-gomemlimit-MiB, only when it
// has one), failing when daemonEnv set GOGC and the daemon runs with
// another: a run would otherwise be reported under a setting it did not
// have.
func (d *benchDaemon) reportMemory(b *testing.B) {
	b.Helper()
	mfs, err := d.gather()
	require.NoError(b, err)
	peak, err := peakRSS(d.cmd.Process.Pid)
	require.NoError(b, err)
	gogc := mustMetric(b, mfs, "go_gc_gogc_percent")
	b.ReportMetric(mustMetric(b, mfs, "process_resident_memory_bytes")/(1<<20), "daemon-rss-MiB")
	b.ReportMetric(float64(peak)/1024, "daemon-peak-RSS-MiB")
	b.ReportMetric(gogc, "daemon-gogc-percent")
	if limit := mustMetric(b, mfs, "go_gc_gomemlimit_bytes"); limit < math.MaxInt64 {
		b.ReportMetric(limit/(1<<20), "daemon-gomemlimit-MiB") // none reported: no limit
	}
	for _, kv := range daemonEnv {
		if v, ok := strings.CutPrefix(kv, "GOGC="); ok {
			want := -1.0
			if v != "off" {
				n, err := strconv.Atoi(v)
				require.NoError(b, err, "-daemon.env=%s", kv)
				want = float64(n)
			}
			require.Equal(b, want, gogc, "the daemon's go_gc_gogc_percent is not the -daemon.env=%s it was given", kv)
		}
	}
}

// freeLocalAddr is a local TCP address free a moment ago.
func freeLocalAddr(tb testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	defer l.Close()
	return l.Addr().String()
}

// waitSandboxCgroups waits until every sandbox the runtime runs has its
// cgroup's cpuset.cpus written: the daemon's pinner has reached them
// (what waitSandboxesPinned waits for in this process; the fake runtime
// makes the file empty).
func waitSandboxCgroups(b *testing.B, f *fakeRuntime) {
	b.Helper()
	f.mu.Lock()
	var dirs []string
	for _, pod := range f.pods {
		dir, err := cgroupDir(pod.Linux.CgroupsPath)
		require.NoError(b, err)
		dirs = append(dirs, filepath.Join(f.hierarchy(), dir, "cpuset.cpus"))
	}
	f.mu.Unlock()
	deadline := time.Now().Add(2 * time.Minute)
	for _, path := range dirs {
		for {
			data, err := os.ReadFile(path)
			require.NoError(b, err)
			if strings.TrimSpace(string(data)) != "" {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("the daemon did not pin sandbox cgroup %s in 2 minutes", path)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// daemonProfile names a directory where
// BenchmarkCreateContainerRoundTripAllFeaturesProcess writes the real
// binary's profiles over its measured rounds (the fill and the rounds'
// pods, run and pinned before them, left out), taken
// through its --pprof-address: <benchmark>.daemon.cpu.prof (a CPU profile
// of daemonProfileSeconds, from the first measured round: give the
// benchmark rounds enough to last that long, or the profile's tail is the
// daemon idle; .daemon.cpu.rounds says how many rounds ended while it ran,
// for CPU per round), and .daemon.allocs.prof, .daemon.block.prof and
// .daemon.mutex.prof with their
// .before.prof taken as the rounds start (`go tool pprof -base
// X.before.prof X.prof` is the rounds' own). The snapshots fall within
// the latency probe's window: take the daemon's CPU and allocation
// figures from a run without it.
var (
	daemonProfile        = flag.String("daemon.profile", "", "directory for the real binary's profiles over the measured rounds (…AllFeaturesProcess)")
	daemonProfileSeconds = flag.Int("daemon.profile.seconds", 5, "length of the real binary's CPU profile (-daemon.profile), from the first measured round")
	daemonTrace          = flag.Bool("daemon.trace", false, "with -daemon.profile, also the real binary's execution trace over the CPU profile's seconds (<benchmark>.daemon.trace.out): `go tool trace -pprof=sched` gives how long its goroutines waited, runnable, for a CPU")
)

// profile starts the profiles daemonProfile asks for and returns what
// waits for them and writes them; nothing when it is not set.
func (d *benchDaemon) profile(b *testing.B, rounds func() int64) func() {
	b.Helper()
	if *daemonProfile == "" {
		return func() {}
	}
	require.NotEmpty(b, d.pprof, "the daemon serves no profiles: start it with daemonSpec.pprof")
	require.NoError(b, os.MkdirAll(*daemonProfile, 0o755))
	base := filepath.Join(*daemonProfile, strings.NewReplacer("/", "_", "=", "").Replace(b.Name())+".daemon.")
	fetch := func(path, file string) error {
		cl := http.Client{Timeout: time.Duration(*daemonProfileSeconds)*time.Second + time.Minute}
		resp, err := cl.Get("http://" + d.pprof + path)
		if err != nil {
			return fmt.Errorf("fetching the daemon's %s: %w", path, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("fetching the daemon's %s: %s", path, resp.Status)
		}
		out, err := os.Create(file)
		if err != nil {
			return err
		}
		defer out.Close()
		_, err = io.Copy(out, resp.Body)
		return err
	}
	for _, name := range []string{"allocs", "block", "mutex"} {
		require.NoError(b, fetch("/debug/pprof/"+name, base+name+".before.prof"))
	}
	// The execution trace, over the same seconds: what the CPU and block
	// profiles cannot show, the time a handler's goroutine was runnable
	// but not running (the Go scheduler's latency, and the OS's under it).
	trace := make(chan error, 1)
	if *daemonTrace {
		go func() {
			trace <- fetch(fmt.Sprintf("/debug/pprof/trace?seconds=%d", *daemonProfileSeconds), base+"trace.out")
		}()
	} else {
		trace <- nil
	}
	cpu := make(chan error, 1)
	go func() {
		from, start := rounds(), time.Now()
		if err := fetch(fmt.Sprintf("/debug/pprof/profile?seconds=%d", *daemonProfileSeconds), base+"cpu.prof"); err != nil {
			cpu <- err
			return
		}
		n, took := rounds()-from, time.Since(start)
		b.Logf("the daemon's CPU profile covers %d rounds in %v", n, took.Round(time.Millisecond))
		cpu <- os.WriteFile(base+"cpu.rounds", fmt.Appendf(nil, "rounds %d\nseconds %.3f\n", n, took.Seconds()), 0o644)
	}()
	return func() {
		for _, name := range []string{"allocs", "block", "mutex"} {
			require.NoError(b, fetch("/debug/pprof/"+name, base+name+".prof"))
		}
		require.NoError(b, <-cpu)
		require.NoError(b, <-trace)
	}
}

// daemonClocks runs the daemon of
// BenchmarkCreateContainerRoundTripAllFeaturesProcess with
// --handler-clocks and reports, over the measured rounds, each phase of its
// CreateContainer by wall clock and by the handler thread's CPU clock
// (clk-<phase>-wall-median-µs, -wall-mean-µs, -cpu-median-µs,
// -cpu-mean-µs; <phase> total for the whole), the share of creations whose
// thread was preempted (clk-preempted-share), the thread's involuntary and
// voluntary switches and minor page faults per creation, and the creations
// timed and those left out (clk-creations, clk-left-out: refused, or ended
// on another thread): whether the handler's time in the daemon is its
// thread off its CPU or its code running slowly (issue 45;
// docs/performance.md). Off by default: the daemon then reads no clock.
var daemonClocks = flag.Bool("daemon.clocks", false, "run the real binary with --handler-clocks and report its CreateContainer's phases by wall and thread CPU clock over the measured rounds (…AllFeaturesProcess)")

// clockRounds reads the daemon's creation clocks as the measured rounds
// start and returns what reports them over the rounds; nothing when
// daemonClocks is off.
func (d *benchDaemon) clockRounds(b *testing.B) func() {
	b.Helper()
	if !*daemonClocks {
		return func() {}
	}
	before := d.creationClocks(b, 0)
	return func() { reportClocks(b, before, d.creationClocks(b, before.Seq)) }
}

// creationClocks is the daemon's creation clocks' summary of the
// creations after since (handlerclock.Recorder.ServeHTTP).
func (d *benchDaemon) creationClocks(b *testing.B, since uint64) handlerclock.Summary {
	b.Helper()
	cl := http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Get(fmt.Sprintf("http://%s/debug/handler-clocks?since=%d", d.metrics, since))
	require.NoError(b, err, "reading the daemon's creation clocks")
	defer resp.Body.Close()
	require.Equal(b, http.StatusOK, resp.StatusCode, "reading the daemon's creation clocks: is it run with --handler-clocks?")
	var s handlerclock.Summary
	require.NoError(b, json.NewDecoder(resp.Body).Decode(&s), "decoding the daemon's creation clocks")
	return s
}

// gather scrapes the daemon's /metrics.
func (d *benchDaemon) gather() ([]*dto.MetricFamily, error) {
	if d.metrics == "" {
		return nil, fmt.Errorf("the daemon serves no metrics: start it with daemonSpec.metrics")
	}
	cl := http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Get("http://" + d.metrics + "/metrics")
	if err != nil {
		return nil, fmt.Errorf("scraping the daemon's metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scraping the daemon's metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	byName, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parsing the daemon's metrics: %w", err)
	}
	mfs := make([]*dto.MetricFamily, 0, len(byName))
	for _, mf := range byName {
		mfs = append(mfs, mf)
	}
	return mfs, nil
}

// hostFileChanges is the daemon's host file writes and restores so far
// (cpupool_host_file_writes_total + cpupool_host_file_restores_total).
func hostFileChanges(b *testing.B, mfs []*dto.MetricFamily) float64 {
	return mustMetric(b, mfs, "cpupool_host_file_writes_total") + mustMetric(b, mfs, "cpupool_host_file_restores_total")
}

// hostFilePasses is the daemon's host file passes so far, full and
// kicked (cpupool_host_file_passes_total).
func hostFilePasses(b *testing.B, mfs []*dto.MetricFamily) float64 {
	b.Helper()
	for _, mf := range mfs {
		if mf.GetName() == "cpupool_host_file_passes_total" {
			var sum float64
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
			return sum
		}
	}
	b.Fatalf("the daemon exports no cpupool_host_file_passes_total")
	return 0
}

// waitHostFilesSettled waits until the daemon's background passes have
// caught up with the containers running: no host file written or
// restored for longer than passes may be spaced after a change
// (hostfiles.DefaultTiming: BusyMax, 1 s, after a long pass), the
// counterpart of FlushIsolation in this process.
func (d *benchDaemon) waitHostFilesSettled(b *testing.B) {
	b.Helper()
	quiet := hostfiles.DefaultTiming.BusyMax + 500*time.Millisecond
	deadline := time.Now().Add(2 * time.Minute)
	last, since := -1.0, time.Now()
	for {
		mfs, err := d.gather()
		require.NoError(b, err)
		if n := hostFileChanges(b, mfs); n != last {
			last, since = n, time.Now()
		} else if time.Since(since) >= quiet {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("the daemon's host file passes did not settle in 2 minutes (%v writes and restores so far)", last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// metricValue is the value of a metric family's first series: a counter's
// or a gauge's value, a summary's or a histogram's count.
func metricValue(mfs []*dto.MetricFamily, name string) (float64, bool) {
	for _, mf := range mfs {
		if mf.GetName() != name || len(mf.GetMetric()) == 0 {
			continue
		}
		m := mf.GetMetric()[0]
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Summary != nil:
			return float64(m.GetSummary().GetSampleCount()), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		case m.Untyped != nil:
			return m.GetUntyped().GetValue(), true
		}
	}
	return 0, false
}

// mustMetric is metricValue, failing the benchmark when the metric is
// missing: a figure read as 0 would look measured.
func mustMetric(b *testing.B, mfs []*dto.MetricFamily, name string) float64 {
	b.Helper()
	v, ok := metricValue(mfs, name)
	if !ok {
		b.Fatalf("no metric %s in the plugin's metrics", name)
	}
	return v
}
