// Command chartcheck checks what `helm template` renders of the chart in
// deploy/helm/nri-cpupool, offline (no API server): `make lint` runs it
// through test/helm.sh on each values file of the chart's ci/ directory.
//
//	helm template nri-cpupool deploy/helm/nri-cpupool -f ci/dra-values.yaml > out.yaml
//	go run ./tools/chartcheck -expect DaemonSet=1,DeviceClass=3 out.yaml
//
// Each object is decoded strictly into its Kubernetes API type (an unknown
// or duplicated field, a string where a number goes, an unknown kind is an
// error), and the plugin's config file in the ConfigMap is parsed as the
// daemon parses it (config.Parse: unknown keys and bad values refused).
// On top, what the API server would accept but could not run: a
// DaemonSet whose selector does not match its pods' labels, a volume mount
// of no volume, a probe on a port the container does not name or that is
// not the config's metricsAddress port, or on a path the daemon does not
// serve (a 404: the kubelet restarts the plugin for ever), a ConfigMap volume of no
// ConfigMap of the release, a service account of none, a hostPath volume
// whose path is not absolute, two volume mounts of a container at one
// path, a mount inside the config's ConfigMap mount or the ConfigMap's
// inside a hostPath mount, an image without a name, an admission policy
// no binding names (or a binding of no policy), the DRA driver's
// ResourceSlice policy matching another account than the DaemonSet's.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/cpupool/nri-cpupool/config"
)

func main() {
	expect := flag.String("expect", "", "comma-separated KIND=N: how many objects of each kind the file must hold (kinds not named: any number)")
	initScript := flag.Bool("init-script", false, "print the shell script of the DaemonSet's runtime-drop-in init container (/bin/sh -c SCRIPT) instead of checking, for test/helm.sh to run against a directory")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: chartcheck [-expect KIND=N,...] RENDERED.yaml...\n       chartcheck -init-script RENDERED.yaml")
		os.Exit(2)
	}
	if *initScript {
		script, err := dropInScript(flag.Arg(0))
		if err != nil {
			fmt.Fprintf(os.Stderr, "chartcheck -init-script %s: %v\n", flag.Arg(0), err)
			os.Exit(1)
		}
		fmt.Print(script)
		return
	}
	failed := false
	for _, path := range flag.Args() {
		data, err := os.ReadFile(path)
		if err == nil {
			var kinds map[string]int
			kinds, err = check(data)
			if err == nil {
				err = expectKinds(kinds, *expect)
			}
			if err == nil {
				fmt.Printf("chartcheck %s: %s\n", path, summary(kinds))
			}
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "chartcheck %s: %v\n", path, err)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}

// check decodes every object of a rendered chart and checks them together;
// it returns how many objects of each kind there are.
func check(data []byte) (map[string]int, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("building the scheme: %w", err)
	}
	decoder := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	kinds := map[string]int{}
	var objects []runtime.Object
	var errs []error
	for i := 1; ; i++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		obj, gvk, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			errs = append(errs, fmt.Errorf("document %d: %w", i, err))
			continue
		}
		kinds[gvk.Kind]++
		objects = append(objects, obj)
	}
	errs = append(errs, checkTogether(objects)...)
	return kinds, errors.Join(errs...)
}

// dropInScript returns the script of the runtime-drop-in init container
// of the one DaemonSet in a rendered chart: its command must be
// ["/bin/sh", "-c", SCRIPT].
func dropInScript(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return "", errors.New("no DaemonSet with a runtime-drop-in init container")
		}
		if err != nil {
			return "", err
		}
		var ds appsv1.DaemonSet
		if err := utilyaml.Unmarshal(doc, &ds); err != nil || ds.Kind != "DaemonSet" {
			continue
		}
		for _, c := range ds.Spec.Template.Spec.InitContainers {
			if c.Name != "runtime-drop-in" {
				continue
			}
			if len(c.Command) != 3 || c.Command[0] != "/bin/sh" || c.Command[1] != "-c" {
				return "", fmt.Errorf("init container runtime-drop-in: command %q, want [/bin/sh -c SCRIPT]", c.Command)
			}
			return c.Command[2] + "\n", nil
		}
	}
}

// stripComments drops the comment lines of a YAML document (helm's
// "# Source:" headers), to tell an empty document from an object.
func stripComments(doc []byte) []byte {
	var out bytes.Buffer
	for line := range bytes.Lines(doc) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out.Write(line)
		}
	}
	return out.Bytes()
}

// checkTogether checks what no single object's schema says.
func checkTogether(objects []runtime.Object) []error {
	var errs []error
	configMaps := map[string]*corev1.ConfigMap{}
	accounts := map[string]bool{}
	var daemonSets []*appsv1.DaemonSet
	var policies []*admissionv1.ValidatingAdmissionPolicy
	var bindings []*admissionv1.ValidatingAdmissionPolicyBinding
	for _, obj := range objects {
		switch o := obj.(type) {
		case *corev1.ConfigMap:
			configMaps[o.Name] = o
		case *corev1.ServiceAccount:
			accounts[o.Name] = true
		case *appsv1.DaemonSet:
			daemonSets = append(daemonSets, o)
		case *admissionv1.ValidatingAdmissionPolicy:
			policies = append(policies, o)
		case *admissionv1.ValidatingAdmissionPolicyBinding:
			bindings = append(bindings, o)
		}
	}
	for _, ds := range daemonSets {
		errs = append(errs, checkDaemonSet(ds, configMaps, accounts)...)
	}
	return append(errs, checkAdmissionPolicies(policies, bindings, daemonSets)...)
}

// checkAdmissionPolicies: each policy is in force (a binding of the chart
// names it; a binding names a policy of the chart), and a policy on
// ResourceSlices (the DRA driver's, narrowing its role to its own node)
// matches the user of a DaemonSet's service account. The API server takes
// each of these slips, and the policy then restricts nobody.
func checkAdmissionPolicies(policies []*admissionv1.ValidatingAdmissionPolicy, bindings []*admissionv1.ValidatingAdmissionPolicyBinding, daemonSets []*appsv1.DaemonSet) []error {
	var errs []error
	bound := map[string]bool{}
	for _, b := range bindings {
		bound[b.Spec.PolicyName] = true
		if !slices.ContainsFunc(policies, func(p *admissionv1.ValidatingAdmissionPolicy) bool { return p.Name == b.Spec.PolicyName }) {
			errs = append(errs, fmt.Errorf("ValidatingAdmissionPolicyBinding %s binds policy %q, which is not in the chart", b.Name, b.Spec.PolicyName))
		}
	}
	var users []string
	for _, ds := range daemonSets {
		if sa := ds.Spec.Template.Spec.ServiceAccountName; sa != "" {
			users = append(users, "system:serviceaccount:"+ds.Namespace+":"+sa)
		}
	}
	for _, p := range policies {
		if !bound[p.Name] {
			errs = append(errs, fmt.Errorf("ValidatingAdmissionPolicy %s: no binding of the chart names it, so it is not in force", p.Name))
		}
		if p.Spec.MatchConstraints == nil || !slices.ContainsFunc(p.Spec.MatchConstraints.ResourceRules, func(r admissionv1.NamedRuleWithOperations) bool {
			return slices.Contains(r.Resources, "resourceslices")
		}) {
			continue
		}
		if !slices.ContainsFunc(p.Spec.MatchConditions, func(c admissionv1.MatchCondition) bool {
			return slices.ContainsFunc(users, func(u string) bool { return strings.Contains(c.Expression, strconv.Quote(u)) })
		}) {
			errs = append(errs, fmt.Errorf("ValidatingAdmissionPolicy %s: its match conditions name no service account of the chart's DaemonSets (%s), so it restricts nobody", p.Name, strings.Join(users, ", ")))
		}
	}
	return errs
}

func checkDaemonSet(ds *appsv1.DaemonSet, configMaps map[string]*corev1.ConfigMap, accounts map[string]bool) []error {
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("DaemonSet %s: "+format, append([]any{ds.Name}, args...)...))
	}
	spec := ds.Spec.Template.Spec
	if ds.Spec.Selector == nil || !labels.SelectorFromSet(ds.Spec.Selector.MatchLabels).Matches(labels.Set(ds.Spec.Template.Labels)) {
		fail("its selector %v does not match its pods' labels %v", ds.Spec.Selector, ds.Spec.Template.Labels)
	}
	if spec.ServiceAccountName != "" && !accounts[spec.ServiceAccountName] {
		fail("its pods' service account %q is not in the chart", spec.ServiceAccountName)
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
		// The API server takes any text here, an empty one included; the
		// kubelet then fails the pod's start at this volume.
		if v.HostPath != nil && !strings.HasPrefix(v.HostPath.Path, "/") {
			fail("volume %s: hostPath path %q is not absolute: the kubelet cannot mount it; give the node's path from / (the chart's host.* and config.* paths)", v.Name, v.HostPath.Path)
		}
		if v.ConfigMap != nil && configMaps[v.ConfigMap.Name] == nil {
			fail("volume %s names ConfigMap %q, which is not in the chart", v.Name, v.ConfigMap.Name)
		}
	}
	var metricsAddress string
	for _, v := range spec.Volumes {
		if v.ConfigMap == nil || configMaps[v.ConfigMap.Name] == nil {
			continue
		}
		if text, ok := configMaps[v.ConfigMap.Name].Data["config.yaml"]; ok {
			cfg, err := config.Parse(strings.NewReader(text), "ConfigMap "+v.ConfigMap.Name+" config.yaml")
			if err != nil {
				errs = append(errs, err)
				continue
			}
			metricsAddress = cfg.MetricsAddress
			for _, c := range spec.Containers {
				if mountsVolume(c, v.Name) {
					errs = append(errs, checkPluginPod(ds.Name, spec, c, cfg)...)
				}
			}
		}
	}
	containers := slices.Concat(spec.InitContainers, spec.Containers)
	for _, c := range containers {
		// A pod template's image may be empty for the API server, and ":dev"
		// passes its check too; no runtime pulls either.
		if imageName(c.Image) == "" {
			fail("container %s: image %q has no name: set the image's repository (image.repository, runtime.dropIn.image)", c.Name, c.Image)
		}
		for _, m := range c.VolumeMounts {
			if _, ok := volumes[m.Name]; !ok {
				fail("container %s mounts volume %q, which the pod does not have", c.Name, m.Name)
			}
		}
		for _, err := range checkMountPaths(c, volumes) {
			fail("%v", err)
		}
		for _, p := range []struct {
			name  string
			probe *corev1.Probe
		}{{"liveness", c.LivenessProbe}, {"readiness", c.ReadinessProbe}} {
			if p.probe == nil || p.probe.HTTPGet == nil {
				continue
			}
			if err := checkProbePath(p.name, p.probe.HTTPGet.Path); err != nil {
				fail("container %s: %s probe %v", c.Name, p.name, err)
			}
			port, err := probePort(c, p.probe.HTTPGet.Port.String())
			if err != nil {
				fail("container %s: %s probe: %v", c.Name, p.name, err)
				continue
			}
			_, want, err := net.SplitHostPort(metricsAddress)
			if err != nil {
				fail("container %s: %s probe on port %d, but the config serves no metrics address (%q)", c.Name, p.name, port, metricsAddress)
			} else if want != strconv.Itoa(int(port)) {
				fail("container %s: %s probe on port %d, but the config's metricsAddress is %s", c.Name, p.name, port, metricsAddress)
			}
		}
	}
	return errs
}

// imageName is an image reference without its digest (@...) and tag
// (:... after the last /, so that a registry's port stays in the name).
func imageName(image string) string {
	name, _, _ := strings.Cut(image, "@")
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name = name[:i]
	}
	return strings.TrimSpace(name)
}

func mountsVolume(c corev1.Container, volume string) bool {
	return slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == volume })
}

// checkPluginPod checks the plugin's container against its config: each
// directory the daemon writes is mounted read-write (at that path or
// above it), what it reads is mounted, and the DRA driver has its node
// name and its token.
func checkPluginPod(ds string, spec corev1.PodSpec, c corev1.Container, cfg *config.Config) []error {
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("DaemonSet %s: container %s: "+format, append([]any{ds, c.Name}, args...)...))
	}
	mounted := func(dir string, write bool) {
		for _, m := range c.VolumeMounts {
			if (m.MountPath == dir || strings.HasPrefix(dir, strings.TrimSuffix(m.MountPath, "/")+"/")) && (!write || !m.ReadOnly) {
				return
			}
		}
		how := "mounted"
		if write {
			how = "mounted read-write"
		}
		fail("%s, which its config uses, is not %s", dir, how)
	}
	mounted(filepath.Dir(cfg.StateFile), true)
	mounted(filepath.Dir(cfg.NRISocket), true)
	mounted(cfg.CgroupRoot, true)
	// The tuning features write host files (docs/tuning.md): the host's
	// /proc/irq, which only a privileged container may, and files under
	// /sys, which must then be mounted read-write too.
	if tuning := tuningFeatures(cfg); len(tuning) > 0 {
		if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
			fail("its config turns on %s, which write host files, but the container is not privileged", strings.Join(tuning, ", "))
		}
		mounted(filepath.Join(cfg.SysfsRoot, "sys"), true)
	} else {
		mounted(filepath.Join(cfg.SysfsRoot, "sys"), false)
	}
	mounted(filepath.Join(cfg.SysfsRoot, "proc/cmdline"), false)
	for _, err := range checkNestedInHostMounts(c, []hostMount{
		{filepath.Join(cfg.SysfsRoot, "sys"), "the node's sysfs, where the runtime cannot make the mount point (sysfs takes no mkdir; the chart mounts it read-only): the container does not start"},
		{filepath.Join(cfg.SysfsRoot, "proc/cmdline"), "a file, under which nothing can be mounted: the container does not start"},
		{cfg.CgroupRoot, "the node's cgroup tree, where the mount point the runtime makes is a cgroup on the node"},
	}) {
		fail("%v", err)
	}
	if cfg.Kubelet.DevicePlugin {
		mounted(cfg.Kubelet.DevicePluginDir, true)
	}
	// The metrics port is advertised where Prometheus's pod discovery can
	// reach it, and only there: on the host network a loopback address is
	// reached from the node alone.
	if host, port, err := net.SplitHostPort(cfg.MetricsAddress); err == nil {
		loopback := host == "localhost"
		if ip := net.ParseIP(host); ip != nil {
			loopback = ip.IsLoopback()
		}
		advertised, _ := probePort(c, "metrics")
		switch {
		case loopback && advertised != 0:
			fail("advertises port metrics (%d), but metricsAddress %s is the node's loopback, which pod discovery cannot scrape", advertised, cfg.MetricsAddress)
		case !loopback && strconv.Itoa(int(advertised)) != port:
			fail("metricsAddress %s is reachable from other nodes, but the container advertises no port metrics %s for pod discovery", cfg.MetricsAddress, port)
		}
	}
	if !cfg.DRA.Enabled {
		return errs
	}
	for _, dir := range []string{cfg.DRA.CDIDir, cfg.DRA.PluginDir, cfg.DRA.RegistryDir} {
		mounted(dir, true)
	}
	if cfg.DRA.NodeName == "" && !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName"
	}) {
		fail("dra.enabled without dra.nodeName, and no NODE_NAME from spec.nodeName")
	}
	if cfg.DRA.Kubeconfig == "" && spec.AutomountServiceAccountToken != nil && !*spec.AutomountServiceAccountToken {
		fail("dra.enabled with in-cluster credentials, but the pod mounts no service account token")
	}
	return errs
}

// tuningFeatures names the features of cfg that write the host's
// /proc/irq or files under /sys.
func tuningFeatures(cfg *config.Config) []string {
	var on []string
	if cfg.IRQIsolationEnabled() {
		on = append(on, "IRQ isolation")
	}
	if cfg.HousekeepingEnabled() {
		on = append(on, "housekeeping")
	}
	if cfg.RPSHeld() || cfg.WorkqueuesHeld() {
		on = append(on, "kernelWork")
	}
	if len(cfg.Power.Classes) > 0 {
		on = append(on, "power classes")
	}
	return on
}

// probePort resolves a probe's port, a number or the name of a port of the
// container.
func probePort(c corev1.Container, port string) (int32, error) {
	if n, err := strconv.Atoi(port); err == nil {
		return int32(n), nil
	}
	for _, p := range c.Ports {
		if p.Name == port {
			return p.ContainerPort, nil
		}
	}
	return 0, fmt.Errorf("port %q is not a port of the container", port)
}

// expectKinds checks the counts of -expect.
func expectKinds(kinds map[string]int, expect string) error {
	var errs []error
	for item := range strings.SplitSeq(expect, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		kind, n, ok := strings.Cut(item, "=")
		want, err := strconv.Atoi(n)
		if !ok || err != nil {
			return fmt.Errorf("-expect %q: write KIND=N", item)
		}
		if kinds[kind] != want {
			errs = append(errs, fmt.Errorf("%d objects of kind %s, want %d", kinds[kind], kind, want))
		}
	}
	return errors.Join(errs...)
}

func summary(kinds map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, kinds[k]))
	}
	return strings.Join(parts, " ")
}
