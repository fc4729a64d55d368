package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// linkable are the only packages of the Kubernetes project nri-cpupool may
// link: cpuset, resource.Quantity (the config's amounts) and the device
// plugin API, with what they need. The DRA driver's libraries (client-go,
// the API types, dynamic-resource-allocation) cost a node about 25 MiB of
// memory whether or not the driver runs (issue 33): they belong in
// nri-cpupool-dra, which nri-cpupool execs when dra.enabled is set.
var linkable = []string{
	"k8s.io/utils/cpuset",
	"k8s.io/apimachinery/pkg/api/resource",
	"k8s.io/apimachinery/pkg/runtime/serializer/cbor/direct",
	"k8s.io/apimachinery/pkg/runtime/serializer/cbor/internal/modes",
	"sigs.k8s.io/json",
	"sigs.k8s.io/json/internal/golang/encoding/json",
	"k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1",
}

// TestLinksNoKubernetesClient fails when nri-cpupool links a package of the
// Kubernetes project beyond linkable, for example by importing package dra
// where dra/dracore would do.
func TestLinksNoKubernetesClient(t *testing.T) {
	deps := goListDeps(t, ".")
	var extra []string
	for _, p := range deps {
		if (strings.HasPrefix(p, "k8s.io/") || strings.HasPrefix(p, "sigs.k8s.io/") ||
			p == "github.com/cpupool/nri-cpupool/dra") && !slices.Contains(linkable, p) {
			extra = append(extra, p)
		}
	}
	if len(extra) > 0 {
		t.Errorf("nri-cpupool links %d packages it must not (the DRA driver's belong in nri-cpupool-dra; see docs/architecture.md); `go mod why -m` or `go list -deps` tells which import brings them:\n  %s",
			len(extra), strings.Join(extra, "\n  "))
	}
	if dra := goListDeps(t, "./nri-cpupool-dra"); !slices.Contains(dra, "github.com/cpupool/nri-cpupool/dra") {
		t.Errorf("nri-cpupool-dra does not link the DRA driver (package dra)")
	}
}

func goListDeps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}
