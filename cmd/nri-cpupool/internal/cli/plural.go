package cli

import "fmt"

// plural is a count and its noun, singular for one: "1 CPU", "2 NUMA
// nodes", "0 containers". Every count the commands print in prose goes
// through it (issue 43: "1 NUMA nodes", "1 CPUs"); the nouns it is given
// take a plain "s".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
