package allocator

import "testing"

func TestAnnotationKeyVocabulary(t *testing.T) {
	for _, tc := range []struct {
		key        string
		ours       bool
		base, name string
		scoped     bool
	}{
		{key: "pool.cpupool.dev", ours: true, base: "pool.cpupool.dev"},
		{key: "pool.cpupool.dev/pod", ours: true, base: "pool.cpupool.dev"},
		{key: "pool.cpupool.dev/container.web", ours: true, base: "pool.cpupool.dev", name: "web", scoped: true},
		{key: "pool.cpupool.dev/container.", ours: true, base: "pool.cpupool.dev", scoped: true},
		{key: "cpupool.dev/container.a", ours: true, base: "cpupool.dev", name: "a", scoped: true},
		// A domain that merely ends like ours is someone else's.
		{key: "pool.notcpupool.dev/container.web", base: "pool.notcpupool.dev", name: "web", scoped: true},
		{key: "example.com/container.web", base: "example.com", name: "web", scoped: true},
		// "container.<name>" is a scope only after the first slash.
		{key: "container.web", base: "container.web"},
		{key: "pool.cpupool.dev/containers.web", ours: true, base: "pool.cpupool.dev"},
	} {
		if got := OurAnnotation(tc.key); got != tc.ours {
			t.Errorf("OurAnnotation(%q) = %v, want %v", tc.key, got, tc.ours)
		}
		base, name, scoped := ContainerScoped(tc.key)
		if base != tc.base || name != tc.name || scoped != tc.scoped {
			t.Errorf("ContainerScoped(%q) = %q, %q, %v; want %q, %q, %v", tc.key, base, name, scoped, tc.base, tc.name, tc.scoped)
		}
	}
}
