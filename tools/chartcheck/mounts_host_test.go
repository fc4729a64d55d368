package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestAStateDirectoryNestedWithAFixedHostMountIsRefused: the pod's fixed
// host mounts are the node's sysfs at /host/sys (mkdir in sysfs fails, and
// it is mounted read-only), the file /host/proc/cmdline (nothing can be
// mounted under a file) and the node's cgroup tree at /host/sys/fs/cgroup
// (the runtime's mkdir of a mount point there makes a cgroup on the node).
// A state directory inside one of them renders a pod that never starts or
// that changes the node; one above one (/host) mounts the node's directory
// read-write and makes the fixed mount's point in it. The API server takes
// all of them. Mounts nested otherwise stay fine.
func TestAStateDirectoryNestedWithAFixedHostMountIsRefused(t *testing.T) {
	for _, tc := range []struct{ dir, want string }{
		{"/host/sys/nri-cpupool", "mounts volume state at /host/sys/nri-cpupool, inside volume sys's mount at /host/sys, the node's sysfs"},
		{"/host/proc/cmdline/x", "mounts volume state at /host/proc/cmdline/x, inside volume cmdline's mount at /host/proc/cmdline, a file"},
		{"/host/sys/fs/cgroup/nri-cpupool", "mounts volume state at /host/sys/fs/cgroup/nri-cpupool, inside volume cgroup's mount at /host/sys/fs/cgroup, the node's cgroup tree"},
		{"/host", "mounts volume sys at /host/sys, inside volume state's mount at /host"},
		{"/host/proc", "mounts volume cmdline at /host/proc/cmdline, inside volume state's mount at /host/proc"},
		{"/host/sys/fs", "inside volume sys's mount at /host/sys"},
		{"/var/run/nri/state", ""},
		{"/host-state", ""},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			rendered := strings.NewReplacer("    sysfsRoot: /host\n", "    sysfsRoot: /host\n    stateFile: "+tc.dir+"/state.json\n",
				"{name: state, mountPath: /var/lib/nri-cpupool}", "{name: state, mountPath: "+tc.dir+"}").Replace(good)
			_, err := check([]byte(rendered))
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tc.want)
		})
	}
}
