#!/bin/sh
# Before removal. Arguments:
#   deb: "remove" on removal, "upgrade" <new version> on an upgrade
#   rpm: <number of instances left after the transaction: 0 on removal>
# On removal only: stops and disables the service, then puts back the host
# files the plugin changed (nri-cpupool restore-host: the daemon's stop
# restores nothing, and after the removal no binary is left to read the
# journal). An upgrade restarts the service in postinstall instead, and the
# new daemon restores what it no longer wants. The state and the config
# stay.
set -e
removal=no
case "$1" in
  remove|deconfigure) removal=yes ;;
  0) removal=yes ;;
esac
[ "$removal" = yes ] || exit 0
# The fail-closed drop-in: the runtime read it at its start and, with the
# plugin gone, refuses every container that lacks the tolerate annotation
# until the file is deleted and the runtime restarted.
for f in /etc/containerd/conf.d/nri-cpupool-fail-closed.toml /etc/containerd/conf.d/containerd-fail-closed.toml \
         /etc/crio/crio.conf.d/20-nri-cpupool-fail-closed.conf; do
  if [ -e "${DPKG_ROOT:-}$f" ]; then
    echo "nri-cpupool: WARNING: $f makes the runtime require the plugin: once it stops, no container starts" \
         "(required plugin \"cpupool\" not present). Delete the file and restart the runtime" \
         "(systemctl restart containerd, or crio)." >&2
  fi
done
# Only where systemd runs this system (not in a chroot, a container build or
# a scratch root, where DPKG_ROOT or RPM_INSTALL_PREFIX may be set): there
# the host files are not this package's to restore either.
if [ -d /run/systemd/system ] && [ -z "${DPKG_ROOT:-}" ]; then
  systemctl disable --now nri-cpupool.service || true
  # A failure must not stop the removal: what is left stays in the journal
  # in /var/lib/nri-cpupool, and a reboot resets those files.
  if [ -x /usr/bin/nri-cpupool ] && ! /usr/bin/nri-cpupool restore-host; then
    echo "nri-cpupool: WARNING: restore-host did not put every host file back (above); they keep the plugin's values" \
         "until the next reboot (the originals stay in /var/lib/nri-cpupool/host-originals.json)" >&2
  fi
fi
exit 0
