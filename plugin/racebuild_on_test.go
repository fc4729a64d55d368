//go:build race

package plugin

// raceBuild tells tests that count allocations that the race detector is
// on: it makes some objects escape that do not otherwise, and sync.Pool
// (logrus's entries and buffers) drops a share of what is put back at
// random, so counts run higher and vary.
const raceBuild = true
