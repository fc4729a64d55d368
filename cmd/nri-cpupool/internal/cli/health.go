package cli

// The daemon's health endpoints, on the metrics address beside /metrics
// (docs/metrics.md, "Health endpoints"):
//
//   - /healthz: the process serves; a liveness probe's endpoint.
//   - /readyz: the node pins containers and remembers them: registered with
//     the runtime and synchronized on that connection, and the state writer
//     not failing. 200 "ok", or 503 with one line per failed check;
//     ?verbose lists every check the way the kube-apiserver does.
//
// The DRA driver and the journal of host files' originals (isolation) are
// shown by ?verbose and do not make the daemon unready: pinning depends on
// neither, and a DaemonSet's readiness must not follow them (with
// maxSurge the controller deletes the old pod only once the new one is
// ready, and on the host network the new pod's probe reaches the old
// process, which holds the port: an old driver that cannot register, or
// an old build whose journal cannot be opened, would stall the rollout
// that fixes it, on untuned nodes too). cpupool_dra_driver_state,
// cpupool_host_files_journal_unavailable and their alerts watch them
// instead.

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/cpupool/nri-cpupool/dra/dracore"
)

// readyCheck is one check of /readyz: nil when it passes, otherwise why
// not. An informational one is listed by ?verbose and fails nothing.
type readyCheck struct {
	name          string
	check         func() error
	informational bool
}

// ready is what /readyz asks of the plugin (run passes its *plugin.Plugin):
// the endpoints need only these answers of the daemon.
type ready interface {
	RuntimeReady() error
	StateWriterReady() error
	IsolationReady() error
}

// readyChecks are the daemon's checks: the plugin's, and the DRA driver's
// when it runs (d is nil otherwise).
func readyChecks(p ready, d Driver) []readyCheck {
	checks := []readyCheck{
		{name: "runtime", check: p.RuntimeReady},
		{name: "state-writer", check: p.StateWriterReady},
		{name: "isolation", check: p.IsolationReady, informational: true},
	}
	if d != nil {
		checks = append(checks, readyCheck{name: "dra", check: func() error { return draReady(d.Status()) }, informational: true})
	}
	return checks
}

// draReady is nil when the kubelet confirmed the driver's registration.
func draReady(s dracore.Status) error {
	if s.State == dracore.StateRegistered {
		return nil
	}
	msg := string(s.State)
	if !s.Since.IsZero() {
		msg += " since " + s.Since.UTC().Format(time.RFC3339)
	}
	if s.Detail != "" {
		msg += ": " + s.Detail
	}
	return fmt.Errorf("%s", msg)
}

// plainText sets the headers of a probe's answer: text, never cached.
func plainText(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
}

// healthz answers that the process serves.
func healthz(w http.ResponseWriter, _ *http.Request) {
	plainText(w)
	io.WriteString(w, "ok")
}

// readyz answers 200 "ok" when every check that counts passes, and 503
// with a line per failed check ("runtime: ...") otherwise; with ?verbose,
// a line per check ([+] passed, [-] failed, [!] failed but informational)
// and the verdict.
func readyz(checks []readyCheck) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, verbose := r.URL.Query()["verbose"]
		var out strings.Builder
		failed := false
		for _, c := range checks {
			err := c.check()
			switch {
			case err == nil:
				if verbose {
					fmt.Fprintf(&out, "[+]%s ok\n", c.name)
				}
			case c.informational:
				if verbose {
					fmt.Fprintf(&out, "[!]%s %v (informational: readiness does not depend on it)\n", c.name, err)
				}
			default:
				failed = true
				if verbose {
					fmt.Fprintf(&out, "[-]%s failed: %v\n", c.name, err)
				} else {
					fmt.Fprintf(&out, "%s: %v\n", c.name, err)
				}
			}
		}
		plainText(w)
		switch {
		case failed:
			if verbose {
				out.WriteString("readyz check failed\n")
			}
			w.WriteHeader(http.StatusServiceUnavailable)
		case verbose:
			out.WriteString("readyz check passed\n")
		default:
			out.WriteString("ok")
		}
		io.WriteString(w, out.String())
	}
}
