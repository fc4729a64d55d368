#!/usr/bin/env bash
# Config reload and CPU hotplug on a real kernel (issue 34). It runs INSIDE a
# VM of shape `prod` (2 sockets x 2 cores x 2 threads, isolcpus 2-3,6-7) on
# cgroup v2, with the real containerd, runc and crictl of test/e2e/lib.sh:
# test/vm/e2e.sh's run "v2:reload". By hand:
#   test/vm/vm.sh --shape prod --cgroup v2 --env E2E_IMAGE_TAR=... -- bash test/vm/reload.sh
# The timed checks read the cgroup files and the metrics, not `status`: a Go
# binary's start alone can take most of a second under emulation.
set -uo pipefail
source "$(dirname "$0")/../e2e/lib.sh"
# shellcheck source=test/vm/checks.sh
source "$(dirname "$0")/checks.sh"

if [ "${VM_SHAPE:-}" != prod ] || [ "${VM_CGROUP:-}" != v2 ]; then die "run inside a VM of shape prod on cgroup v2 (test/vm/e2e.sh)"; fi
need_root_linux
BIN=$REPO/bin/nri-cpupool

finish() {
  local rc=$?
  # Every CPU back online, whatever failed: the VM's other runs need them.
  for c in 1 2 3 4 5 6 7; do echo 1 > "/sys/devices/system/cpu/cpu$c/online" 2>/dev/null; done
  if [ "$FAILED" -gt 0 ] || [ "$rc" -ne 0 ]; then report; fi
  teardown
  echo
  echo "e2e-vm reload ($VM_SHAPE, cgroup $VM_CGROUP, Linux $(uname -r)): $PASSED passed, $FAILED failed"
  [ "$FAILED" -eq 0 ] && [ "$rc" -eq 0 ] || exit 1
}
trap finish EXIT
section() { say "[$SECONDS s] $*"; }

# within_1s WANT CMD [ARGS...]: runs CMD until it prints WANT, for one second
# at most; prints "in time" (and, on stderr, how long it took), or what CMD
# printed last. The time is taken when the read that saw WANT ended, so keep
# CMD cheap (read_file, metric), not crictl. Under emulation (TCG) the VM
# runs many times slower than a machine, and a runtime's update of a
# container (runc) alone takes seconds: the limit is then 15 s (runs took
# 1.1-5.2 s, the longest beside another VM; CI machines are no quieter), and
# the one-second figure is a KVM run's. E2E_VM_TIMED_LIMIT_MS sets it.
LIMIT_MS=1000
[ "${VM_ACCEL:-}" = tcg ] && LIMIT_MS=15000
LIMIT_MS=${E2E_VM_TIMED_LIMIT_MS:-$LIMIT_MS}
within_1s() {
  local want=$1 got start now
  shift
  start=$(date +%s%N)
  while :; do
    got=$("$@" 2>/dev/null)
    now=$(date +%s%N)
    [ $((now - start)) -gt $((LIMIT_MS * 1000000)) ] && break
    if [ "$got" = "$want" ]; then echo "in time"; info "$want after $(((now - start) / 1000000)) ms (limit $LIMIT_MS ms, ${VM_ACCEL:-?})" >&2; return; fi
    sleep 0.02
  done
  echo "$got (after $(((now - start) / 1000000)) ms, limit $LIMIT_MS ms)"
}
read_file() { cat "$1"; }
metric() { metrics | awk -v m="$1" '$1 == m {print $2}'; }
online() { echo "$2" > "/sys/devices/system/cpu/cpu$1/online"; }
# hotplug_ms T0: the milliseconds from T0 (date +%s%3N) until the first
# line the plugin logged after T0 saying which online CPUs and pools are
# in force after a hotplug, "" when there is none.
hotplug_ms() {
  # A pipe, not a process substitution: the VM has no /dev/fd.
  grep 'hotplug: online CPUs .*; pools: ' "$W/plugin.log" | while read -r line; do
    t=$(date -d "$(echo "$line" | sed -n 's/^time="\([^"]*\)".*/\1/p')" +%s%3N 2>/dev/null) || continue
    [ "$t" -ge "$1" ] || continue
    echo $((t - $1))
    break
  done
}
effective_cpus() { cat "$(cgroup_of "$1")/cpuset.cpus.effective"; }
status_pool() { "$BIN" status --state-file "$STATE" | awk -v p="$1" '$1 == p {print $2}'; }

# The pools: exclusive on every isolated CPU, a shared pool of one CPU that
# is not isolated (5; a warning), infra 0-1,4.
config() { # config EXCLUSIVE SHARED
  printf 'reservedCPUs: "0-1"\npools:\n  exclusive: {cpus: "%s"}\n  shared: {cpus: "%s"}\nmetricsAddress: "127.0.0.1:19464"\n' "$1" "$2"
}
start_runtime # makes $W
CFG=$W/config.yaml STATE=$W/state/nri-cpupool.json
config 2-3,6-7 5 > "$CFG"
start_plugin "$CFG"

section "an exclusive container on a whole core, a shared one"
X=$(run_pod fwd telco guaranteed '{"pool.cpupool.dev": "exclusive"}') || die "run pod fwd"
X_C=$(create_ctr "$X" fwd fwd 2000) || die "create fwd/fwd"
S=$(run_pod ctl telco burstable '{"pool.cpupool.dev": "shared"}') || die "run pod ctl"
S_C=$(create_ctr "$S" ctl ctl 500) || die "create ctl/ctl"
XC=$(cpus_of "$X_C") S_CG=$(cgroup_of "$S_C")
case "$XC" in 2-3) FREE=6-7 ;; 6-7) FREE=2-3 ;; *) die "the exclusive container runs on $XC, not a whole isolated core" ;; esac
F1=${FREE%-*} F2=${FREE#*-}
check "shared container on the shared pool" "$(cpus_of "$S_C")" "5"
info "exclusive container on $XC; free isolated core $FREE"

section "a reload that grows the shared pool while the exclusive container runs: applied in < 1 s"
config "$XC,$F1" "5,$F2" > "$CFG.new" && mv "$CFG.new" "$CFG" # an editor's save
check "the shared member has the grown pool within 1 s (the file changed)" "$(within_1s "5,$F2" read_file "$S_CG/cpuset.cpus")" "in time"
check "the exclusive container did not move" "$(cpus_of "$X_C")" "$XC"
check "its Cpus_allowed_list did not either" "$(allowed_of "$X_C")" "$XC"
check "the shared member's process follows" "$(eventually "5,$F2" allowed_of "$S_C")" "5,$F2"
check "metrics: one reload applied" "$(metric 'cpupool_config_reloads_total{result="applied"}')" "1"
check "metrics: the exclusive pool has 3 CPUs" "$(metric 'cpupool_pool_cpus{pool="exclusive"}')" "3"
check_contains "status: the last reload" "$("$BIN" status --state-file "$STATE")" "Last reload: applied at"
# The plugin's own measures, from the save's first file event (the 200 ms
# debounce included): until the new pools were in force and the shared
# member's update sent, < 1 s even under TCG; and until the runtime had
# answered that update (runc's update of the cgroup, which TCG slows far
# more), within the timed limit (1 s; 15 s under TCG).
LAST=$("$BIN" status --state-file "$STATE" | grep '^Last reload: applied at .* (file changed) in ')
RELOAD_MS=$(echo "$LAST" | sed -n 's/.* in \([0-9.]*\) ms.*/\1/p')
INFORCE_MS=$(echo "$LAST" | sed -n 's/.*(in force after \([0-9.]*\) ms).*/\1/p')
info "the plugin had the reload in force after ${INFORCE_MS:-?} ms, applied with the runtime's answer after ${RELOAD_MS:-?} ms (its own measures, ${VM_ACCEL:-?})"
under() { awk -v ms="${1:-x}" -v lim="$2" 'BEGIN { print (ms ~ /^[0-9.]+$/ && ms < lim) ? "under " lim " ms" : "not: " ms }'; }
check "the plugin's own measure until in force: < 1000 ms" "$(under "$INFORCE_MS" 1000)" "under 1000 ms"
check "and until the runtime answered: < $LIMIT_MS ms" "$(under "$RELOAD_MS" "$LIMIT_MS")" "under $LIMIT_MS ms"
check "the plugin's log says it, with the member updated" "$(grep -c 'reload (file changed) applied in .*, in force after .* (1 of 1 containers that follow the pools updated)' "$W/plugin.log")" "1"

section "a reload that would move the exclusive container: refused, naming it; the old config stays"
config "$FREE" "5,$XC" > "$CFG.new" && mv "$CFG.new" "$CFG"
check "metrics: the changed file's reload refused" "$(eventually 1 metric 'cpupool_config_reloads_total{result="refused"}')" "1"
kill -HUP "$PLUGIN_PID" # systemctl reload: the same file again
check "metrics: SIGHUP's reload refused too" "$(eventually 2 metric 'cpupool_config_reloads_total{result="refused"}')" "2"
check_contains "the log names the container and its CPUs" "$(cat "$W/plugin.log")" "refused: telco/fwd/fwd would move"
check_contains "status: refused, and why" "$("$BIN" status --state-file "$STATE")" "telco/fwd/fwd (CPUs $XC)"
check "the exclusive container did not move" "$(cpus_of "$X_C")" "$XC"
check "the shared member kept the pool in force" "$(cpus_of "$S_C")" "5,$F2"
check "the daemon still runs" "$(kill -0 "$PLUGIN_PID" && echo yes)" "yes"
config "$XC,$F1" "5,$F2" > "$CFG" # back to the config in force

section "a free exclusive CPU offline: out of the pool within 1 s, back with echo 1"
T_OFF=$(date +%s%3N)
online "$F1" 0
T_DONE=$(date +%s%3N)
check "metrics: exclusive has 2 CPUs within 1 s" "$(within_1s 2 metric 'cpupool_pool_cpus{pool="exclusive"}')" "in time"
# The plugin's own reaction, without the polling above (which TCG slows):
# from the kernel's end of the offline (the write to online returned)
# until the plugin's log line (milliseconds) says the new pools are in
# force, the 250 ms poll included; < 1 s under TCG too. The write itself
# is the kernel's (stop_machine on every CPU, which under TCG waits for
# one host thread to run all eight vCPUs, and may take seconds), so it is
# reported, not counted; a log line before the write returned (the
# online mask changes within it) is a reaction of 0 ms.
OFF_MS=$(hotplug_ms "$T_OFF")
WRITE_MS=$((T_DONE - T_OFF))
REACT_MS=$(awk -v ms="${OFF_MS:-x}" -v w="$WRITE_MS" 'BEGIN { if (ms ~ /^[0-9]+$/) print (ms > w ? ms - w : 0); else print "" }')
info "the kernel took CPU $F1 offline in $WRITE_MS ms; the plugin had it out of its pools ${OFF_MS:-?} ms after the write began, ${REACT_MS:-?} ms after it returned (its log's time, ${VM_ACCEL:-?})"
check "the plugin's reaction to the CPU going offline: < 1000 ms" "$(awk -v ms="${REACT_MS:-x}" 'BEGIN { print (ms ~ /^[0-9]+$/ && ms < 1000) ? "under 1 s" : "not: " ms }')" "under 1 s"
check "status: exclusive without CPU $F1" "$(status_pool exclusive)" "$XC"
check "metrics: counted" "$(metric 'cpupool_cpu_hotplug_total{event="offline"}')" "1"
online "$F1" 1
check "metrics: exclusive has 3 CPUs again within 1 s" "$(within_1s 3 metric 'cpupool_pool_cpus{pool="exclusive"}')" "in time"
check "status: exclusive with CPU $F1 again" "$(status_pool exclusive)" "$XC,$F1"

section "a held CPU offline: reported, kept, not given to anyone else"
H=${XC#*-}
online "$H" 0
check "metrics: one held CPU offline within 1 s" "$(within_1s 1 metric cpupool_offline_held_cpus)" "in time"
check "the kernel shrank the container's effective cpuset" "$(cat "$(cgroup_of "$X_C")/cpuset.cpus.effective")" "${XC%-*}"
check_contains "the log says so" "$(cat "$W/plugin.log")" "CPU $H went offline under container telco/fwd/fwd"
check_contains "status lists it" "$("$BIN" status --state-file "$STATE")" "CPU $H of telco/fwd/fwd is offline"
AUDIT=$("$BIN" audit --state-file "$STATE" --sample 100ms 2>&1)
check_contains "audit reports it offline" "$AUDIT" "offline: the kernel took it"
Y=$(run_pod more telco guaranteed '{"pool.cpupool.dev": "exclusive"}') || die "run pod more"
Y_C=$(create_ctr "$Y" more one 1000) || die "create more/one"
check "a new exclusive container gets the free CPU, not the offline held one" "$(cpus_of "$Y_C")" "$F1"
OUT=$(create_ctr "$Y" more two 1000 2>&1) && GOT="created on $(cpus_of "$OUT")" || GOT=refused
check "another one: refused (CPU $H is the container's)" "$GOT" "refused"
online "$H" 1
check "back online: nothing held offline within 1 s" "$(within_1s 0 metric cpupool_offline_held_cpus)" "in time"
check "the container has its CPU back" "$(eventually "$XC" effective_cpus "$X_C")" "$XC"
OUT=$(create_ctr "$Y" more three 1000 2>&1) && GOT="created on $(cpus_of "$OUT")" || GOT=refused
check "still the container's: refused" "$GOT" "refused"

section "a restart while a held CPU is offline: it stays the container's"
online "$H" 0
check "metrics: one held CPU offline within 1 s" "$(within_1s 1 metric cpupool_offline_held_cpus)" "in time"
stop_plugin -KILL
start_plugin "$CFG" # the config lists CPU $H, offline: a warning now, not a refusal to start
check_contains "the daemon started: the offline CPU in the config is a warning" "$(cat "$W/plugin.log")" "CPU $H is offline (online: "
check "the container did not move" "$(cpus_of "$X_C")" "$XC"
check "metrics after the restart: one held CPU offline" "$(eventually 1 metric cpupool_offline_held_cpus)" "1"
check_contains "the log says it stays the container's" "$(cat "$W/plugin.log")" "synchronize: CPU $H of container telco/fwd/fwd is offline"
check_contains "status lists it (the state keeps it)" "$("$BIN" status --state-file "$STATE")" "CPU $H of telco/fwd/fwd is offline"
OUT=$(create_ctr "$Y" more four 1000 2>&1) && GOT="created on $(cpus_of "$OUT")" || GOT=refused
check "a new exclusive container while it is offline: refused" "$GOT" "refused"
online "$H" 1
check "back online: nothing held offline within 1 s" "$(within_1s 0 metric cpupool_offline_held_cpus)" "in time"
check "the container has its CPU back" "$(eventually "$XC" effective_cpus "$X_C")" "$XC"
OUT=$(create_ctr "$Y" more five 1000 2>&1) && GOT="created on $(cpus_of "$OUT")" || GOT=refused
check "back online after the restart, still the container's: refused" "$GOT" "refused"
