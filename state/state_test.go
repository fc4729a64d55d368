package state

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFileStoreRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "state.json")
	s := NewFileStore(path)
	st, err := s.Load()
	require.NoError(t, err, "a missing file is an empty state")
	assert.Empty(t, st.Containers)

	st.Containers["abc"] = ContainerState{PodUID: "u", PodNamespace: "ns", PodName: "p", Container: "c", Pool: "exclusive", CPUs: "2-3", Mems: "0", MilliCPU: 2000}
	st.Previous["u/c"] = "4-5"
	require.NoError(t, s.Save(st))
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	require.Eventually(t, func() bool { return len(s.spare) == 1 }, 5*time.Second, time.Millisecond, "a spare file is prepared")
	require.NoError(t, s.Save(st), "saving through the spare")
	require.Eventually(t, func() bool { return len(s.spare) == 1 }, 5*time.Second, time.Millisecond)
	s.Close()
	leftovers, _ := filepath.Glob(path + ".tmp-*")
	assert.Empty(t, leftovers, "no temporary file left behind")

	back, err := s.Load()
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now(), back.Written, time.Minute, "when it was written, from the envelope")
	back.Written = time.Time{}
	assert.Equal(t, st, back)

	raw, _ := os.ReadFile(path)
	assert.Contains(t, string(raw), fmt.Sprintf(`"schemaVersion":%d`, SchemaVersion))
	assert.Contains(t, string(raw), `"checksum":"sha256:`)
}

func TestFileStoreRemovesStaleTemporaryFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	require.NoError(t, os.WriteFile(path+".tmp-123", []byte("half a write"), 0o600))
	s := NewFileStore(path)
	_, err := s.Load()
	require.NoError(t, err)
	leftovers, _ := filepath.Glob(path + ".tmp-*")
	assert.Empty(t, leftovers)
}

func TestFileStoreDiscardsBadFiles(t *testing.T) {
	for name, content := range map[string]string{
		"garbage":      "nope",
		"newer schema": `{"schemaVersion":99,"checksum":"` + checksum([]byte(`{}`)) + `","state":{}}`,
		"bad checksum": `{"schemaVersion":1,"checksum":"sha256:00","state":{"containers":{}}}`,
		"empty object": `{}`,
		"unknown field in a schema 1 state": func() string {
			payload := `{"containers":{},"surprise":1}`
			return `{"schemaVersion":1,"checksum":"` + checksum([]byte(payload)) + `","state":` + payload + `}`
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.json")
			require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
			s := NewFileStore(path)
			s.now = func() time.Time { return time.Date(2026, 11, 30, 1, 2, 3, 0, time.UTC) }
			st, err := s.Load()
			require.ErrorIs(t, err, ErrStateDiscarded)
			assert.Contains(t, err.Error(), "moved to "+path+".corrupt-20261130T010203")
			assert.Empty(t, st.Containers)
			_, err = os.Stat(path)
			assert.True(t, os.IsNotExist(err))
			aside, _ := filepath.Glob(path + ".corrupt-*")
			require.Len(t, aside, 1)
			kept, _ := os.ReadFile(aside[0])
			assert.Equal(t, content, string(kept), "the bad file is kept as it was")
		})
	}
}

// TestReadStateSaysWhatANonStateFileIs: a file without the envelope
// (`{}`, a bare state) is named for what it is and what to do, not as a
// checksum mismatch with an empty "file says" (issue 43, item 5).
func TestReadStateSaysWhatANonStateFileIs(t *testing.T) {
	for content, want := range map[string]string{
		`{}`:                             "not a state file of nri-cpupool: it has no schemaVersion, checksum or state",
		`{"containers": {}}`:             "it has no schemaVersion, checksum or state",
		`{"schemaVersion":5}`:            "it has no checksum or state",
		`{"schemaVersion":5,"state":{}}`: "it has no checksum (",
	} {
		path := filepath.Join(t.TempDir(), "state.json")
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		_, err := ReadState(path)
		require.Error(t, err, content)
		assert.Contains(t, err.Error(), want, content)
		assert.Contains(t, err.Error(), "name the plugin's state file (--state-file, the config's stateFile)", content)
		assert.NotContains(t, err.Error(), "file says", content)
	}
}

// TestIncrementalEncodingMatchesJSON keeps the cached encoder byte-for-byte
// equal to encoding/json across changes, additions and removals, of
// containers and of holds.
func TestIncrementalEncodingMatchesJSON(t *testing.T) {
	var enc stateEncoder
	st := NewState()
	for step := 0; step < 50; step++ {
		id := fmt.Sprintf("c%02d", step%17)
		if step%5 == 4 {
			delete(st.Containers, id)
		} else {
			st.Containers[id] = ContainerState{PodUID: "u", PodName: "p\"quoted\"", Container: "c", Pool: "exclusive", CPUs: fmt.Sprint(step), MilliCPU: int64(step),
				PowerClass: []string{"", "turbo"}[step%2]}
		}
		if step%8 == 6 {
			// One goes and another comes in the same write: as many
			// containers as before, not the same ones.
			for gone := range st.Containers {
				delete(st.Containers, gone)
				break
			}
			st.Containers[fmt.Sprintf("n%02d", step)] = ContainerState{PodUID: "u", Container: "n", Pool: "infra", CPUs: "0"}
		}
		if step%7 == 0 {
			st.Previous["u/c"+id] = fmt.Sprint(step)
		}
		if step%3 == 0 {
			code := int32(step)
			st.Held["u/h"+id] = HeldState{ContainerID: id, ContainerState: ContainerState{PodUID: "u", Container: "h" + id, CPUs: fmt.Sprint(step)}, ExitCode: &code}
		}
		if step%9 == 8 {
			for gone := range st.Held {
				delete(st.Held, gone)
				break
			}
		}
		if step%4 == 2 {
			for k, h := range st.Held {
				code := int32(1000 + step) // only the exit code changes
				h.ExitCode = &code
				st.Held[k] = h
				break
			}
		}
		st.Pools["infra"] = fmt.Sprintf("0-%d", step)
		if step%4 == 1 {
			st.PowerClasses = map[string]string{"low-latency": fmt.Sprint(step), "saver": "0-1"}
		} else if step%4 == 3 {
			st.PowerClasses = nil
		}
		if step%6 == 2 {
			capacity := int64(step) << 30
			st.NUMAMemory = []NUMAMemory{{Node: 0, Memory: NUMAMemoryBytes{Capacity: &capacity, Held: int64(step)},
				HugePages: []NUMAHugePages{{Size: "2Mi", Total: 32, Free: int64(step)}}}, {Node: 1}}
		} else if step%6 == 5 {
			st.NUMAMemory = nil
		}
		got, err := enc.encode(st)
		require.NoError(t, err)
		want, err := json.Marshal(st)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "step %d", step)
	}
}

// TestFileStoreSaveCleansUpAfterAFailedRename: whichever step of a save
// fails, the temporary file goes and the old state stays.
func TestFileStoreSaveCleansUpAfterAFailedRename(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	require.NoError(t, os.MkdirAll(filepath.Join(path, "in-the-way"), 0o700), "a directory cannot be renamed over")
	s := NewFileStore(path)
	defer s.Close()
	err := s.Save(NewState())
	require.ErrorContains(t, err, "replacing state: renaming the temporary file over "+path)
	assert.NotContains(t, err.Error(), ".tmp-", "the error names the state file, not its temporary file")
	leftovers, _ := filepath.Glob(path + ".tmp-*")
	assert.Empty(t, leftovers, "the temporary file is removed")
	_, err = os.Stat(filepath.Join(path, "in-the-way"))
	assert.NoError(t, err)
}

// TestFileStoreCloseRightAfterSaveLeavesNoSpare: the spare temporary file
// is prepared in the background after a save; Close waits for it, so a
// store closed at once leaves nothing behind.
func TestFileStoreCloseRightAfterSaveLeavesNoSpare(t *testing.T) {
	dir := t.TempDir()
	for i := 0; i < 50; i++ {
		path := filepath.Join(dir, fmt.Sprintf("state-%d.json", i))
		s := NewFileStore(path)
		require.NoError(t, s.Save(NewState()))
		s.Close()
	}
	time.Sleep(100 * time.Millisecond) // a spare still being prepared would appear now
	leftovers, _ := filepath.Glob(filepath.Join(dir, "*.tmp-*"))
	assert.Empty(t, leftovers)
}
