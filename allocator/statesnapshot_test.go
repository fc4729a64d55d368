package allocator

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/cpupool/nri-cpupool/numamem"
	"github.com/cpupool/nri-cpupool/pools"
)

// stateSnapshot renders every record an allocator decides with, unexported
// fields included, following pointers: containers and their indexes, holds,
// CPU owners, the memory account with its claims, and the pools' CPUs as
// they read now. Two allocators with equal snapshots decide alike. It is
// for tests that undo an operation (a kept-but-not-grown adoption): a
// field the undo forgets shows in the diff, whichever it is, including one
// added after the test was written.
//
// Left out: what is no record but a decision's working memory or a cache
// of the records (scratch, fit buffers, the last plan's nodes, infra's
// cached cpuset and the generation counters that tell it changed: they
// count changes, and an undo is changes), the static topology and layout,
// and the account's way back to the allocator (owners, which is the
// allocator itself). A hugepage count of 0 in the account's per-node sums
// is left out too: the account keeps a size whose count fell back to 0 in
// place, which is no holding.
func stateSnapshot(a *Allocator) string {
	d := snapshotter{seen: map[uintptr]string{}}
	d.value("a", reflect.ValueOf(a).Elem())
	for _, p := range []string{pools.Infra, pools.Shared, pools.Exclusive, pools.ExclusiveNonIsolcpus} {
		fmt.Fprintf(&d.b, "PoolCPUs(%s) = %s\n", p, a.PoolCPUs(p))
		fmt.Fprintf(&d.b, "MembersCPUs(%s) = %s\n", p, a.MembersCPUs(p))
	}
	return d.b.String()
}

// assertSameState fails t with the lines of two stateSnapshots that
// differ (- before, + after), not the whole snapshots, which run to
// hundreds of lines.
func assertSameState(t *testing.T, before, after string, msgAndArgs ...any) bool {
	t.Helper()
	if before == after {
		return true
	}
	count := map[string]int{}
	for _, l := range strings.Split(after, "\n") {
		count[l]++
	}
	var diff []string
	for _, l := range strings.Split(before, "\n") {
		if count[l] > 0 {
			count[l]--
			continue
		}
		diff = append(diff, "- "+l)
	}
	for _, l := range strings.Split(after, "\n") {
		if count[l] > 0 {
			count[l]--
			diff = append(diff, "+ "+l)
		}
	}
	t.Errorf("the allocator's records changed:\n%s\n%s", strings.Join(diff, "\n"), fmt.Sprint(msgAndArgs...))
	return false
}

// snapshotSkipped are the fields stateSnapshot leaves out, by type and
// field name (see stateSnapshot for why).
var snapshotSkipped = map[string]bool{
	"Allocator.x": true, "Allocator.layout": true, "Allocator.scratch": true,
	"Allocator.infraGen": true, "Allocator.infraCPUsGen": true, "Allocator.infraCPUs": true, "Allocator.sharedGen": true,
	"Allocator.planNodes": true, "Allocator.fit": true, "Allocator.liveNodes": true, "Allocator.liveSizes": true,
	"Allocator.fitBuf": true, "Account.owners": true,
}

type snapshotter struct {
	b strings.Builder
	// seen maps a pointer already rendered to the path it was rendered
	// at: the same record reached twice (a container in containers and
	// in exclusive) reads as that path, so an index that points at a copy
	// instead shows in the diff.
	seen map[uintptr]string
}

func (d *snapshotter) value(path string, v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			fmt.Fprintf(&d.b, "%s = nil\n", path)
			return
		}
		if at, ok := d.seen[v.Pointer()]; ok {
			fmt.Fprintf(&d.b, "%s = same as %s\n", path, at)
			return
		}
		d.seen[v.Pointer()] = path
		d.value(path, v.Elem())
	case reflect.Interface:
		if v.IsNil() {
			fmt.Fprintf(&d.b, "%s = nil\n", path)
			return
		}
		d.value(path, v.Elem())
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			if snapshotSkipped[t.Name()+"."+t.Field(i).Name] {
				continue
			}
			d.value(path+"."+t.Field(i).Name, v.Field(i))
		}
	case reflect.Slice, reflect.Array:
		// nil and empty alike: no code tells them apart.
		for i := 0; i < v.Len(); i++ {
			e := v.Index(i)
			if e.Type() == reflect.TypeOf(numamem.Pages{}) && e.FieldByName("Count").Int() == 0 {
				continue
			}
			d.value(fmt.Sprintf("%s[%d]", path, i), e)
		}
	case reflect.Map:
		keys := v.MapKeys()
		names := make([]string, len(keys))
		byName := make(map[string]reflect.Value, len(keys))
		for i, k := range keys {
			names[i] = fmt.Sprint(k)
			if k.Kind() == reflect.Int {
				names[i] = fmt.Sprintf("%08d", k.Int())
			}
			byName[names[i]] = v.MapIndex(k)
		}
		sort.Strings(names)
		for _, n := range names {
			// The key on a line of its own: a set's members
			// (struct{} values) render nothing else.
			fmt.Fprintf(&d.b, "%s[%s]\n", path, n)
			d.value(path+"["+n+"]", byName[n])
		}
	case reflect.Func, reflect.Chan:
		fmt.Fprintf(&d.b, "%s = %s nil=%v\n", path, v.Kind(), v.IsNil())
	case reflect.String:
		fmt.Fprintf(&d.b, "%s = %q\n", path, v.String())
	case reflect.Bool:
		fmt.Fprintf(&d.b, "%s = %v\n", path, v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		fmt.Fprintf(&d.b, "%s = %d\n", path, v.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		fmt.Fprintf(&d.b, "%s = %d\n", path, v.Uint())
	case reflect.Float32, reflect.Float64:
		fmt.Fprintf(&d.b, "%s = %v\n", path, v.Float())
	default:
		fmt.Fprintf(&d.b, "%s = <%s>\n", path, v.Kind())
	}
}
