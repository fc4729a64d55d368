#!/bin/sh
# Sourced by the VM's /init (busybox sh) when vm.sh --systemd boots the
# host's systemd as PID 1: systemd_setup ROOT writes, below ROOT's /run
# (a tmpfs, so nothing reaches the host), the units that run the command
# and power the VM off after it, and masks what is slow or useless in a
# throw-away VM under emulation.
#
#   vm.target            the boot's target (systemd.unit=vm.target): basic.target
#                        and the command, not multi-user.target's services
#   vm-command.service   /run/vm/cmd.sh in system.slice, its output and exit
#                        status to /run/vm (the share the host reads), then
#                        poweroff-immediate (the status is synced first)
#
# Units in /run/systemd/system are runtime units: they and the masks are
# gone at power-off like the overlay's upper layer.

# The units the boot masks: timers, gettys, the network, udev, and sysinit
# work that only matters on a machine that keeps its disk (random seed,
# journal flush to /var/log, fsck, utmp, first boot, machine-id commit).
VM_MASKED="timers.target getty.target getty@tty1.service serial-getty@ttyS0.service console-getty.service
systemd-timesyncd.service systemd-pstore.service systemd-networkd.service systemd-networkd.socket
systemd-network-generator.service systemd-networkd-wait-online.service systemd-resolved.service networking.service
systemd-udevd.service systemd-udev-trigger.service systemd-udev-settle.service systemd-modules-load.service
kmod-static-nodes.service systemd-binfmt.service proc-sys-fs-binfmt_misc.automount systemd-firstboot.service
systemd-machine-id-commit.service systemd-random-seed.service systemd-remount-fs.service systemd-fsck-root.service
systemd-repart.service systemd-pcrphase-sysinit.service systemd-pcrphase.service systemd-update-utmp.service
systemd-journal-flush.service sys-kernel-debug.mount sys-kernel-tracing.mount sys-fs-fuse-connections.mount
sys-kernel-config.mount systemd-ask-password-console.path systemd-ask-password-wall.path
cryptsetup.target integritysetup.target veritysetup.target systemd-hwdb-update.service ldconfig.service
postgresql.service cron.service ssh.service e2scrub_reap.service"

systemd_setup() {
  r=$1
  d=$r/run/systemd/system
  # A host that is itself a container (/.dockerenv) would make systemd
  # think it runs in one: it would then ignore the kernel command line
  # (systemd.unit=, the cgroup hierarchy) and power off as a container
  # does. A whiteout in the overlay hides it from the VM only.
  rm -f "$r/.dockerenv" "$r/.containerenv" || return 1
  mkdir -p "$d" || return 1
  for u in $VM_MASKED; do ln -sf /dev/null "$d/$u" || return 1; done
  # The boot's target, also where systemd does not read systemd.unit=
  # from the kernel command line. /etc (the overlay) wins over /run.
  mkdir -p "$r/etc/systemd/system" && ln -sf /run/systemd/system/vm.target "$r/etc/systemd/system/default.target" || return 1
  cat > "$d/vm.target" <<UNIT || return 1
[Unit]
Description=vm.sh: the command
Requires=basic.target
Wants=vm-command.service
After=basic.target
AllowIsolate=yes
UNIT
  cat > "$d/vm-command.service" <<UNIT || return 1
[Unit]
Description=vm.sh: the command
Wants=dbus.socket
After=basic.target dbus.socket
[Service]
# simple, not oneshot: the boot is finished (systemctl is-system-running,
# systemd-analyze) while the command runs, as on a node.
Type=simple
ExecStart=/bin/sh /run/vm-command.sh
StandardInput=null
StandardOutput=journal+console
TimeoutStartSec=infinity
# The wrapper always exits 0 once the status is on the share: power off
# at once, nothing of the VM needs to be stopped cleanly.
SuccessAction=poweroff-immediate
FailureAction=poweroff-immediate
UNIT
  cat > "$r/run/vm-command.sh" <<'WRAP' || return 1
echo booted > /run/vm/booted
bash /run/vm/cmd.sh > /run/vm/output 2>&1 < /dev/null
echo $? > /run/vm/status.tmp
sync
mv /run/vm/status.tmp /run/vm/status
sync
# reboot(2) at once (SuccessAction= alone left the VM up under TCG).
systemctl --force --force poweroff
WRAP
}
