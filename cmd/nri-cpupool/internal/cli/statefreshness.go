package cli

// How current the state file status and explain read is. The daemon
// writes it in the background after each change (docs/state.md), and
// keeps pinning when it cannot: a full or read-only disk leaves the file
// as it was, while containers come and go. The file alone cannot tell:
// a quiet node's file is old and right. So status and explain print when
// it was written, and ask the one who knows, the daemon's /readyz (its
// state-writer check), where the node's config names the address it
// serves on (metricsAddress) and the file read is that config's
// stateFile. The status file beside the state file cannot say it: it is
// written to the same directory, whose writes are the ones failing.

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// readyzTimeout bounds the question to the daemon: a port that drops
// packets must not stall status.
const readyzTimeout = time.Second

// stateFreshness is what status and explain say of the state file's age.
type stateFreshness struct {
	// Written is when the daemon wrote the file (its envelope).
	Written time.Time
	// WriterFailing is what the daemon's /readyz says of its failing
	// state writer ("" when it does not say so, or was not asked).
	WriterFailing string
	// Readyz is the endpoint asked ("" when none was).
	Readyz string
}

// freshnessOf is the state file's freshness: its written time, and the
// daemon's word on its writer when the file read is the config's
// stateFile and the config names metricsAddress.
func freshnessOf(written time.Time, stateFile, configStateFile, metricsAddress string) stateFreshness {
	f := stateFreshness{Written: written}
	if stateFile != configStateFile || metricsAddress == "" {
		return f
	}
	f.Readyz = readyzURL(metricsAddress)
	if f.Readyz != "" {
		f.WriterFailing = stateWriterFailing(f.Readyz)
	}
	return f
}

// readyzURL is the daemon's /readyz for the address it listens on: an
// unspecified host (":9464", "0.0.0.0:9464") is reached on loopback.
func readyzURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/readyz?verbose"
}

// stateWriterFailing is the daemon's failing state-writer check, from its
// /readyz?verbose ("[-]state-writer failed: <why>"); "" when it answers
// otherwise, or not within readyzTimeout (no daemon there, or one that
// does not serve it: nothing is known then, and nothing is said).
func stateWriterFailing(url string) string {
	// The daemon on this node, never a proxy (HTTP_PROXY in the
	// operator's shell would send a node address's question off the
	// node), and no redirect followed elsewhere.
	client := http.Client{Timeout: readyzTimeout, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		return ""
	}
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 64<<10))
	for sc.Scan() {
		if why, ok := strings.CutPrefix(sc.Text(), "[-]state-writer failed: "); ok {
			// Whatever answers on that port writes this: bounded here
			// (on a character, with its size when cut), quoted where it
			// is printed (writeFreshness).
			return boundedAnswer(why)
		}
	}
	return ""
}

// maxAnswer bounds what status and explain repeat of the daemon's answer.
const maxAnswer = 256

// boundedAnswer is s, or its first maxAnswer bytes cut on a character
// and followed by its size.
func boundedAnswer(s string) string {
	if len(s) <= maxAnswer {
		return s
	}
	n := maxAnswer
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + fmt.Sprintf("… (%d bytes)", len(s))
}

// writeFreshness prints when the file was written and, when the daemon
// says its writer fails, that the file may be stale.
func writeFreshness(w io.Writer, stateFile string, f stateFreshness) {
	fmt.Fprintf(w, "State file: %s, written at %s\n", stateFile, f.Written.UTC().Format(time.RFC3339))
	if f.WriterFailing != "" {
		fmt.Fprintf(w, "WARNING: the daemon (%s) says its state writer fails: %s; this file may miss its decisions since (the runtime has where containers run, the daemon's log what it decided)\n",
			strings.TrimSuffix(f.Readyz, "?verbose"), strconv.Quote(f.WriterFailing))
	}
}
