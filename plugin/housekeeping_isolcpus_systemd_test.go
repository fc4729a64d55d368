package plugin

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/hostfiles"
	"github.com/cpupool/nri-cpupool/housekeeping"
)

// unitBus is systemd's D-Bus API as housekeeping uses it: each unit's
// AllowedCPUs, as the byte mask systemd sends (bit c%8 of byte c/8).
type unitBus struct {
	mu      sync.Mutex
	allowed map[string]cpuset.CPUSet
}

func (b *unitBus) dial(context.Context) (housekeeping.Bus, error) { return b, nil }

func (b *unitBus) GetUnitTypePropertyContext(_ context.Context, unit, _, name string) (*sddbus.Property, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	set, ok := b.allowed[unit]
	if !ok || name != "AllowedCPUs" {
		return nil, godbus.Error{Name: "org.freedesktop.systemd1.NoSuchUnit", Body: []any{"Unit " + unit + " not loaded."}}
	}
	var mask []byte
	for _, c := range set.List() {
		for len(mask) <= c/8 {
			mask = append(mask, 0)
		}
		mask[c/8] |= 1 << (c % 8)
	}
	return &sddbus.Property{Name: name, Value: godbus.MakeVariant(mask)}, nil
}

func (b *unitBus) SetUnitPropertiesContext(_ context.Context, unit string, _ bool, props ...sddbus.Property) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range props {
		mask, _ := p.Value.Value().([]byte)
		var cpus []int
		for i, by := range mask {
			for j := range 8 {
				if by&(1<<j) != 0 {
					cpus = append(cpus, 8*i+j)
				}
			}
		}
		b.allowed[unit] = cpuset.New(cpus...)
	}
	return nil
}

func (b *unitBus) Close() {}

func (b *unitBus) units() map[string]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]string{}
	for u, s := range b.allowed {
		out[u] = s.String()
	}
	return out
}

// TestIsolcpusKeptFreeUnderSystemd (issue 42, item 2): on a cgroup v2
// node whose cgroups systemd manages, the default config sets
// AllowedCPUs= of the host's top-level units to the CPUs outside
// isolcpus=, through D-Bus, and moves a thread already on the isolated
// CPUs off them; after a kill -9, a start with keepHostOffIsolcpus off
// unsets every unit and gives the thread its affinity back, exactly.
func TestIsolcpusKeptFreeUnderSystemd(t *testing.T) {
	f := isolcpusFakeNode(t)
	for _, dir := range []string{"init.scope", "system.slice", "user.slice", "kubepods.slice"} {
		require.NoError(t, os.MkdirAll(filepath.Join(f.cgroupRoot, dir), 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(f.procRoot(), "1/comm"), []byte("systemd\n"), 0o644))
	bus := &unitBus{allowed: map[string]cpuset.CPUSet{"init.scope": cpuset.New(), "system.slice": cpuset.New(), "user.slice": cpuset.New()}}
	unset := bus.units()
	all := cpuset.New()
	for c := range 80 {
		all = all.Union(cpuset.New(c))
	}
	k := &threadKernel{aff: map[int]cpuset.CPUSet{}}
	k.addUserThread(t, f, 500, "stress-ng", "/system.slice/load.service", 100, all)
	withSystemd := func(p *Plugin) {
		p.isolationFS = housekeeping.NewSystemdFS(housekeeping.NewAffinityFS(hostfiles.OS{}, f.procRoot(), k), bus.dial, f.cgroupRoot)
	}

	first := startPlugin(t, f, isolcpusNode, statePath(f), withSystemd)
	require.NoError(t, first.p.FlushIsolation())
	host := isolcpusHost.String()
	assert.Equal(t, map[string]string{"init.scope": host, "system.slice": host, "user.slice": host}, bus.units())
	assert.Equal(t, host, k.get(500), "moved off the isolated CPUs")
	data, err := os.ReadFile(filepath.Join(f.cgroupRoot, "system", "cpuset.cpus"))
	require.NoError(t, err)
	assert.Equal(t, "", strings.TrimSpace(string(data)), "no cgroup file is written under systemd")

	first.kill()
	second := startPlugin(t, f, testNode{fixture: isolcpusNode.fixture, config: "keepHostOffIsolcpus: false\n"}, statePath(f), withSystemd)
	require.NoError(t, second.p.FlushIsolation())
	assert.Equal(t, unset, bus.units(), "every unit unset again")
	assert.Equal(t, all.String(), k.get(500), "its affinity exactly")
}
