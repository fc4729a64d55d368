// Package plural words counts and CPU lists for people, singular for one:
// "1 CPU", "CPU 7 is offline", "CPUs 4-6 are offline", as the docs promise
// of the commands' prose (docs/commands.md; issue 43: "1 NUMA nodes",
// review 58: "1 threads", "CPUs 200 do not exist").
package plural

import (
	"fmt"

	"k8s.io/utils/cpuset"
)

// Count is a count and its noun, singular for one: "1 CPU", "2 NUMA
// nodes", "0 containers". The nouns it is given take a plain "s".
func Count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// CPUs names a set of CPUs: "CPU 7", "CPUs 4-6,9".
func CPUs(set cpuset.CPUSet) string {
	if set.Size() == 1 {
		return "CPU " + set.String()
	}
	return "CPUs " + set.String()
}

// Verb is one when n is 1, else many: Verb(n, "is", "are").
func Verb(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
