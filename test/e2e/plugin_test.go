//go:build e2e

package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// pluginProc is bin/nri-cpupool running as an external NRI plugin.
type pluginProc struct {
	// bin is the binary; empty for this build's (bin/nri-cpupool).
	bin                      string
	cfg, state, log, metrics string
	socket                   string
	cmd                      *exec.Cmd
	done                     chan struct{}
}

// startPlugin writes the scenario's config (plus a private metrics
// address) and starts the plugin; it returns once the runtime has
// synchronized it.
func (c *tc) startPlugin(config string) *pluginProc {
	c.Helper()
	p := &pluginProc{}
	c.preparePlugin(p, config)
	p.start(c)
	return p
}

// preparePlugin gives p the scenario's paths and writes its config.
func (c *tc) preparePlugin(p *pluginProc, config string) {
	c.Helper()
	p.cfg, p.state = filepath.Join(c.dir, "config.yaml"), filepath.Join(c.dir, "state", "nri-cpupool.json")
	p.log, p.metrics, p.socket = filepath.Join(c.dir, "plugin.log"), freeAddr(c), c.e.rt.NRISocket()
	mustWrite(c, p.cfg, config+fmt.Sprintf("metricsAddress: %q\n", p.metrics))
	c.plugin = p
}

func (p *pluginProc) start(c *tc) {
	c.Helper()
	p.launch(c)
	p.waitSynced(c, 0)
}

// launch starts the process without waiting for the runtime.
func (p *pluginProc) launch(c *tc) {
	c.Helper()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.Fatal(err)
	}
	defer f.Close()
	bin := pluginBin
	if p.bin != "" {
		bin = p.bin
	}
	p.cmd = exec.Command(bin, "run", "--config", p.cfg, "--nri-socket", p.socket, "--state-file", p.state, "--log-level", "debug")
	p.cmd.Stdout, p.cmd.Stderr = f, f
	if err := p.cmd.Start(); err != nil {
		c.Fatal(err)
	}
	p.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { cmd.Wait(); close(done) }(p.cmd, p.done)
}

// waitSynced waits until the runtime synchronized the plugin more than n
// times (the plugin's own counter).
func (p *pluginProc) waitSynced(c *tc, n float64) {
	c.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if v, err := p.metric("cpupool_runtime_synchronizations_total"); err == nil && v > n {
			return
		}
		select {
		case <-p.done:
			c.Fatalf("the plugin exited:\n%s", tail(p.log, 30))
		default:
		}
		if time.Now().After(deadline) {
			c.Fatalf("the runtime did not synchronize the plugin:\n%s", tail(p.log, 30))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (p *pluginProc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// kill ends the plugin with SIGKILL (no goodbye to the runtime).
func (p *pluginProc) kill() {
	if p.cmd != nil && p.alive() {
		p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *pluginProc) stop() {
	if p.cmd != nil && p.alive() {
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			p.kill()
		}
	}
}

// metrics scrapes the plugin's metrics endpoint: one value per series,
// keyed as exposed, e.g. `cpupool_pool_free_cpus{pool="exclusive"}`.
func (p *pluginProc) scrape() (map[string]float64, error) {
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get("http://" + p.metrics + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return parseMetrics(resp.Body)
}

func parseMetrics(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %w", line, err)
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

func (p *pluginProc) metric(series string) (float64, error) {
	m, err := p.scrape()
	if err != nil {
		return 0, err
	}
	v, ok := m[series]
	if !ok {
		return 0, fmt.Errorf("no series %s", series)
	}
	return v, nil
}

// metricLabels returns the labels of the first series of a metric.
func (p *pluginProc) series(prefix string) []string {
	m, _ := p.scrape()
	var out []string
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	return out
}

// freeAddr picks a free local port for the plugin's metrics.
func freeAddr(c *tc) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		c.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
