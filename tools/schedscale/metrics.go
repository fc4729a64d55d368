package main

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The scheduler's own counters say where a phase's pods waited and what
// moved them (issue 33: why claims went at a tenth of the no-claim rate).
// These are the series a phase reports, by their labels.
const (
	metricAttempts = "scheduler_schedule_attempts_total"   // by result
	metricIncoming = "scheduler_queue_incoming_pods_total" // by event and queue
	metricPending  = "scheduler_pending_pods"              // by queue, a gauge
)

// Queue is what the scheduler's metrics say of one phase: the attempts by
// result and the pods entering each queue by event (differences over the
// phase), and the most pods seen waiting in each queue (sampled).
type Queue struct {
	Attempts    map[string]float64 `json:"attempts"`
	Incoming    map[string]float64 `json:"incoming"`
	PendingPeak map[string]float64 `json:"pendingPeak"`
}

// scraper reads the scheduler's /metrics through its secure port.
type scraper struct {
	client *http.Client
	url    string
}

func newScraper(o options) (*scraper, error) {
	cert, err := tls.LoadX509KeyPair(o.cert, o.key)
	if err != nil {
		return nil, fmt.Errorf("the client certificate for the scheduler's metrics: %w", err)
	}
	// The scheduler's serving certificate is self-signed, on loopback.
	return &scraper{url: o.schedURL + "/metrics", client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true}}}}, nil //nolint:gosec // loopback, our own cluster
}

func (s *scraper) scrape() (map[string]map[string]float64, error) {
	resp, err := s.client.Get(s.url)
	if err != nil {
		return nil, fmt.Errorf("reading the scheduler's metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("reading the scheduler's metrics: %s: %s", s.url, resp.Status)
	}
	return parseMetrics(resp.Body, metricAttempts, metricIncoming, metricPending)
}

// parseMetrics reads Prometheus text and returns, for each of names, its
// samples by their labels without the quotes (`event=PodAdd,queue=active`).
func parseMetrics(r io.Reader, names ...string) (map[string]map[string]float64, error) {
	out := map[string]map[string]float64{}
	for _, n := range names {
		out[n] = map[string]float64{}
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, _ := strings.Cut(line, "{")
		labels := ""
		if rest == "" {
			name, rest, _ = strings.Cut(line, " ")
		} else {
			labels, rest, _ = strings.Cut(rest, "}")
		}
		series, ok := out[name]
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(rest + " x")[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metric line %q: %w", line, err)
		}
		series[strings.ReplaceAll(labels, `"`, "")] += v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading metrics: %w", err)
	}
	return out, nil
}

// watchQueue samples the scheduler's metrics every interval until stop is
// closed, from first (read before the phase, while the scheduler ran),
// and returns the phase's Queue: the counters' growth since first and each
// queue's peak. With trace, each sample's pending pods go to trace.
func (s *scraper) watchQueue(first map[string]map[string]float64, stop <-chan struct{}, interval time.Duration, trace io.Writer) func() Queue {
	var mu sync.Mutex
	start := time.Now()
	last := first
	peak := maps.Clone(first[metricPending])
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			m, err := s.scrape()
			if err != nil {
				continue // a sample lost to a slow scrape; the next one counts
			}
			if trace != nil {
				fmt.Fprintf(trace, "schedscale: %5.1fs pending %v, attempts %v\n", time.Since(start).Seconds(), m[metricPending], m[metricAttempts])
			}
			mu.Lock()
			last = m
			for q, v := range m[metricPending] {
				peak[q] = max(peak[q], v)
			}
			mu.Unlock()
		}
	}()
	return func() Queue {
		<-done
		m, err := s.scrape()
		if err != nil {
			mu.Lock()
			m = last
			mu.Unlock()
		}
		return Queue{Attempts: growth(first[metricAttempts], m[metricAttempts]),
			Incoming: growth(first[metricIncoming], m[metricIncoming]), PendingPeak: peak}
	}
}

// growth is after minus before, for the series that grew.
func growth(before, after map[string]float64) map[string]float64 {
	d := map[string]float64{}
	for k, v := range after {
		if v-before[k] > 0 {
			d[k] = v - before[k]
		}
	}
	return d
}
