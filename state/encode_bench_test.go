package state

import (
	"fmt"
	"testing"
)

// BenchmarkEncodeOneChange is the state writer's encode of a file of
// 5,000 containers and 100 holds (stopped exclusive containers whose pods
// still run) after one container changed (issue 45: a write at 5,000
// running): the cached encoder re-encodes that one; what it still does
// for the others is what this measures.
// Tracked, the State says which container changed (the state writer's
// mirror, State.TrackContainerChanges); untracked, every container is
// compared with its cached entry.
func BenchmarkEncodeOneChange(b *testing.B) {
	for _, tracked := range []bool{false, true} {
		b.Run(fmt.Sprintf("tracked=%v", tracked), func(b *testing.B) { benchmarkEncodeOneChange(b, tracked) })
	}
}

func benchmarkEncodeOneChange(b *testing.B, tracked bool) {
	st := NewState()
	if tracked {
		st.TrackContainerChanges()
	}
	for i := 0; i < 5000; i++ {
		st.Containers[fmt.Sprintf("%064d", i)] = ContainerState{PodUID: fmt.Sprintf("uid-%d", i), PodNamespace: "ns", PodName: fmt.Sprintf("pod-%d", i),
			Container: "c", Pool: "infra", MilliCPU: 1000, CPUs: "0,192", Mems: "0"}
	}
	for i := 0; i < 100; i++ {
		code := int32(i)
		st.Held[fmt.Sprintf("uid-h%d/c", i)] = HeldState{ContainerID: fmt.Sprintf("%064d", 10000+i), ExitCode: &code,
			ContainerState: ContainerState{PodUID: fmt.Sprintf("uid-h%d", i), PodNamespace: "ns", PodName: fmt.Sprintf("held-%d", i),
				Container: "c", Pool: "exclusive", MilliCPU: 1000, CPUs: fmt.Sprint(100 + i), Mems: "0"}}
	}
	var enc stateEncoder
	_, err := enc.encode(st)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := fmt.Sprintf("%064d", i%5000)
		c := st.Containers[id]
		c.MilliCPU++
		st.SetContainer(id, c)
		if _, err := enc.encode(st); err != nil {
			b.Fatal(err)
		}
	}
}
