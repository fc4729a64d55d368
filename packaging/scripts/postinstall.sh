#!/bin/sh
# After install or upgrade. Arguments:
#   deb: "configure" <previously configured version, empty on a first install>
#   rpm: <number of installed instances: 1 on a first install, 2 on an upgrade>
# Never touches /etc/nri-cpupool or /var/lib/nri-cpupool, and never enables
# the unit: the operator edits and validates the config first.
set -e
upgrade=no
case "$1" in
  configure) [ -n "$2" ] && upgrade=yes ;;
  [0-9]*) [ "$1" -ge 2 ] && upgrade=yes ;;
esac
# A first install leaves the unit disabled, and so does a removal: dpkg
# runs "configure <old version>" also for a reinstall after `apt remove`
# (the conffiles stayed), whose prerm disabled the unit. Whatever the
# arguments, a unit that is not enabled gets the first install's hint.
enabled=no
# Only talk to systemd when it runs this system (not in a chroot, a container
# build or a scratch root, where DPKG_ROOT or RPM_INSTALL_PREFIX may be set).
if [ -d /run/systemd/system ] && [ -z "${DPKG_ROOT:-}" ]; then
  systemctl daemon-reload || true
  if [ "$upgrade" = yes ]; then
    # The new binary takes over; running containers keep their CPUs
    # (the state file and the runtime's cpusets are the memory).
    systemctl try-restart nri-cpupool.service || true
  fi
  systemctl is-enabled --quiet nri-cpupool.service && enabled=yes
else
  # Without a running systemd, the links `systemctl enable` makes. They
  # are absolute: under DPKG_ROOT, [ -e ] alone would follow one onto this
  # machine's /usr/lib, where the unit may not be.
  for link in "${DPKG_ROOT:-}"/etc/systemd/system/*.wants/nri-cpupool.service; do
    if [ -L "$link" ] || [ -e "$link" ]; then enabled=yes; fi
  done
fi
# Files the package managers' conffile handling leaves beside the CRI-O
# drop-in (dpkg: .dpkg-old, .dpkg-dist, .dpkg-new; rpm: .rpmnew, .rpmsave):
# CRI-O reads every file in crio.conf.d whatever its name, so their settings
# apply, over the drop-in's. They are the operator's to merge and delete:
# named, never deleted here.
for f in /etc/crio/crio.conf.d/10-nri-cpupool.conf.dpkg-old /etc/crio/crio.conf.d/10-nri-cpupool.conf.dpkg-dist \
         /etc/crio/crio.conf.d/10-nri-cpupool.conf.dpkg-new /etc/crio/crio.conf.d/10-nri-cpupool.conf.rpmnew \
         /etc/crio/crio.conf.d/10-nri-cpupool.conf.rpmsave; do
  if [ -e "${DPKG_ROOT:-}$f" ]; then
    echo "nri-cpupool: WARNING: $f is left over from the package manager's configuration file handling;" \
         "CRI-O reads every file in /etc/crio/crio.conf.d whatever its name, so its settings apply." \
         "Merge what you need into 10-nri-cpupool.conf, delete it, and restart CRI-O (systemctl restart crio)." >&2
  fi
done
if [ "$enabled" = no ]; then
  echo "nri-cpupool installed: edit /etc/nri-cpupool/config.yaml, run 'nri-cpupool validate', then 'systemctl enable --now nri-cpupool'"
fi
exit 0
