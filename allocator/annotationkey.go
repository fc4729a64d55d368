package allocator

import "strings"

// Annotation keys. Each is looked up the NRI way (lookup): "<key>/container.<name>"
// first, then "<key>/pod", then "<key>".
const (
	AnnotationDomain               = "cpupool.dev"
	AnnotationPool                 = "pool.cpupool.dev"
	AnnotationNUMA                 = "numa.cpupool.dev"
	AnnotationDevice               = "device.cpupool.dev"
	AnnotationHideHyperthreads     = "hide-hyperthreads.cpupool.dev"
	AnnotationFullPCPUsOnly        = "full-pcpus-only.cpupool.dev"
	AnnotationDistributeAcrossNUMA = "distribute-across-numa.cpupool.dev"
	AnnotationDisableCPUQuota      = "disable-cpu-quota.cpupool.dev"
	AnnotationIRQIsolation         = "irq-isolation.cpupool.dev"
	AnnotationIsolatedPartition    = "isolated-partition.cpupool.dev"
	AnnotationPowerClass           = "power-class.cpupool.dev"
	AnnotationSharedCPUs           = "shared-cpus.cpupool.dev"
)

var knownAnnotations = []string{AnnotationPool, AnnotationNUMA, AnnotationDevice, AnnotationHideHyperthreads, AnnotationFullPCPUsOnly, AnnotationDistributeAcrossNUMA,
	AnnotationDisableCPUQuota, AnnotationIRQIsolation, AnnotationIsolatedPartition, AnnotationPowerClass, AnnotationSharedCPUs}

// An annotation key of ours is "<base>", "<base>/pod" or
// "<base>/container.<name>", as in containerd/nri's sample plugins; the
// base is one of the Annotation constants. This file is the one home of
// that vocabulary: the policy looks keys up with it, and the plugin's
// typo warnings and explain read container names out of keys with it.
const (
	scopePod       = "pod"
	scopeContainer = "container."
)

// OurAnnotation tells whether an annotation key, of any scope, is in our
// domain.
func OurAnnotation(key string) bool {
	base, _, _ := strings.Cut(key, "/")
	return strings.HasSuffix(base, "."+AnnotationDomain) || base == AnnotationDomain
}

// ContainerScoped splits a key scoped to one container,
// "<base>/container.<name>", into its base and the container's name; ok
// is false for a key of any other scope. It does not check the domain.
func ContainerScoped(key string) (base, name string, ok bool) {
	base, scope, _ := strings.Cut(key, "/")
	if name, ok = strings.CutPrefix(scope, scopeContainer); !ok {
		return base, "", false
	}
	return base, name, true
}

// annotationPair is one annotation of our domain.
type annotationPair struct{ key, value string }

// annotationView is a container's annotations of our domain, gathered
// from the pod's map in the one pass that checks them (gatherOurs), for
// lookup. A decision makes a dozen lookups, each of up to three keys, most
// of them misses, and most pods carry none or a few of ours: reading the
// few gathered pairs costs less than hashing three keys each into the
// pod's map, whose lines the reply path finds cold (issue 45).
type annotationView struct {
	container string
	ours      []annotationPair
}

// lookup finds an annotation for the container the NRI way,
// "<key>/container.<name>" first, then "<key>/pod", then "<key>", and
// returns the key that matched.
func (a annotationView) lookup(key string) (string, string, bool) {
	best, rank := -1, scopeNone
	for i, kv := range a.ours {
		if r := scopeRank(kv.key, key, a.container); r < rank {
			best, rank = i, r
		}
	}
	if best < 0 {
		return "", "", false
	}
	return a.ours[best].key, a.ours[best].value, true
}

// The precedence of a key's scopes for a container, first first.
const (
	scopeRankContainer = iota
	scopeRankPod
	scopeRankBare
	scopeNone
)

// scopeRank is k's precedence as a key of base for container: scopeNone
// when k is not one of base's three keys for it.
func scopeRank(k, base, container string) int {
	rest, ok := strings.CutPrefix(k, base)
	switch {
	case !ok:
		return scopeNone
	case rest == "":
		return scopeRankBare
	case rest == "/"+scopePod:
		return scopeRankPod
	}
	if name, ok := strings.CutPrefix(rest, "/"+scopeContainer); ok && name == container {
		return scopeRankContainer
	}
	return scopeNone
}

// isDNSLabel tells whether name is an RFC 1123 label, as Kubernetes
// requires of a container's name: 1 to 63 bytes of lower-case letters,
// digits and '-', starting and ending with a letter or digit. Written
// here, not taken from apimachinery's validation package, which would
// link the Kubernetes client libraries into nri-cpupool
// (TestLinksNoKubernetesClient).
func isDNSLabel(name string) bool {
	if len(name) == 0 || len(name) > 63 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (c != '-' || i == 0 || i == len(name)-1) {
			return false
		}
	}
	return true
}
