//go:build race

package hostfiles

// raceBuild tells tests that count allocations that the race detector is
// on: sync.Pool drops a share of what is put back at random (the JSON
// encoder's buffers among them), so counts run far higher and vary.
const raceBuild = true
