# The default config keeps host processes off an isolcpus= CPU of the
# exclusive pool (issue 42, items 2 and 4), for systemd.sh: sourced there,
# and run once the unit is installed, with the runtime up and no pod left.
# With host load in system.slice (stress-ng, or busy shell loops where the
# host has none), a container of the exclusive pool runs on its isolcpus=
# CPU (bursts and 10 ms sleeps); during a 10 s window, traced from sched_switch (sched-switch.sh), no
# user-space task other than it may be switched in there: a count, not a
# time. The same window with keepHostOffIsolcpus: false is logged as what
# the feature prevents (not checked: it depends on where the load lands).
# Needs check, within, allowed, units_allowed, loops_allowed, LOOPS_BEFORE,
# UNIT, CONF, STATE and the runtime's helpers of systemd.sh.
# shellcheck shell=bash
# shellcheck source=test/vm/sched-switch.sh
source "$(dirname "${BASH_SOURCE[0]}")/sched-switch.sh"

ISOLCPUS_LOAD=vm-isolcpus-load.service

# isolcpus_load_start: CPU and memory load in system.slice on every CPU
# its cgroup allows: stress-ng at a quarter load (more starves the
# emulated CPUs under TCG: a container's start then timed out), else four
# busy shell loops.
isolcpus_load_start() {
  if command -v stress-ng >/dev/null; then
    systemd-run -q --unit="$ISOLCPUS_LOAD" --slice=system.slice stress-ng --cpu 4 --cpu-load 25 --vm 1 --vm-bytes 16m --timeout 600 >/dev/null
  else
    info "no stress-ng here: busy shell loops instead"
    # shellcheck disable=SC2016 # the loop's own variables
    systemd-run -q --unit="$ISOLCPUS_LOAD" --slice=system.slice /bin/sh -c \
      'for _ in 1 2 3 4; do (while :; do i=0; while [ $i -lt 3000 ]; do i=$((i + 1)); done; sleep 0.05; done) & done; wait'
  fi
}

# isolcpus_load_on CPU: "yes" when a thread of the load may run on CPU.
isolcpus_load_on() {
  local pid t
  while read -r pid; do
    for t in /proc/"$pid"/task/*; do
      [ "$(overlaps "$(awk '/^Cpus_allowed_list/ {print $2}' "$t/status" 2>/dev/null)" "$1")" = yes ] && { echo yes; return; }
    done
  done < "/sys/fs/cgroup/system.slice/$ISOLCPUS_LOAD/cgroup.procs"
  echo no
}

# isolcpus_window CPU PROBE_C: traces CPU for 10 s and prints the foreign
# user-space switches ("COUNT names": not the probe's threads, the idle
# task or kernel threads) and whether the probe was seen switched in: it
# sleeps 10 ms between bursts, so a live trace of the right CPU has it,
# and a trace that saw nothing cannot pass as clean.
isolcpus_window() {
  local cpu=$1 out=/run/isolcpus-trace.$RANDOM probe
  mapfile -t probe < "$(cgroup_of "$2")/cgroup.threads"
  sched_switch_record "$cpu" 10 "$out" || { echo "no trace"; return; }
  echo "$(sched_switch_foreign "$out" "${probe[@]}"); probe seen: $(sched_switch_seen "$out" "${probe[0]}")"
  rm -f "$out" "$out.in"
}

# isolcpus_audit_foreign CPU: the audit's foreignThreads on CPU.
isolcpus_audit_foreign() {
  /usr/bin/nri-cpupool audit --config "$CONF" --state-file "$STATE" --sample 100ms --json 2>/dev/null | tr -d ' \n' |
    sed 's/{"cpu":/\n/g' | grep -E "^$1," | grep -o '"foreignThreads":[0-9]*' | cut -d: -f2 | awk '{n += $1} END {print NR ? n : "not in the audit"}'
}

isolcpus_default_check() {
  local saved=/run/isolcpus-saved.yaml probe probe_c cpu before got
  cp "$CONF" "$saved"
  # The config of the sections before: keepHostOffIsolcpus false.
  check "the config before turns it off" "$(grep -c '^keepHostOffIsolcpus: false' "$CONF")" "1"
  probe=$(run_pod probe telco guaranteed '{"pool.cpupool.dev": "exclusive"}') || die "run pod probe"
  # Bursts of work and 10 ms sleeps in one process (read -t on a FIFO no
  # one writes: no fork), so that the CPU goes idle, where a task allowed
  # there would be woken, and the probe shows in the trace.
  # shellcheck disable=SC2016 # the probe's own variables
  probe_c=$(create_ctr "$probe" probe c 1000 0 \
    '["/bin/sh", "-c", "mkfifo /dev/shm/probe && exec 3<>/dev/shm/probe && while :; do i=0; while [ $i -lt 2000 ]; do i=$((i + 1)); done; read -t 0.01 x <&3; done"]') ||
    die "create probe/c"
  cpu=$(cpus_of "$probe_c")
  # The load once the probe runs: a container's start under it is slow.
  isolcpus_load_start || die "systemd-run $ISOLCPUS_LOAD"
  sleep 2
  check "the probe holds one isolcpus= CPU" "$(overlaps "$cpu" 2-3,6-7)/$(cpu_list "$cpu" | wc -l)" "yes/1"
  before=$(isolcpus_window "$cpu" "$probe_c")
  info "keepHostOffIsolcpus: false, CPU $cpu, 10 s: $before foreign user-space switches (what isolcpus= alone gives on cgroup v2)"

  # Only what every config needs here: nothing else is set.
  printf 'nriSocket: %s\nmetricsAddress: "127.0.0.1:19464"\nlogLevel: debug\n' "$W/nri.sock" > "$CONF"
  systemctl restart "$UNIT"
  # The top-level units: every CPU but the isolated ones.
  check "default config: system.slice loses the isolcpus= CPUs" "$(within 30 0-1,4-5 allowed system.slice)" "0-1,4-5"
  check "default config: init.scope too" "$(within 30 0-1,4-5 allowed init.scope)" "0-1,4-5"
  check "default config: no thread of the load may run on CPU $cpu" "$(within 30 no isolcpus_load_on "$cpu")" "no"
  got=$(isolcpus_window "$cpu" "$probe_c")
  check "default config, CPU $cpu, 10 s under load: no foreign user-space task switched in (sched_switch)" "$got" "0; probe seen: yes"
  check "default config: audit finds no foreign user-space thread on CPU $cpu" "$(settled 30 0 isolcpus_audit_foreign "$cpu")" "0"
  check "the probe still holds its CPU" "$(cpus_of "$probe_c")" "$cpu"

  # Off again: every unit and loop exactly as before, the probe kept.
  cp "$saved" "$CONF"
  systemctl restart "$UNIT"
  check "turned off: units as before" "$(within 30 "system.slice= user.slice= machine.slice= init.scope= " units_allowed)" "system.slice= user.slice= machine.slice= init.scope= "
  check "turned off: every loop's affinity exactly as before" "$(within 30 "$LOOPS_BEFORE" loops_allowed)" "$LOOPS_BEFORE"
  systemctl stop "$ISOLCPUS_LOAD" 2>/dev/null
  remove_pods "$probe"
}
