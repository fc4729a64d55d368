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

// removeCDISpec removes a claim's spec; a missing one is fine.
func removeCDISpec(dir, claimUID string) error {
	if err := os.Remove(cdiFile(dir, claimUID)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the CDI spec of claim %s: %w", claimUID, err)
	}
	return nil
}
