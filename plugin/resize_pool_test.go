package plugin

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Guaranteed container that guaranteedExclusive made exclusive is
// resized in place from 2 to 2.5 CPUs. For a new container of 2.5 CPUs the
// rule would choose the default pool, but a running container keeps its
// pool, so its annotations (a NUMA node, exclusive and shared CPUs) must be
// judged against exclusive, not against infra: the resize grows it instead
// of being refused with "applies to exclusive pools only".
func TestResizeJudgesAnnotationsAgainstTheRunningPool(t *testing.T) {
	for name, ann := range map[string]map[string]string{
		"numa":        {"numa.cpupool.dev": "0"},
		"shared-cpus": {"shared-cpus.cpupool.dev": "true"},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFakeRuntime(t, true)
			node := testNode{fixture: desktop.fixture, config: desktop.config + "guaranteedExclusive: true\n"}
			rp := startPlugin(t, f, node, statePath(f))
			pod := f.runPod(podSpec{name: "db", namespace: "telco", qos: "guaranteed", annotations: ann})
			db, _, err := f.createContainer(pod, "db", 2000)
			require.NoError(t, err)
			rp.p.mu.Lock()
			a, _ := rp.p.alloc.Get(db.Id)
			rp.p.mu.Unlock()
			require.Equal(t, "exclusive", a.Pool)
			require.Equal(t, 2, a.CPUs.Size(), "exclusive by guaranteedExclusive: %s", a.CPUs)
			_, err = f.updateResources(pod, db, 2500, 0)
			require.NoError(t, err, "in-place resize of a running exclusive container")
			rp.p.mu.Lock()
			a, _ = rp.p.alloc.Get(db.Id)
			rp.p.mu.Unlock()
			assert.Equal(t, "exclusive", a.Pool)
			assert.Equal(t, 3, a.CPUs.Size(), "grown to 2.5 CPUs: %s", a.CPUs)
		})
	}
}
