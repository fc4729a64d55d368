package state

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

// randomContainer is a container whose every field is drawn from a small
// set, so that a value often changes in one field only, and sometimes not
// at all.
func randomContainer(r *rand.Rand) ContainerState {
	pick := func(of ...string) string { return of[r.Intn(len(of))] }
	flag := func() bool { return r.Intn(2) == 0 }
	return ContainerState{PodUID: pick("u1", "u2"), PodNamespace: pick("ns", "kube-system"), PodName: pick("p", "p\"q\""), Container: pick("c", "d"),
		Pool: pick("infra", "exclusive"), MilliCPU: int64(r.Intn(3)) * 500, CPUs: pick("0", "1-2", "3,5"), Reserved: pick("", "7"), Mems: pick("0", "0-1"),
		Added: pick("", "9"), NoCPUQuota: flag(), IsolateIRQs: flag(), IsolatedPartition: flag(), PowerClass: pick("", "turbo"),
		WithShared: flag(), SharedCPUs: pick("", "0-3"), Memory: pick("", "0:memory=1073741824"), Rule: pick("", "annotation", "qos"),
		RuleDetail: pick("", "pool.cpupool.dev"), DeviceNUMA: pick("", "1"), FromHold: pick("", "old"),
		OtherContainerKeys: pick("", "pool.cpupool.dev/container.x"), HideHyperthreads: flag()}
}

// randomHold is a hold drawn like randomContainer, with an id and an exit
// code (none, 0 or 1) of its own.
func randomHold(r *rand.Rand) HeldState {
	h := HeldState{ContainerID: []string{"a", "b"}[r.Intn(2)], ContainerState: randomContainer(r)}
	if n := r.Intn(3); n > 0 {
		code := int32(n - 1)
		h.ExitCode = &code
	}
	return h
}

// changeOneField copies one field of from, drawn at random, into v (a
// pointer to a struct): a change a comparison of some fields would miss.
func changeOneField(r *rand.Rand, v, from any) {
	dst, src := reflect.ValueOf(v).Elem(), reflect.ValueOf(from)
	i := r.Intn(dst.NumField())
	dst.Field(i).Set(src.Field(i))
}

// TestIncrementalEncodingMatchesJSONAtRandom: whatever happens to the
// containers and holds between two writes (a value replaced by one that
// differs from it in one field, or in none; one removed and another added
// under the same key or another; keys json escapes or sorts by byte), the
// cached encoder writes what encoding/json writes. Few keys, so that they
// come back.
func TestIncrementalEncodingMatchesJSONAtRandom(t *testing.T) {
	keys := []string{"a", "b", "é", "<&>", "z\"", "A", "\xff", "ab"}
	r := rand.New(rand.NewSource(45))
	var enc stateEncoder
	st := NewState()
	for step := 0; step < 2000; step++ {
		for n := r.Intn(4); n > 0; n-- {
			key := keys[r.Intn(len(keys))]
			switch r.Intn(8) {
			case 0:
				delete(st.Containers, key)
			case 1:
				delete(st.Held, key)
			case 2, 3:
				st.Containers[key] = randomContainer(r)
			case 4:
				c := st.Containers[key]
				changeOneField(r, &c, randomContainer(r))
				st.Containers[key] = c
			case 5:
				h := st.Held[key]
				if r.Intn(2) == 0 {
					changeOneField(r, &h, randomHold(r)) // its id, state or exit code
				} else {
					changeOneField(r, &h.ContainerState, randomContainer(r))
				}
				st.Held[key] = h
			default:
				st.Held[key] = randomHold(r)
			}
		}
		got, err := enc.encode(st)
		require.NoError(t, err)
		want, err := json.Marshal(st)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "step %d", step)
	}
}

// TestIncrementalEncodingOwnsItsHolds: a hold's exit code is a pointer
// that the state shares with whoever made the hold; the cache must not
// share it, or a code changed in place after a write would be compared
// with itself and the file would keep the old one.
func TestIncrementalEncodingOwnsItsHolds(t *testing.T) {
	var enc stateEncoder
	st := NewState()
	code := int32(0)
	st.Held["u/c"] = HeldState{ContainerID: "a", ContainerState: ContainerState{PodUID: "u", Container: "c", CPUs: "3"}, ExitCode: &code}
	_, err := enc.encode(st)
	require.NoError(t, err)
	code = 137
	got, err := enc.encode(st)
	require.NoError(t, err)
	want, err := json.Marshal(st)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
}

// TestEncodingOfANilContainersMap: json.Marshal writes a nil map as null;
// so does the encoder (the state file is what encoding/json would write,
// whatever the state).
func TestEncodingOfANilContainersMap(t *testing.T) {
	var enc stateEncoder
	st := &State{}
	got, err := enc.encode(st)
	require.NoError(t, err)
	want, err := json.Marshal(st)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
	st.Containers = map[string]ContainerState{"x": {Pool: "infra"}}
	got, err = enc.encode(st)
	require.NoError(t, err)
	want, err = json.Marshal(st)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
}

// TestEncodeAllocatesForTheChangeOnly: after one container and one hold
// changed, an encode of a state of 2,000 containers and 500 holds
// allocates about what encoding those two takes, not in proportion to the
// unchanged ones (issue 45: a state write per creation, flat across
// sizes). TestCreationAllocationsFlat sees few holds, so this is the test
// that holds are cached too.
func TestEncodeAllocatesForTheChangeOnly(t *testing.T) {
	st := NewState()
	for i := 0; i < 2000; i++ {
		st.Containers[fmt.Sprintf("%064d", i)] = ContainerState{PodUID: fmt.Sprint("uid-", i), Pool: "infra", MilliCPU: 1000, CPUs: "0-3", Mems: "0"}
	}
	for i := 0; i < 500; i++ {
		code := int32(i % 2)
		st.Held[fmt.Sprint("uid-h", i, "/c")] = HeldState{ContainerID: fmt.Sprint(i), ExitCode: &code,
			ContainerState: ContainerState{PodUID: fmt.Sprint("uid-h", i), Pool: "exclusive", MilliCPU: 1000, CPUs: fmt.Sprint(4 + i), Mems: "0"}}
	}
	var enc stateEncoder
	_, err := enc.encode(st)
	require.NoError(t, err)
	step := 0
	allocs := testing.AllocsPerRun(20, func() {
		step++
		id := fmt.Sprintf("%064d", step%2000)
		c := st.Containers[id]
		c.MilliCPU++
		st.Containers[id] = c
		key := fmt.Sprint("uid-h", step%500, "/c")
		h := st.Held[key]
		h.MilliCPU++
		st.Held[key] = h
		_, err := enc.encode(st)
		require.NoError(t, err)
	})
	t.Logf("%.0f allocations per encode", allocs)
	require.Less(t, allocs, 100.0, "allocations per encode after one container and one hold changed, of 2,000 and 500")
}

// TestSameHoldSeesEveryField: a hold that differs from another in any one
// field, of its own or of its container's, at any depth, is not the same
// hold (or the cache would keep its old entry); one whose exit code is
// another pointer to the same number is.
func TestSameHoldSeesEveryField(t *testing.T) {
	code := int32(1)
	base := HeldState{ExitCode: &code}
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		for i := 0; i < v.NumField(); i++ {
			f, name := v.Field(i), path+v.Type().Field(i).Name
			if f.Kind() == reflect.Struct {
				walk(f, name+".")
				continue
			}
			old := reflect.New(f.Type()).Elem()
			old.Set(f)
			switch f.Kind() {
			case reflect.String:
				f.SetString("changed")
			case reflect.Bool:
				f.SetBool(true)
			case reflect.Int64, reflect.Int32, reflect.Int:
				f.SetInt(7)
			case reflect.Pointer:
				other := int32(2)
				f.Set(reflect.ValueOf(&other))
			default:
				t.Fatalf("%s: a %s; teach this test to change it", name, f.Kind())
			}
			changed := reflect.ValueOf(&base).Elem().Interface().(HeldState)
			f.Set(old)
			require.False(t, sameHold(base, changed), "a hold that differs in %s", name)
		}
	}
	walk(reflect.ValueOf(&base).Elem(), "")
	same := int32(1)
	require.True(t, sameHold(base, HeldState{ExitCode: &same}))
	require.False(t, sameHold(base, HeldState{}), "an exit code against none")
}
