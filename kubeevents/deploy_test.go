package kubeevents

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/cpupool/nri-cpupool/internal/manifesttest"
)

// TestShippedManifestsPostEvents: both DaemonSet manifests turn the pod
// Events on, and give their service account what the recorder calls
// (core Events, create and patch) with its token, in-cluster credentials
// and the node name from the pod's node.
func TestShippedManifestsPostEvents(t *testing.T) {
	for _, path := range []string{"../deploy/kubernetes/nri-cpupool.yaml", "../deploy/kubernetes/dra/nri-cpupool-dra.yaml"} {
		t.Run(path, func(t *testing.T) {
			docs := manifesttest.Docs(t, path)
			cfg := manifesttest.Config(t, docs)
			assert.True(t, cfg.Kubernetes.Events)
			assert.Empty(t, cfg.APIKubeconfig(), "in-cluster credentials")
			assert.Empty(t, cfg.APINodeName(), "from NODE_NAME")

			var role rbacv1.ClusterRole
			manifesttest.Decode(t, docs, "ClusterRole", &role)
			var binding rbacv1.ClusterRoleBinding
			manifesttest.Decode(t, docs, "ClusterRoleBinding", &binding)
			assert.Equal(t, role.Name, binding.RoleRef.Name)
			require.Len(t, binding.Subjects, 1)
			assert.Equal(t, "nri-cpupool", binding.Subjects[0].Name)
			for _, verb := range []string{"create", "patch"} {
				assert.True(t, slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
					return slices.Contains(r.APIGroups, "") && slices.Contains(r.Resources, "events") && slices.Contains(r.Verbs, verb)
				}), "events: %s", verb)
			}

			var ds appsv1.DaemonSet
			manifesttest.Decode(t, docs, "DaemonSet", &ds)
			pod := ds.Spec.Template.Spec
			assert.Equal(t, binding.Subjects[0].Name, pod.ServiceAccountName)
			assert.True(t, pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken, "the Events need the token")
			var sa corev1.ServiceAccount
			manifesttest.Decode(t, docs, "ServiceAccount", &sa)
			assert.True(t, sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken, "the Events need the token")
			assert.True(t, slices.ContainsFunc(pod.Containers[0].Env, func(e corev1.EnvVar) bool {
				return e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName"
			}), "NODE_NAME from the pod's node")
		})
	}
}
