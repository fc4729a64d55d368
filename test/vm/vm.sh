#!/usr/bin/env bash
# Boots a throw-away VM of a named shape (sockets, cores, threads, NUMA nodes,
# memory per node, kernel command line) on a Debian kernel, with cgroup v1 or
# v2, runs one command in it and exits with that command's status.
#
#   test/vm/vm.sh [--shape NAME] [--cgroup v1|v2] [--append 'KERNEL ARGS']
#                 [--env NAME=VALUE]... [--share DIR]... [--cwd DIR] [--systemd]
#                 [--timeout SECONDS] [--accel auto|kvm|tcg] -- COMMAND [ARG...]
#   test/vm/vm.sh --list        # the shapes
#   test/vm/vm.sh --prepare     # fetch the kernel and check qemu, boot nothing
#
# Inside the VM the command sees the host's root filesystem read-only (9p),
# with private tmpfs on /tmp, /var/tmp, /run and /dev/shm, its own /proc, /sys,
# /dev, a fresh cgroup hierarchy on /sys/fs/cgroup, `lo` up, and the host's
# PATH, HOME and working directory. Each --share DIR is a host directory the
# VM sees read-only at the same path, also where its own tmpfs would hide it
# (a checkout under /tmp); a working directory that the VM would not see
# without one is refused before the boot. Its stdout and stderr (merged)
# stream to ours. Exit status: the command's, or 125 when the VM itself failed (no
# boot, timeout), with the VM's console printed.
#
# With --systemd the host's own systemd (/lib/systemd/systemd) is PID 1
# instead of a busybox init: the root is a writable overlay (tmpfs upper
# layer, gone at power-off) of the host's read-only root, systemd mounts the
# cgroup hierarchy (v1: systemd.unified_cgroup_hierarchy=0, legacy), and the
# command runs as the unit vm-command.service in system.slice once
# basic.target is up, with the system bus (dbus.socket); timers, gettys,
# the network, udev and the like are masked (test/vm/init-systemd.sh), and the
# VM powers off after the command. "booted in N s" is then the time until
# systemd started the command.
#
# It downloads nothing but a Debian kernel package (apt-get download, unpacked
# with dpkg-deb into ${XDG_CACHE_HOME:-~/.cache}/nri-cpupool-vm), installs
# qemu-system-x86 and busybox-static with apt-get when they are missing, and
# removes its temporary directory and its qemu process on exit. Environment:
#   VM_KERNEL_PKG  Debian kernel package (default: what linux-image-amd64 depends on)
#   VM_KERNEL, VM_MODULES  use this vmlinuz and this lib/modules/<version> tree instead
#   VM_ACCEL       auto (default: KVM if a probe boot works, else TCG), kvm or tcg
#   VM_CACHE       cache directory
#   VM_APPEND      kernel arguments added to every boot's command line, after
#                  --append's (make bench-isolation passes psi=0 this way:
#                  e2e.sh has no --append of its own)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=test/vm/shapes.sh
source "$HERE/shapes.sh"

VM_CACHE=${VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nri-cpupool-vm}
# Modules the VM needs before it can reach the host's root; their
# dependencies are added from each module's modinfo.
MODULES="virtio_pci 9pnet_virtio 9p overlay"
# The VM's exit status when the VM, not the command, failed.
VM_FAILED=125

# Where the VM mounts its own file systems over the host's root: a host
# directory below one of these is not seen in the VM unless it is shared.
VM_HIDDEN="/tmp /var/tmp /run /var/run /dev/shm /dev /proc /sys"

vm_say() { printf 'vm: %s\n' "$*" >&2; }
vm_die() { vm_say "$*"; exit "$VM_FAILED"; }

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }

# ensure_debs PACKAGE:COMMAND...: apt-get installs PACKAGE unless COMMAND exists.
ensure_debs() {
  local want=() pc
  for pc in "$@"; do
    command -v "${pc#*:}" >/dev/null 2>&1 || [ -x "${pc#*:}" ] || want+=("${pc%%:*}")
  done
  [ ${#want[@]} -gt 0 ] || return 0
  [ "$(id -u)" = 0 ] || vm_die "missing ${want[*]}: install them (apt-get install ${want[*]}) or run as root"
  vm_say "installing ${want[*]} (apt-get)"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${want[@]}" >/dev/null
}

# kernel_prepare sets KERNEL (a vmlinuz) and MODDIR (its lib/modules/<version>
# tree, possibly partial), downloading the Debian package once.
kernel_prepare() {
  if [ -n "${VM_KERNEL:-}" ]; then
    [ -r "$VM_KERNEL" ] || vm_die "VM_KERNEL=$VM_KERNEL is not readable"
    KERNEL=$VM_KERNEL MODDIR=${VM_MODULES:-}
    return 0
  fi
  local pkg=${VM_KERNEL_PKG:-}
  if [ -z "$pkg" ]; then
    pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[^ ]*\)$/\1/p' | head -1)
    if [ -z "$pkg" ]; then
      # A fresh machine may have no package lists yet; a cached kernel will do then.
      # shellcheck disable=SC2012 # the newest cached kernel by time; names are package versions
      pkg=$(ls -t "$VM_CACHE/kernels" 2>/dev/null | head -1)
      if [ -z "$pkg" ]; then
        apt-get update -qq >/dev/null 2>&1 || true
        pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[^ ]*\)$/\1/p' | head -1)
      fi
    fi
    [ -n "$pkg" ] || vm_die "cannot tell which Debian kernel to use: set VM_KERNEL_PKG (e.g. linux-image-6.1.0-57-amd64) or VM_KERNEL"
  fi
  local dir=$VM_CACHE/kernels/$pkg
  if ! [ -f "$dir/ready" ]; then
    vm_say "downloading the Debian kernel $pkg (once; cached in $dir)"
    mkdir -p "$VM_CACHE/kernels"
    local tmp
    tmp=$(mktemp -d "$VM_CACHE/kernels/.dl.XXXXXX")
    # apt warns that it downloads unsandboxed into a root-only directory: harmless.
    if ! (cd "$tmp" && apt-get download "$pkg" >/dev/null 2>"$tmp/apt.err"); then
      cat "$tmp/apt.err" >&2; rm -rf "$tmp"; vm_die "apt-get download $pkg failed"
    fi
    dpkg-deb -x "$tmp"/*.deb "$tmp/x" || { rm -rf "$tmp"; vm_die "cannot unpack $pkg"; }
    rm -rf "$dir"; mkdir -p "$dir"
    cp "$tmp"/x/boot/vmlinuz-* "$dir/vmlinuz"
    cp "$tmp"/x/boot/config-* "$dir/config"
    # Keep the modules a VM may need (file systems, network, virtio), not all
    # 400 MB of them.
    local mods
    mods=$(echo "$tmp"/x/lib/modules/*)
    local keep=() k
    for k in kernel/fs kernel/net kernel/lib kernel/crypto kernel/arch kernel/drivers/virtio kernel/drivers/char \
             kernel/drivers/block kernel/drivers/net/virtio_net.ko kernel/drivers/net/net_failover.ko; do
      [ -e "$mods/$k" ] && keep+=("$k")
    done
    mkdir -p "$dir/modules"
    (cd "$mods" && tar -cf - "${keep[@]}") | tar -xf - -C "$dir/modules" || { rm -rf "$tmp"; vm_die "cannot copy the modules of $pkg"; }
    # Newer kernels (6.12) ship modules compressed; busybox insmod wants them plain.
    find "$dir/modules" -name '*.ko.xz' -exec xz -d {} + || { rm -rf "$tmp"; vm_die "cannot decompress the modules of $pkg"; }
    basename "$mods" > "$dir/version"
    rm -rf "$tmp"
    touch "$dir/ready"
  fi
  KERNEL=$dir/vmlinuz MODDIR=$dir/modules
}

# module_path NAME: the .ko file of module NAME under MODDIR ('-' and '_' are one).
module_path() {
  awk -v m="${1//-/_}" '$1 == m {print $2; found = 1; exit} END {exit !found}' "$RUN/modindex"
}

# modules_resolve NAME...: prints NAME and its dependencies, dependencies first,
# each once. Modules the kernel has built in have no file and are skipped.
modules_resolve() {
  local m f d
  for m in "$@"; do
    m=${m//-/_}
    case " $RESOLVED " in *" $m "*) continue ;; esac
    f=$(module_path "$m") || continue
    for d in $(grep -a -o 'depends=[A-Za-z0-9_,-]*' "$f" | head -1 | sed 's/^depends=//; s/,/ /g'); do
      modules_resolve "$d"
    done
    case " $RESOLVED " in *" $m "*) ;; *) RESOLVED="$RESOLVED $m"; echo "$m $f" ;; esac
  done
}

# initramfs_build OUT: busybox, /init, /vm.conf and the modules, as a newc cpio.
initramfs_build() {
  local root=$RUN/initramfs m f
  mkdir -p "$root"/{bin,proc,sys,dev,modules,newroot}
  cp "$BUSYBOX" "$root/bin/busybox"
  local applet
  for applet in sh mount umount insmod mkdir cat echo grep awk poweroff sleep sync chroot ip hostname mv ln switch_root; do
    ln -s busybox "$root/bin/$applet"
  done
  cp "$HERE/init.sh" "$root/init"; chmod 755 "$root/init"
  cp "$HERE/init-systemd.sh" "$root/init-systemd.sh"
  printf 'CGROUP=%s\nVM_HOSTNAME=%s\nSYSTEMD=%s\n' "$CGROUP" "vm-$SHAPE" "$SYSTEMD" > "$root/vm.conf"
  # "tag path" lines, parents first: the --share directories.
  local i
  : > "$root/shares"
  for i in "${!SHARES[@]}"; do printf 'share%d %s\n' "$i" "${SHARES[$i]}" >> "$root/shares"; done
  : > "$root/modules.load"
  if [ -n "$MODDIR" ] && [ -d "$MODDIR" ]; then
    # "name path" lines; module names use '_' where file names may use '-'.
    find "$MODDIR" -name '*.ko' | awk '{n = $0; sub(/.*\//, "", n); sub(/\.ko$/, "", n); gsub(/-/, "_", n); print n, $0}' > "$RUN/modindex"
    RESOLVED=""
    # shellcheck disable=SC2086
    modules_resolve $MODULES > "$RUN/modules" || true
    while read -r m f; do
      cp "$f" "$root/modules/$m.ko"
      echo "$m" >> "$root/modules.load"
    done < "$RUN/modules"
  fi
  (cd "$root" && find . | "$BUSYBOX" cpio -o -H newc 2>/dev/null) > "$1"
}

# hidden_by DIR: prints the VM's own mount that hides DIR (a canonical path),
# or fails when the VM sees DIR through the host's root.
hidden_by() {
  local h
  for h in $VM_HIDDEN; do
    case "$1/" in "$h"/*) echo "$h"; return 0 ;; esac
  done
  return 1
}

# shared DIR: whether DIR lies in one of the --share directories.
shared() {
  local d
  for d in ${SHARES[@]+"${SHARES[@]}"}; do
    case "$1/" in "$d"/*|"$d"/) return 0 ;; esac
  done
  return 1
}

# canonical DIR: DIR with symbolic links resolved, or fails when it is no
# directory of this host.
canonical() { (cd "$1" 2>/dev/null && pwd -P); }

# kvm_works: a probe boot with KVM and the command `true` (nested KVM can
# fail to start, or hang, where /dev/kvm exists).
kvm_works() {
  [ -w /dev/kvm ] || return 1
  local probe
  probe=$("${BASH_SOURCE[0]}" --shape tiny --cgroup v2 --accel kvm --cwd / --timeout "${VM_KVM_PROBE_TIMEOUT:-40}" -- /bin/true 2>&1) && return 0
  vm_say "KVM does not work here, using TCG (probe: $(echo "$probe" | grep -o 'qemu-system-x86_64: [^:]*error.*' | head -1 | cut -c1-160))"
  return 1
}

SHAPE=prod CGROUP=v2 APPEND="" TIMEOUT=${VM_TIMEOUT:-1200} ACCEL=${VM_ACCEL:-auto} CWD=$PWD
ENVS=() SHARES=() PREPARE="" SYSTEMD=0
while [ $# -gt 0 ]; do
  case "$1" in
    --shape) SHAPE=$2; shift 2 ;;
    --cgroup) CGROUP=$2; shift 2 ;;
    --append) APPEND=$2; shift 2 ;;
    --env) ENVS+=("$2"); shift 2 ;;
    --cwd) CWD=$2; shift 2 ;;
    --share) SHARES+=("$2"); shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --accel) ACCEL=$2; shift 2 ;;
    --systemd) SYSTEMD=1; shift ;;
    --list) for s in $(shape_names); do "shape_$s"; printf '%-10s %s\n' "$s" "$SHAPE_DOC"; done; exit 0 ;;
    --prepare) PREPARE=yes; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    *) break ;;
  esac
done
[ -n "$PREPARE" ] || [ $# -gt 0 ] || { usage >&2; exit 2; }
declare -F "shape_$SHAPE" >/dev/null || vm_die "unknown shape '$SHAPE' (known: $(shape_names | tr '\n' ' '))"
"shape_$SHAPE"
case "$CGROUP" in v1|v2) ;; *) vm_die "--cgroup $CGROUP: want v1 or v2" ;; esac
case "$ACCEL" in auto|kvm|tcg) ;; *) vm_die "--accel $ACCEL: want auto, kvm or tcg" ;; esac
[ "$(uname -m)" = x86_64 ] || vm_die "needs an x86_64 host (uname -m: $(uname -m))"

# The shares as canonical paths, parents before children (a prefix sorts
# first), so that the VM mounts a child over its parent's share.
for i in "${!SHARES[@]}"; do
  d=$(canonical "${SHARES[$i]}") || vm_die "--share ${SHARES[$i]}: not a directory of this host"
  case "$d" in
    *$'\n'*) vm_die "--share ${SHARES[$i]}: a path with a newline cannot be shared" ;;
    /) vm_die "--share /: the VM sees the host's root already (read-only)" ;;
    /proc|/proc/*|/sys|/sys/*) vm_die "--share $d: the VM has its own /proc and /sys" ;;
    /dev/shm|/dev/shm/*) ;;
    /dev|/dev/*) vm_die "--share $d: the VM has its own /dev" ;;
  esac
  SHARES[i]=$d
done
if [ ${#SHARES[@]} -gt 0 ]; then
  mapfile -t SHARES < <(printf '%s\n' "${SHARES[@]}" | sort -u)
fi
if [ -z "$PREPARE" ]; then
  dir=$(canonical "$CWD") || vm_die "--cwd $CWD: not a directory of this host"
  if h=$(hidden_by "$dir") && ! shared "$dir"; then
    vm_die "the command's directory $dir is under $h, which the VM covers with its own file system, so the command would not find it there: share it with --share $dir (or a parent of it), or run from a directory outside $VM_HIDDEN"
  fi
  CWD=$dir
fi

ensure_debs qemu-system-x86:qemu-system-x86_64
BUSYBOX=/bin/busybox
# The initramfs needs a static busybox (ldd fails on static binaries).
if ! [ -x "$BUSYBOX" ] || ldd "$BUSYBOX" >/dev/null 2>&1; then
  BUSYBOX=$VM_CACHE/busybox
  if ! [ -x "$BUSYBOX" ]; then
    vm_say "fetching busybox-static (apt-get download; cached)"
    mkdir -p "$VM_CACHE"
    t=$(mktemp -d "$VM_CACHE/.bb.XXXXXX")
    (cd "$t" && apt-get download busybox-static >/dev/null 2>&1) || \
      { apt-get update -qq >/dev/null 2>&1; (cd "$t" && apt-get download busybox-static >/dev/null); } || vm_die "apt-get download busybox-static failed"
    dpkg-deb -x "$t"/busybox-static_*.deb "$t/x" && cp "$t/x/bin/busybox" "$BUSYBOX"
    rm -rf "$t"
  fi
fi
kernel_prepare
if [ -n "$PREPARE" ]; then vm_say "ready: kernel $KERNEL, qemu $(qemu-system-x86_64 --version | head -1)"; exit 0; fi

if [ "$ACCEL" = auto ]; then
  if kvm_works; then ACCEL=kvm; else ACCEL=tcg; fi
fi

RUN=$(mktemp -d "${TMPDIR:-/tmp}/nri-cpupool-vm.XXXXXX")
QEMU_PID="" TAIL_PID=""
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
  local rc=$?
  [ -n "$QEMU_PID" ] && kill -9 "$QEMU_PID" 2>/dev/null
  [ -n "$TAIL_PID" ] && kill "$TAIL_PID" 2>/dev/null && wait "$TAIL_PID" 2>/dev/null
  rm -rf "$RUN"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$RUN/io"

# The command, with the host's environment essentials and the --env pairs.
{
  echo "export PATH=$(printf %q "$PATH") HOME=$(printf %q "$HOME") TERM=dumb LANG=C.UTF-8"
  echo "export VM_SHAPE=$(printf %q "$SHAPE") VM_CGROUP=$CGROUP VM_ACCEL=$ACCEL VM_SYSTEMD=$SYSTEMD"
  for e in ${ENVS[@]+"${ENVS[@]}"}; do
    case "$e" in *=*) ;; *) vm_die "--env $e: want NAME=VALUE" ;; esac
    echo "export ${e%%=*}=$(printf %q "${e#*=}")"
  done
  printf 'cd %q || { echo "vm: the command'"'"'s directory is not visible in the VM; share it with --share" >&2; exit %d; }\n' "$CWD" "$VM_FAILED"
  printf 'exec'; printf ' %q' "$@"; echo
} > "$RUN/io/cmd.sh"
initramfs_build "$RUN/initramfs.cpio"

CPUS=$((SOCKETS * CORES * THREADS))
[ $((CPUS % NODES)) -eq 0 ] || vm_die "shape $SHAPE: $CPUS CPUs do not split into $NODES NUMA nodes"
PER=$((CPUS / NODES))
NUMA=()
for ((n = 0; n < NODES; n++)); do
  NUMA+=(-object "memory-backend-ram,id=mem$n,size=${MEM_PER_NODE}M"
         -numa "node,nodeid=$n,cpus=$((n * PER))-$(((n + 1) * PER - 1)),memdev=mem$n")
done
for ((a = 0; a < NODES; a++)); do for ((b = 0; b < NODES; b++)); do
  [ "$a" = "$b" ] || NUMA+=(-numa "dist,src=$a,dst=$b,val=20")
done; done
if [ "$ACCEL" = kvm ]; then
  ACCEL_ARGS=(-accel kvm -cpu host)
else
  # TCG on an AMD host shows no SMT siblings without topoext; an Intel vendor
  # makes the guest read the topology from CPUID leaf 0xB instead.
  ACCEL_ARGS=(-accel "tcg,thread=${VM_TCG_THREAD:-single}" -cpu "max,vendor=GenuineIntel")
  # The guest calibrates its TSC against the host's at boot, which goes wrong on
  # a busy host under emulation: its clock then ran twice as fast as ours and
  # timeouts fired early. The HPET is read from qemu's clock. Page-table
  # isolation flushes emulated TLBs on every system call; nothing here tests it.
  ACCEL_CMDLINE="clocksource=hpet mitigations=off"
fi
# qemu reads a comma in an option's value as ",,".
SHARE_ARGS=()
for i in "${!SHARES[@]}"; do
  SHARE_ARGS+=(-virtfs "local,path=${SHARES[$i]//,/,,},mount_tag=share$i,security_model=none,multidevs=remap,readonly=on")
done
CMDLINE="console=ttyS0 quiet loglevel=4 panic=-1 oops=panic ${ACCEL_CMDLINE:-} $SHAPE_CMDLINE $APPEND ${VM_APPEND:-}"
[ "$CGROUP" = v2 ] && CMDLINE="$CMDLINE cgroup_no_v1=all"
if [ "$SYSTEMD" = 1 ]; then
  [ -x /lib/systemd/systemd ] || vm_die "--systemd: this host has no /lib/systemd/systemd"
  # No fstab, GPT or getty generators: the host's fstab names its disks,
  # which the VM does not have. The legacy hierarchy for v1, as the
  # busybox init mounts it.
  CMDLINE="$CMDLINE systemd.unit=vm.target fstab=0 systemd.gpt_auto=0 systemd.getty_auto=0 systemd.firstboot=0 systemd.show_status=0"
  if [ "$CGROUP" = v2 ]; then CMDLINE="$CMDLINE systemd.unified_cgroup_hierarchy=1"
  else CMDLINE="$CMDLINE systemd.unified_cgroup_hierarchy=0 systemd.legacy_systemd_cgroup_controller=1"; fi
fi

vm_say "booting shape $SHAPE ($SHAPE_DOC), cgroup $CGROUP, $ACCEL$([ "$SYSTEMD" = 1 ] && echo ", systemd as PID 1")"
qemu-system-x86_64 -nodefaults -no-user-config -display none -monitor none -no-reboot \
  -machine q35 "${ACCEL_ARGS[@]}" \
  -smp "$CPUS,sockets=$SOCKETS,cores=$CORES,threads=$THREADS" -m "$((NODES * MEM_PER_NODE))M" "${NUMA[@]}" \
  -kernel "$KERNEL" -initrd "$RUN/initramfs.cpio" -append "$CMDLINE" \
  -serial "file:$RUN/console.log" \
  -virtfs local,path=/,mount_tag=hostroot,security_model=none,multidevs=remap,readonly=on \
  -virtfs "local,path=$RUN/io,mount_tag=vmio,security_model=none" ${SHARE_ARGS[@]+"${SHARE_ARGS[@]}"} \
  >"$RUN/qemu.log" 2>&1 &
QEMU_PID=$!
# Polled below rather than waited for: bash would print its own line when qemu
# aborts, and qemu.log says it better.
disown "$QEMU_PID"

touch "$RUN/io/output"
tail -n +1 -f --pid "$QEMU_PID" "$RUN/io/output" &
TAIL_PID=$!

START=$SECONDS TIMED_OUT="" BOOTED=""
while kill -0 "$QEMU_PID" 2>/dev/null; do
  if [ -z "$BOOTED" ] && [ -f "$RUN/io/booted" ]; then BOOTED=$((SECONDS - START)); vm_say "booted in ${BOOTED} s"; fi
  if [ $((SECONDS - START)) -ge "$TIMEOUT" ]; then TIMED_OUT=yes; kill -9 "$QEMU_PID" 2>/dev/null; break; fi
  # The status is synced before the VM powers off: a VM that does not
  # power off (a systemd that hangs in its shutdown) is not waited for.
  if [ -f "$RUN/io/status" ]; then
    [ -n "${STATUS_AT:-}" ] || STATUS_AT=$SECONDS
    if [ $((SECONDS - STATUS_AT)) -ge 20 ]; then vm_say "the VM did not power off 20 s after the command's status: killed (console: $(tail -3 "$RUN/console.log" | tr -d '\r' | tr '\n' ' ' | cut -c1-300))"; kill -9 "$QEMU_PID" 2>/dev/null; break; fi
  fi
  sleep 0.5
done
QEMU_PID=""
sleep 0.3; kill "$TAIL_PID" 2>/dev/null || true; wait "$TAIL_PID" 2>/dev/null || true; TAIL_PID=""

if [ -f "$RUN/io/status" ]; then
  rc=$(cat "$RUN/io/status")
  vm_say "command exited $rc after $((SECONDS - START)) s"
  exit "$rc"
fi
vm_say "the VM ended without a command status$( [ -n "$TIMED_OUT" ] && echo " (killed after ${TIMEOUT}s)")$( [ -f "$RUN/io/booted" ] && echo "; it had booted")"
vm_say "qemu: $(tail -5 "$RUN/qemu.log" | tr '\n' ' ')"
vm_say "console (last 40 lines):"
tail -40 "$RUN/console.log" >&2 || true
exit "$VM_FAILED"
