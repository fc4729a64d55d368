package benchutil

// Evictor is memory to write over between two timed operations, so that
// each finds the CPU's caches and TLB holding other lines, as a daemon's
// handler does after other processes ran (issue 45's cold decision).
type Evictor []byte

// NewEvictor returns an Evictor of 32 MiB, more than the last-level cache
// of the machines the benchmarks run on.
func NewEvictor() Evictor { return make(Evictor, 32<<20) }

// Evict writes one byte in each 64-byte line.
func (e Evictor) Evict() {
	for i := 0; i < len(e); i += 64 {
		e[i]++
	}
}
