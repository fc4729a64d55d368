//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// podSpec is what the kubelet would put in a pod sandbox config.
type podSpec struct {
	name, namespace string
	qos             string // guaranteed, burstable, besteffort
	annotations     map[string]string
	// pid is the pod's PID namespace mode: POD (shared, with a pause
	// process; CRI's zero value, as crictl sends it) or CONTAINER (the
	// kubelet's default).
	pid runtimeapi.NamespaceMode
	// seccomp asks for the RuntimeDefault profile, as the kubelet always does.
	seccomp bool
}

type pod struct {
	id     string
	spec   podSpec
	parent string
	cfg    *runtimeapi.PodSandboxConfig
	ctrs   map[string]int // attempts per container name
}

func (c *tc) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 60*time.Second)
}

func kubeletLabels(s podSpec, uid string) map[string]string {
	return map[string]string{"io.kubernetes.pod.name": s.name, "io.kubernetes.pod.namespace": s.namespace, "io.kubernetes.pod.uid": uid}
}

// runPod creates a pod sandbox with host networking (no CNI here) below the
// run's own cgroup tree.
func (c *tc) runPod(s podSpec) *pod {
	c.Helper()
	if s.namespace == "" {
		s.namespace = "default"
	}
	uid := newUID(s.name)
	parent := "/" + c.e.top + "/kubepods/pod" + uid
	if s.qos != "" && s.qos != "guaranteed" {
		parent = "/" + c.e.top + "/kubepods/" + s.qos + "/pod" + uid
	}
	sc := &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE, Pid: s.pid}}
	if s.seccomp {
		sc.Seccomp = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
	}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: s.name, Namespace: s.namespace, Uid: uid},
		Labels:       kubeletLabels(s, uid),
		Annotations:  s.annotations,
		LogDirectory: filepath.Join(c.dir, "logs", s.name),
		Linux:        &runtimeapi.LinuxPodSandboxConfig{CgroupParent: parent, SecurityContext: sc},
	}
	os.MkdirAll(cfg.LogDirectory, 0o755)
	ctx, cancel := c.ctx()
	defer cancel()
	resp, err := c.e.cri.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		c.Fatalf("RunPodSandbox %s: %v", s.name, err)
	}
	c.pods = append(c.pods, resp.PodSandboxId)
	return &pod{id: resp.PodSandboxId, spec: s, parent: parent, cfg: cfg, ctrs: map[string]int{}}
}

// create creates a container requesting milliCPU (as the kubelet passes it:
// shares, and a quota as the limit) and starts it unless noStart.
func (c *tc) create(p *pod, name string, milli int64, noStart ...bool) (string, error) {
	c.Helper()
	return c.createCmd(p, name, milli, []string{"/bin/sleep", "inf"}, len(noStart) == 0 || !noStart[0])
}

// createCmd creates a container running cmd, the next attempt of its name
// in the pod (as the kubelet re-creates a container), and starts it if asked.
func (c *tc) createCmd(p *pod, name string, milli int64, cmd []string, start bool) (string, error) {
	c.Helper()
	return c.createEnv(p, name, milli, cmd, start, nil)
}

// createEnv is createCmd with environment variables, as the kubelet passes
// a device plugin's Allocate response.
func (c *tc) createEnv(p *pod, name string, milli int64, cmd []string, start bool, env map[string]string) (string, error) {
	c.Helper()
	shares := milli * 1024 / 1000
	if shares < 2 {
		shares = 2
	}
	quota := milli * 100
	attempt := p.ctrs[name]
	p.ctrs[name] = attempt + 1
	labels := kubeletLabels(p.spec, p.cfg.Metadata.Uid)
	labels["io.kubernetes.container.name"] = name
	var envs []*runtimeapi.KeyValue
	for _, k := range slices.Sorted(maps.Keys(env)) {
		envs = append(envs, &runtimeapi.KeyValue{Key: k, Value: []byte(env[k])})
	}
	sc := &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE, Pid: p.spec.pid}}
	if p.spec.seccomp {
		sc.Seccomp = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
	}
	cfg := &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name, Attempt: uint32(attempt)},
		Image:    &runtimeapi.ImageSpec{Image: image, UserSpecifiedImage: image},
		Command:  cmd,
		Envs:     envs,
		Labels:   labels,
		LogPath:  fmt.Sprintf("%s-%d.log", name, attempt),
		Linux: &runtimeapi.LinuxContainerConfig{
			Resources:       &runtimeapi.LinuxContainerResources{CpuShares: shares, CpuQuota: quota, CpuPeriod: 100000},
			SecurityContext: sc,
		},
	}
	ctx, cancel := c.ctx()
	defer cancel()
	resp, err := c.e.cri.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: p.id, Config: cfg, SandboxConfig: p.cfg})
	if err != nil {
		return "", fmt.Errorf("%s", status.Convert(err).Message())
	}
	if start {
		if _, err := c.e.cri.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: resp.ContainerId}); err != nil {
			return resp.ContainerId, fmt.Errorf("StartContainer: %s", status.Convert(err).Message())
		}
	}
	return resp.ContainerId, nil
}

// mustCreate is create that fails the test on error.
func (c *tc) mustCreate(p *pod, name string, milli int64) string {
	c.Helper()
	id, err := c.create(p, name, milli)
	if err != nil {
		c.Fatalf("creating %s/%s: %v", p.spec.name, name, err)
	}
	return id
}

func (c *tc) stopContainer(id string) {
	c.Helper()
	ctx, cancel := c.ctx()
	defer cancel()
	if _, err := c.e.cri.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 10}); err != nil {
		c.Fatalf("StopContainer: %v", err)
	}
}

func (c *tc) removeContainer(id string) {
	c.Helper()
	ctx, cancel := c.ctx()
	defer cancel()
	if _, err := c.e.cri.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
		c.Fatalf("RemoveContainer: %v", err)
	}
}

// removePod stops and removes a pod, as the kubelet does.
func (c *tc) removePod(p *pod) {
	c.Helper()
	ctx, cancel := c.ctx()
	defer cancel()
	if _, err := c.e.cri.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: p.id}); err != nil {
		c.Fatalf("StopPodSandbox: %v", err)
	}
	if _, err := c.e.cri.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.id}); err != nil {
		c.Fatalf("RemovePodSandbox: %v", err)
	}
}

func (c *tc) exec(id string, cmd ...string) string {
	c.Helper()
	ctx, cancel := c.ctx()
	defer cancel()
	resp, err := c.e.cri.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: cmd, Timeout: 10})
	if err != nil {
		c.Fatalf("exec %v: %v", cmd, err)
	}
	return strings.TrimSpace(string(resp.Stdout))
}

// cgroupDir is the container's (or sandbox's) cpuset cgroup directory.
func (c *tc) cgroupDir(parent, id string) string {
	path := c.e.rt.CgroupsPath(parent, id)
	if _, err := os.Stat("/sys/fs/cgroup/cpuset"); err == nil {
		return "/sys/fs/cgroup/cpuset" + path
	}
	return "/sys/fs/cgroup" + path
}

// quota is a container's CFS quota in microseconds, -1 for none:
// cpu.cfs_quota_us on cgroup v1, the first field of cpu.max on v2.
func (c *tc) quota(p *pod, id string) string {
	path := c.e.rt.CgroupsPath(p.parent, id)
	if _, err := os.Stat("/sys/fs/cgroup/cpu"); err == nil {
		return readTrim("/sys/fs/cgroup/cpu" + path + "/cpu.cfs_quota_us")
	}
	f := strings.Fields(readTrim("/sys/fs/cgroup" + path + "/cpu.max"))
	if len(f) == 0 {
		return "?"
	}
	if f[0] == "max" {
		return "-1"
	}
	return f[0]
}

func readTrim(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "error: " + err.Error()
	}
	return strings.TrimSpace(string(data))
}

// cpus and mems read a container's cgroup; sandboxCPUs the pod's own.
func (c *tc) cpus(p *pod, id string) string {
	return readTrim(c.cgroupDir(p.parent, id) + "/cpuset.cpus")
}
func (c *tc) mems(p *pod, id string) string {
	return readTrim(c.cgroupDir(p.parent, id) + "/cpuset.mems")
}
func (c *tc) sandboxCPUs(p *pod) string { return c.cpus(p, p.id) }

// verboseInfo is the part of the runtimes' verbose status the suite reads.
type verboseInfo struct {
	Pid         int `json:"pid"`
	RuntimeSpec struct {
		Linux struct {
			Resources struct {
				CPU struct {
					Cpus string `json:"cpus"`
				} `json:"cpu"`
			} `json:"resources"`
		} `json:"linux"`
	} `json:"runtimeSpec"`
}

// containerState is the container's CRI state.
func (c *tc) containerState(id string) runtimeapi.ContainerState {
	c.Helper()
	ctx, cancel := c.ctx()
	defer cancel()
	resp, err := c.e.cri.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		c.Fatalf("ContainerStatus: %v", err)
	}
	return resp.Status.State
}

// specCPUs is the cpuset a container was created with, as the runtime
// reports it (an exited container's cgroup is gone).
func (c *tc) specCPUs(id string) string {
	c.Helper()
	ctx, cancel := c.ctx()
	defer cancel()
	resp, err := c.e.cri.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
	if err != nil {
		c.Fatalf("ContainerStatus: %v", err)
	}
	var info verboseInfo
	if err := json.Unmarshal([]byte(resp.Info["info"]), &info); err != nil {
		c.Fatalf("verbose status of %s: %v", id, err)
	}
	return info.RuntimeSpec.Linux.Resources.CPU.Cpus
}

// containerPid is the container's init process as the runtime reports it.
func (c *tc) containerPid(id string) int {
	c.Helper()
	ctx, cancel := c.ctx()
	defer cancel()
	resp, err := c.e.cri.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
	if err != nil {
		c.Fatalf("ContainerStatus: %v", err)
	}
	var info verboseInfo
	if err := json.Unmarshal([]byte(resp.Info["info"]), &info); err != nil || info.Pid == 0 {
		c.Fatalf("no pid in the verbose status of %s: %v %q", id, err, resp.Info["info"])
	}
	return info.Pid
}

// sandboxPid is the pod's infra process, 0 if it has none.
func (c *tc) sandboxPid(p *pod) int {
	c.Helper()
	ctx, cancel := c.ctx()
	defer cancel()
	resp, err := c.e.cri.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: p.id, Verbose: true})
	if err != nil {
		c.Fatalf("PodSandboxStatus: %v", err)
	}
	var info verboseInfo
	json.Unmarshal([]byte(resp.Info["info"]), &info)
	return info.Pid
}

// allowed is a process's Cpus_allowed_list.
func allowed(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "error: " + err.Error()
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

func (c *tc) allowedOf(id string) string { return allowed(c.containerPid(id)) }
