#!/bin/sh
# /init of the VM's initramfs (busybox sh). Loads the modules the harness put
# in /modules, mounts the host's root read-only over 9p, gives it private
# tmpfs, proc, sys, dev and a cgroup hierarchy, mounts the host directories
# listed in /shares (vm.sh --share) over them, runs /run/vm/cmd.sh in it and
# writes the exit status to /run/vm/status (a writable 9p share that the host
# reads). Settings come from /vm.conf (CGROUP=v1|v2, VM_HOSTNAME, SYSTEMD).
# With SYSTEMD=1 (vm.sh --systemd) the root is a writable overlay of the
# host's and the host's own systemd becomes PID 1, running the command as a
# unit (init-systemd.sh).
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
if [ "${SYSTEMD:-}" = 1 ]; then
  # systemd as PID 1 writes /etc, /var and its units: the host's root,
  # read-only over 9p, is the lower layer of an overlay whose upper layer
  # is a tmpfs, so every write stays in the VM and is gone at power-off.
  mkdir -p /lower /rw
  mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=loose,ro hostroot /lower || fail "cannot mount the host's root over 9p"
  mount -t tmpfs -o mode=755 tmpfs /rw || fail "no tmpfs for the overlay"
  mkdir -p /rw/upper /rw/work
  mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work overlay $R || fail "cannot mount the overlay over the host's root"
else
  mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=loose,ro hostroot $R || fail "cannot mount the host's root over 9p"
fi
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

if [ "${SYSTEMD:-}" = 1 ]; then
  # systemd mounts the cgroup hierarchy itself (the kernel command line
  # says which), brings up lo, sets the hostname and runs the command as
  # a unit (init-systemd.sh): hand over to it.
  # shellcheck source=test/vm/init-systemd.sh # copied to /init-systemd.sh by vm.sh
  . /init-systemd.sh
  systemd_setup $R || fail "cannot set up the units for systemd"
  echo "$VM_HOSTNAME" > $R/etc/hostname
  # The new root has its own /proc, /sys and /dev already; the
  # initramfs's go (lazily: the console is still open).
  umount -l /proc /sys /dev 2>/dev/null
  exec switch_root $R /lib/systemd/systemd
fi

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
