package dra

import (
	"fmt"
	"strings"
	"time"

	"github.com/cpupool/nri-cpupool/internal/cpulist"
)

// lostClaims is a claims file the driver found unusable at start: the
// claims it held are unknown to the driver, while the kubelet still holds
// them prepared and does not prepare them again. A container of such a
// claim that the kubelet restarts shows its token, which the driver
// refuses as unknown: the refusal says why and how to recover, instead of
// blaming the user for a token set by hand. Its record is
// the file set aside: a restart reads it back from there
// (atomicfile.Newest), for as long as the operator keeps the file.
type lostClaims struct {
	at time.Time
	// file is the claims file, aside where it was moved to (or is to be).
	file, aside string
}

// unknownToken is the refusal of a token the driver does not know; it
// names the variable of env that carries it, bounded (tenant input).
func (d *Driver) unknownToken(env []string, tok string) error {
	name := EnvPrefix + "…"
	for _, e := range env {
		if k, v, _ := strings.Cut(e, "="); v == tok && strings.HasPrefix(k, EnvPrefix) {
			name = cpulist.Echo(k)
			break
		}
	}
	if c, ok := d.dropped[tok]; ok {
		return fmt.Errorf("%s: unknown claim token: %s was dropped from the %s driver's claims file %s at its start: %s; "+
			"delete the pod (the kubelet unprepares its claims and prepares those of the new pod), or let the kubelet unprepare the claim; a token set by hand is never accepted",
			name, c.claim, DriverName, d.store.path, c.why)
	}
	if d.lost == nil {
		return fmt.Errorf("%s: unknown claim token; the %s driver sets it through CDI when a container uses a ResourceClaim of its devices, and it cannot be set by hand", name, DriverName)
	}
	// Where the file is: a file that could not be moved aside is still
	// at its place until the driver's next write moves it.
	where := "kept as " + d.lost.aside
	if d.store.leftUnmoved.Load() {
		where = "still at " + d.lost.file + ", to be moved to " + d.lost.aside + " before the next write"
	}
	return fmt.Errorf("%s: unknown claim token: the %s driver's claims file %s could not be used at its start at %s (%s), and the claims prepared before then are lost; "+
		"if this pod's claim is one of them, delete the pod (the kubelet unprepares its claims and prepares those of the new pod), or let the kubelet unprepare the claim; a token set by hand is never accepted",
		name, DriverName, d.lost.file, d.lost.at.UTC().Format(time.RFC3339), where)
}
