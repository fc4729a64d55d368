# The VM suite's short noise check (issue 42, item 4): with the host load of
# the noise harness (test/vm/noise.sh) running, an oslat container on a CPU
# that nri-cpupool holds with housekeeping and IRQ isolation (the harness's
# setup b) shares its CPU with no user-space task during a 10 s window, from
# the kernel's sched_switch events: a count, not a time, so that it holds
# under emulation. Kernel threads that still run there are printed, not
# checked (docs/limitations.md says which and why).
# Sourced by test/vm/isolation.sh after test/e2e/lib.sh, test/vm/checks.sh
# and test/vm/noise.sh, with the runtime up and no plugin running.
# shellcheck shell=bash

# noise_check_held [SECONDS]: the check; leaves the plugin stopped.
noise_check_held() {
  local secs=${1:-10} conf=/tmp/noise-held.yaml out=/tmp/noise-held pod ctr pid cpu
  if ! noise_tracefs; then
    check "tracefs with sched_switch for the noise check" "none" "mounted"
    return
  fi
  if ! [ -x /usr/bin/oslat ] && ! command -v oslat >/dev/null; then
    check "oslat (Debian's rt-tests) for the noise check's probe" "missing" "installed"
    return
  fi
  cat > "$conf" <<YAML
reservedCPUs: "0-1"
pools:
  exclusive-non-isolcpus: {enabled: true, housekeeping: held, irqIsolation: optOut, isolatedPartition: optOut}
irq: {rescanInterval: 2s}
metricsAddress: "127.0.0.1:19464"
YAML
  start_plugin "$conf"
  if ! noise_load_start; then
    check "the noise check's host load (stress-ng)" "not started" "started"
    stop_plugin -TERM
    return
  fi
  pod=$(run_pod noiseheld telco guaranteed '{"pool.cpupool.dev": "exclusive-non-isolcpus"}') || die "run pod noiseheld"
  ctr=$(noise_probe_start "$pod" noiseheld probe $((secs + 600))) || die "create the noise probe"
  cpu=$(cpus_of "$ctr")
  if pid=$(noise_probe_pid "$ctr"); then
    noise_window "$cpu" "$secs" "$out" "$pid"
    check "held CPU $cpu under load: no user-space task but the probe scheduled there in ${secs} s (sched_switch)" \
      "$(noise_count "$out" user)$( [ "$(noise_count "$out" user)" = 0 ] || echo ": $(noise_names "$out" user)")" "0"
    check "the trace lost no event" "$(cat "$out.lost")" "0"
    info "on CPU $cpu besides the probe: per-CPU kernel threads $(noise_count "$out" percpu) ($(noise_names "$out" percpu)), unbound $(noise_count "$out" unbound) ($(noise_names "$out" unbound)); the probe preempted $(cat "$out.nvcsw") times; IRQs $(paste -sd' ' "$out.irqs")"
  else
    check "oslat measures in the noise check's container" "$(noise_probe_log noiseheld probe | tail -2 | paste -sd' ')" "Test starts"
  fi
  crictl rmp -f "$pod" >/dev/null
  noise_load_stop
  stop_plugin -TERM
}
