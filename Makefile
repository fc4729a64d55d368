# nri-cpupool — see README.md. `make test` is the project's test command.
GO       ?= go
# The binaries' and the packages' version: packaging/version.sh (the tag,
# or 0.0.0~git<commit date>.<hash>, which dpkg and rpm order by age where
# bare hashes would not); make VERSION=1.2.3 overrides it (docs/install.md).
ifeq ($(origin VERSION),undefined)
VERSION  := $(shell bash packaging/version.sh 2>/dev/null || echo dev)
endif
LDFLAGS  := -X github.com/cpupool/nri-cpupool/cmd/nri-cpupool/internal/cli.Version=$(VERSION)
BIN      := bin/nri-cpupool
# The same commands with the DRA driver and the Kubernetes client libraries
# it needs; nri-cpupool runs it in its place when dra.enabled is set, so
# that a node without DRA does not pay for them (docs/architecture.md).
BIN_DRA  := bin/nri-cpupool-dra
PREFIX   ?= /usr/local
DESTDIR  ?=
SPECS    := $(wildcard testdata/topologies/*.yaml)
# e2e runs where it can: as root on Linux (it starts a real containerd).
# Build tools (nfpm, ...) are installed with go install into a cache that
# survives clean clones.
TOOLS_BIN ?= $(HOME)/.cache/nri-cpupool-tools
NFPM_VERSION := v2.44.0
NFPM     := $(TOOLS_BIN)/nfpm-$(NFPM_VERSION)
RUN_E2E  ?= $(shell [ "$$(id -u)" = 0 ] && [ "$$(uname -s)" = Linux ] && echo yes || echo no)
# The Kubernetes suite also needs the Kubernetes binaries: prebuilt ones in
# $NRI_CPUPOOL_K8S_TOOLS (.ci/run sets it) or ones it unpacked or built before.
K8S_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/nri-cpupool-k8s
HAVE_K8S ?= $(shell { [ -f "$(NRI_CPUPOOL_K8S_TOOLS)/kubelet.xz" ] || [ -f "$(K8S_CACHE)/kubernetes-v1.36.3/.complete" ]; } && echo yes || echo no)

# Lint tools: staticcheck with go install into the same cache, one file per
# version; shellcheck from Debian (apt-get, as root).
STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(TOOLS_BIN)/staticcheck-$(STATICCHECK_VERSION)
# promtool checks deploy/monitoring's alerting rules and runs their unit
# tests. Prometheus 3.x's Go module versions are v0.3MM.P for v3.MM.P.
# Built without the service discovery plugins (remove_all_sd), whose cloud
# SDKs would take most of its build and which rules do not use.
PROMTOOL_VERSION := v0.316.0
PROMTOOL := $(TOOLS_BIN)/promtool-$(PROMTOOL_VERSION)
MONITORING := deploy/monitoring
# The Helm CLI (v4) for the chart in deploy/helm: helm lint and helm
# template in make lint, helm install in the Kubernetes suite.
HELM_VERSION := v4.3.2
HELM     := $(TOOLS_BIN)/helm-$(HELM_VERSION)
SHELL_SCRIPTS := .ci/run $(wildcard packaging/*.sh packaging/scripts/*.sh test/*.sh test/*/*.sh)

.PHONY: all build test unit soak fuzz packaging e2e e2e-vm e2e-vm-systemd k8s-e2e scale-scheduler bench bench-latency bench-isolation lint tools helm shellcheck-installed install uninstall demo fixtures deb rpm package nfpm image clean

all: build

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/nri-cpupool
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN_DRA) ./cmd/nri-cpupool/nri-cpupool-dra

# Unit + integration tests (real ttRPC through the NRI adaptation library),
# lint, then the end-to-end suite with a real containerd when run as root.
test: lint unit packaging
ifeq ($(RUN_E2E),yes)
	$(MAKE) e2e
ifeq ($(HAVE_K8S),yes)
	$(MAKE) k8s-e2e
	$(MAKE) scale-scheduler NODES=20 PODS=100 MODELS=numaNode
else
	@echo "make test: skipping the Kubernetes suite: no Kubernetes binaries (set NRI_CPUPOOL_K8S_TOOLS to a directory like shared/tools/kubernetes-v1.36.3, or run 'make k8s-e2e', which builds them once, 15-25 min)"
endif
else
	@echo "make test: skipping the end-to-end suites (need root on Linux; run 'make e2e' and 'make k8s-e2e' there)"
endif

# PROMTOOL: tools/dashcheck's tests parse the dashboard's expressions with
# make lint's promtool, and skip without it (they did in make test).
# NRI_CPUPOOL_TEST_BINDIR: the plugin tests that run the real daemon use
# the binaries build just made instead of each linking its own
# (plugin/harness_test.go prebuiltDir); make test builds them anyway.
unit: $(PROMTOOL) build
	mkdir -p bin
	rm -f bin/property.txt
	PROMTOOL=$(PROMTOOL) CPUPOOL_PROPERTY_REPORT=$(CURDIR)/bin/property.txt NRI_CPUPOOL_TEST_BINDIR=$(CURDIR)/bin \
	  $(GO) test -race -count=1 -timeout 30m ./...
	@cat bin/property.txt

# Go native fuzzing, each target for FUZZTIME (make test runs the seeds and
# the checked-in corpora in testdata/fuzz as plain tests).
FUZZTIME ?= 30s
FUZZ_TARGETS := FuzzParse:./internal/cpulist FuzzParse:./config FuzzAnnotations:./allocator \
  FuzzStateSynchronize:./plugin FuzzRequests:./cmd/nri-cpupool/internal/simulate
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
	  name=$${t%%:*}; pkg=$${t#*:}; echo "== $$name ($$pkg, $(FUZZTIME))"; \
	  $(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) $(FUZZFLAGS) $$pkg; \
	done

# The randomized property test of the whole plugin, long: ≥ 20,000 events
# with kills and runtime restarts (make test runs 300).
SOAK_EVENTS ?= 20000
soak:
	mkdir -p bin
	@status=0; CPUPOOL_PROPERTY_EVENTS=$(SOAK_EVENTS) CPUPOOL_PROPERTY_REPORT=$(CURDIR)/bin/soak.txt \
	  $(GO) test -count=1 -timeout 90m -v -run '^TestPropertyWholePlugin$$' ./plugin > bin/soak.log 2>&1 || status=$$?; \
	  grep -E '^(--- |ok|FAIL|panic)|property' bin/soak.log; exit $$status
	@cat bin/soak.txt

packaging: build $(NFPM)
	NFPM=$(NFPM) bash test/packaging.sh

e2e: build
	bash test/e2e/e2e.sh

# The focused end-to-end set in VMs with NUMA nodes, SMT siblings, kernel
# isolcpus and cgroup v2 (and v1); skips with its reason where qemu cannot run.
e2e-vm: build
	bash test/vm/e2e.sh

# The packaged unit under the host's own systemd as PID 1 in a VM (install,
# Type=notify, the hardening, housekeeping through D-Bus, the audit,
# upgrade, removal), on Debian's Linux 6.1 and on 6.12 (from
# bookworm-backports, skipped saying so without it): VM_SYSTEMD_RUNS
# picks (e.g. VM_SYSTEMD_RUNS=v2:systemd for 6.1 alone).
VM_SYSTEMD_RUNS ?= v2:systemd v2:systemd:6.12
e2e-vm-systemd: build $(NFPM)
	E2E_VM_RUNS="$(VM_SYSTEMD_RUNS)" NFPM=$(NFPM) bash test/vm/e2e.sh

# A private one-node Kubernetes cluster with this plugin (test/k8s): the
# annotation, device plugin and DaemonSet routes (the DaemonSet from the
# plain manifest, then from the Helm chart), then the DRA driver.
k8s-e2e: build $(HELM)
	HELM=$(HELM) bash test/k8s/run.sh
	bash test/k8s/dra.sh

# The scheduler with NODES kwok nodes that carry the slices our driver would
# publish for mixed fixture shapes and a NIC driver's devices
# (test/k8s/scale.sh, issue 33): PODS pods without claims, then PODS with a
# claim for CPUS CPUs on a NIC's NUMA node, in each device model of MODELS;
# pods/s, the scheduler's memory, and a check of every allocation. make test
# runs a short one (20 nodes, 100 pods); figures in docs/performance.md. The
# cpu model's phases make CPU_PODS pods: its claims go at 1 to 2 pods/s.
NODES    ?= 100
PODS     ?= 2000
CPU_PODS ?= 300
MODELS   ?= numaNode cpu
CPUS     ?= 2
scale-scheduler:
	NODES=$(NODES) PODS=$(PODS) CPU_PODS=$(CPU_PODS) MODELS="$(MODELS)" CPUS=$(CPUS) bash test/k8s/scale.sh

# Speed and memory figures (medians and p99 from one run). Not a pass/fail gate.
# -p 1: packages one after the other, so benchmarks do not share the CPUs.
# Issue 45's matrix with the real binary in its own process runs at one size
# here (it would double the run); make bench-latency runs it whole.
bench:
	mkdir -p bin
	$(GO) test -run '^$$' -bench 'Decision|Release|Churn|RoundTrip|HandlerMemory|CreateContainerAllocs|Synchronize|PodRemoval|WorstCaseAnnotation|DRAPrepare' -skip 'AllFeaturesProcess' -benchmem -count=1 -p 1 -benchtime=1000x ./allocator ./plugin ./dra | tee bin/bench.txt
	$(GO) test -run '^$$' -bench 'AllFeaturesProcess/cpus=384/running=0$$' -benchmem -count=1 -benchtime=1000x ./plugin | tee -a bin/bench.txt
	$(GO) test -run '^$$' -bench 'PluginRSS|StateBurst' -benchtime=1x ./plugin | tee -a bin/bench.txt
	$(GO) run ./tools/benchtable < bin/bench.txt

# Issue 45's latency matrix alone, in both modes: nri-cpupool in the
# benchmark's process and the real binary in its own, 384 and 1,024 CPUs, 0
# to 5,000 running, every isolation feature on, and the reply's cost
# (docs/performance.md). Output kept in bin/bench-latency.txt.
bench-latency:
	mkdir -p bin
	$(GO) test -run '^$$' -bench 'RoundTripAllFeatures|RoundTripReplyCost' -benchmem -count=1 -timeout 120m -benchtime=1000x ./plugin | tee bin/bench-latency.txt
	$(GO) run ./tools/benchtable < bin/bench-latency.txt

# The noise harness (issue 42): an oslat container on an exclusive CPU under
# the same host load (stress-ng, a timer, 9p IRQs) in four setups, alternated,
# BENCH_ROUNDS rounds of BENCH_WINDOW seconds each: plain pinning,
# nri-cpupool (housekeeping, IRQ isolation, the isolated partition), an
# isolcpus CPU with the features off and with the default config; what else
# ran on the probe's CPU (sched_switch), the IRQs taken there, the probe's
# preemptions and oslat's maximum, as one table (test/vm/bench-isolation.sh,
# figures in docs/performance.md). In VMs with systemd as PID 1 on Debian's
# 6.1 and on 6.12 (VM_BENCH_RUNS picks); not part of make test. The output
# is kept in bin/bench-isolation.txt.
VM_BENCH_RUNS ?= v2:bench v2:bench:6.12
BENCH_ROUNDS  ?= 3
BENCH_WINDOW  ?= 20
bench-isolation: build
	mkdir -p bin
	E2E_VM_RUNS="$(VM_BENCH_RUNS)" BENCH_ROUNDS=$(BENCH_ROUNDS) BENCH_WINDOW=$(BENCH_WINDOW) \
	  bash -o pipefail -c 'bash test/vm/e2e.sh 2>&1 | tee bin/bench-isolation.txt'

# gofmt, go vet, staticcheck, go.mod/go.sum tidiness, shellcheck, promtool
# on the alerting rules (checked, and their unit tests run), tools/dashcheck
# on the Grafana dashboard (Grafana's schema, strictly, through the
# foundation SDK; data sources, variables; promtool parses its
# expressions: no Grafana runs here), the Helm chart
# (test/helm.sh: helm lint, helm template of its ci/ values files checked by
# tools/chartcheck), and docscheck: every config key, annotation, metric,
# pod Event reason, command, flag and make target the code defines is
# documented in docs/,
# every relative link of README.md and docs/ resolves, and the rules and the
# dashboard of deploy/monitoring name only metrics the code exports, and
# docs/architecture.md lists every package on its floor
# (tools/docscheck; -list shows the names).
# govulncheck is not part of it: it needs its vulnerability database online.
lint: tools
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run 'go mod tidy'"; exit 1; }
	shellcheck -x -P SCRIPTDIR $(SHELL_SCRIPTS)
	$(PROMTOOL) check rules $(MONITORING)/nri-cpupool.rules.yaml
	$(PROMTOOL) test rules $(MONITORING)/nri-cpupool.rules.test.yaml
	$(GO) run ./tools/dashcheck -promtool $(PROMTOOL) $(MONITORING)/nri-cpupool-dashboard.json
	HELM=$(HELM) bash test/helm.sh
	$(GO) run ./tools/docscheck -monitoring $(MONITORING)

tools: $(STATICCHECK) $(PROMTOOL) $(HELM) shellcheck-installed

helm: $(HELM)
$(HELM):
	mkdir -p $(TOOLS_BIN)/.helm
	GOBIN=$(abspath $(TOOLS_BIN))/.helm GOFLAGS=-buildvcs=false $(GO) install helm.sh/helm/v4/cmd/helm@$(HELM_VERSION)
	mv $(TOOLS_BIN)/.helm/helm $(HELM)

$(STATICCHECK):
	mkdir -p $(TOOLS_BIN)/.staticcheck
	GOBIN=$(abspath $(TOOLS_BIN))/.staticcheck GOFLAGS=-buildvcs=false $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv $(TOOLS_BIN)/.staticcheck/staticcheck $(STATICCHECK)

$(PROMTOOL):
	mkdir -p $(TOOLS_BIN)/.promtool
	GOBIN=$(abspath $(TOOLS_BIN))/.promtool GOFLAGS=-buildvcs=false $(GO) install -tags remove_all_sd github.com/prometheus/prometheus/cmd/promtool@$(PROMTOOL_VERSION)
	mv $(TOOLS_BIN)/.promtool/promtool $(PROMTOOL)

shellcheck-installed:
	@command -v shellcheck >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq shellcheck >/dev/null; \
	  else echo "make lint needs shellcheck (Debian: apt-get install shellcheck)"; exit 1; fi; }

# Materialize the sysfs fixtures (for topology/simulate by hand).
fixtures:
	$(GO) run ./tools/mksysfs -out testdata/sysfs $(SPECS)

# The runtime drop-ins make install puts in place, as SOURCE:EXAMPLE:TARGET.
# An edited one is kept (like the config), and the shipped one is only put in
# share/doc: not beside it as a .new, since CRI-O reads every file of
# crio.conf.d, whatever its name. make uninstall removes only an unedited one.
RUNTIME_DROPINS := containerd/nri-cpupool.toml:containerd.toml:/etc/containerd/conf.d/nri-cpupool.toml \
  crio/10-nri-cpupool.conf:crio.conf:/etc/crio/crio.conf.d/10-nri-cpupool.conf
DROPIN_EXAMPLES = $(DESTDIR)$(PREFIX)/share/doc/nri-cpupool/examples

install: build
	install -D -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/nri-cpupool
	install -D -m 0755 $(BIN_DRA) $(DESTDIR)$(PREFIX)/bin/nri-cpupool-dra
	install -d $(DESTDIR)/etc/systemd/system
	sed 's|/usr/bin/nri-cpupool|$(PREFIX)/bin/nri-cpupool|g' packaging/nri-cpupool.service > $(DESTDIR)/etc/systemd/system/nri-cpupool.service
	@if [ ! -e $(DESTDIR)/etc/nri-cpupool/config.yaml ]; then \
	  install -D -m 0644 packaging/config.yaml $(DESTDIR)/etc/nri-cpupool/config.yaml; \
	else echo "keeping existing $(DESTDIR)/etc/nri-cpupool/config.yaml"; fi
	install -D -m 0644 packaging/containerd/nri-cpupool-fail-closed.toml $(DESTDIR)$(PREFIX)/share/doc/nri-cpupool/examples/containerd-fail-closed.toml
	install -D -m 0644 packaging/crio/20-nri-cpupool-fail-closed.conf $(DESTDIR)$(PREFIX)/share/doc/nri-cpupool/examples/crio-fail-closed.conf
	@set -e; for d in $(RUNTIME_DROPINS); do \
	  src=packaging/$${d%%:*}; ex=$${d#*:}; dst=$(DESTDIR)$${ex#*:}; ex=$(DROPIN_EXAMPLES)/$${ex%%:*}; \
	  install -D -m 0644 "$$src" "$$ex"; \
	  if [ ! -e "$$dst" ] || cmp -s "$$src" "$$dst"; then install -D -m 0644 "$$src" "$$dst"; \
	  else echo "keeping $$dst: it differs from this tree's (edited, or an older version's); this tree's is $$ex: merge what you need, then restart the runtime"; fi; \
	done
	install -d -m 0700 $(DESTDIR)/var/lib/nri-cpupool
	@echo "installed; next: nri-cpupool validate && systemctl daemon-reload && systemctl enable --now nri-cpupool"

# On this system (no DESTDIR): stop and disable the service, then put back
# the host files it changed (its stop restores nothing, and once the binary
# is gone nothing could). A restore that fails stops here, the binary kept,
# so that it can be run again; a binary older than restore-host hands it to
# the tree's bin/nri-cpupool, or warns (packaging/uninstall-restore.sh). The fail-closed drop-in is the operator's to
# delete: the runtime read it at its start and refuses containers without
# the plugin until it restarts without it.
uninstall:
	@for f in /etc/containerd/conf.d/nri-cpupool-fail-closed.toml /etc/containerd/conf.d/containerd-fail-closed.toml \
	  /etc/crio/crio.conf.d/20-nri-cpupool-fail-closed.conf; do \
	  if [ -e "$(DESTDIR)$$f" ]; then echo "warning: $(DESTDIR)$$f makes the runtime require the plugin: once it stops, no container starts; delete it and restart the runtime (systemctl restart containerd, or crio)" >&2; fi; \
	done
	@if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then systemctl disable --now nri-cpupool.service || true; fi
	@if [ -z "$(DESTDIR)" ] && [ -x $(PREFIX)/bin/nri-cpupool ]; then \
	  sh packaging/uninstall-restore.sh $(PREFIX)/bin/nri-cpupool $(BIN); \
	fi
	@for d in $(RUNTIME_DROPINS); do \
	  src=packaging/$${d%%:*}; ex=$${d#*:}; dst=$(DESTDIR)$${ex#*:}; ex=$(DROPIN_EXAMPLES)/$${ex%%:*}; \
	  [ -e "$$dst" ] || continue; \
	  if cmp -s "$$src" "$$dst" || { [ -e "$$ex" ] && cmp -s "$$ex" "$$dst"; }; then rm -f "$$dst"; \
	  else echo "keeping $$dst: it differs from the shipped drop-in (edited, or an older version's); delete it yourself if the runtime no longer needs it, then restart the runtime"; fi; \
	done
	rm -f $(DESTDIR)/etc/systemd/system/multi-user.target.wants/nri-cpupool.service
	rm -f $(DESTDIR)$(PREFIX)/bin/nri-cpupool $(DESTDIR)$(PREFIX)/bin/nri-cpupool-dra $(DESTDIR)/etc/systemd/system/nri-cpupool.service \
	  $(DROPIN_EXAMPLES)/containerd.toml $(DROPIN_EXAMPLES)/crio.conf \
	  $(DESTDIR)$(PREFIX)/share/doc/nri-cpupool/examples/containerd-fail-closed.toml \
	  $(DESTDIR)$(PREFIX)/share/doc/nri-cpupool/examples/crio-fail-closed.conf
	@if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi

demo: build
	bash test/e2e/demo.sh

# The .deb and the .rpm, from one nfpm recipe (packaging/nfpm.yaml).
package: build $(NFPM)
	NFPM=$(NFPM) bash packaging/package.sh $(VERSION) deb rpm
deb: build $(NFPM)
	NFPM=$(NFPM) bash packaging/package.sh $(VERSION) deb
rpm: build $(NFPM)
	NFPM=$(NFPM) bash packaging/package.sh $(VERSION) rpm

# The DaemonSet's image (deploy/kubernetes): the static binaries (nri-cpupool
# and nri-cpupool-dra) in an OCI archive, built without a container engine or
# registry.
IMAGE ?= ghcr.io/cpupool/nri-cpupool:dev
image:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/nri-cpupool-static ./cmd/nri-cpupool
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/nri-cpupool-dra-static ./cmd/nri-cpupool/nri-cpupool-dra
	$(GO) run ./tools/mkimage -plugin bin/nri-cpupool-static -plugin-dra bin/nri-cpupool-dra-static -name $(IMAGE) -out bin/nri-cpupool-image.tar
	@echo "bin/nri-cpupool-image.tar ($(IMAGE)): ctr -n k8s.io images import bin/nri-cpupool-image.tar"

nfpm: $(NFPM)
$(NFPM):
	mkdir -p $(TOOLS_BIN)/.nfpm
	GOBIN=$(abspath $(TOOLS_BIN))/.nfpm GOFLAGS=-buildvcs=false $(GO) install github.com/goreleaser/nfpm/v2/cmd/nfpm@$(NFPM_VERSION)
	mv $(TOOLS_BIN)/.nfpm/nfpm $(NFPM)

clean:
	rm -rf bin testdata/sysfs
