# The VM suite's short noise checks (issue 42, item 4): with the host load
# of the noise harness (test/vm/noise.sh) running, an oslat container
# shares its CPU with no user-space task during a 10 s window, from the
# kernel's sched_switch events: a count, not a time, so that it holds
# under emulation. Two setups of the harness (test/vm/bench-isolation.sh):
#   noise_check_held     b: a CPU nri-cpupool holds with housekeeping and
#                        IRQ isolation (exclusive-non-isolcpus)
#   noise_check_default  d: an isolcpus= CPU of the exclusive pool with the
#                        default config (reservedCPUs only): host processes
#                        kept off it by keepHostOffIsolcpus, on by default
# Kernel threads that still run there are printed, not checked
# (docs/limitations.md says which and why); so are oslat's figures, whose
# run is ended with the window (SIGINT) so that they cover it.
# Sourced by test/vm/isolation.sh (and bench-isolation.sh) after
# test/e2e/lib.sh, test/vm/checks.sh and test/vm/noise.sh, with the
# runtime up and no plugin running.
# shellcheck shell=bash

# noise_check_tools: tracefs and oslat, or a failed check saying which.
noise_check_tools() {
  if ! noise_tracefs; then
    check "tracefs with sched_switch for the noise check" "none" "mounted"
    return 1
  fi
  if ! [ -x /usr/bin/oslat ] && ! command -v oslat >/dev/null; then
    check "oslat (Debian's rt-tests) for the noise check's probe" "missing" "installed"
    return 1
  fi
}

# noise_load_on CPU: "yes" when a thread of the host load may run on CPU.
noise_load_on() {
  if [ "$(noise_load_allowed "$1")" -gt 0 ]; then echo yes; else echo no; fi
}

# noise_load_allowed CPU: how many threads of the host load may run on CPU
# (their Cpus_allowed_list): 0 where the CPU is kept free of them, all of
# them where the kernel reset their affinities to every CPU.
noise_load_allowed() {
  local procs p t n=0
  if [ "${VM_SYSTEMD:-}" = 1 ]; then
    procs=$(cat /sys/fs/cgroup/system.slice/noise-{stress,timer,9p}.service/cgroup.procs 2>/dev/null)
  else
    procs=$(cat /sys/fs/cgroup/system.slice/noise-{stress,timer,9p}/cgroup.procs 2>/dev/null)
  fi
  for p in $procs; do
    for t in /proc/"$p"/task/*; do
      case ",$(cpu_list_of "$(awk '/^Cpus_allowed_list/ {print $2}' "$t/status" 2>/dev/null)")," in *",$1,"*) n=$((n + 1)) ;; esac
    done
  done
  echo "$n"
}

# cpu_list_of LIST: a cpulist ("0-1,4") as "0,1,4".
cpu_list_of() {
  local p out=""
  for p in ${1//,/ }; do
    case "$p" in *-*) out="$out,$(seq -s, "${p%-*}" "${p#*-}")" ;; *) out="$out,$p" ;; esac
  done
  echo "${out#,}"
}

# noise_check_probe POD PODNAME SECONDS OUT WHAT: the probe in POD, its
# window and the checks; WHAT names the CPU in them. Prints nothing; sets
# NOISE_CHECK_CPU to the probe's CPU.
noise_check_probe() {
  local pod=$1 podname=$2 secs=$3 out=$4 what=$5 ctr pid cpu stopped=no
  ctr=$(noise_probe_start "$pod" "$podname" probe $((secs + 600))) || die "create the noise probe in $podname"
  cpu=$(cpus_of "$ctr")
  NOISE_CHECK_CPU=$cpu
  if pid=$(noise_probe_pid "$ctr" "$podname" probe); then
    noise_load_resume || die "the noise check's host load could not be thawed"
    sleep "${NOISE_CHECK_SETTLE:-5}"
    noise_window "$cpu" "$secs" "$out" "$pid" stop
    noise_probe_stop "$pid" "$podname" probe "$out" && stopped=yes
    check "$what $cpu under load: no user-space task but the probe scheduled there in ${secs} s (sched_switch)" \
      "$(noise_count "$out" user)$( [ "$(noise_count "$out" user)" = 0 ] || echo ": $(noise_names "$out" user)")" "0"
    check "the trace lost no event" "$(cat "$out.lost")" "0"
    check "oslat, its run ended with the window (SIGINT), printed its summary" "$stopped" "yes"
    info "on CPU $cpu besides the probe: per-CPU kernel threads $(noise_count "$out" percpu) ($(noise_names "$out" percpu)), unbound $(noise_count "$out" unbound) ($(noise_names "$out" unbound)); the probe preempted $(cat "$out.nvcsw") times; IRQs $(paste -sd' ' "$out.irqs")"
    [ "$stopped" = no ] || info "oslat: maximum $(noise_oslat "$out" max) us over $(noise_oslat "$out" duration) s; $(noise_oslat "$out" hist)"
  else
    check "oslat measures in the noise check's container" "$(noise_probe_log "$podname" probe | tail -2 | paste -sd' ')" "Test starts"
  fi
}

# noise_check_under_load CONF PODNAME ANNOTATIONS SECONDS OUT WHAT: the
# plugin with CONF, the host load, a Guaranteed pod and its probe's check
# (noise_check_probe); the pod in NOISE_CHECK_POD for noise_check_end.
# Fails, with the plugin stopped, when the load does not start. The load
# is frozen while the pod and its probe start, and thawed
# NOISE_CHECK_SETTLE (5) s before the window, as the harness does
# (bench-isolation.sh): under TCG the probe took from 26 to 190 s to
# start through the running load, once 186 s, past crictl's 180 s, and
# that start was most of the VM suite's time. The processes, and the
# affinities the plugin or the kernel gave them, are the same through a
# freeze (noise.sh).
noise_check_under_load() {
  local conf=$1 podname=$2 ann=$3 secs=$4 out=$5 what=$6
  start_plugin "$conf"
  if ! noise_load_start; then
    check "the noise check's host load (stress-ng)" "not started" "started"
    stop_plugin -TERM
    return 1
  fi
  if ! noise_load_pause; then
    check "the noise check's host load frozen while the probe starts" "not frozen" "frozen"
    noise_load_stop
    stop_plugin -TERM
    return 1
  fi
  NOISE_CHECK_POD=$(run_pod "$podname" telco guaranteed "$ann") || die "run pod $podname"
  noise_check_probe "$NOISE_CHECK_POD" "$podname" "$secs" "$out" "$what"
}

# noise_check_end: the pod, the load and the plugin stopped.
noise_check_end() {
  remove_pods "$NOISE_CHECK_POD"
  noise_load_stop
  stop_plugin -TERM
}

# noise_check_held [SECONDS]: setup b; leaves the plugin stopped.
noise_check_held() {
  local secs=${1:-10} conf=/tmp/noise-held.yaml
  noise_check_tools || return
  cat > "$conf" <<YAML
reservedCPUs: "0-1"
pools:
  exclusive-non-isolcpus: {enabled: true, housekeeping: held, irqIsolation: optOut, isolatedPartition: optOut}
irq: {rescanInterval: 2s}
metricsAddress: "127.0.0.1:19464"
YAML
  noise_check_under_load "$conf" noiseheld '{"pool.cpupool.dev": "exclusive-non-isolcpus"}' "$secs" /tmp/noise-held "held CPU" || return
  noise_check_end
}

# noise_check_default [SECONDS]: setup d, with nothing configured but the
# reserved CPUs: the issue's item 2 (isolcpus= CPUs kept free of host
# processes by default, with or without systemd) under the harness's load.
# Run after a housekeeping confinement and its release (noise_check_held),
# which on Linux 6.12 reset the host's affinities onto the isolated CPUs
# (the issue's 467 switches). Leaves the plugin stopped.
noise_check_default() {
  local secs=${1:-10} conf=/tmp/noise-default.yaml
  noise_check_tools || return
  printf 'reservedCPUs: "0-1"\nmetricsAddress: "127.0.0.1:19464"\n' > "$conf"
  noise_check_under_load "$conf" noisedefault '{"pool.cpupool.dev": "exclusive"}' "$secs" /tmp/noise-default "default config, isolcpus= CPU" || return
  check "default config: the probe's CPU is an isolcpus= CPU" "$(case ",$(cpu_list_of "$(cat /sys/devices/system/cpu/isolated)")," in *",$NOISE_CHECK_CPU,"*) echo yes ;; *) echo no ;; esac)" "yes"
  check "default config: no thread of the host load may run on CPU $NOISE_CHECK_CPU" "$(noise_load_on "$NOISE_CHECK_CPU")" "no"
  noise_check_end
}
