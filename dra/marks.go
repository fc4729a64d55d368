package dra

// The check, at load, of the claims file's unanswered marks and Prepare
// numbers: values a decoder would take silently (a null mark is no mark,
// "answered"; a null number is 0, the oldest) or refuse with a message
// that names no claim. They decide whether a restarted driver holds a
// claim's CPUs against a running container (see PreparedOn), so a damaged
// one must never read as "answered" unseen.

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// markFields is what checkMarks reads of each claim of the file.
type markFields struct {
	Namespace  string          `json:"namespace"`
	Name       string          `json:"name"`
	Unanswered json.RawMessage `json:"unanswered"`
	Requests   map[string]*struct {
		Unanswered json.RawMessage `json:"unanswered"`
		Prepare    json.RawMessage `json:"prepare"`
	} `json:"requests"`
}

// markFix says how to fix a bad mark or number.
const markFix = "the file was edited or damaged: set it to %s, in the file moved aside, and move it back before the daemon starts again"

// checkMarks refuses a claims file in which a claim's or a request's
// "unanswered" is present but neither true nor false (a string, a number,
// null, an object), or a request's "prepare" is present but no
// non-negative integer: such a file was edited by hand or damaged, and it
// is refused as one with any other bad field is (set aside; see
// store.load), with the claim, the request, the field and its value
// named, and how to fix it. Taking a bad mark as false would say
// "answered" for a claim the kubelet may never have been answered. Keys
// match as encoding/json matches them (case-insensitively, the last of
// duplicates), so this reads the values the decoder then uses.
func checkMarks(data []byte) error {
	var doc struct {
		Claims map[string]*markFields `json:"claims"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return err // the decoder's own error, as before this check
	}
	for _, uid := range slices.Sorted(maps.Keys(doc.Claims)) {
		c := doc.Claims[uid]
		if c == nil {
			continue
		}
		claim := fmt.Sprintf("claim %s (%s/%s)", echo(uid), echo(c.Namespace), echo(c.Name))
		if err := checkMark(claim, c.Unanswered); err != nil {
			return err
		}
		for _, name := range slices.Sorted(maps.Keys(c.Requests)) {
			r := c.Requests[name]
			if r == nil {
				continue
			}
			request := claim + " request " + echo(name)
			if err := checkMark(request, r.Unanswered); err != nil {
				return err
			}
			if v := string(r.Prepare); r.Prepare != nil {
				if _, err := strconv.ParseUint(v, 10, 64); err != nil {
					return fmt.Errorf(`%s: its "prepare" is %s, not a number of 0 or more (the claim's Prepare that made the request's token; absent: 0); `+markFix,
						request, echo(v), "the highest of the claim's requests, and mark the request unanswered: true")
				}
			}
		}
	}
	return nil
}

// checkMark refuses an "unanswered" present but neither true nor false.
func checkMark(what string, mark json.RawMessage) error {
	if v := string(mark); mark != nil && v != "true" && v != "false" {
		return fmt.Errorf(`%s: its "unanswered" is %s, not true or false (true: its Prepare's answer to the kubelet is not known to have been sent; absent: false); `+markFix,
			what, echo(v), "true when unsure, the safe side")
	}
	return nil
}

// echo bounds what a message repeats of the file's content.
func echo(s string) string {
	const most = 40
	if len(s) > most {
		return s[:most] + "..."
	}
	return s
}
