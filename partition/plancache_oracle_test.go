package partition

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"k8s.io/utils/cpuset"

	"github.com/cpupool/nri-cpupool/hostfiles"
)

// TestPlanCacheMatchesAFreshSource: a Source kept between passes plans as
// a new Source would, over random sequences of wants and cgroups (its
// containers' and ancestors' changes kept between passes, issue 45).
func TestPlanCacheMatchesAFreshSource(t *testing.T) {
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "cgroup.controllers"), []byte("cpuset\n"), 0o644)
	dirs := []string{"kubepods/podA/c1", "kubepods/podA/c2", "kubepods/podB/c3", "other/c4", "kubepods/c5"}
	log := logrus.New()
	log.SetOutput(new(strings.Builder))
	rng := rand.New(rand.NewSource(1))
	var wants []Want
	kept := NewSource(root, func() []Want { return wants }, log)
	describe := func(p hostfiles.Plan) []string {
		var out []string
		for _, ch := range p.Changes {
			s := fmt.Sprintf("%s o=%d", strings.TrimPrefix(ch.Path, root), ch.Order)
			for _, orig := range []string{"", "0-1", "8", "2-3"} {
				w, err := ch.Want(orig)
				s += fmt.Sprintf(" want(%q)=%q,%v", orig, w, err)
				for _, content := range []string{"", w, "0-1", "2-3,8", "isolated", "isolated invalid (x)"} {
					if ch.Satisfied != nil {
						s += fmt.Sprintf(" sat(%q,%q)=%v", content, w, ch.Satisfied(content, w))
					}
					if ch.Gives != nil {
						s += fmt.Sprintf(" gives(%q,%q)=%v", content, w, ch.Gives(content, w))
					}
				}
			}
			if ch.Verify != nil {
				s += fmt.Sprintf(" verify=%v", ch.Verify("isolated invalid (x)"))
			}
			out = append(out, s)
		}
		slices.Sort(out)
		return append(out, fmt.Sprint("pending=", p.Pending))
	}
	for step := 0; step < 3000; step++ {
		// Random change: a want added/removed/re-CPU'd, a cgroup created or removed.
		switch rng.Intn(4) {
		case 0:
			d := dirs[rng.Intn(len(dirs))]
			wants = slices.DeleteFunc(wants, func(w Want) bool { return w.Dir == d })
			ids := []int{rng.Intn(4) * 2, rng.Intn(4)*2 + 1}
			wants = append(wants, Want{Dir: d, CPUs: cpuset.New(ids...), Who: "ns/pod/" + d})
		case 1:
			if len(wants) > 0 {
				i := rng.Intn(len(wants))
				wants = slices.Delete(wants, i, i+1)
			}
		case 2:
			d := filepath.Join(root, dirs[rng.Intn(len(dirs))])
			os.MkdirAll(d, 0o755)
			if rng.Intn(3) > 0 {
				os.WriteFile(filepath.Join(d, exclusiveFile), nil, 0o644)
				os.WriteFile(filepath.Join(filepath.Dir(d), exclusiveFile), nil, 0o644)
			}
		case 3:
			os.RemoveAll(filepath.Join(root, dirs[rng.Intn(len(dirs))]))
		}
		got, err1 := kept.Plan()
		want, err2 := NewSource(root, func() []Want { return wants }, log).Plan()
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		g, w := describe(got), describe(want)
		if !slices.Equal(g, w) {
			t.Fatalf("step %d: kept Source plans\n%s\nfresh one\n%s", step, strings.Join(g, "\n"), strings.Join(w, "\n"))
		}
	}
}
