package kubeevents

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/cpupool/nri-cpupool/config"
)

// TestShippedManifestsPostEvents: both DaemonSet manifests turn the pod
// Events on, and give their service account what the recorder calls
// (core Events, create and patch) with its token, in-cluster credentials
// and the node name from the pod's node.
func TestShippedManifestsPostEvents(t *testing.T) {
	for _, path := range []string{"../deploy/kubernetes/nri-cpupool.yaml", "../deploy/kubernetes/dra/nri-cpupool-dra.yaml"} {
		t.Run(path, func(t *testing.T) {
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			docs := map[string][]byte{}
			dec := k8syaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
			for {
				doc, err := dec.Read()
				if errors.Is(err, io.EOF) {
					break
				}
				require.NoError(t, err)
				var meta struct{ Kind string }
				require.NoError(t, k8syaml.Unmarshal(doc, &meta))
				docs[meta.Kind] = doc
			}
			var cm corev1.ConfigMap
			require.NoError(t, k8syaml.Unmarshal(docs["ConfigMap"], &cm))
			cfg, err := config.Parse(strings.NewReader(cm.Data["config.yaml"]), "ConfigMap")
			require.NoError(t, err)
			assert.True(t, cfg.Kubernetes.Events)
			assert.Empty(t, cfg.APIKubeconfig(), "in-cluster credentials")
			assert.Empty(t, cfg.APINodeName(), "from NODE_NAME")

			var role rbacv1.ClusterRole
			require.NoError(t, k8syaml.Unmarshal(docs["ClusterRole"], &role))
			var binding rbacv1.ClusterRoleBinding
			require.NoError(t, k8syaml.Unmarshal(docs["ClusterRoleBinding"], &binding))
			assert.Equal(t, role.Name, binding.RoleRef.Name)
			require.Len(t, binding.Subjects, 1)
			assert.Equal(t, "nri-cpupool", binding.Subjects[0].Name)
			for _, verb := range []string{"create", "patch"} {
				assert.True(t, slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
					return slices.Contains(r.APIGroups, "") && slices.Contains(r.Resources, "events") && slices.Contains(r.Verbs, verb)
				}), "events: %s", verb)
			}

			var ds appsv1.DaemonSet
			require.NoError(t, k8syaml.Unmarshal(docs["DaemonSet"], &ds))
			pod := ds.Spec.Template.Spec
			assert.Equal(t, binding.Subjects[0].Name, pod.ServiceAccountName)
			assert.True(t, pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken, "the Events need the token")
			var sa corev1.ServiceAccount
			require.NoError(t, k8syaml.Unmarshal(docs["ServiceAccount"], &sa))
			assert.True(t, sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken, "the Events need the token")
			assert.True(t, slices.ContainsFunc(pod.Containers[0].Env, func(e corev1.EnvVar) bool {
				return e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName"
			}), "NODE_NAME from the pod's node")
		})
	}
}
