package plugin

import (
	"fmt"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/require"
	gproto "google.golang.org/protobuf/proto"

	"github.com/cpupool/nri-cpupool/config"
	"github.com/cpupool/nri-cpupool/state"
)

// adjustmentBySetters is a creation's adjustment made with NRI's setters,
// one allocation each: what adjustment built before it allocated the
// parts together (issue 45), and what it must still send.
func adjustmentBySetters(pinMemory bool, st state.ContainerState) *api.ContainerAdjustment {
	adj := &api.ContainerAdjustment{}
	cpus := cpusetOf(st)
	adj.SetLinuxCPUSetCPUs(cpus)
	if pinMemory && st.Mems != "" {
		adj.SetLinuxCPUSetMems(st.Mems)
	}
	if st.NoCPUQuota {
		adj.SetLinuxCPUQuota(noQuota)
	}
	adj.AddEnv(EnvCPUs, cpus)
	adj.AddEnv(EnvMems, st.Mems)
	adj.AddEnv(EnvPool, st.Pool)
	if st.WithShared {
		adj.AddEnv(EnvExclusiveCPUs, st.CPUs)
		adj.AddEnv(EnvSharedCPUs, st.SharedCPUs)
	}
	return adj
}

// TestAdjustmentAsSetters: the adjustment a creation sends is, field for
// field and on the wire, the one NRI's setters make, with and without
// memory pinning, mems, a lifted quota and a shared part.
func TestAdjustmentAsSetters(t *testing.T) {
	for _, pinMemory := range []bool{false, true} {
		for _, mems := range []string{"", "0-1"} {
			for _, noQuota := range []bool{false, true} {
				for _, withShared := range []bool{false, true} {
					st := state.ContainerState{Pool: "exclusive", CPUs: "4-5", Mems: mems, NoCPUQuota: noQuota}
					if withShared {
						st.WithShared, st.SharedCPUs = true, "0-3"
					}
					name := fmt.Sprintf("pinMemory=%v/mems=%q/noQuota=%v/withShared=%v", pinMemory, mems, noQuota, withShared)
					t.Run(name, func(t *testing.T) {
						p := &Plugin{cfg: &config.Config{PinMemory: pinMemory}}
						got, want := p.adjustment(st), adjustmentBySetters(pinMemory, st)
						require.Equal(t, want, got)
						require.True(t, gproto.Equal(want, got), "on the wire: got %v, want %v", got, want)
						wire, err := gproto.MarshalOptions{Deterministic: true}.Marshal(got)
						require.NoError(t, err)
						wantWire, err := gproto.MarshalOptions{Deterministic: true}.Marshal(want)
						require.NoError(t, err)
						require.Equal(t, wantWire, wire)
					})
				}
			}
		}
	}
}

// TestAddEnvBeyondItsRoom: a variable past the pinEnvs kept in the
// adjustment is allocated on its own, with every earlier one intact, not
// a panic under the plugin's lock.
func TestAddEnvBeyondItsRoom(t *testing.T) {
	b := new(pinAdjustment)
	b.adj.Env = b.envp[:0]
	want := &api.ContainerAdjustment{}
	for i := range pinEnvs + 2 {
		key, value := fmt.Sprintf("K%d", i), fmt.Sprint(i)
		b.addEnv(key, value)
		want.AddEnv(key, value)
	}
	require.Equal(t, want.Env, b.adj.Env)
}
