package main

// What the tool reads of the scheduler process itself: its CPU time and
// memory from /proc, and a CPU profile from its /debug/pprof (its
// metrics are metrics.go's).

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// cpuTime is a process's user and system time so far (/proc/PID/stat,
// fields 14 and 15, in clock ticks of 1/100 s on Linux), 0 when unknown.
func cpuTime(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name, field 2, may hold spaces: count from its ')'.
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// memory reads the scheduler's VmRSS and VmHWM in MiB.
func memory(pid int) (rss, peak float64) {
	if pid == 0 {
		return 0, 0
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			rss = round1(kb / 1024)
		case "VmHWM:":
			peak = round1(kb / 1024)
		}
	}
	return rss, peak
}

// profile fetches a CPU profile from the scheduler's /debug/pprof.
func profile(o options) error {
	cert, err := tls.LoadX509KeyPair(o.cert, o.key)
	if err != nil {
		return err
	}
	// The scheduler's serving certificate is self-signed, on loopback.
	client := &http.Client{Timeout: time.Duration(o.profileSecs+30) * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true}}} //nolint:gosec // loopback, our own cluster
	resp, err := client.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", o.schedURL, o.profileSecs))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", o.schedURL, resp.Status)
	}
	fh, err := os.Create(o.profile)
	if err != nil {
		return err
	}
	if _, err := io.Copy(fh, resp.Body); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}
