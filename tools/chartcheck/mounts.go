package main

import (
	"fmt"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// checkMountPaths refuses two volume mounts of a container at one path
// (spelt alike once cleaned: /var/run/nri and /var/run/nri/ are one
// directory to the runtime). The API server refuses such a pod ("must be
// unique"), so it would fail only at helm install: the chart's paths
// (config.stateFile's directory, config.nriSocket's, the DRA and device
// plugin directories) set to one directory, or over a fixed mount.
//
// It also refuses a mount nested with a ConfigMap's (the config file's at
// /etc/nri-cpupool), which the API server takes but the node cannot run:
// see checkNestedInConfigMap.
func checkMountPaths(c corev1.Container, volumes map[string]corev1.Volume) []error {
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
	return append(errs, checkNestedInConfigMap(c, volumes)...)
}

// checkNestedInConfigMap refuses a mount inside a ConfigMap volume's mount
// and a ConfigMap volume's mount inside a hostPath one (cleaned paths,
// either way round). The kubelet mounts a ConfigMap read-only, so the
// runtime cannot make the inner mount point in it and the container never
// starts (config.stateFile=/etc/nri-cpupool/state/state.json). A ConfigMap
// mounted inside a hostPath puts the node's directory over the image's and
// makes the config's mount point on the node (config.stateFile=
// /etc/state.json mounts the node's /etc read-write at /etc). Mounts
// nested otherwise are fine (the state directory below the NRI socket's,
// the cgroup tree below /host/sys, whose mount point the node has).
func checkNestedInConfigMap(c corev1.Container, volumes map[string]corev1.Volume) []error {
	var errs []error
	for _, outer := range c.VolumeMounts {
		for _, inner := range c.VolumeMounts {
			o, i := path.Clean(outer.MountPath), path.Clean(inner.MountPath)
			if o == i || !strings.HasPrefix(i, strings.TrimSuffix(o, "/")+"/") {
				continue
			}
			ov, iv := volumes[outer.Name], volumes[inner.Name]
			switch {
			case ov.ConfigMap != nil:
				errs = append(errs, fmt.Errorf("container %s mounts volume %s at %s, inside volume %s's mount at %s, a ConfigMap the kubelet mounts read-only: the runtime cannot make the mount point there and the container does not start; give the path that sets it (config.stateFile's or config.nriSocket's directory, config.dra.*Dir, config.kubelet.devicePluginDir) a directory outside %s", c.Name, inner.Name, i, outer.Name, o, o))
			case iv.ConfigMap != nil && ov.HostPath != nil:
				errs = append(errs, fmt.Errorf("container %s mounts volume %s at %s, inside volume %s's mount at %s, the node's %s: the node's directory would hide the image's, and the runtime would make %s on the node; give the path that sets it (config.stateFile's or config.nriSocket's directory, config.dra.*Dir, config.kubelet.devicePluginDir) a directory of its own, not above %s", c.Name, inner.Name, i, outer.Name, o, ov.HostPath.Path, i, i))
			}
		}
	}
	return errs
}

// hostMount is one of the plugin container's fixed mounts of the node
// that its config reads (the node's sysfs, /proc/cmdline, the cgroup
// tree): its path in the container and why nothing may be mounted in it.
type hostMount struct {
	at, what string
}

// checkNestedInHostMounts refuses another mount of the plugin's container
// (the state, NRI socket, device plugin and DRA directories the chart's
// values set) inside one of its fixed host mounts, or above one: inside
// the node's sysfs the runtime cannot make the mount point (sysfs takes no
// mkdir, and the chart mounts it read-only) and the container does not
// start; under the file /proc/cmdline nothing can be mounted; inside the
// node's cgroup tree the mount point the runtime makes is a cgroup on the
// node. A mount above one (config.stateFile=/host/state.json) mounts the
// node's directory read-write and makes the fixed mount's point in it on
// the node. The API server takes all of them. The fixed mounts nested in
// each other (the cgroup tree below /host/sys, whose mount point the node
// has) and the others nested in each other are fine.
func checkNestedInHostMounts(c corev1.Container, fixed []hostMount) []error {
	var errs []error
	isFixed := func(p string) bool {
		return slices.ContainsFunc(fixed, func(f hostMount) bool { return path.Clean(f.at) == p })
	}
	inside := func(inner, outer string) bool {
		return inner != outer && strings.HasPrefix(inner, strings.TrimSuffix(outer, "/")+"/")
	}
	for _, m := range c.VolumeMounts {
		p := path.Clean(m.MountPath)
		if isFixed(p) {
			continue
		}
		// The deepest fixed mount it is in: the cgroup tree's reason, not
		// sysfs's, for a directory in /host/sys/fs/cgroup.
		var in *hostMount
		for i, f := range fixed {
			if inside(p, path.Clean(f.at)) && (in == nil || len(f.at) > len(in.at)) {
				in = &fixed[i]
			}
		}
		for _, f := range c.VolumeMounts {
			fp := path.Clean(f.MountPath)
			if in != nil && fp == path.Clean(in.at) {
				errs = append(errs, fmt.Errorf("mounts volume %s at %s, inside volume %s's mount at %s, %s: give the path that sets it (config.stateFile's or config.nriSocket's directory, config.dra.*Dir, config.kubelet.devicePluginDir) a directory outside %s", m.Name, p, f.Name, fp, in.what, fp))
			}
			if isFixed(fp) && inside(fp, p) {
				errs = append(errs, fmt.Errorf("mounts volume %s at %s, inside volume %s's mount at %s: the node's directory would be mounted read-write in the pod, and the runtime would make %s on the node; give the path that sets it (config.stateFile's or config.nriSocket's directory, config.dra.*Dir, config.kubelet.devicePluginDir) a directory of its own, not above %s", f.Name, fp, m.Name, p, fp, fp))
			}
		}
	}
	return errs
}
