package cli

// Golden tests of the commands' output, which scripts read: each
// testdata/script/*.txtar runs nri-cpupool the way a user does and compares
// stdout and stderr with the expected files checked in beside the script.
// After an intended change of the output, regenerate them with
//
//	go test ./cmd/nri-cpupool/internal/cli -run TestScripts -update
//
// and review the diff. Fixtures are rendered into each script's work
// directory and named relatively, so no temporary path reaches the output.

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/cpupool/nri-cpupool/state"
	"github.com/cpupool/nri-cpupool/sysfs/fixture"
)

var update = flag.Bool("update", false, "rewrite the expected output in testdata/script/*.txtar")

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"nri-cpupool": func() { os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr)) },
	})
}

func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		UpdateScripts:       *update,
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			// The repository's example configs and requests, as the docs use them.
			dir, err := filepath.Abs("../../../../testdata")
			env.Setenv("TESTDATA", dir)
			return err
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"fixture":   cmdFixture,
			"savestate": cmdSaveState,
		},
	})
}

// cmdFixture renders testdata/topologies/NAME.yaml for this script alone
// and makes NAME in the work directory a symlink to it. fixture.Root puts
// it on tmpfs when there is one: a large shape is over 12,000 files, which
// took 10-15 s each on the VM disk the work directory is on (most of the
// time of TestScripts) and 1.5 s on tmpfs. The name the commands are given
// stays relative, so no temporary path reaches their output, and a script
// may still write into its own copy (explain, validate do), which
// "fixture NAME" again replaces with a fresh one.
func cmdFixture(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: fixture NAME")
	}
	link := ts.MkAbs(args[0])
	if st, err := os.Lstat(link); err == nil && st.Mode()&os.ModeSymlink != 0 {
		// Rendered again: a fresh copy, without the script's changes.
		ts.Check(os.Remove(link))
	}
	ts.Check(os.Symlink(fixture.Root(scriptTB{ts}, args[0]), link))
}

// scriptTB is a script as the fixture.TB fixture.Root wants: its temporary
// directories in the script's work directory, removed with it; its
// cleanups run when the script ends.
type scriptTB struct{ ts *testscript.TestScript }

func (s scriptTB) Helper()                        {}
func (s scriptTB) Fatal(args ...any)              { s.ts.Fatalf("%s", fmt.Sprint(args...)) }
func (s scriptTB) Fatalf(format string, a ...any) { s.ts.Fatalf(format, a...) }
func (s scriptTB) Cleanup(f func())               { s.ts.Defer(f) }
func (s scriptTB) TempDir() string {
	dir, err := os.MkdirTemp(s.ts.Getenv("WORK"), "fixture-")
	s.ts.Check(err)
	return dir
}

// cmdSaveState writes the state given as plain JSON in IN to the state file
// OUT the way the plugin does (envelope, checksum), for status to read,
// written at savedAt, so that the output that says when is the same at
// each run.
func cmdSaveState(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: savestate IN OUT")
	}
	st := state.NewState()
	ts.Check(json.Unmarshal([]byte(ts.ReadFile(args[0])), st))
	payload, err := json.Marshal(st)
	ts.Check(err)
	data, err := state.EncodeEnvelope(nil, payload, savedAt)
	ts.Check(err)
	ts.Check(os.MkdirAll(filepath.Dir(ts.MkAbs(args[1])), 0o700))
	ts.Check(os.WriteFile(ts.MkAbs(args[1]), data, 0o600))
}

// savedAt is when savestate's files say they were written.
var savedAt = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
