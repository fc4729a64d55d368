package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cpupool/nri-cpupool/dra"
)

// -cluster prints one kwok Node a shape, each with the driver's slices for
// that shape (the same devices as -fixture for one node) and a NIC on
// every NUMA node that has CPUs, per -nics-per-numa.
func TestCluster(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, runCluster(&out, len(clusterShapes), dra.ModelNUMANode, 2))
	var list struct {
		Items []struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name        string            `json:"name"`
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
			Spec struct {
				Driver   string `json:"driver"`
				NodeName string `json:"nodeName"`
				Devices  []struct {
					Name       string                            `json:"name"`
					Attributes map[string]struct{ Int *int64 }   `json:"attributes"`
					Capacity   map[string]struct{ Value string } `json:"capacity"`
				} `json:"devices"`
			} `json:"spec"`
		} `json:"items"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &list))
	nodes, ours, nics := map[string]bool{}, map[string]int{}, map[string]map[int64]int{}
	for _, it := range list.Items {
		switch {
		case it.Kind == "Node":
			assert.Equal(t, "fake", it.Metadata.Annotations["kwok.x-k8s.io/node"])
			nodes[it.Metadata.Name] = true
		case it.Spec.Driver == dra.DriverName:
			ours[it.Spec.NodeName] += len(it.Spec.Devices)
		case it.Spec.Driver == NICDriver:
			nics[it.Spec.NodeName] = map[int64]int{}
			for _, d := range it.Spec.Devices {
				nics[it.Spec.NodeName][*d.Attributes[dra.AttrNUMANode].Int]++
			}
		}
	}
	assert.Len(t, nodes, 4)
	// The shapes' devices: 2 + 1 pools' nodes on the Xeon (its infra's
	// CPUs that are neither reserved nor isolated are all on NUMA node 1:
	// exclusive-non-isolcpus lends no isolated CPU), 6 on Granite Rapids,
	// 8 + 1 on Turin (exclusive-non-isolcpus on one node), 4 on the
	// 1,024-CPU node.
	assert.Equal(t, map[string]int{"scale-0": 3, "scale-1": 6, "scale-2": 9, "scale-3": 4}, ours)
	for node, byNUMA := range nics {
		for numa, n := range byNUMA {
			assert.Equal(t, 2, n, "%s NUMA node %d", node, numa)
		}
	}
	assert.Len(t, nics["scale-2"], 8, "Turin NPS4: a NIC pair on each of 8 NUMA nodes")

	// One node from its fixture and a config, in the cpu model.
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(clusterShapes[3].config+"\n"), 0o600))
	var one bytes.Buffer
	require.NoError(t, run(&one, "", clusterShapes[3].fixture, cfg, "n", dra.ModelCPU, 0))
	assert.Contains(t, one.String(), `"resourceSliceCount": 8`, "1,022 slots in slices of 128")
}
