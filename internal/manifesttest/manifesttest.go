// Package manifesttest reads the shipped Kubernetes manifests
// (deploy/kubernetes) for the tests that check them against what the
// code does: the documents by kind, each decoded into its API type, and
// the plugin's config in the ConfigMap, parsed as the daemon parses it.
package manifesttest

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/cpupool/nri-cpupool/config"
)

// Docs are the documents of the manifest at path, by kind (a manifest
// ships one object of each kind).
func Docs(t testing.TB, path string) map[string][]byte {
	t.Helper()
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
		require.NotContains(t, docs, meta.Kind, "%s: one %s only", path, meta.Kind)
		docs[meta.Kind] = doc
	}
	return docs
}

// Decode decodes the document of kind into obj (a *appsv1.DaemonSet...).
func Decode(t testing.TB, docs map[string][]byte, kind string, obj any) {
	t.Helper()
	require.Contains(t, docs, kind)
	require.NoError(t, k8syaml.Unmarshal(docs[kind], obj))
}

// Config is the plugin's config in the ConfigMap's config.yaml, parsed as
// the daemon parses its config file.
func Config(t testing.TB, docs map[string][]byte) *config.Config {
	t.Helper()
	var cm corev1.ConfigMap
	Decode(t, docs, "ConfigMap", &cm)
	cfg, err := config.Parse(strings.NewReader(cm.Data["config.yaml"]), "ConfigMap")
	require.NoError(t, err)
	return cfg
}
