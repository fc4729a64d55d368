package allocator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mapLookup is the NRI way written against the pod's map, as lookup was
// before it read the gathered pairs: the reference the gathered lookup
// must agree with.
func mapLookup(ann map[string]string, key, container string) (string, string, bool) {
	for _, k := range []string{key + "/" + scopeContainer + container, key + "/" + scopePod, key} {
		if v, ok := ann[k]; ok {
			return k, v, true
		}
	}
	return "", "", false
}

// TestAnnotationViewLookupAgreesWithTheMap: the gathered lookup finds,
// for every key and container, what the three keys in the pod's map
// find: the container's key over the pod's over the bare one, another
// container's key, a longer base with the same prefix and foreign keys
// never.
func TestAnnotationViewLookupAgreesWithTheMap(t *testing.T) {
	pods := []map[string]string{
		nil,
		{},
		{"example.com/pool": "shared", "kubernetes.io/config.seen": "x"},
		{AnnotationPool: "infra"},
		{AnnotationPool + "/pod": "shared", AnnotationPool: "infra"},
		{AnnotationPool + "/container.web": "exclusive", AnnotationPool + "/pod": "shared", AnnotationPool: "infra"},
		{AnnotationPool + "/container.web": "exclusive", AnnotationPool + "/container.we": "shared"},
		{AnnotationPool + "/container.web-1": "exclusive", AnnotationPool: "infra"},
		{AnnotationNUMA + "/container.web": "0", AnnotationDevice + "/pod": "/sys/x", AnnotationSharedCPUs: "true",
			AnnotationIsolatedPartition + "/container.log": "false", AnnotationIRQIsolation + "/pod": "true"},
	}
	for _, ann := range pods {
		var few [8]annotationPair
		ours, err := gatherOurs(ann, few[:0])
		require.NoError(t, err, "%v", ann)
		for _, container := range []string{"web", "we", "log", "web-1"} {
			a := annotationView{container: container, ours: ours}
			for _, key := range knownAnnotations {
				wk, wv, wok := mapLookup(ann, key, container)
				k, v, ok := a.lookup(key)
				assert.Equal(t, []any{wk, wv, wok}, []any{k, v, ok}, "%s of container %s in %v", key, container, ann)
			}
		}
	}
}
