package plugin

import "github.com/cpupool/nri-cpupool/internal/handlerclock"

// The phases of CreateContainer that --handler-clocks times (issue 45:
// where the handler's time goes in the daemon, on its CPU or off it).
// Each is marked where it ends; the last ends as the handler returns,
// after the lock is released.
const (
	clockInput    = iota // the tenant's input checked and read, before the lock
	clockLock            // the lock taken
	clockRequest         // the request built: the container's pool, grant, claims, device nodes
	clockAllocate        // the allocator's decision (placement, memory accounting, commit)
	clockRecord          // the decision recorded: state handoff, cgroup, grant, writer and reconciler kicked
	clockLog             // the decision's line handed to the log
	clockNotes           // notes, warnings and Events about the creation
	clockReply           // the followers' updates and the adjustment built
)

// creationPhases names the phases above, in order.
var creationPhases = []string{"input", "lock", "request", "allocate", "record", "log", "notes", "reply", "unlock"}

// NewCreationClocks is a Recorder for CreateContainer's phases, to give
// to TimeCreations.
func NewCreationClocks() *handlerclock.Recorder {
	r, err := handlerclock.NewRecorder(creationPhases...)
	if err != nil {
		panic(err) // a fixed list within MaxPhases: a bug here, not an input
	}
	return r
}

// TimeCreations times each creation's phases into r (the daemon's
// --handler-clocks); nil, the default, times nothing. The daemon calls it
// before Run; a creation that began before a later call is timed by the
// Recorder it found.
func (p *Plugin) TimeCreations(r *handlerclock.Recorder) { p.clocks.Store(r) }

// CreationClocks is the Recorder TimeCreations gave, nil when creations
// are not timed: the daemon serves its summary then.
func (p *Plugin) CreationClocks() *handlerclock.Recorder { return p.clocks.Load() }
