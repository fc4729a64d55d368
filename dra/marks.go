package dra

// The check, at load, of the claims file's unanswered marks: values a
// decoder would take silently (a null mark is no mark, "answered") or
// refuse with a message that names no claim. A mark decides whether a
// restarted driver holds a claim's CPUs against a running container (see
// PreparedOn), so a damaged one must never read as "answered" unseen.

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// markFields is what checkMarks reads of each claim of the file.
type markFields struct {
	Namespace  string          `json:"namespace"`
	Name       string          `json:"name"`
	Unanswered json.RawMessage `json:"unanswered"`
}

// checkMarks refuses a claims file in which a claim's "unanswered" is
// present but neither true nor false (a string, a number, null, an
// object): such a file was edited by hand or damaged, and it is refused
// as one with any other bad field is (set aside; see store.load), with
// the claim, the field and its value named, and how to fix it. Taking
// such a value as false would say "answered" for a claim the kubelet may
// never have been answered. Keys match as encoding/json matches them
// (case-insensitively, the last of duplicates), so this reads the value
// the decoder then uses.
func checkMarks(data []byte) error {
	var doc struct {
		Claims map[string]*markFields `json:"claims"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return err // the decoder's own error, as before this check
	}
	for _, uid := range slices.Sorted(maps.Keys(doc.Claims)) {
		c := doc.Claims[uid]
		if c == nil || c.Unanswered == nil {
			continue
		}
		if v := string(c.Unanswered); v != "true" && v != "false" {
			return fmt.Errorf(`claim %s (%s/%s): its "unanswered" is %s, not true or false (true: its Prepare's answer to the kubelet is not known to have been sent; absent: false); the file was edited or damaged: set it to true when unsure, the safe side, in the file moved aside, and move it back before the daemon starts again`,
				uid, echo(c.Namespace), echo(c.Name), echo(v))
		}
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
