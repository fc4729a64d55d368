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

// lookup finds an annotation for a container the NRI way and returns the
// key that matched.
//
// The scoped keys are built in a stack buffer and looked up without
// becoming strings (the compiler does not copy string(b) in a map index):
// a decision makes seven lookups, most of them misses.
func lookup(ann map[string]string, key, container string) (string, string, bool) {
	if len(ann) == 0 {
		return "", "", false
	}
	var buf [128]byte
	b := append(append(append(buf[:0], key...), "/"+scopeContainer...), container...)
	if v, ok := ann[string(b)]; ok {
		return string(b), v, true
	}
	b = append(append(b[:0], key...), "/"+scopePod...)
	if v, ok := ann[string(b)]; ok {
		return string(b), v, true
	}
	if v, ok := ann[key]; ok {
		return key, v, true
	}
	return "", "", false
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
