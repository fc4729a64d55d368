package dra

import (
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/cpupool/nri-cpupool/internal/manifesttest"
)

// TestShippedManifest checks deploy/kubernetes/dra/nri-cpupool-dra.yaml
// against what the driver does: its config turns DRA on with the device
// plugin off, the role allows what the kubelet plugin helper and the stale
// claim check call, and the DaemonSet gives the node name and the kubelet's
// and CDI's directories where the config says.
func TestShippedManifest(t *testing.T) {
	docs := manifesttest.Docs(t, "../deploy/kubernetes/dra/nri-cpupool-dra.yaml")
	cfg := manifesttest.Config(t, docs)
	assert.True(t, cfg.DRA.Enabled)
	assert.False(t, cfg.Kubelet.DevicePlugin)
	assert.Empty(t, cfg.DRA.Kubeconfig, "in-cluster credentials")
	assert.Empty(t, cfg.DRA.NodeName, "from NODE_NAME")

	var role rbacv1.ClusterRole
	manifesttest.Decode(t, docs, "ClusterRole", &role)
	allowed := func(group, resource, verb string) bool {
		for _, r := range role.Rules {
			if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
				return true
			}
		}
		return false
	}
	for _, verb := range []string{"get", "list", "watch", "create", "update", "delete"} {
		assert.True(t, allowed("resource.k8s.io", "resourceslices", verb), verb)
	}
	assert.True(t, allowed("resource.k8s.io", "resourceclaims", "get"))
	assert.False(t, allowed("resource.k8s.io", "resourceclaims", "update"), "claims are read only")
	assert.True(t, allowed("", "nodes", "get"))

	// The role lets the account write any node's ResourceSlices; the
	// admission policy narrows it to its token's node.
	var policy admissionv1.ValidatingAdmissionPolicy
	manifesttest.Decode(t, docs, "ValidatingAdmissionPolicy", &policy)
	require.NotNil(t, policy.Spec.MatchConstraints)
	require.Len(t, policy.Spec.MatchConstraints.ResourceRules, 1)
	rule := policy.Spec.MatchConstraints.ResourceRules[0].Rule
	assert.Equal(t, []string{"resource.k8s.io"}, rule.APIGroups)
	assert.Equal(t, []string{"resourceslices"}, rule.Resources)
	assert.ElementsMatch(t, []admissionv1.OperationType{admissionv1.Create, admissionv1.Update, admissionv1.Delete}, policy.Spec.MatchConstraints.ResourceRules[0].Operations)
	var sa corev1.ServiceAccount
	manifesttest.Decode(t, docs, "ServiceAccount", &sa)
	require.Len(t, policy.Spec.MatchConditions, 1)
	assert.Contains(t, policy.Spec.MatchConditions[0].Expression, `"system:serviceaccount:`+sa.Namespace+":"+sa.Name+`"`, "the policy restricts the driver's account")
	var exprs []string
	for _, v := range policy.Spec.Variables {
		exprs = append(exprs, v.Expression)
	}
	assert.Contains(t, strings.Join(exprs, " "), "authentication.kubernetes.io/node-name")
	assert.Contains(t, strings.Join(exprs, " "), "spec.?nodeName")
	var binding admissionv1.ValidatingAdmissionPolicyBinding
	manifesttest.Decode(t, docs, "ValidatingAdmissionPolicyBinding", &binding)
	assert.Equal(t, policy.Name, binding.Spec.PolicyName)
	assert.Equal(t, []admissionv1.ValidationAction{admissionv1.Deny}, binding.Spec.ValidationActions)

	var ds appsv1.DaemonSet
	manifesttest.Decode(t, docs, "DaemonSet", &ds)
	pod := ds.Spec.Template.Spec
	assert.True(t, pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken, "the driver needs its token")
	c := pod.Containers[0]
	require.Len(t, c.Env, 1)
	assert.Equal(t, NodeNameEnv, c.Env[0].Name)
	assert.Equal(t, "spec.nodeName", c.Env[0].ValueFrom.FieldRef.FieldPath)
	mounts := map[string]bool{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = !m.ReadOnly
	}
	for _, dir := range []string{cfg.DRA.CDIDir, "/var/lib/kubelet/plugins", cfg.DRA.RegistryDir} {
		assert.True(t, mounts[dir], "%s is mounted read-write", dir)
	}
	assert.True(t, strings.HasPrefix(cfg.DRA.PluginDir, "/var/lib/kubelet/plugins/"))
}

// TestShippedManifestsProbeHealth: both DaemonSets probe the daemon's
// /healthz for liveness and /readyz for readiness, on the address the
// config serves its metrics on (issue 43, item 4: the liveness probe read
// /metrics, and nothing probed readiness).
func TestShippedManifestsProbeHealth(t *testing.T) {
	for _, path := range []string{"../deploy/kubernetes/nri-cpupool.yaml", "../deploy/kubernetes/dra/nri-cpupool-dra.yaml"} {
		t.Run(path, func(t *testing.T) {
			docs := manifesttest.Docs(t, path)
			cfg := manifesttest.Config(t, docs)
			host, port, err := net.SplitHostPort(cfg.MetricsAddress)
			require.NoError(t, err, "metricsAddress")

			var ds appsv1.DaemonSet
			manifesttest.Decode(t, docs, "DaemonSet", &ds)
			c := ds.Spec.Template.Spec.Containers[0]
			for _, p := range []struct {
				probe *corev1.Probe
				path  string
			}{{c.LivenessProbe, "/healthz"}, {c.ReadinessProbe, "/readyz"}} {
				require.NotNil(t, p.probe, p.path)
				require.NotNil(t, p.probe.HTTPGet, p.path)
				assert.Equal(t, p.path, p.probe.HTTPGet.Path)
				assert.Equal(t, host, p.probe.HTTPGet.Host, p.path)
				assert.Equal(t, port, p.probe.HTTPGet.Port.String(), p.path)
			}
		})
	}
}
