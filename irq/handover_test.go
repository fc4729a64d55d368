package irq

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNewSourceTakesItsPredecessorsWrites: the isolation is made again in
// the same process (a reload, a hotplug) while CPUs 2 and 3 are banned;
// then 2 is released. An IRQ still holding the first Source's write
// gets CPU 2 back only if the new Source knows that write as the
// plugin's own; without it, a value that avoids the ban is taken as
// another program's placement and left.
func TestNewSourceTakesItsPredecessorsWrites(t *testing.T) {
	for _, take := range []bool{false, true} {
		n := newNode(t, twoNodes(), "")
		n.ban(2, 3)
		require.Equal(t, "0-1,4-7", n.affinity("24"))
		prev := n.src
		n.r.Close()
		n.start("")
		if take {
			n.src.TakeOwnWrites(prev)
		}
		n.ban(2, 3)
		n.ban(3)
		if take {
			assert.Equal(t, "0-2,4-7", n.affinity("24"), "CPU 2 released: the IRQ the first Source narrowed gets it back")
			assert.Equal(t, "2", n.affinity("28"), "its original less 3")
		} else {
			assert.Equal(t, "0-1,4-7", n.affinity("24"), "without the records: taken as another program's placement")
		}
		n.ban()
		assert.Equal(t, "0-7", n.affinity("24"))
	}
}
