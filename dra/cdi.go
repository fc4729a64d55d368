package dra

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/cpupool/nri-cpupool/internal/atomicfile"
)

// CDI: each prepared claim gets one spec file in the CDI directory, one
// device per request, whose only edit is the request's token variable.
// The kubelet passes the device ids Prepare returned to the runtime, which
// applies the edits before NRI's CreateContainer, so the plugin finds the
// token in the container's environment. The spec holds tokens, so it is
// readable by root only (the runtime).

// CDIKind is the vendor/class of the driver's CDI devices.
const CDIKind = DriverName + "/claim"

// cdiVersion is the CDI spec version written: environment edits need
// nothing newer, and containerd 2.0 and CRI-O 1.30 read it.
const cdiVersion = "0.6.0"

type cdiSpec struct {
	Version string      `json:"cdiVersion"`
	Kind    string      `json:"kind"`
	Devices []cdiDevice `json:"devices"`
}

type cdiDevice struct {
	Name           string   `json:"name"`
	ContainerEdits cdiEdits `json:"containerEdits"`
}

type cdiEdits struct {
	Env []string `json:"env"`
}

// cdiDeviceName names a request's CDI device: unique per claim UID (never
// reused, as the kubeletplugin package asks, so that no runtime cache
// mistakes an old device for a new one).
func cdiDeviceName(claimUID, request string) string { return claimUID + "-" + request }

// CDIDeviceID is the fully qualified id the kubelet hands the runtime.
func CDIDeviceID(claimUID, request string) string {
	return CDIKind + "=" + cdiDeviceName(claimUID, request)
}

// cdiFile is the spec file of a claim.
func cdiFile(dir, claimUID string) string {
	return filepath.Join(dir, strings.ReplaceAll(CDIKind, "/", "-")+"_"+claimUID+".json")
}

// writeCDISpec writes a claim's spec atomically: a runtime that reads the
// directory meanwhile sees the old file or the new one, never half of one.
func writeCDISpec(dir, claimUID string, c *Claim) error {
	spec := cdiSpec{Version: cdiVersion, Kind: CDIKind}
	for _, name := range slices.Sorted(maps.Keys(c.Requests)) {
		r := c.Requests[name]
		spec.Devices = append(spec.Devices, cdiDevice{Name: cdiDeviceName(claimUID, name),
			ContainerEdits: cdiEdits{Env: []string{EnvName(claimUID, name) + "=" + r.Token}}})
	}
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return fmt.Errorf("CDI spec of claim %s: %w", claimUID, err)
	}
	if err := atomicfile.Replace(cdiFile(dir, claimUID), data, false); err != nil {
		return fmt.Errorf("writing the CDI spec of claim %s: %w", claimUID, err)
	}
	return nil
}

// cdiWriteFailed logs, coalesced, and counts a Prepare whose CDI spec
// could not be written. The claims file holds the claim: the kubelet's
// retry keeps its CPUs and tokens and writes the spec again, and what this
// Prepare changed is said by the one that writes it (unreport). The
// kubeletplugin package puts the error in its reply only, so nothing else
// says it: a full /run or an SELinux denial on the CDI directory left
// every pod with a claim for our devices unstarted while the log read
// "prepared". Under prepareMu.
func (d *Driver) cdiWriteFailed(claim *resourceapi.ResourceClaim, r prepareReport, err error) {
	d.cdiWriteErrors.Add(1)
	d.unreport(claim, r)
	if d.cdiFailing == nil {
		d.cdiFailing = map[string]struct{}{}
	}
	d.cdiFailing[string(claim.UID)] = struct{}{}
	// Each claim's spec file is named by its UID: without it, the same
	// failure of every claim's retries reads the same.
	same := strings.ReplaceAll(err.Error(), string(claim.UID), "<uid>")
	if log, unlogged := d.cdiFailures.failAs(same, time.Now()); log {
		more := ""
		if unlogged > 0 {
			more = fmt.Sprintf("; %d more Prepares failed so since the last such line", unlogged)
		}
		d.log.Warnf("DRA: preparing claim %s/%s: %v (it keeps its CPUs, not prepared: the kubelet retries%s)", claim.Namespace, claim.Name, err, more)
	}
}

// cdiWritten records that a claim's CDI spec was written. The failures
// end, and "written again" is said, only when the last claim whose spec
// could not be written gets it: ended by the spec of another claim of the
// same kubelet call, every retry of the one still failing logged its
// failure again, and a false "written again after 1 failed Prepares".
// Under prepareMu.
func (d *Driver) cdiWritten(claimUID string) {
	if _, failing := d.cdiFailing[claimUID]; !failing {
		return
	}
	delete(d.cdiFailing, claimUID)
	if len(d.cdiFailing) > 0 {
		return
	}
	if failed := d.cdiFailures.succeed(); failed > 0 {
		d.log.Infof("DRA: CDI specs written again after %d failed Prepares", failed)
	}
}

// forgetCDIFailingLocked drops the claims whose spec could not be written that
// are no longer remembered (unprepared, or forgotten as stale): no
// Prepare of theirs will write it. When none is left, the failures end
// without "written again" (no spec was), so that a later failure is
// logged as new. Under prepareMu and d.mu.
func (d *Driver) forgetCDIFailingLocked() {
	if len(d.cdiFailing) == 0 {
		return
	}
	for uid := range d.cdiFailing {
		if _, ok := d.claims[uid]; !ok {
			delete(d.cdiFailing, uid)
		}
	}
	if len(d.cdiFailing) == 0 {
		d.cdiFailures.succeed()
	}
}

// removeCDISpec removes a claim's spec; a missing one is fine.
func removeCDISpec(dir, claimUID string) error {
	if err := os.Remove(cdiFile(dir, claimUID)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the CDI spec of claim %s: %w", claimUID, err)
	}
	return nil
}

// cdiFilePrefix begins the name of every spec file of the driver
// (cdiFile): the files it owns in a directory the runtime's other CDI
// vendors share.
var cdiFilePrefix = strings.ReplaceAll(CDIKind, "/", "-") + "_"

// maxListed bounds the claims a log line names.
const maxListed = 8

// removeStaleCDISpecs removes, at start, the spec files of claims the
// driver does not know: those of a claims file found unusable
// (left in the CDI directory, their tokens were refused as "set by
// hand"), or of a claim whose Unprepare could not remove its spec. Their
// tokens would be refused anyway, as unknown; the kubelet removes a spec
// only through Unprepare, which it does not ask for a claim it holds
// prepared. Only files named as the driver names its own are looked at.
func (d *Driver) removeStaleCDISpecs() {
	if d.cdiDir == "" {
		return
	}
	files, err := filepath.Glob(filepath.Join(d.cdiDir, cdiFilePrefix+"*.json"))
	if err != nil {
		return // only a bad pattern fails Glob
	}
	var removed, kept []string
	var firstErr error
	for _, f := range files {
		uid := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), cdiFilePrefix), ".json")
		if _, known := d.claims[uid]; known {
			continue
		}
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			// One line for them all: a lost claims file of a
			// busy node on a CDI directory gone read-only fails each.
			if firstErr == nil {
				firstErr = err
			}
			kept = append(kept, uid)
			continue
		}
		removed = append(removed, uid)
	}
	if len(kept) > 0 {
		d.log.Warnf("DRA: could not remove the CDI specs of %d claims this driver does not know (%s): %v; a container of such a claim that still shows its token is refused as unknown",
			len(kept), listClaims(kept), firstErr)
	}
	if len(removed) > 0 {
		d.log.Warnf("DRA: removed the CDI specs of %d claims this driver does not know (%s): the containers of their pods cannot start again until the pods are deleted", len(removed), listClaims(removed))
	}
}

// listClaims names the first maxListed claims of uids, for a log line.
func listClaims(uids []string) string {
	listed := strings.Join(uids[:min(len(uids), maxListed)], ", ")
	if len(uids) > maxListed {
		listed += ", …"
	}
	return listed
}
