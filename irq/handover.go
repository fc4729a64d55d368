package irq

// A reload or a CPU hotplug makes the isolation's Sources again in the
// same process (the IRQ Source knows the online CPUs it was made with).
// A new Source that knew nothing of its predecessor's writes took an
// IRQ still holding the plugin's value for a ban since released as
// another program's placement, which avoids the ban: the released CPUs
// got no IRQ back while any other CPU stayed banned. It takes the
// predecessor's records instead, as if it had written them itself.

// TakeOwnWrites makes what from wrote to each IRQ this Source's own
// writes, under a banned set other than any this Source plans: each such
// IRQ is checked against this Source's first want (ownwrites.go). Call
// it before this Source's first pass, once from's reconciler is closed:
// neither may be in a pass.
func (s *Source) TakeOwnWrites(from *Source) {
	if from == nil || from == s {
		return
	}
	for n, w := range from.own.wrote {
		s.own.wrote[n] = w
	}
	s.own.gen = max(s.own.gen, from.own.gen) + 1
}
