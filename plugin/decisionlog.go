package plugin

import (
	"fmt"
	"io"
)

// DecisionLog takes the line that tells a creation's decision ("container
// …: pool …, CPUs …, mems …"), at info: the one line of every creation,
// logged under the lock on the path of the reply. The plugin's own logger
// is one, and the default; the daemon's formats the line after the reply
// (cmd/nri-cpupool/internal/logsink.Deferred), so the argument handed to
// it is a decisionLine, a value of strings, which nothing changes
// afterwards.
type DecisionLog interface {
	Infof(format string, args ...any)
}

// decisionLine is a creation's decision line, "container <who>: pool
// <pool>, CPUs <cpus><shared>, mems <mems>", as one argument for "%v": the
// five strings as arguments of their own were each boxed into an
// interface under the lock, on the path of the reply, while this is boxed
// once (issue 45). The text is the same, made when the line is formatted.
type decisionLine struct{ who, pool, cpus, shared, mems string }

// Format writes the line, whatever the verb.
func (l decisionLine) Format(f fmt.State, _ rune) {
	for _, s := range [...]string{"container ", l.who, ": pool ", l.pool, ", CPUs ", l.cpus, l.shared, ", mems ", l.mems} {
		io.WriteString(f, s)
	}
}

// LogDecisionsTo sends the creations' decision lines to d instead of the
// plugin's logger, which must be the logger d writes through: its level
// and its formatting stay the lines'. Called before Run.
func (p *Plugin) LogDecisionsTo(d DecisionLog) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.decisions = d
}
