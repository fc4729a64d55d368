#!/bin/sh
# After install or upgrade. Arguments:
#   deb: "configure" <previously configured version, empty on a first install>
#   rpm: <number of installed instances: 1 on a first install, 2 on an upgrade>
# Never touches /etc/nri-cpupool or /var/lib/nri-cpupool.
set -e
upgrade=no
case "$1" in
  configure) [ -n "$2" ] && upgrade=yes ;;
  [0-9]*) [ "$1" -ge 2 ] && upgrade=yes ;;
esac
# Only talk to systemd when it runs this system (not in a chroot, a container
# build or a scratch root, where DPKG_ROOT or RPM_INSTALL_PREFIX may be set).
if [ -d /run/systemd/system ] && [ -z "${DPKG_ROOT:-}" ]; then
  systemctl daemon-reload || true
  if [ "$upgrade" = yes ]; then
    # The new binary takes over; running containers keep their CPUs
    # (the state file and the runtime's cpusets are the memory).
    systemctl try-restart nri-cpupool.service || true
  fi
fi
if [ "$upgrade" = no ]; then
  echo "nri-cpupool installed: edit /etc/nri-cpupool/config.yaml, run 'nri-cpupool validate', then 'systemctl enable --now nri-cpupool'"
fi
exit 0
