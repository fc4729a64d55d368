#!/bin/sh
# /init of the VM's initramfs (busybox sh). Loads the modules the harness put
# in /modules, mounts the host's root read-only over 9p, gives it private
# tmpfs, proc, sys, dev and a cgroup hierarchy, mounts the host directories
# listed in /shares (vm.sh --share) over them, runs /run/vm/cmd.sh in it and
# writes the exit status to /run/vm/status (a writable 9p share that the host
# reads). Settings come from /vm.conf (CGROUP=v1|v2, VM_HOSTNAME).
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
# shellcheck source=/dev/null # written into the initramfs by vm.sh
. /vm.conf

halt_vm() { sync; poweroff -f; sleep 10; }
fail() { echo "vm-init: $*" >/dev/console; halt_vm; }

while read -r m; do
  insmod "/modules/$m.ko" 2>/dev/null || grep -q "^$m " /proc/modules || echo "vm-init: insmod $m failed" >/dev/console
done < /modules.load

R=/newroot
mkdir -p $R
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=loose,ro hostroot $R || fail "cannot mount the host's root over 9p"
mount -t tmpfs -o mode=755 tmpfs $R/run || fail "no /run in the host's root"
mkdir -p $R/run/vm
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 vmio $R/run/vm || fail "cannot mount the exchange share"
mount -t proc proc $R/proc
mount -t sysfs sysfs $R/sys
mount -t devtmpfs devtmpfs $R/dev
mkdir -p $R/dev/pts $R/dev/shm
mount -t devpts -o newinstance,ptmxmode=0666 devpts $R/dev/pts
mount -t tmpfs -o mode=1777 tmpfs $R/dev/shm
mount -t tmpfs -o mode=1777 tmpfs $R/tmp
mount -t tmpfs -o mode=1777 tmpfs $R/var/tmp
[ -d $R/var/run ] && [ ! -L $R/var/run ] && mount -t tmpfs -o mode=755 tmpfs $R/var/run
# The host's directories given with --share, read-only at the same path,
# over the tmpfs above where one hides them (a checkout under /tmp).
while read -r tag dir; do
  if ! mkdir -p "$R$dir" || ! mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=loose,ro "$tag" "$R$dir"; then
    fail "cannot mount the host's $dir (--share) at $dir"
  fi
done < /shares

case "$CGROUP" in
v2)
  mount -t cgroup2 -o nsdelegate cgroup2 $R/sys/fs/cgroup || fail "cannot mount cgroup2"
  for c in cpuset cpu io memory pids hugetlb; do
    grep -qw "$c" $R/sys/fs/cgroup/cgroup.controllers && echo "+$c" > $R/sys/fs/cgroup/cgroup.subtree_control
  done
  ;;
v1)
  mount -t tmpfs -o mode=755 cgroup $R/sys/fs/cgroup || fail "cannot mount the cgroup v1 tmpfs"
  # shellcheck disable=SC2013 # one controller name per line, no spaces
  for c in $(awk 'NR > 1 && $4 == 1 {print $1}' /proc/cgroups); do
    mkdir -p "$R/sys/fs/cgroup/$c"
    mount -t cgroup -o "$c" cgroup "$R/sys/fs/cgroup/$c" || fail "cannot mount cgroup v1 $c"
  done
  ;;
*) fail "CGROUP=$CGROUP: want v1 or v2" ;;
esac

ip link set lo up
hostname "$VM_HOSTNAME"
echo booted > $R/run/vm/booted

chroot $R /bin/bash /run/vm/cmd.sh > $R/run/vm/output 2>&1 < /dev/null
echo $? > $R/run/vm/status.tmp
sync
mv $R/run/vm/status.tmp $R/run/vm/status
sync
umount $R/run/vm
halt_vm
