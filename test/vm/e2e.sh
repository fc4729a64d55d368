#!/usr/bin/env bash
# `make e2e-vm`: the focused end-to-end set (test/vm/scenarios.sh) and the
# isolation set (test/vm/isolation.sh) on real kernels, in VMs of shape
# `prod` (2 sockets x 2 cores x 2 threads, 2 NUMA nodes, isolcpus) on cgroup
# v2 (the production case) and on cgroup v1.
#   E2E_VM_RUNS="v2:full v1:quick v2:isolation v2:isolation:6.12 v2:reload"
#                            the VMs to boot, in order: cgroup version, set
#                            (full or quick: scenarios.sh, quick stops after the
#                            exclusive containers; isolation: isolation.sh;
#                            reload: reload.sh, config reload and CPU hotplug;
#                            systemd: systemd.sh in a VM booted with the host's
#                            systemd as PID 1, `make e2e-vm-systemd`; bench:
#                            the noise harness bench-isolation.sh, also with
#                            systemd as PID 1, `make bench-isolation`) and
#                            optionally a kernel series (6.12: Debian's
#                            linux-image-6.12.*-amd64-unsigned, from
#                            bookworm-backports; skipped, saying so, when apt
#                            does not know it)
#   E2E_VM_REQUIRED=1        fail instead of skipping when qemu cannot run here
#   E2E_VM_MEMORY=0          the full set leaves out its check that memory
#                            follows the CPUs (issue 31: hugepages reserved on
#                            node 1 only, tools/hugeprobe in a container); on
#                            by default
#   BENCH_ROUNDS, BENCH_WINDOW, BENCH_SETUPS, BENCH_CHECK, BENCH_SETTLE   for the bench set
# Everything vm.sh reads (VM_ACCEL, VM_KERNEL_PKG, ...) applies too.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../e2e/lib.sh"

skip() {
  [ "${E2E_VM_REQUIRED:-}" = 1 ] && die "e2e-vm cannot run: $*"
  echo "e2e-vm: SKIPPED: $*"
  exit 0
}
if [ "$(uname -s)" != Linux ] || [ "$(uname -m)" != x86_64 ]; then skip "needs an x86_64 Linux host"; fi
[ "$(id -u)" = 0 ] || skip "needs root (it installs qemu with apt-get, and the VM's containerd writes as root)"
"$HERE/vm.sh" --prepare || skip "qemu or the Debian kernel could not be set up (see above)"
[ -x "$REPO/bin/nri-cpupool" ] || die "build first: make build"

install_tools
VM_CACHE=${VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nri-cpupool-vm}
mkdir -p "$VM_CACHE"
SHARE=$(mktemp -d "$VM_CACHE/e2e.XXXXXX")
trap 'rm -rf "$SHARE"' EXIT
# oslat (Debian's rt-tests), the noise check's and harness's probe, and
# stress-ng, their host load (test/vm/noise.sh), installed on the host: the
# VM runs the host's root. Neither package starts anything.
if ! command -v oslat >/dev/null || ! command -v stress-ng >/dev/null; then
  info "installing rt-tests and stress-ng (apt-get) for the noise check"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends rt-tests stress-ng; } >/dev/null 2>&1 ||
    info "apt-get could not install rt-tests and stress-ng: the noise check will fail saying so"
fi
# The image carries tools/hugeprobe for the hugepage check (static: the
# image has no libc), and oslat with the shared libraries it links, at the
# paths its loader looks for them.
IMAGE_ADD=(-add "$SHARE/hugeprobe=/bin/hugeprobe")
if OSLAT=$(command -v oslat); then
  IMAGE_ADD+=(-add "$OSLAT=/bin/oslat")
  for lib in $(ldd "$OSLAT" | grep -o '/[^ ]*'); do IMAGE_ADD+=(-add "$lib=$lib"); done
fi
(cd "$REPO" && CGO_ENABLED=0 go build -o "$SHARE/hugeprobe" ./tools/hugeprobe &&
  go run ./tools/mkimage -busybox /bin/busybox "${IMAGE_ADD[@]}" -name "$IMAGE" -out "$SHARE/busybox.tar")

# Debian's irqbalance for the isolation set, unpacked into the cache (the
# VM sees the host's root; its libraries are the host's), not installed:
# installing it would start it on the host.
IRQBALANCE_BIN=$VM_CACHE/irqbalance/usr/sbin/irqbalance
if ! [ -x "$IRQBALANCE_BIN" ]; then
  t=$(mktemp -d "$VM_CACHE/.irqb.XXXXXX")
  if (cd "$t" && apt-get download irqbalance >/dev/null 2>&1) && dpkg-deb -x "$t"/irqbalance_*.deb "$t/x"; then
    rm -rf "$VM_CACHE/irqbalance" && mv "$t/x" "$VM_CACHE/irqbalance"
  else
    info "irqbalance could not be downloaded: the isolation set skips its irqbalance part"
  fi
  rm -rf "$t"
fi

# Two builds of the packages, of two versions, for the systemd set's
# install and upgrade: packaged from a copy of the recipe's inputs, so
# that bin/ keeps the build it has.
PKG_ENVS=()
case " ${E2E_VM_RUNS:-} " in *:systemd" "*|*:systemd:*)
  [ -x "${NFPM:-}" ] || die "the systemd set needs nfpm: run it with make e2e-vm-systemd"
  # rpm for the set's .rpm install and upgrade (the VM runs the host's
  # root read-only, so it must be here); without it that part is skipped.
  if ! command -v rpm >/dev/null; then
    info "installing rpm (apt-get) for the systemd set's .rpm checks"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends rpm; } >/dev/null 2>&1 ||
      info "apt-get could not install rpm: the .rpm checks will be skipped"
  fi
  for v in 1 2; do
    d=$SHARE/pkg$v
    mkdir -p "$d/bin"
    cp -r "$REPO/packaging" "$REPO/docs" "$REPO/README.md" "$d/"
    (cd "$REPO" && go build -trimpath -ldflags "-X github.com/cpupool/nri-cpupool/cmd/nri-cpupool/internal/cli.Version=0.0.$v-e2e" -o "$d/bin/nri-cpupool" ./cmd/nri-cpupool)
    # The other binaries the recipe ships (nri-cpupool-dra), as make build
    # left them: only nri-cpupool's version is checked.
    if [ -x "$REPO/bin/nri-cpupool-dra" ]; then cp "$REPO/bin/nri-cpupool-dra" "$d/bin/"; fi
    (cd "$d" && VERSION=0.0.$v~e2e ARCH=$(go env GOARCH) "$NFPM" package --config packaging/nfpm.yaml --packager deb --target "$SHARE/nri-cpupool_$v.deb" >/dev/null &&
      VERSION=0.0.$v~e2e ARCH=$(go env GOARCH) "$NFPM" package --config packaging/nfpm.yaml --packager rpm --target "$SHARE/nri-cpupool_$v.rpm" >/dev/null) ||
      die "packaging build $v failed"
  done
  PKG_ENVS=(--env "E2E_DEB=$SHARE/nri-cpupool_1.deb" --env "E2E_DEB2=$SHARE/nri-cpupool_2.deb"
    --env "E2E_RPM=$SHARE/nri-cpupool_1.rpm" --env "E2E_RPM2=$SHARE/nri-cpupool_2.rpm")
  ;;
esac

# One KVM probe for all the VMs.
if [ "${VM_ACCEL:-auto}" = auto ]; then
  if [ -w /dev/kvm ] && "$HERE/vm.sh" --shape tiny --accel kvm --cwd / --timeout "${VM_KVM_PROBE_TIMEOUT:-40}" -- /bin/true >/dev/null 2>&1; then
    export VM_ACCEL=kvm
  else
    export VM_ACCEL=tcg
  fi
fi

# The VM sees the host's root read-only but covers /tmp, /var/tmp and /run
# with its own tmpfs: the checkout, the image and the tools are shared
# explicitly, so that they are found wherever they are (a clone under /tmp,
# a HOME under /run).
SHARES=(--share "$REPO" --share "$SHARE" --share "$TOOLS")
[ -d "$VM_CACHE/irqbalance" ] && SHARES+=(--share "$VM_CACHE/irqbalance")
START=$SECONDS FAILED=""
for run in ${E2E_VM_RUNS:-v2:full v1:quick v2:isolation v2:isolation:6.12 v2:reload}; do
  IFS=: read -r cg set series <<<"$run"
  t=$SECONDS script=scenarios.sh pkg=${VM_KERNEL_PKG:-} mode=()
  [ "$set" = isolation ] && script=isolation.sh
  [ "$set" = reload ] && script=reload.sh
  if [ "$set" = systemd ]; then script=systemd.sh mode=(--systemd "${PKG_ENVS[@]}"); fi
  if [ "$set" = bench ]; then
    script=bench-isolation.sh
    mode=(--systemd --env "BENCH_ROUNDS=${BENCH_ROUNDS:-3}" --env "BENCH_WINDOW=${BENCH_WINDOW:-20}" --env "BENCH_SETUPS=${BENCH_SETUPS:-a b c d}" --env "BENCH_CHECK=${BENCH_CHECK:-1}" --env "BENCH_SETTLE=${BENCH_SETTLE:-5}")
  fi
  if [ -n "$series" ]; then
    re="^linux-image-${series//./[.]}[.][0-9.]*[+]deb[0-9]*-amd64-unsigned\$"
    pkg=$(apt-cache search --names-only "$re" 2>/dev/null | cut -d' ' -f1 | sort -V | tail -1)
    if [ -z "$pkg" ]; then
      info "$run: SKIPPED: apt knows no linux-image-$series.*-amd64-unsigned (add the bookworm-backports suite)"
      continue
    fi
  fi
  say "e2e-vm: shape prod on cgroup $cg, $set set${pkg:+, $pkg} ($VM_ACCEL)"
  if VM_KERNEL_PKG=$pkg "$HERE/vm.sh" --shape prod --cgroup "$cg" --timeout "${E2E_VM_TIMEOUT:-1800}" "${SHARES[@]}" \
       --env "E2E_VM_SET=$set" --env "E2E_IMAGE_TAR=$SHARE/busybox.tar" --env "E2E_TOOLS=$TOOLS" \
       --env "E2E_VM_MEMORY=${E2E_VM_MEMORY:-1}" \
       --env "IRQBALANCE_BIN=$IRQBALANCE_BIN" \
       --env "E2E_CRICTL_TIMEOUT=${E2E_CRICTL_TIMEOUT:-180}" ${mode[@]+"${mode[@]}"} --cwd "$REPO" -- bash "test/vm/$script"; then
    info "$run: passed in $((SECONDS - t)) s"
  else
    info "$run: FAILED after $((SECONDS - t)) s"
    FAILED="$FAILED $run"
  fi
done
echo "e2e-vm: $((SECONDS - START)) s in all ($VM_ACCEL)${FAILED:+; failed:$FAILED}"
[ -z "$FAILED" ]
