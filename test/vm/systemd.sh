#!/usr/bin/env bash
# The packaged unit under a real systemd, and housekeeping through its D-Bus
# API (issues 32 and 34). It runs INSIDE a VM of shape `prod` booted with
# vm.sh --systemd on cgroup v2 (test/vm/e2e.sh: the run "v2:systemd"), as the
# unit vm-command.service in system.slice, with the real containerd, runc
# and crictl of test/e2e/lib.sh for the plugin to register with.
#   E2E_DEB, E2E_DEB2  two builds of the .deb, of two versions (test/vm/e2e.sh
#                      builds them); E2E_DEB2 for the upgrade
#   E2E_RPM, E2E_RPM2  the same as .rpm; without them, or without rpm, the rpm
#                      part is skipped, saying so
# It checks: dpkg -i and `systemctl start` up to Type=notify's READY; the
# hardened unit's writable paths (/proc/irq, the cgroup tree, the workqueue
# mask, the CPUs' files) and read-only ones; a shell loop in system.slice
# kept off an exclusive-non-isolcpus container's CPUs by AllowedCPUs= on the
# host's units, through daemon-reload and a kill -9; loops in user.slice and
# in a slice of a package's (ceph.slice) kept off them too, each with its own
# affinity less the held CPUs, never widened (issue 41, item 11); a restart
# without the feature restores every unit exactly, and every loop's affinity
# (item 12); `dpkg -i` of another version while running restarts the unit
# once and loses no record; a release gives every loop its affinity back; a
# kill -9, the pod removed while down and a restart too; the default config
# keeps host processes off an isolcpus= CPU of the exclusive pool under
# load, counted from sched_switch (isolcpus-default.sh, issue 42); stop,
# dpkg -r and -P leave the host as it was; dpkg -r while the default config
# keeps the units off the isolcpus= CPUs puts them back (restore-host).
set -uo pipefail
export E2E_WORK_PARENT=/run
source "$(dirname "$0")/../e2e/lib.sh"
# shellcheck source=test/vm/checks.sh
source "$(dirname "$0")/checks.sh"
# shellcheck source=test/vm/isolcpus-default.sh
source "$(dirname "$0")/isolcpus-default.sh"

if [ "${VM_SHAPE:-}" != prod ] || [ "${VM_SYSTEMD:-}" != 1 ]; then die "run inside a VM of shape prod booted with --systemd (test/vm/e2e.sh)"; fi
need_root_linux
UNIT=nri-cpupool.service
CONF=/etc/nri-cpupool/config.yaml
STATE=/var/lib/nri-cpupool/state.json
UNITS="system.slice user.slice machine.slice init.scope"
BUSY=vm-busy.service
# The housekeeping set for host processes while 4-5 are held: every CPU
# less 4-5 and less the CPUs isolcpus=domain took (2-3, 6-7), which host
# processes never ran on.
HOSTSET=0-1
# The sleeping loops whose affinity is checked: in system.slice, user.slice
# and a top-level slice none of the four named units is (issue 41, item 11).
LOOPS=("$BUSY" vm-user.service vm-ceph.service)

finish() {
  local rc=$?
  if [ "$FAILED" -gt 0 ] || [ "$rc" -ne 0 ]; then
    echo "---------- journal of $UNIT (last 40 lines) ----------"
    journalctl -u "$UNIT" -o short-monotonic --no-pager 2>/dev/null | grep -v ' level=debug ' | tail -40
    report
  fi
  systemctl stop "${LOOPS[@]}" "$ISOLCPUS_LOAD" 2>/dev/null
  teardown
  echo
  echo "e2e-vm systemd ($VM_SHAPE, cgroup $VM_CGROUP, Linux $(uname -r), $(systemctl --version | head -1)): $PASSED passed, $FAILED failed in $SECONDS s"
  [ "$FAILED" -eq 0 ] && [ "$rc" -eq 0 ] || exit 1
}
trap finish EXIT
section() { say "[$SECONDS s] $*"; }

cpu_list() { local p; for p in ${1//,/ }; do case "$p" in *-*) seq "${p%-*}" "${p#*-}" ;; *) echo "$p" ;; esac; done; }
# overlaps LIST1 LIST2: "yes" when the CPU lists share a CPU.
overlaps() {
  local c
  for c in $(cpu_list "$1"); do
    case ",$(cpu_list "$2" | paste -sd,)," in *",$c,"*) echo yes; return ;; esac
  done
  echo no
}
# allowed UNIT: the unit's AllowedCPUs as a CPU list ("" when unset).
allowed() { systemctl show -p AllowedCPUs --value "$1" | tr ' ' ','; }
units_allowed() { local u; for u in $UNITS; do printf '%s=%s ' "$u" "$(allowed "$u")"; done; }
# wq_has_held: "yes" when the unbound workqueue mask has CPU 4 or 5.
wq_has_held() { if (( 0x$(cat /sys/devices/virtual/workqueue/cpumask) & 0x30 )); then echo yes; else echo no; fi; }
busy_overlaps() { overlaps "$(busy_allowed)" "$HELD"; }
# kthreadd_overlaps: whether kthreadd, an unbound kernel thread housekeeping
# narrows by affinity, may run on the held CPUs.
kthreadd_overlaps() { overlaps "$(awk '/^Cpus_allowed_list/ {print $2}' /proc/2/status)" "$HELD"; }
busy_allowed() { loop_allowed "$BUSY"; }
# loop_allowed UNIT: the affinity of the unit's main process (LOOP_PID,
# read once: a systemctl call per poll is slow under TCG); loops_allowed:
# every loop's, in one line.
declare -A LOOP_PID=()
loop_allowed() { awk '/^Cpus_allowed_list/ {print $2}' "/proc/${LOOP_PID[$1]:-$(systemctl show -p MainPID --value "$1")}/status"; }
loops_allowed() { local u; for u in "${LOOPS[@]}"; do printf '%s=%s ' "$u" "$(loop_allowed "$u")"; done; }
# minus LIST1 LIST2: the CPUs of LIST1 not in LIST2, comma-separated;
# expanded LIST: the same form of LIST.
minus() { local c; for c in $(cpu_list "$1"); do [ "$(overlaps "$c" "$2")" = no ] && echo "$c"; done | paste -sd,; }
expanded() { cpu_list "$1" | paste -sd,; }
# loop_now UNIT: the loop's affinity, expanded (compared with minus's).
loop_now() { expanded "$(loop_allowed "$1")"; }
ceph_confined() { if [ -n "$(allowed ceph.slice)" ]; then echo yes; else echo no; fi; }
ceph_overlaps() { overlaps "$(loop_allowed vm-ceph.service)" "$HELD"; }
# host: what the plugin may change on this host, in one line per kind.
host() {
  echo "units: $(units_allowed)"
  echo "workqueue: $(cat /sys/devices/virtual/workqueue/cpumask)"
  echo "irqs: $(for i in /proc/irq/[0-9]*; do printf '%s=%s ' "${i##*/}" "$(cat "$i/smp_affinity_list")"; done)"
  echo "default_smp_affinity: $(cat /proc/irq/default_smp_affinity)"
  echo "kthreadd: $(awk '/^Cpus_allowed_list/ {print $2}' /proc/2/status)"
}
# audit_foreign: the user-space threads of other processes that the audit
# finds allowed on the held CPUs 4-5 (its JSON's foreignThreads, summed);
# audit_why: the audit's kinds and threads of those, for the log when not 0.
audit_json() { /usr/bin/nri-cpupool audit --config "$CONF" --state-file "$STATE" --sample 1s --json 2>/dev/null; }
audit_foreign() {
  audit_json | tr -d ' \n' | sed 's/{"cpu":/\n/g' | grep -E '^[45],' | grep -o '"foreignThreads":[0-9]*' | cut -d: -f2 |
    awk '{n += $1} END {print NR ? n : "no held CPU in the audit"}'
}
audit_why() { audit_json | tr -d '\n' | grep -o '"foreignKinds":{[^}]*}\|"threads":\[[^]]*\]' | head -4; }
prop() { systemctl show -p "$1" --value "$UNIT"; }
# loops_why: what the journal of originals and the plugin's log say of the
# loops, for the log when their affinity is not what it was.
loops_why() {
  local u
  for u in "${LOOPS[@]}"; do
    echo "    $u: pid ${LOOP_PID[$u]}, $(cat "/proc/${LOOP_PID[$u]}/cgroup"), record: $(tr -d ' \n' < /var/lib/nri-cpupool/host-originals.json 2>/dev/null | grep -o "\"/affinity/${LOOP_PID[$u]}/[0-9]*\":{[^}]*}" || echo none)"
  done
  echo "    top-level cgroups: $(find /sys/fs/cgroup -mindepth 1 -maxdepth 1 -type d -printf '%f ')"
  journalctl -u "$UNIT" -o cat --no-pager 2>/dev/null | grep -iE 'host files|housekeeping' | tail -15 | sed 's/^/    log: /'
}
journal_count() { journalctl -u "$UNIT" -o cat --no-pager 2>/dev/null | grep -c "$1"; }
# writable_in PID PATH: "rw" or "ro", the mount option PATH has in PID's
# mount namespace (the unit's sandbox).
writable_in() { findmnt -N "$1" -no OPTIONS -T "$2" | cut -d, -f1; }
# state_containers: the containers the state file holds (status's NAMESPACE
# POD CONTAINER columns; the pods here are in namespace telco).
state_containers() { /usr/bin/nri-cpupool status --state-file "$STATE" 2>/dev/null | awk '$1 == "telco" {print $1 "/" $2 "/" $3}' | sort -u | paste -sd' '; }

section "the machine: systemd as PID 1, cgroup v2"
check "PID 1" "$(cat /proc/1/comm)" "systemd"
check "cgroup v2" "$(stat -fc %T /sys/fs/cgroup)" "cgroup2fs"
check "the system is up" "$(systemctl is-system-running)" "running"
check "this check runs in system.slice" "$(cut -d: -f3 /proc/self/cgroup)" "/system.slice/vm-command.service"
BEFORE=$(host)

section "dpkg -i, then systemctl start: Type=notify says READY once registered"
if ! [ -r "${E2E_DEB:-}" ] || ! [ -r "${E2E_DEB2:-}" ]; then die "E2E_DEB and E2E_DEB2 must name two .deb builds"; fi
t=$SECONDS
check "dpkg -i" "$(dpkg -i "$E2E_DEB" >/tmp/dpkg.log 2>&1 && echo installed)" "installed"
info "dpkg -i took $((SECONDS - t)) s"
# /lib is /usr/lib on a merged-/usr system (Debian 12): systemd names either.
check "the unit is loaded from the package" "$(systemctl show -p FragmentPath --value "$UNIT" | sed 's|^/usr/lib/|/lib/|')" "/lib/systemd/system/nri-cpupool.service"
check "not enabled by the package" "$(systemctl is-enabled "$UNIT")" "disabled"
V1=$(/usr/bin/nri-cpupool version | head -1)
start_runtime
# keepHostOffIsolcpus off: what is checked up to isolcpus_default_check is
# housekeeping: held alone (the default keeps isolcpus= CPUs off the units
# from the start).
cat > "$CONF" <<YAML
nriSocket: $W/nri.sock
keepHostOffIsolcpus: false
reservedCPUs: "0-1"
pools:
  exclusive-non-isolcpus: {enabled: true, housekeeping: held, irqIsolation: optOut}
irq: {rescanInterval: 2s}
logLevel: debug
metricsAddress: "127.0.0.1:19464"
YAML
t=$SECONDS
check "systemctl start returns (READY=1)" "$(timeout 150 systemctl start "$UNIT" && echo started)" "started"
info "systemctl start took $((SECONDS - t)) s"
check "ActiveState/SubState" "$(prop ActiveState)/$(prop SubState)" "active/running"
check "StatusText" "$(prop StatusText)" "registered with the runtime"
PID1=$(prop MainPID)

section "the hardened unit: what it may write, what it may not"
check "/proc/irq writable" "$(writable_in "$PID1" /proc/irq)" "rw"
check "the cgroup tree writable" "$(writable_in "$PID1" /sys/fs/cgroup)" "rw"
check "/sys/devices/system/cpu writable" "$(writable_in "$PID1" /sys/devices/system/cpu)" "rw"
check "the workqueue mask writable" "$(writable_in "$PID1" /sys/devices/virtual/workqueue)" "rw"
check "its state directory writable" "$(writable_in "$PID1" /var/lib/nri-cpupool)" "rw"
check "/proc/sys read-only" "$(writable_in "$PID1" /proc/sys)" "ro"
check "/sys/kernel read-only" "$(writable_in "$PID1" /sys/kernel)" "ro"
check "/etc read-only (ProtectSystem=strict)" "$(writable_in "$PID1" /etc)" "ro"
check "/usr read-only" "$(writable_in "$PID1" /usr)" "ro"
# The unit's own sandbox for a shell (its properties, as systemd-run -p):
# a write the unit should never make is refused, the ones it needs pass.
SANDBOX=()
for p in ProtectSystem ReadWritePaths ReadOnlyPaths InaccessiblePaths ProtectKernelTunables CapabilityBoundingSet PrivateDevices; do
  while read -r line; do [ -n "$line" ] && SANDBOX+=(-p "$line"); done < <(systemctl cat "$UNIT" | grep "^$p=")
done
sandboxed() { systemd-run --wait --pipe -q "${SANDBOX[@]}" /bin/sh -c "$1" 2>&1 && echo written; }
# sandboxed_rewrite FILE: writes FILE's own content back to it.
sandboxed_rewrite() { sandboxed "v=\$(cat $1) && echo \"\$v\" > $1"; }
check "in the unit's sandbox, /proc/sys/kernel/sysrq is refused" "$(sandboxed 'cat /proc/sys/kernel/sysrq > /proc/sys/kernel/sysrq' | tail -1 | grep -o 'Read-only file system')" "Read-only file system"
check "in the unit's sandbox, an IRQ's affinity is written" "$(sandboxed_rewrite /proc/irq/default_smp_affinity | tail -1)" "written"
check "in the unit's sandbox, the workqueue mask is written" "$(sandboxed_rewrite /sys/devices/virtual/workqueue/cpumask | tail -1)" "written"

section "housekeeping through D-Bus: a shell loop in system.slice leaves the held CPUs"
# A shell loop that sleeps: a spinning one starves the emulated CPUs under
# TCG (RCU stalls); what is checked is where it may run.
ENI=$(run_pod eni telco guaranteed '{"pool.cpupool.dev": "exclusive-non-isolcpus"}') || die "run pod eni"
# The loops start once the pod's sandbox is up: runc enables the cpuset
# controller at the root for it, which resets every top-level cgroup's
# tasks to every CPU (issue 42), before the plugin holds anything. Each
# loop then sets the affinity PID 1 had at boot (every CPU but the
# isolcpus= ones, 2-3 and 6-7) as its own: what the plugin must give back.
for u in "${LOOPS[@]}"; do
  slice=system.slice
  case $u in vm-user.service) slice=user.slice ;; vm-ceph.service) slice=ceph.slice ;; esac # ceph.slice: a top-level slice of a package's
  systemd-run -q --unit="$u" --slice="$slice" /usr/bin/taskset -c 0-1,4-5 /bin/sh -c 'while :; do sleep 0.2; done' || die "systemd-run $u"
done
sleep 1
for u in "${LOOPS[@]}"; do LOOP_PID[$u]=$(systemctl show -p MainPID --value "$u"); done
LOOPS_BEFORE=$(loops_allowed)
info "the loops may run on: $LOOPS_BEFORE"
check "units unset before" "$(units_allowed)" "system.slice= user.slice= machine.slice= init.scope= "
ENI_C=$(create_ctr "$ENI" eni c 2000) || die "create eni/c"
HELD=$(cpus_of "$ENI_C")
check "the container holds 4-5" "$HELD" "4-5"
check "system.slice AllowedCPUs without them (one pass)" "$(within 30 $HOSTSET allowed system.slice)" "$HOSTSET"
check "init.scope too" "$(within 30 $HOSTSET allowed init.scope)" "$HOSTSET"
check "the shell loop no longer may run on 4-5" "$(within 30 no busy_overlaps)" "no"
sleep 3
info "while confined:"; loops_why
check "ceph.slice AllowedCPUs without them (a slice not named)" "$(within 30 $HOSTSET allowed ceph.slice)" "$HOSTSET"
for u in "${LOOPS[@]}"; do
  before=$(echo "$LOOPS_BEFORE" | tr ' ' '\n' | sed -n "s/^$u=//p")
  check "$u: its own affinity less 4-5, never widened" "$(within 30 "$(minus "$before" "$HELD,2-3,6-7")" loop_now "$u")" "$(minus "$before" "$HELD,2-3,6-7")"
done
check "the workqueue mask without 4-5" "$(within 30 no wq_has_held)" "no"
check "IRQs kept off 4-5 (/proc/irq written)" "$(within 30 cf cat /proc/irq/default_smp_affinity)" "cf"
FOREIGN=$(within 30 0 audit_foreign)
check "audit: no foreign user-space thread on 4-5" "$FOREIGN" "0"
[ "$FOREIGN" = 0 ] || info "audit: $(audit_why)"
check "no write refused for the sandbox or by systemd" "$(journal_count 'Read-only file system\|read-only here\|Access denied\|AccessDenied')" "0"
# The workqueue mask, system.slice and init.scope through D-Bus, and the
# unbound kernel threads' affinities (kthreadd among them).
check "metrics: the mask, 2 units and the kernel threads changed" "$(metrics | awk '/^cpupool_host_files_changed\{owner="housekeeping"\}/ {print ($2 > 3 ? "more than 3" : $2)}')" "more than 3"
check "kthreadd no longer may run on 4-5" "$(within 30 no kthreadd_overlaps)" "no"
check_contains "metrics: nothing refused" "$(metrics)" 'cpupool_host_files_refused{owner="housekeeping"} 0'
check_contains "metrics: systemd reachable" "$(metrics)" 'cpupool_housekeeping_systemd_unreachable_total 0'
check "kubepods left alone: no runtime property of the pods' tree" "$(find /run/systemd/system.control -name 'kubepods*' 2>/dev/null | wc -l)" "0"

section "systemctl daemon-reload keeps it"
systemctl daemon-reload
check "system.slice after daemon-reload" "$(allowed system.slice)" "$HOSTSET"
check "the shell loop still off 4-5" "$(busy_overlaps)" "no"
sleep 3 # a rescan
check "and after a rescan" "$(allowed system.slice)" "$HOSTSET"
check "audit after daemon-reload: no foreign user-space thread on 4-5" "$(audit_foreign)" "0"

section "kill -9: the next process keeps the units confined"
systemctl kill -s KILL "$UNIT"
check "restarted by Restart=always" "$(within 30 yes sh -c "[ \"\$(systemctl show -p MainPID --value $UNIT)\" != $PID1 ] && [ \"\$(systemctl show -p SubState --value $UNIT)\" = running ] && echo yes")" "yes"
check "system.slice still without 4-5" "$(within 30 $HOSTSET allowed system.slice)" "$HOSTSET"
check "the shell loop still off 4-5" "$(busy_overlaps)" "no"
check "audit after kill -9: no foreign user-space thread on 4-5" "$(audit_foreign)" "0"

section "a restart without the feature: every unit exactly as before"
sed -i 's/housekeeping: held, //' "$CONF"
systemctl restart "$UNIT"
check "units as before" "$(within 30 "system.slice= user.slice= machine.slice= init.scope= " units_allowed)" "system.slice= user.slice= machine.slice= init.scope= "
# Empty, or the root's CPUs where the kernel refuses to empty a cgroup
# with tasks: either way every CPU of the root.
check "system.slice has every CPU of the root again" "$(within 30 0-7 cat /sys/fs/cgroup/system.slice/cpuset.cpus.effective)" "0-7"
check "ceph.slice as before" "$(within 30 "" allowed ceph.slice)" ""
# A cpuset change resets the affinity of the cgroup's tasks to its CPUs:
# the loops had inherited PID 1's, without the isolated CPUs; the plugin
# recorded and gives back each one's (issue 41, item 12).
check "every loop's affinity exactly as before" "$(within 30 "$LOOPS_BEFORE" loops_allowed)" "$LOOPS_BEFORE"
[ "$(loops_allowed)" = "$LOOPS_BEFORE" ] || loops_why
check "the workqueue mask as before" "$(within 30 "$(echo "$BEFORE" | sed -n 's/^workqueue: //p')" cat /sys/devices/virtual/workqueue/cpumask)" "$(echo "$BEFORE" | sed -n 's/^workqueue: //p')"
check "the container keeps its CPUs" "$(cpus_of "$ENI_C")" "4-5"
sed -i 's/irqIsolation: optOut/housekeeping: held, irqIsolation: optOut/' "$CONF"
systemctl restart "$UNIT"
check "the feature back on: system.slice without 4-5" "$(within 30 $HOSTSET allowed system.slice)" "$HOSTSET"

section "the packaged upgrade (issue 34): dpkg -i of another version while running"
RECORDS=$(state_containers)
info "records before: $RECORDS"
PID2=$(prop MainPID) INV=$(prop InvocationID) STARTED=$(journal_count '^Started ')
t=$SECONDS
check "dpkg -i of the second build" "$(dpkg -i "$E2E_DEB2" >>/tmp/dpkg.log 2>&1 && echo upgraded)" "upgraded"
info "the upgrade took $((SECONDS - t)) s"
check "the unit restarted exactly once" "$(( $(journal_count '^Started ') - STARTED ))" "1"
check "a new process, active" "$([ "$(prop MainPID)" != "$PID2" ] && [ "$(prop InvocationID)" != "$INV" ] && echo "new $(prop ActiveState)")" "new active"
check "the new version runs" "$([ "$(/usr/bin/nri-cpupool version | head -1)" != "$V1" ] && echo yes)" "yes"
check "the state directory lock is the new process's" "$(sed -n 's/^pid \([0-9]*\),.*/\1/p' /var/lib/nri-cpupool/nri-cpupool.lock)" "$(prop MainPID)"
check "the state holds the container before the upgrade" "$RECORDS" "telco/eni/c"
check "no record lost" "$(state_containers)" "$RECORDS"
check "the container keeps its CPUs" "$(cpus_of "$ENI_C")" "4-5"
check "system.slice still without 4-5" "$(within 30 $HOSTSET allowed system.slice)" "$HOSTSET"

section "the pod ends: every unit and every loop exactly as before"
remove_pods "$ENI"
check "released: units as before" "$(within 30 "system.slice= user.slice= machine.slice= init.scope= " units_allowed)" "system.slice= user.slice= machine.slice= init.scope= "
check "released: ceph.slice as before" "$(within 30 "" allowed ceph.slice)" ""
check "released: every loop's affinity exactly as before" "$(within 30 "$LOOPS_BEFORE" loops_allowed)" "$LOOPS_BEFORE"

section "kill -9, the pod removed while the plugin is down, a start: every loop exactly as before (issue 41, item 12)"
ENI2=$(run_pod eni2 telco guaranteed '{"pool.cpupool.dev": "exclusive-non-isolcpus"}') || die "run pod eni2"
ENI2_C=$(create_ctr "$ENI2" eni2 c 2000) || die "create eni2/c"
HELD=$(cpus_of "$ENI2_C")
info "the second container holds $HELD"
check "ceph.slice confined again" "$(within 30 yes ceph_confined)" "yes"
check "the ceph loop off the held CPUs" "$(within 30 no ceph_overlaps)" "no"
# No restart by Restart=always until the pod is gone: a runtime drop-in.
mkdir -p /run/systemd/system/$UNIT.d
printf '[Service]\nRestart=no\n' > /run/systemd/system/$UNIT.d/50-e2e-norestart.conf
systemctl daemon-reload
systemctl kill -s KILL "$UNIT"
check "killed, not restarted" "$(within 30 failed prop ActiveState)" "failed"
remove_pods "$ENI2"
rm -f /run/systemd/system/$UNIT.d/50-e2e-norestart.conf
systemctl daemon-reload
systemctl reset-failed "$UNIT"
check "started again" "$(timeout 150 systemctl start "$UNIT" && prop SubState)" "running"
check "units as before" "$(within 30 "system.slice= user.slice= machine.slice= init.scope= " units_allowed)" "system.slice= user.slice= machine.slice= init.scope= "
check "ceph.slice as before" "$(within 30 "" allowed ceph.slice)" ""
check "every loop's affinity exactly as before" "$(within 30 "$LOOPS_BEFORE" loops_allowed)" "$LOOPS_BEFORE"

section "the default config: an isolcpus= CPU of the exclusive pool free of host processes under load (issue 42)"
isolcpus_default_check
sleep 1
check "systemctl stop" "$(systemctl stop "$UNIT" && prop ActiveState)" "inactive"
systemctl stop "${LOOPS[@]}"
check "the host as before (units, workqueue, IRQs)" "$(host)" "$BEFORE"

section "dpkg -r while a feature holds host files: preremove's restore-host puts them back"
# The daemon's stop restores nothing (a restart must not disturb), so a
# removal with a feature in force relies on preremove running restore-host
# after it stops the unit. The default config keeps the host's units off the
# isolcpus= CPUs from the start, with no container.
printf 'nriSocket: %s\nmetricsAddress: "127.0.0.1:19464"\nlogLevel: debug\n' "$W/nri.sock" > "$CONF"
check "started with the default config" "$(timeout 150 systemctl start "$UNIT" && prop SubState)" "running"
check "default config: system.slice loses the isolcpus= CPUs" "$(within 30 0-1,4-5 allowed system.slice)" "0-1,4-5"
check "dpkg -r while it runs" "$(dpkg -r nri-cpupool >>/tmp/dpkg.log 2>&1 && echo removed)" "removed"
info "preremove said: $(grep -i 'restore\|nri-cpupool:' /tmp/dpkg.log | tail -5 | tr '\n' ' ')"
check "the host as before after dpkg -r (units, workqueue, IRQs)" "$(host)" "$BEFORE"
check "the unit is gone" "$(systemctl show -p LoadState --value "$UNIT")" "not-found"
check "the config stays after -r" "$([ -f "$CONF" ] && echo kept)" "kept"
check "dpkg -P" "$(dpkg -P nri-cpupool >>/tmp/dpkg.log 2>&1 && echo purged)" "purged"
check "no config after -P" "$([ -e "$CONF" ] && echo left || echo gone)" "gone"
check "no process left" "$(pgrep -x nri-cpupool | wc -l)" "0"
check "the host still as before" "$(host)" "$BEFORE"

section "the .rpm"
if [ -r "${E2E_RPM:-}" ] && [ -r "${E2E_RPM2:-}" ] && command -v rpm >/dev/null; then
  # rpm on Debian has its own, empty database: --nodeps for systemd and
  # the shell, which dpkg provides.
  check "rpm -i" "$(rpm -i --nodeps "$E2E_RPM" >/tmp/rpm.log 2>&1 && echo installed)" "installed"
  printf 'nriSocket: %s\nmetricsAddress: "127.0.0.1:19464"\n' "$W/nri.sock" > "$CONF"
  check "systemctl start" "$(timeout 150 systemctl start "$UNIT" && prop SubState)" "running"
  PID3=$(prop MainPID) STARTED=$(journal_count '^Started ')
  check "rpm -U of the second build" "$(rpm -U --nodeps "$E2E_RPM2" >>/tmp/rpm.log 2>&1 && echo upgraded)" "upgraded"
  check "the unit restarted exactly once" "$(( $(journal_count '^Started ') - STARTED ))" "1"
  check "a new process, running" "$([ "$(prop MainPID)" != "$PID3" ] && prop SubState)" "running"
  check "rpm -e" "$(rpm -e --nodeps nri-cpupool >>/tmp/rpm.log 2>&1 && echo removed)" "removed"
  check "stopped and gone" "$(systemctl show -p LoadState --value "$UNIT")/$(pgrep -x nri-cpupool | wc -l)" "not-found/0"
  rm -f "$CONF" "$CONF.rpmsave"
else
  info "SKIPPED: no E2E_RPM and E2E_RPM2, or no rpm"
fi
