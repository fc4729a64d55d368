package benchutil

// Evictor is memory to write over between two timed operations, so that
// each finds the CPU's caches and TLB holding other lines, as a daemon's
// handler does after other processes ran (issue 45's cold decision).
type Evictor []byte

// NewEvictor returns an Evictor of 32 MiB, more than the last-level cache
// of the machines the benchmarks run on.
func NewEvictor() Evictor { return NewEvictorOf(32 << 20) }

// NewEvictorOf returns an Evictor of size bytes. One smaller than the
// last-level cache evicts only the levels below it, so that a cold
// operation's time can be told by the level its lines come back from
// (the development VM's cores have 64 KiB of L1 data, 1 MiB of L2 each,
// and share 32 MiB of L3).
func NewEvictorOf(size int) Evictor { return make(Evictor, size) }

// Evict writes one byte in each 64-byte line.
func (e Evictor) Evict() {
	for i := 0; i < len(e); i += 64 {
		e[i]++
	}
}
