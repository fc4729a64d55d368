package dra

// The reading, at load, of the claims file's unanswered marks and Prepare
// numbers: values a decoder would take silently (a null mark is no mark,
// "answered"; a null number is 0, the oldest) or refuse with a message
// that names no claim, and that would cost the whole file. They decide
// whether a restarted driver holds a claim's CPUs against a running
// container (see PreparedOn), so a damaged one must never read as
// "answered" unseen; and one claim's damaged mark must not cost the
// other claims of the file (their CDI specs, their running containers).

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// maxPrepare is the highest Prepare number read from the file: a claim is
// prepared far fewer times, and nextPrepare never wraps from it to 0, the
// oldest (whose mark any container of the claim clears).
const maxPrepare = 1 << 53

// requestOnLoad is a request as the file holds it: its mark and number
// raw, read by readMarks. The outer fields shadow the embedded ones, so
// keys match them as encoding/json matches Request's (case-insensitively,
// the last of duplicates).
type requestOnLoad struct {
	Request
	Unanswered json.RawMessage `json:"unanswered"`
	Prepare    json.RawMessage `json:"prepare"`
}

// claimOnLoad is a claim as the file holds it (see requestOnLoad).
type claimOnLoad struct {
	Claim
	Unanswered json.RawMessage           `json:"unanswered"`
	Requests   map[string]*requestOnLoad `json:"requests"`
}

// unansweredNote says what a bad mark was read as, and what to do.
const unansweredNote = `not true or false (true: its Prepare's answer to the kubelet is not known to have been sent; absent: false); the file was edited or damaged: read as true (unanswered, the safe side: its CPUs stay held for the claim's own container until that container or the kubelet's next Prepare confirms it); nothing to do unless the claim's pod misbehaves: then delete the pod (see docs/troubleshooting.md)`

// prepareNote says what a bad Prepare number was read as, and what to do.
const prepareNote = `not a number from 0 to 2^53 (the claim's Prepare that made the request's token; absent: 0); the file was edited or damaged: read as the claim's newest, unanswered (the safe side: a container showing another request's older token does not confirm it); nothing to do unless the claim's pod misbehaves: then delete the pod (see docs/troubleshooting.md)`

// readMarks makes the claim c holds (uid, in the file path), its marks
// and numbers read safely: a claim's or request's "unanswered" present
// but neither true nor false (a string, a number, null, an object) reads
// as true; a request's "prepare" present but no integer from 0 to
// maxPrepare reads as marked and numbered above every other request of
// the claim, so that no container showing an older token clears its
// mark. Each is said through warn, naming the file, the claim, the
// request, the field and its value (echoed short). Taking a bad mark as
// false would say "answered" for a claim the kubelet may never have been
// answered; refusing the file would lose every other claim of it.
func (c *claimOnLoad) readMarks(path, uid string, warn func(string)) *Claim {
	claim := fmt.Sprintf("claim %s (%s/%s)", echo(uid), echo(c.Namespace), echo(c.Name))
	out := c.Claim
	out.Unanswered = readMark(path, claim, c.Unanswered, warn)
	out.Requests = make(map[string]*Request, len(c.Requests))
	var bad []*Request
	var most uint64
	for _, name := range slices.Sorted(maps.Keys(c.Requests)) {
		r := c.Requests[name]
		if r == nil {
			out.Requests[name] = nil // refused as incomplete by checkClaims
			continue
		}
		request := claim + " request " + echo(name)
		req := r.Request
		req.Unanswered = readMark(path, request, r.Unanswered, warn)
		req.Prepare = 0
		if r.Prepare != nil {
			n, err := strconv.ParseUint(string(r.Prepare), 10, 64)
			if err != nil || n > maxPrepare {
				warn(fmt.Sprintf(`DRA claims file %s: %s: its "prepare" is %s, %s`, path, request, echo(string(r.Prepare)), prepareNote))
				bad = append(bad, &req)
			} else {
				req.Prepare = n
				most = max(most, n)
			}
		}
		out.Requests[name] = &req
	}
	for _, r := range bad {
		r.Prepare, r.Unanswered = most+1, true
	}
	return &out
}

// readMark reads an "unanswered": absent is false, and a value neither
// true nor false is true, said through warn.
func readMark(path, what string, mark json.RawMessage, warn func(string)) bool {
	switch v := string(mark); {
	case mark == nil || v == "false":
		return false
	case v == "true":
		return true
	default:
		warn(fmt.Sprintf(`DRA claims file %s: %s: its "unanswered" is %s, %s`, path, what, echo(v), unansweredNote))
		return true
	}
}

// echo bounds what a message repeats of the file's content.
func echo(s string) string {
	const most = 40
	if len(s) > most {
		return s[:most] + "..."
	}
	return s
}
