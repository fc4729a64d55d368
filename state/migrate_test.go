package state

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// v1File is a state file written by the first release's own FileStore
// (2a6c3c2): two exclusive containers (one with hidden siblings), an infra
// one, and the CPUs remembered for a stopped init container.
const v1File = "testdata/v1-2a6c3c2.json"

func copyFile(t *testing.T, from string) string {
	t.Helper()
	data, err := os.ReadFile(from)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "state.json")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	return path
}

func schemaOf(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var env struct {
		SchemaVersion int `json:"schemaVersion"`
	}
	require.NoError(t, json.Unmarshal(data, &env))
	return env.SchemaVersion
}

// TestMigrateV1: the previous schema's file loads with every assignment,
// and the next save writes the current schema.
func TestMigrateV1(t *testing.T) {
	path := copyFile(t, v1File)
	require.Equal(t, 1, schemaOf(t, path))
	store := NewFileStore(path)
	defer store.Close()
	st, err := store.Load()
	require.NoError(t, err, "an older schema is migrated, not moved aside")
	assert.Equal(t, 1, st.MigratedFrom)
	require.Len(t, st.Containers, 3)
	fwd := st.Containers["6f1c0ffee0000000000000000000000000000000000000000000000000000001"]
	assert.Equal(t, ContainerState{PodUID: "uid-dpdk", PodNamespace: "telco", PodName: "dpdk", Container: "fwd", Pool: "exclusive",
		MilliCPU: 2000, CPUs: "4,12", Mems: "0"}, fwd)
	assert.Equal(t, "13", st.Containers["6f1c0ffee0000000000000000000000000000000000000000000000000000002"].Reserved)
	assert.Equal(t, map[string]string{"uid-dpdk/init": "6"}, st.Previous, "kept for Synchronize to turn into holds")
	assert.Equal(t, "4-7,12-15", st.Pools["exclusive"])
	aside, _ := filepath.Glob(path + ".corrupt-*")
	assert.Empty(t, aside)

	require.NoError(t, store.Save(st))
	assert.Equal(t, SchemaVersion, schemaOf(t, path), "rewritten in the current schema")
	again, err := NewFileStore(path).Load()
	require.NoError(t, err)
	assert.Zero(t, again.MigratedFrom)
	assert.Equal(t, st.Containers, again.Containers)
}

// TestNewerOrUnknownSchemaIsMovedAside: only a file this build cannot
// read is moved aside, with a reason that says which.
func TestNewerOrUnknownSchemaIsMovedAside(t *testing.T) {
	for _, tc := range []struct {
		version int
		want    string
	}{
		{SchemaVersion + 1, "written by a newer nri-cpupool"},
		{0, "unknown schema version 0"},
		{-3, "unknown schema version -3"},
	} {
		payload := []byte(`{"containers":{}}`)
		data, err := EncodeEnvelope(nil, payload, time.Time{})
		require.NoError(t, err)
		data = []byte(strings.Replace(string(data), `"schemaVersion":`+itoa(SchemaVersion), `"schemaVersion":`+itoa(tc.version), 1))
		path := filepath.Join(t.TempDir(), "state.json")
		require.NoError(t, os.WriteFile(path, data, 0o600))
		st, err := NewFileStore(path).Load()
		require.ErrorIs(t, err, ErrStateDiscarded)
		assert.Contains(t, err.Error(), tc.want)
		assert.Empty(t, st.Containers)
		aside, _ := filepath.Glob(path + ".corrupt-*")
		assert.Len(t, aside, 1, "version %d moved aside", tc.version)
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// TestV2FileIsRead: schema 3 only added isolateIRQs and
// isolatedPartition; a version 2 file is read as it is, its containers
// without either.
func TestV2FileIsRead(t *testing.T) {
	payload := []byte(`{"containers":{"c1":{"podUID":"u","podNamespace":"n","podName":"p","container":"c","pool":"exclusive","milliCPU":1000,"cpus":"2","mems":"0","noCPUQuota":true}},"held":{}}`)
	data, err := EncodeEnvelope(nil, payload, time.Time{})
	require.NoError(t, err)
	data = []byte(strings.Replace(string(data), `"schemaVersion":`+itoa(SchemaVersion), `"schemaVersion":2`, 1))
	path := filepath.Join(t.TempDir(), "state.json")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	st, err := NewFileStore(path).Load()
	require.NoError(t, err)
	assert.Equal(t, 2, st.MigratedFrom)
	assert.Equal(t, ContainerState{PodUID: "u", PodNamespace: "n", PodName: "p", Container: "c", Pool: "exclusive", MilliCPU: 1000, CPUs: "2", Mems: "0", NoCPUQuota: true}, st.Containers["c1"])
}

// TestV4FileIsRead: schema 5 only added what containers and holds hold of
// each node's memory; a version 4 file is read with none (the plugin
// derives it again from the runtime), and a version 5 file keeps it.
func TestV4FileIsRead(t *testing.T) {
	const container = `"c1":{"podUID":"u","podNamespace":"n","podName":"p","container":"c","pool":"exclusive","milliCPU":1000,"cpus":"2","mems":"1","powerClass":"fast"`
	for _, tc := range []struct {
		version int
		payload string
		memory  string
	}{
		{4, `{"containers":{` + container + `}}}`, ""},
		{5, `{"containers":{` + container + `,"memory":"1:2048kB=16"}}}`, "1:2048kB=16"},
	} {
		data, err := EncodeEnvelope(nil, []byte(tc.payload), time.Time{})
		require.NoError(t, err)
		data = []byte(strings.Replace(string(data), `"schemaVersion":`+itoa(SchemaVersion), `"schemaVersion":`+itoa(tc.version), 1))
		path := filepath.Join(t.TempDir(), "state.json")
		require.NoError(t, os.WriteFile(path, data, 0o600))
		st, err := NewFileStore(path).Load()
		require.NoError(t, err, "version %d", tc.version)
		assert.Equal(t, tc.version, st.MigratedFrom)
		assert.Equal(t, tc.memory, st.Containers["c1"].Memory)
		assert.Equal(t, "fast", st.Containers["c1"].PowerClass)
	}
}

// TestV5FileIsRead: schema 6 only added what decided a container's pool
// and the last refusals, schema 7 the pod's keys for other containers,
// schema 8 whether a container hides its hyperthreads; a version 5 file is
// read with none, a version 6 file keeps the first two, a version 7 file
// all but the last, and a version 8 file keeps all, written back as they
// were read.
func TestV5FileIsRead(t *testing.T) {
	const container = `"c1":{"podUID":"u","podNamespace":"n","podName":"p","container":"c","pool":"exclusive","milliCPU":1000,"cpus":"2","mems":"1"`
	const refusals = `"refusals":[{"podNamespace":"n","podName":"p","container":"d","time":"2026-03-01T08:00:00Z","reason":"placement","message":"no room","count":3}]`
	for _, tc := range []struct {
		version  int
		payload  string
		rule     string
		refusals int
	}{
		{5, `{"containers":{` + container + `}}}`, "", 0},
		{6, `{"containers":{` + container + `,"rule":"annotation","ruleDetail":"pool.cpupool.dev=exclusive","deviceNUMA":"1","fromHold":"c"}},` + refusals + `}`, "annotation", 1},
		{7, `{"containers":{` + container + `,"rule":"default","ruleDetail":"defaultPool","deviceNUMA":"1","fromHold":"c","otherContainerKeys":"pool.cpupool.dev/container.cc"}},` + refusals + `}`, "default", 1},
		{8, `{"containers":{` + container + `,"rule":"default","ruleDetail":"defaultPool","deviceNUMA":"1","fromHold":"c","otherContainerKeys":"pool.cpupool.dev/container.cc","hideHyperthreads":true}},` + refusals + `}`, "default", 1},
	} {
		data, err := EncodeEnvelope(nil, []byte(tc.payload), time.Time{})
		require.NoError(t, err)
		data = []byte(strings.Replace(string(data), `"schemaVersion":`+itoa(SchemaVersion), `"schemaVersion":`+itoa(tc.version), 1))
		path := filepath.Join(t.TempDir(), "state.json")
		require.NoError(t, os.WriteFile(path, data, 0o600))
		store := NewFileStore(path)
		st, err := store.Load()
		require.NoError(t, err, "version %d", tc.version)
		assert.Equal(t, map[int]int{5: 5, 6: 6, 7: 7, 8: 0}[tc.version], st.MigratedFrom)
		assert.Equal(t, tc.version >= 8, st.Containers["c1"].HideHyperthreads)
		assert.Equal(t, tc.rule, st.Containers["c1"].Rule)
		assert.Len(t, st.Refusals, tc.refusals)
		if tc.version == SchemaVersion {
			require.NoError(t, store.Save(st))
			again, err := ReadState(path)
			require.NoError(t, err)
			assert.Equal(t, st.Refusals, again.Refusals)
			assert.Equal(t, st.Containers, again.Containers)
			assert.Equal(t, "1", again.Containers["c1"].DeviceNUMA)
			assert.Equal(t, "c", again.Containers["c1"].FromHold)
			assert.Equal(t, "pool.cpupool.dev/container.cc", again.Containers["c1"].OtherContainerKeys)
			assert.True(t, again.Containers["c1"].HideHyperthreads)
		}
		store.Close()
	}
}
