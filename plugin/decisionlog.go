package plugin

// DecisionLog takes the line that tells a creation's decision ("container
// …: pool …, CPUs …, mems …"), at info: the one line of every creation,
// logged under the lock on the path of the reply. The plugin's own logger
// is one, and the default; the daemon's formats the line after the reply
// (cmd/nri-cpupool/internal/logsink.Deferred), so the arguments handed to
// it are strings, which nothing changes afterwards.
type DecisionLog interface {
	Infof(format string, args ...any)
}

// LogDecisionsTo sends the creations' decision lines to d instead of the
// plugin's logger, which must be the logger d writes through: its level
// and its formatting stay the lines'. Called before Run.
func (p *Plugin) LogDecisionsTo(d DecisionLog) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.decisions = d
}
