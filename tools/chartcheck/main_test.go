package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// good is a minimal rendering of the chart's shape: the checks pass on it,
// and each case below breaks one thing.
const good = `---
# Source: nri-cpupool/templates/serviceaccount.yaml
apiVersion: v1
kind: ServiceAccount
metadata: {name: p, namespace: ns}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: p-config, namespace: ns}
data:
  config.yaml: |
    metricsAddress: 127.0.0.1:9464
    sysfsRoot: /host
    cgroupRoot: /host/sys/fs/cgroup
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: p, namespace: ns}
spec:
  selector: {matchLabels: {app: p}}
  template:
    metadata: {labels: {app: p}}
    spec:
      serviceAccountName: p
      containers:
        - name: p
          image: x
          livenessProbe: {httpGet: {host: 127.0.0.1, port: 9464, path: /healthz}}
          readinessProbe: {httpGet: {host: 127.0.0.1, port: 9464, path: /readyz}}
          volumeMounts:
            - {name: config, mountPath: /etc/nri-cpupool}
            - {name: nri, mountPath: /var/run/nri}
            - {name: state, mountPath: /var/lib/nri-cpupool}
            - {name: sys, mountPath: /host/sys, readOnly: true}
            - {name: cmdline, mountPath: /host/proc/cmdline, readOnly: true}
            - {name: cgroup, mountPath: /host/sys/fs/cgroup}
      volumes:
        - {name: config, configMap: {name: p-config}}
        - {name: nri, hostPath: {path: /var/run/nri}}
        - {name: state, hostPath: {path: /var/lib/nri-cpupool}}
        - {name: sys, hostPath: {path: /sys}}
        - {name: cmdline, hostPath: {path: /proc/cmdline}}
        - {name: cgroup, hostPath: {path: /sys/fs/cgroup}}
`

func TestCheck(t *testing.T) {
	kinds, err := check([]byte(good))
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"ServiceAccount": 1, "ConfigMap": 1, "DaemonSet": 1}, kinds)
	require.NoError(t, expectKinds(kinds, "DaemonSet=1,DeviceClass=0"))
	assert.ErrorContains(t, expectKinds(kinds, "DeviceClass=3"), "0 objects of kind DeviceClass, want 3")

	for _, tc := range []struct{ name, from, to, want string }{
		{"unchanged", "", "", ""},
		{"unknown field in the pod", "      serviceAccountName: p", "      serviceAccountName: p\n      hostNetwok: true", `unknown field "spec.template.spec.hostNetwok"`},
		{"selector", "selector: {matchLabels: {app: p}}", "selector: {matchLabels: {app: q}}", "does not match its pods' labels"},
		{"mount of no volume", "{name: config, mountPath", "{name: conf, mountPath", `mounts volume "conf"`},
		{"state directory read-only", "mountPath: /var/lib/nri-cpupool}", "mountPath: /var/lib/nri-cpupool, readOnly: true}", "/var/lib/nri-cpupool, which its config uses, is not mounted read-write"},
		{"cgroup tree elsewhere", "    cgroupRoot: /host/sys/fs/cgroup", "    cgroupRoot: /host/cgroup", "/host/cgroup, which its config uses, is not mounted read-write"},
		{"device plugin directory not mounted", "    sysfsRoot: /host", "    sysfsRoot: /host\n    kubelet: {devicePlugin: true}", "/var/lib/kubelet/device-plugins, which its config uses"},
		{"DRA without its directories, node name or token", "    sysfsRoot: /host", "    sysfsRoot: /host\n    dra: {enabled: true}", "/var/run/cdi, which its config uses"},
		{"ConfigMap not in the chart", "configMap: {name: p-config}", "configMap: {name: other}", `names ConfigMap "other"`},
		{"unknown config key", "    sysfsRoot: /host", "    sysfsRot: /host", "sysfsRot"},
		{"probe off the metrics port", "port: 9464, path: /readyz", "port: 9465, path: /readyz", "readiness probe on port 9465, but the config's metricsAddress is 127.0.0.1:9464"},
		{"tuning without privileges", "    sysfsRoot: /host", "    sysfsRoot: /host\n    pools: {exclusive: {irqIsolation: optIn}}", "turns on IRQ isolation, which write host files, but the container is not privileged"},
		{"probe on no named port", "port: 9464, path: /healthz", "port: metric, path: /healthz", `port "metric" is not a port of the container`},
		{"metrics port advertised on loopback", "          image: x", "          image: x\n          ports: [{name: metrics, containerPort: 9464}]", "advertises port metrics (9464), but metricsAddress 127.0.0.1:9464 is the node's loopback"},
		{"metrics on every address, no port", "metricsAddress: 127.0.0.1:9464", "metricsAddress: \":9464\"", `metricsAddress :9464 is reachable from other nodes, but the container advertises no port metrics 9464`},
		{"unknown kind", "kind: ServiceAccount", "kind: ServiceAcount", "ServiceAcount"},
		{"service account not in the chart", "serviceAccountName: p", "serviceAccountName: q", `service account "q"`},
		// Values the API server takes but no kubelet can run: --set host.sysfs= rendered `hostPath: {path: }`,
		// host.cgroup=relative a relative one, image.repository= the image
		// ":dev", and chartcheck passed them.
		{"hostPath without a path", "hostPath: {path: /sys}", `hostPath: {path: ""}`, `volume sys: hostPath path "" is not absolute`},
		{"hostPath left null", "hostPath: {path: /sys}", "hostPath: {path: }", `volume sys: hostPath path "" is not absolute`},
		{"relative hostPath", "hostPath: {path: /sys/fs/cgroup}", "hostPath: {path: relative}", `volume cgroup: hostPath path "relative" is not absolute`},
		{"image without a name", "          image: x", `          image: ":dev"`, `container p: image ":dev" has no name`},
		{"image with only a digest", "          image: x", `          image: "@sha256:0123"`, `container p: image "@sha256:0123" has no name`},
		{"no image", "          image: x", `          image: ""`, `container p: image "" has no name`},
		{"image with a registry port, no tag", "          image: x", "          image: r.example:5000/p", ""},
		{"image with a tag and a digest", "          image: x", "          image: r.example/p:1@sha256:0123", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := check([]byte(strings.Replace(good, tc.from, tc.to, 1)))
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

// TestCheckMetricsPort: an address other nodes reach advertises its port.
func TestCheckMetricsPort(t *testing.T) {
	every := strings.NewReplacer("metricsAddress: 127.0.0.1:9464", `metricsAddress: "0.0.0.0:9464"`,
		"          image: x\n", "          image: x\n          ports: [{name: metrics, containerPort: 9464}]\n")
	_, err := check([]byte(every.Replace(good)))
	assert.NoError(t, err)
}

// TestCheckTuning: the features that write host files need a privileged
// container with the host's /sys mounted read-write.
func TestCheckTuning(t *testing.T) {
	power := strings.NewReplacer("    sysfsRoot: /host\n", "    sysfsRoot: /host\n    power: {classes: {fast: {governor: performance}}}\n")
	privileged := strings.NewReplacer("          image: x\n", "          image: x\n          securityContext: {privileged: true}\n")
	writable := strings.NewReplacer("mountPath: /host/sys, readOnly: true}", "mountPath: /host/sys}")
	_, err := check([]byte(writable.Replace(privileged.Replace(power.Replace(good)))))
	assert.NoError(t, err)
	_, err = check([]byte(privileged.Replace(power.Replace(good))))
	assert.ErrorContains(t, err, "/host/sys, which its config uses, is not mounted read-write")
	_, err = check([]byte(writable.Replace(power.Replace(good))))
	assert.ErrorContains(t, err, "turns on power classes, which write host files, but the container is not privileged")
	_, err = check([]byte(privileged.Replace(good)))
	assert.NoError(t, err, "privileged without tuning")
}

// TestCheckDRA: with dra.enabled the container has the driver's
// directories, its node name from NODE_NAME unless the config names it,
// and a token unless the config has a kubeconfig.
func TestCheckDRA(t *testing.T) {
	dra := strings.NewReplacer(
		"    sysfsRoot: /host\n", "    sysfsRoot: /host\n    dra: {enabled: true}\n",
		"      volumes:\n", `            - {name: cdi, mountPath: /var/run/cdi}
            - {name: plugins, mountPath: /var/lib/kubelet/plugins}
            - {name: registry, mountPath: /var/lib/kubelet/plugins_registry}
          env: [{name: NODE_NAME, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}]
      volumes:
        - {name: cdi, hostPath: {path: /var/run/cdi}}
        - {name: plugins, hostPath: {path: /var/lib/kubelet/plugins}}
        - {name: registry, hostPath: {path: /var/lib/kubelet/plugins_registry}}
`).Replace(good)
	_, err := check([]byte(dra))
	require.NoError(t, err)
	noToken := []string{"      serviceAccountName: p", "      serviceAccountName: p\n      automountServiceAccountToken: false"}
	for _, tc := range []struct {
		name  string
		edits []string // from, to, ...
		want  string
	}{
		{"no NODE_NAME", []string{"          env: [{name: NODE_NAME", "          env: [{name: NODENAME"}, "no NODE_NAME from spec.nodeName"},
		{"node name in the config", []string{"          env: [{name: NODE_NAME", "          env: [{name: NODENAME", "dra: {enabled: true}", "dra: {enabled: true, nodeName: n1}"}, ""},
		{"no token", noToken, "mounts no service account token"},
		{"no token, a kubeconfig", append([]string{"dra: {enabled: true}", "dra: {enabled: true, kubeconfig: /etc/kubeconfig}"}, noToken...), ""},
		{"CDI directory read-only", []string{"mountPath: /var/run/cdi}", "mountPath: /var/run/cdi, readOnly: true}"}, "/var/run/cdi, which its config uses, is not mounted read-write"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := check([]byte(strings.NewReplacer(tc.edits...).Replace(dra)))
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

// TestCheckAdmissionPolicy: an admission policy of the chart is in force
// (a binding of the chart names it, and the binding's policy is in the
// chart), and the DRA driver's ResourceSlice policy restricts the
// DaemonSet's own service account: any slip leaves the
// API server taking the objects and restricting nobody.
func TestCheckAdmissionPolicy(t *testing.T) {
	policy := good + `---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: p-slices}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [resource.k8s.io], apiVersions: ["*"], operations: [CREATE], resources: [resourceslices]}]
  matchConditions: [{name: driver, expression: 'request.userInfo.username == "system:serviceaccount:ns:p"'}]
  validations: [{expression: "true"}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: p-slices}
spec: {policyName: p-slices, validationActions: [Deny]}
`
	kinds, err := check([]byte(policy))
	require.NoError(t, err)
	assert.Equal(t, 1, kinds["ValidatingAdmissionPolicy"])
	for _, tc := range []struct{ name, from, to, want string }{
		{"binding of another policy", "spec: {policyName: p-slices", "spec: {policyName: q-slices", `ValidatingAdmissionPolicyBinding p-slices binds policy "q-slices", which is not in the chart`},
		{"policy without a binding", "kind: ValidatingAdmissionPolicyBinding\nmetadata: {name: p-slices}\nspec: {policyName: p-slices", "kind: ValidatingAdmissionPolicyBinding\nmetadata: {name: p-slices}\nspec: {policyName: p-slices2", "ValidatingAdmissionPolicy p-slices: no binding of the chart names it"},
		{"another account", "system:serviceaccount:ns:p", "system:serviceaccount:ns:q", "match conditions name no service account of the chart's DaemonSets (system:serviceaccount:ns:p)"},
		{"another namespace", "system:serviceaccount:ns:p", "system:serviceaccount:default:p", "match conditions name no service account of the chart's DaemonSets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := check([]byte(strings.Replace(policy, tc.from, tc.to, 1)))
			assert.ErrorContains(t, err, tc.want)
		})
	}
}
