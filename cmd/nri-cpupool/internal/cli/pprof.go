package cli

// run's --pprof-address: the daemon's Go profiles (net/http/pprof), for
// whoever measures where its CPU goes on a node or in the process
// benchmarks (issue 45). Off by default, and never on the metrics
// address: a profile shows the process's memory (the heap's call sites,
// the command line) and a CPU or trace request costs the daemon CPU for
// as long as it lasts, so it is served only where the node's own root
// can reach it: a loopback address or a unix socket.

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/cpupool/nri-cpupool/internal/proflabel"
)

// pprofUnixPrefix marks a unix socket path in --pprof-address.
const pprofUnixPrefix = "unix:"

// pprofBlockRate and pprofMutexFraction are the block and mutex profiles'
// sampling while profiles are served: one blocking event per 10 µs spent
// blocked, one contention in 10. Off (0) otherwise, as the runtime's
// default: each sampled event costs a stack walk.
const (
	pprofBlockRate     = 10 * time.Microsecond
	pprofMutexFraction = 10
)

// pprofListen listens on addr: "unix:PATH" (a socket of mode 0600; a
// socket left at PATH by an earlier process, on which no one listens, is
// replaced), or HOST:PORT
// with HOST a loopback address or localhost.
func pprofListen(addr string) (net.Listener, error) {
	if path, ok := strings.CutPrefix(addr, pprofUnixPrefix); ok {
		if path == "" {
			return nil, fmt.Errorf("--pprof-address %q: the unix socket's path is empty; give unix:/run/nri-cpupool/pprof.sock, for example", addr)
		}
		if err := removeStaleSocket(path); err != nil {
			return nil, fmt.Errorf("--pprof-address %q: %w", addr, err)
		}
		l, err := net.Listen("unix", path)
		if err != nil {
			return nil, fmt.Errorf("--pprof-address: %w", err)
		}
		if err := os.Chmod(path, 0o600); err != nil {
			l.Close()
			return nil, fmt.Errorf("--pprof-address: making %s private: %w", path, err)
		}
		return l, nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--pprof-address %q: %w; give 127.0.0.1:PORT, [::1]:PORT, localhost:PORT or unix:PATH", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("--pprof-address %q: profiles are served on a loopback address or a unix socket only (they show the process's memory); give 127.0.0.1:PORT, [::1]:PORT, localhost:PORT or unix:PATH", addr)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--pprof-address: %w", err)
	}
	return l, nil
}

// removeStaleSocket removes the socket at path if no one listens on it
// (an earlier process's, killed before it closed it). A socket someone
// answers on (a second daemon, the runtime's own socket given by mistake)
// or that cannot be told stale is never removed: it is an error. Any
// other file is left for net.Listen to refuse.
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode().Type() != fs.ModeSocket {
		return nil
	}
	conn, err := net.DialTimeout("unix", path, time.Second)
	switch {
	case err == nil:
		conn.Close()
		return fmt.Errorf("another process listens on the unix socket %s; give a path of its own", path)
	case !errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("%s is a socket that may be another process's (%w); remove it or give another path", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing the stale socket %s: %w", path, err)
	}
	return nil
}

// servePprof serves the profiles on addr until the returned stop is
// called, and samples blocking events and lock contention meanwhile. It
// listens before returning, so a taken port is an error at start.
func servePprof(addr string, log *logrus.Logger) (stop func(), where string, err error) {
	l, err := pprofListen(addr)
	if err != nil {
		return nil, "", err
	}
	runtime.SetBlockProfileRate(int(pprofBlockRate.Nanoseconds()))
	runtime.SetMutexProfileFraction(pprofMutexFraction)
	// No write timeout: a CPU profile or a trace answers after the
	// seconds it was asked for.
	srv := &http.Server{Handler: pprofHandler(), ReadHeaderTimeout: 5 * time.Second}
	proflabel.Go(proflabel.Pprof, func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warnf("serving profiles on %s: %v", addr, err)
		}
	})
	return func() {
		srv.Close()
		runtime.SetBlockProfileRate(0)
		runtime.SetMutexProfileFraction(0)
	}, l.Addr().String(), nil
}

// pprofHandler routes /debug/pprof/ as net/http/pprof does on the default
// mux, which this process never serves: the index and the named profiles
// (heap, allocs, block, mutex, goroutine, threadcreate), the CPU profile,
// the execution trace, the command line and symbols; and the runtime's
// scheduler and GC counters (serveRuntimeMetrics).
func pprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/runtime-metrics", serveRuntimeMetrics)
	return mux
}
