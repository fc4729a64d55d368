#!/usr/bin/env bash
# Installs (once) and caches every runtime piece the end-to-end suite needs, then
# prints them as environment variables for test/e2e (e2e.sh evaluates them):
#   E2E_TOOLS          containerd v2.4.2 + shim + ctr, crictl (also used by make demo)
#   E2E_RUNC           runc v1.4.0 built with seccomp (the kubelet always asks for a
#                      seccomp profile; CRI-O needs it too)
#   E2E_CONTAINERD_OLD the oldest supported containerd (v2.0.13), built from its module
#                      source (v2.0.x and v2.1.x refuse `go install`: exclude directives)
#   E2E_CRIO           crio, pinns, copyimg unpacked from $NRI_CPUPOOL_CRIO_DIR (if set)
# Everything goes below ~/.cache/nri-cpupool-e2e, one directory per piece and version,
# under a lock so that concurrent runs never build into the same place.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

CACHE=$(dirname "$TOOLS")
OLD_CONTAINERD_VERSION=${OLD_CONTAINERD_VERSION:-v2.0.13}
CRIO_VERSION=v1.36.3
RUNC_SECCOMP=$CACHE/runc-seccomp-$RUNC_VERSION
OLD=$CACHE/containerd-$OLD_CONTAINERD_VERSION
CRIO=$CACHE/crio-$CRIO_VERSION

log() { printf '==> %s\n' "$*" >&2; }

apt_install() { # apt_install PACKAGE...: installs what is missing
  local missing=() p
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ "${#missing[@]}" -eq 0 ] && return 0
  log "installing ${missing[*]} (apt-get)"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

build_runc_seccomp() {
  [ -x "$RUNC_SECCOMP/runc" ] && "$RUNC_SECCOMP/runc" --version | grep -q 'seccomp' && return 0
  log "building runc $RUNC_VERSION with seccomp (first run only)"
  rm -rf "$RUNC_SECCOMP.partial"
  CGO_ENABLED=1 GOBIN=$RUNC_SECCOMP.partial GOFLAGS=-buildvcs=false go install -tags seccomp "github.com/opencontainers/runc@$RUNC_VERSION" >&2
  rm -rf "$RUNC_SECCOMP" && mv "$RUNC_SECCOMP.partial" "$RUNC_SECCOMP"
}

build_old_containerd() {
  [ -x "$OLD/containerd" ] && [ -x "$OLD/containerd-shim-runc-v2" ] && [ -x "$OLD/ctr" ] && return 0
  log "building containerd $OLD_CONTAINERD_VERSION from its module source (first run only, a few minutes)"
  local mod src
  mod=github.com/containerd/containerd/v2
  src=$(GOFLAGS=-mod=mod go mod download -json "$mod@$OLD_CONTAINERD_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  [ -d "$src" ] || { echo "cannot download $mod@$OLD_CONTAINERD_VERSION" >&2; return 1; }
  rm -rf "$OLD.src" "$OLD.partial"
  cp -r "$src" "$OLD.src" && chmod -R u+w "$OLD.src"
  (cd "$OLD.src" && GOFLAGS="-mod=mod -buildvcs=false" go build \
     -ldflags "-X $mod/version.Version=$OLD_CONTAINERD_VERSION" -o "$OLD.partial/" \
     ./cmd/containerd ./cmd/containerd-shim-runc-v2 ./cmd/ctr >&2)
  rm -rf "$OLD" "$OLD.src" && mv "$OLD.partial" "$OLD"
}

unpack_crio() {
  local dir=${NRI_CPUPOOL_CRIO_DIR:-}
  [ -n "$dir" ] || return 1
  [ -f "$dir/crio.xz" ] || { log "NRI_CPUPOOL_CRIO_DIR=$dir has no crio.xz"; return 1; }
  # SHA256SUMS.unpacked lists "NAME HASH".
  local sums
  sums=$(awk '{print $2 "  " $1}' "$dir/SHA256SUMS.unpacked")
  if ! (cd "$CRIO" 2>/dev/null && sha256sum --quiet -c <<<"$sums" >/dev/null 2>&1); then
    log "unpacking CRI-O $CRIO_VERSION from $dir"
    rm -rf "$CRIO.partial" && mkdir -p "$CRIO.partial"
    local b
    for b in crio pinns copyimg; do xz -dc "$dir/$b.xz" > "$CRIO.partial/$b" && chmod +x "$CRIO.partial/$b"; done
    (cd "$CRIO.partial" && sha256sum --quiet -c <<<"$sums") >&2
    rm -rf "$CRIO" && mv "$CRIO.partial" "$CRIO"
  fi
  apt_install conmon
}

main() {
  mkdir -p "$CACHE"
  exec 9>"$CACHE/.lock"
  flock 9
  install_tools >&2
  apt_install busybox-static libseccomp-dev xz-utils
  build_runc_seccomp
  echo "export E2E_TOOLS=$TOOLS E2E_RUNC=$RUNC_SECCOMP/runc"
  if [ "${E2E_SKIP_OLD:-0}" != 1 ] && build_old_containerd; then
    echo "export E2E_CONTAINERD_OLD=$OLD"
  fi
  if unpack_crio; then
    echo "export E2E_CRIO=$CRIO"
  else
    echo "export E2E_CRIO_SKIP='${NRI_CPUPOOL_CRIO_DIR:+no CRI-O binaries in $NRI_CPUPOOL_CRIO_DIR}${NRI_CPUPOOL_CRIO_DIR:-NRI_CPUPOOL_CRIO_DIR is not set (.ci/run sets it to ../shared/tools/cri-o-v1.36.3 when that exists)}'"
  fi
}
main
