#!/usr/bin/env bash
# `make e2e-vm`: the focused end-to-end set (test/vm/scenarios.sh) on real
# kernels, in VMs of shape `prod` (2 sockets x 2 cores x 2 threads, 2 NUMA
# nodes, isolcpus) on cgroup v2 (the production case) and on cgroup v1.
#   E2E_VM_RUNS="v2:full v1:quick"   the VMs to boot, in order: cgroup version and
#                            scenario set (scenarios.sh: quick stops after the
#                            exclusive containers)
#   E2E_VM_REQUIRED=1        fail instead of skipping when qemu cannot run here
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
(cd "$REPO" && go run ./tools/mkimage -busybox /bin/busybox -name "$IMAGE" -out "$SHARE/busybox.tar")

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
START=$SECONDS FAILED=""
for run in ${E2E_VM_RUNS:-v2:full v1:quick}; do
  cg=${run%%:*} set=${run#*:} t=$SECONDS
  say "e2e-vm: shape prod on cgroup $cg, $set set ($VM_ACCEL)"
  if "$HERE/vm.sh" --shape prod --cgroup "$cg" --timeout "${E2E_VM_TIMEOUT:-1800}" "${SHARES[@]}" \
       --env "E2E_VM_SET=$set" --env "E2E_IMAGE_TAR=$SHARE/busybox.tar" --env "E2E_TOOLS=$TOOLS" \
       --env "E2E_CRICTL_TIMEOUT=${E2E_CRICTL_TIMEOUT:-180}" --cwd "$REPO" -- bash test/vm/scenarios.sh; then
    info "cgroup $cg: passed in $((SECONDS - t)) s"
  else
    info "cgroup $cg: FAILED after $((SECONDS - t)) s"
    FAILED="$FAILED $cg"
  fi
done
echo "e2e-vm: $((SECONDS - START)) s in all ($VM_ACCEL)${FAILED:+; failed on cgroup$FAILED}"
[ -z "$FAILED" ]
