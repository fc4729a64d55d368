package main

import (
	"fmt"
	"path"

	corev1 "k8s.io/api/core/v1"
)

// checkMountPaths refuses two volume mounts of a container at one path
// (spelt alike once cleaned: /var/run/nri and /var/run/nri/ are one
// directory to the runtime). The API server refuses such a pod ("must be
// unique"), so it would fail only at helm install: the chart's paths
// (config.stateFile's directory, config.nriSocket's, the DRA and device
// plugin directories) set to one directory, or over a fixed mount.
func checkMountPaths(c corev1.Container) []error {
	var errs []error
	at := map[string]string{}
	for _, m := range c.VolumeMounts {
		p := path.Clean(m.MountPath)
		if other, ok := at[p]; ok {
			errs = append(errs, fmt.Errorf("container %s mounts volumes %s and %s both at %s: the API server refuses the pod; give the paths that set them (config.stateFile's and config.nriSocket's directories, config.dra.*Dir, config.kubelet.devicePluginDir) directories of their own", c.Name, other, m.Name, p))
			continue
		}
		at[p] = m.Name
	}
	return errs
}
