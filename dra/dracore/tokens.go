package dracore

import (
	"fmt"
	"strconv"
	"strings"
)

// EnvPrefix starts the environment variable that the CDI spec of a prepared
// request sets: CPUPOOL_CLAIM_<claim uid>_<request>=<token>. The token is
// random and remembered with the CPUs it stands for, so the CPUs come from
// the daemon's memory, never from the container: a variable written by
// hand carries no known token and gets nothing.
const EnvPrefix = "CPUPOOL_CLAIM_"

// maxTokenValue bounds what is parsed of a tenant-visible value.
const maxTokenValue = 64

// Tokens finds the claim tokens in a container's environment: the values
// of every variable named EnvPrefix…, as the runtime applied the CDI specs
// the kubelet named. A variable set twice (by the pod spec as well as by
// CDI) and a value longer than a token are errors; values are bounded
// before anything else looks at them.
func Tokens(env []string) ([]string, error) {
	var tokens []string
	seen := map[string]bool{}
	for _, e := range env {
		if !strings.HasPrefix(e, EnvPrefix) {
			continue
		}
		k, v, _ := strings.Cut(e, "=")
		if seen[k] {
			return nil, fmt.Errorf("%s is set more than once; it is set by the %s driver for the container's claims and must not be set in the pod spec", echo(k), DriverName)
		}
		seen[k] = true
		if len(v) > maxTokenValue {
			return nil, fmt.Errorf("%s=%q...: not a claim token", echo(k), v[:16])
		}
		tokens = append(tokens, v)
	}
	return tokens, nil
}

// echo quotes a tenant's variable name for a message, shortened: a claim's
// variable name fits whole.
func echo(s string) string {
	if len(s) > 128 {
		return strconv.Quote(s[:128]) + "..."
	}
	return strconv.Quote(s)
}
