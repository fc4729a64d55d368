#!/usr/bin/env bash
# The noise harness (issue 42, `make bench-isolation`): what a thread on an
# exclusive CPU sees, in four setups, with the same host load. It runs
# INSIDE a VM of shape `prod` booted with vm.sh --systemd on cgroup v2
# (test/vm/e2e.sh: the runs "v2:bench" and "v2:bench:6.12"), with the real
# containerd, runc and crictl of test/e2e/lib.sh and bin/nri-cpupool.
#
# Setups, alternated (each round starts one setup later), BENCH_ROUNDS each:
#   a  plain pinning: exclusive-non-isolcpus, every isolation feature off,
#      keepHostOffIsolcpus too (what the kubelet's static policy gives)
#   b  nri-cpupool: exclusive-non-isolcpus with housekeeping: held,
#      irqIsolation: optOut, isolatedPartition: optOut (a partition where
#      the kernel has them, 6.7 and later), kernelWork's RPS and
#      workqueue masks held (what issue 42 added)
#   c  an isolcpus= CPU (the exclusive pool), every feature off,
#      keepHostOffIsolcpus too (what isolcpus= alone gives)
#   d  the same with the default config (reservedCPUs only)
#   e  b, and 0 written to the probe container's cgroup.pressure before
#      oslat begins (Linux 6.1 and later): whether turning PSI off for the
#      container's cgroup alone keeps PSI's averaging work off the held CPU
#      (its ancestors' groups and the root's still account); not in the
#      default BENCH_SETUPS
# Host load (test/vm/noise.sh): stress-ng CPU workers (flat out, under a
# CPU quota of a fifth of each CPU) and a memory worker, a 1 kHz timer
# stress-ng, in system.slice, and uncached 9p reads and writes; started
# once, and frozen (cgroup v2's freezer) while a setup's plugin, pod and
# probe start and while they are removed, thawed BENCH_SETTLE seconds
# before each window: under TCG a pod took minutes to start through the
# load, and those minutes were most of a round. The same processes run in
# every window, with the affinities and CPUs they had (an affinity the
# kernel reset, setup c's leak, is kept through a freeze). The virtio
# queue IRQs are steered to the probe's
# CPU once its container has it, before oslat begins (under b the plugin's
# rescan must move them off), as a NIC's queue IRQ lands anywhere on a
# node. Steered before the pod instead, to the CPU the pool gave first,
# they missed the probe when the allocator chose another CPU (setup b got
# CPU 5 in a run where a had 4).
# The probe: oslat (Debian's rt-tests) in a 1-CPU container on its CPU; the
# window: BENCH_WINDOW seconds of sched_switch on that CPU while it runs.
# The work items the probe CPU's kworkers ran, and who queued them, are
# traced in the same window (workqueue_execute_start, workqueue_queue_work).
#   BENCH_ROUNDS (3), BENCH_WINDOW (20 s), BENCH_SETUPS ("a b c d"),
#   BENCH_SETTLE (5 s: the load runs this long before each window; more
#   than b's IRQ rescan interval, 2 s)
# Prints one table (setup x figure, median and worst over the rounds) and
# the raw figures; BENCH_OUT (a directory on a share) keeps them.
set -uo pipefail
export E2E_WORK_PARENT=/run
source "$(dirname "$0")/../e2e/lib.sh"
# shellcheck source=test/vm/noise.sh
source "$(dirname "$0")/noise.sh"
# shellcheck source=test/vm/checks.sh
source "$(dirname "$0")/checks.sh"
# shellcheck source=test/vm/noise-check.sh
source "$(dirname "$0")/noise-check.sh"

if [ "${VM_SHAPE:-}" != prod ] || [ "${VM_SYSTEMD:-}" != 1 ] || [ "${VM_CGROUP:-}" != v2 ]; then
  die "run inside a VM of shape prod booted with --systemd on cgroup v2 (make bench-isolation)"
fi
need_root_linux
ROUNDS=${BENCH_ROUNDS:-3} WINDOW=${BENCH_WINDOW:-20} SETUPS=${BENCH_SETUPS:-a b c d} SETTLE=${BENCH_SETTLE:-5}
# The load's CPU workers flat out under a quota of 20 % of each CPU, not
# stress-ng's --cpu-load 20, which a freeze upsets (noise.sh says how).
NOISE_STRESS="--cpu 0 --vm 1 --vm-bytes 16M --vm-hang 1" NOISE_CPU_QUOTA=20
OUT=${BENCH_OUT:-/run/bench-isolation}
mkdir -p "$OUT"
RES=$OUT/results.txt NAMES=$OUT/names.txt
: > "$RES"; : > "$NAMES"; : > "$OUT/hist.txt"

finish() {
  local rc=$?
  noise_load_stop
  [ "$rc" -eq 0 ] || report
  teardown
  exit "$rc"
}
trap finish EXIT

declare -A POOL=([a]=exclusive-non-isolcpus [b]=exclusive-non-isolcpus [c]=exclusive [d]=exclusive [e]=exclusive-non-isolcpus)
declare -A DOC=(
  [a]="plain pinning (exclusive-non-isolcpus, features and keepHostOffIsolcpus off)"
  [b]="nri-cpupool (housekeeping: held, irqIsolation: optOut, isolatedPartition: optOut, kernelWork held)"
  [c]="isolcpus CPU (exclusive pool, features and keepHostOffIsolcpus off)"
  [d]="isolcpus CPU, default config"
  [e]="b with the probe container's cgroup.pressure 0"
)
conf() {
  local f=/run/bench-$1.yaml
  case $1 in
    a) printf 'reservedCPUs: "0-1"\nkeepHostOffIsolcpus: false\npools:\n  exclusive-non-isolcpus: {enabled: true, housekeeping: "off", irqIsolation: "off", isolatedPartition: "off"}\n' ;;
    b|e) printf 'reservedCPUs: "0-1"\npools:\n  exclusive-non-isolcpus: {enabled: true, housekeeping: held, irqIsolation: optOut, isolatedPartition: optOut}\nirq: {rescanInterval: 2s}\nkernelWork: {receivePacketSteering: held, workqueues: held}\n' ;;
    c) printf 'reservedCPUs: "0-1"\nkeepHostOffIsolcpus: false\npools:\n  exclusive: {housekeeping: "off", irqIsolation: "off", isolatedPartition: "off"}\n' ;;
    d) printf 'reservedCPUs: "0-1"\n' ;;
  esac > "$f"
  printf 'metricsAddress: "127.0.0.1:19464"\n' >> "$f"
  echo "$f"
}

virtio_irqs() { awk '/virtio/ && !/-config/ {id = $1; sub(":", "", id); if (id ~ /^[0-9]+$/) print id}' /proc/interrupts; }
steer_irqs() { local i; for i in $(virtio_irqs); do echo "$1" > "/proc/irq/$i/smp_affinity_list" 2>/dev/null; done; }
# irq_where WHEN CPU [counts]: where the steered virtio IRQs are at WHEN
# (IRQ:affinity/effective affinity, and with "counts" each one's count on
# CPU so far), to tell an IRQ taken on a held CPU before the plugin's
# rescan moved it from one taken after (the window's IRQ delta alone
# cannot). Without "counts" it forks nothing (bash's read), so that it
# can run right before the window without delaying it.
irq_where() {
  local i a e c line=""
  local -A oncpu=()
  if [ "${3:-}" = counts ]; then
    while read -r i c; do oncpu[$i]=$c; done < <(awk -v c="$2" '$1 ~ /^[0-9]+:$/ {i = $1; sub(":", "", i); print i, $(c + 2)}' /proc/interrupts)
  fi
  for i in $VIRTIO_IRQS; do
    a="?" e="?"
    read -r a < "/proc/irq/$i/smp_affinity_list" 2>/dev/null
    read -r e < "/proc/irq/$i/effective_affinity_list" 2>/dev/null
    line="$line $i:$a/$e${oncpu[$i]:+/${oncpu[$i]}}"
  done
  # And whether the probe's CPU is isolated from load balancing then (the
  # kernel's isolated CPUs, the probe's cgroup partition): in one 6.12
  # window of b the held CPU ran the balancing softirq (SCHED) 844 times,
  # as if its partition was not in force.
  local iso="?" part="?"
  { read -r iso < /sys/fs/cgroup/cpuset.cpus.isolated; } 2>/dev/null
  [ -z "${PROBE_PARTITION:-}" ] || { read -r part < "$PROBE_PARTITION"; } 2>/dev/null
  # The partition files say what cpuset asked for; whether the scheduler
  # acted on it is whether the CPU still has a scheduling domain (its
  # "domainN" lines in /proc/schedstat): load balancing, and its SCHED
  # softirq, run only on a CPU that has one.
  # CPU 0 (reserved, never isolated) is the control: it has domains.
  sched_domains "$2"; local dom=$DOMAINS
  sched_domains 0
  IRQ_WHERE="$IRQ_WHERE; $1 [$SECONDS s]$line isolated:${iso:-none} partition:$part domains:$dom (CPU 0: $DOMAINS)"
}

# sched_domains CPU: DOMAINS, how many scheduling domains CPU has (its
# "domainN" lines in /proc/schedstat; "?" without the file). No fork.
sched_domains() {
  local w rest in=no
  DOMAINS="?"
  [ -r /proc/schedstat ] || return 0
  DOMAINS=0
  while read -r w rest; do
    case $w in
      cpu"$1") in=yes ;;
      cpu*) [ "$in" = yes ] && break ;;
      domain*) [ "$in" = yes ] && DOMAINS=$((DOMAINS + 1)) ;;
    esac
  done < /proc/schedstat
}

# The scheduler softirq raised on the probe's CPU, with the kernel stack
# of each raise (irq:softirq_raise, vec 7, in an instance of its own with
# stack traces): in 6.12 windows of b the held CPU ran SCHED hundreds of
# times while it had no scheduling domain at the window's start and end,
# where its tick raises none; the stacks say what did (the tick's
# balancing, an idle-balance kick, ...). For the window exactly: its
# tracing goes on and off with noise_window's (NOISE_TRACE_ALSO). The probe cgroup's
# CFS throttling over the window is logged too: an idle-balance kick
# raises the softirq only on an idle CPU, and a CPU running oslat is idle
# only while its cgroup is throttled.
RAISE=$NOISE_TRACEFS/instances/nri-cpupool-sched-raise
sched_raise_start() {
  { [ -d "$RAISE" ] || mkdir "$RAISE"; } 2>/dev/null || return 0
  [ -e "$RAISE/events/irq/softirq_raise/enable" ] || return 0
  echo 0 > "$RAISE/tracing_on"
  echo > "$RAISE/trace"
  printf '%x\n' $((1 << $1)) > "$RAISE/tracing_cpumask"
  echo 2048 > "$RAISE/buffer_size_kb"
  echo 1 > "$RAISE/options/stacktrace"
  echo 'vec == 7' > "$RAISE/events/irq/softirq_raise/filter"
  echo 1 > "$RAISE/events/irq/softirq_raise/enable"
  # On and off with the window's own trace, not before and after it: oslat
  # stops as the window ends, and its CPU, idle then, is kicked all the
  # more (a background sleep of the window's length, until 2026-12-06,
  # stopped it the window's set-up time early).
  NOISE_TRACE_ALSO=$RAISE
}
# sched_raise_stop OUT: OUT.raise, the trace; prints the raises by the
# task they interrupted ("<idle>": the CPU was idle) and their first
# frames.
sched_raise_stop() {
  [ -e "$RAISE/events/irq/softirq_raise/enable" ] || { echo "no trace"; return 0; }
  echo 0 > "$RAISE/tracing_on"
  cat "$RAISE/trace" > "$1.raise"
  echo 0 > "$RAISE/events/irq/softirq_raise/enable"
  echo 0 > "$RAISE/events/irq/softirq_raise/filter"
  echo > "$RAISE/trace"
  awk '/softirq_raise:/ {n++; if (key != "") c[key]++; who = $1; sub(/-[0-9]+$/, "", who); key = "[" who "]"; f = 0; next}
       /^ => / && f < 4 {fn = $2; if (fn ~ /raise_softirq|^trace_event_raw/) next; key = key (f ? "<" : "") fn; f++; next}
       END {if (key != "") c[key]++; printf "%d raised:\n", n; for (k in c) print c[k], k}' "$1.raise" |
    { read -r head; echo "$head $(sort -rn | head -6 | awk '{printf "%s%s ×%d", (NR > 1 ? ", " : ""), $2, $1}')"; }
}

# load_where WHEN: where the host load may run at WHEN, to tell which step
# resets its affinities (setup c's leak, in some runs only): system.slice's
# cpuset.cpus.effective and the load's threads by Cpus_allowed_list, with
# the kernel's isolcpus CPUs.
load_where() {
  local procs p eff="?"
  { read -r eff < /sys/fs/cgroup/system.slice/cpuset.cpus.effective; } 2>/dev/null
  procs=$(cat /sys/fs/cgroup/system.slice/noise-{stress,timer,9p}.service/cgroup.procs 2>/dev/null)
  info "[$SECONDS s] load at $1: system.slice cpus.effective ${eff:-none}; the load's threads by allowed CPUs: $(
    for p in $procs; do cat /proc/"$p"/task/*/status 2>/dev/null; done | awk '/^Cpus_allowed_list/ {n[$2]++} END {for (c in n) printf "%s×%d ", c, n[c]}')(isolcpus: $(cat /sys/devices/system/cpu/isolated))"
}

# psi_where CGROUP: cgroup.pressure of CGROUP and of each ancestor below the
# root (the root has no such file: its PSI is /proc/pressure, on unless
# booted with psi=0).
psi_where() {
  local d=$1 v out=""
  while [ "$d" != /sys/fs/cgroup ] && [ "${d#/sys/fs/cgroup/}" != "$d" ]; do
    v="?"; { read -r v < "$d/cgroup.pressure"; } 2>/dev/null
    out="$out ${d#/sys/fs/cgroup/}:$v"
    d=${d%/*}
  done
  echo "${out# } root:$([ -r /proc/pressure/cpu ] && echo on || echo off)"
}

record() { echo "$1 $2 $3 $4" >> "$RES"; } # setup round figure value

one() {
  local s=$1 r=$2 pool=${POOL[$1]} pod ctr pid cpu win=$OUT/$1-$2
  say "[$SECONDS s] round $r, setup $s: ${DOC[$s]} ($(date -u +%T) UTC, the plugin log's clock)"
  noise_load_pause || die "the host load could not be frozen"
  load_where "the setup's start"
  start_plugin "$(conf "$s")"
  pod=$(run_pod "b$s$r" telco guaranteed "{\"pool.cpupool.dev\": \"$pool\"}") || die "run pod b$s$r"
  info "[$SECONDS s] plugin up, pod b$s$r up"
  load_where "the pod's start"
  # oslat begins when told (noise_probe_pid), after the slow crictl start,
  # and its run is ended with the window below (noise.sh says why).
  ctr=$(noise_probe_start "$pod" "b$s$r" probe $((WINDOW + 900))) || die "create the probe b$s$r"
  info "[$SECONDS s] the probe's container started"
  cpu=$(cpus_of "$ctr")
  PROBE_CG=$(cgroup_of "$ctr")
  PROBE_PARTITION="$PROBE_CG/cpuset.cpus.partition"
  if [ "$s" = e ]; then
    echo 0 > "$(cgroup_of "$ctr")/cgroup.pressure" || die "e: could not write 0 to the probe container's cgroup.pressure (Linux 6.1 and later)"
  fi
  info "PSI of the probe's cgroup and its ancestors (cgroup.pressure): $(psi_where "$(cgroup_of "$ctr")")"
  steer_irqs "$cpu"
  VIRTIO_IRQS=$(virtio_irqs) IRQ_WHERE=""
  irq_where steered "$cpu" counts
  pid=$(noise_probe_pid "$ctr" "b$s$r" probe) || { noise_probe_log "b$s$r" probe | tail -5; die "oslat did not start"; }
  info "[$SECONDS s] oslat measures on CPU $cpu (pid $pid)"
  irq_where thaw "$cpu" counts
  noise_load_resume || die "the host load could not be thawed"
  sleep "$SETTLE"
  info "[$SECONDS s] the load thawed ${SETTLE} s ago: the window"
  irq_where window "$cpu"
  local thr0 thr1
  thr0=$(grep -E '^(nr_throttled|throttled_usec) ' "$PROBE_CG/cpu.stat" 2>/dev/null | paste -sd' ')
  NOISE_TRACE_ALSO=""
  sched_raise_start "$cpu"
  noise_window "$cpu" "$WINDOW" "$win" "$pid" stop
  NOISE_TRACE_ALSO=""
  thr1=$(grep -E '^(nr_throttled|throttled_usec) ' "$PROBE_CG/cpu.stat" 2>/dev/null | paste -sd' ')
  SCHED_RAISED=$(sched_raise_stop "$win")
  info "the probe's cgroup's CFS throttling (cpu.stat; quota $(cat "$PROBE_CG/cpu.max" 2>/dev/null)): before the window ${thr0:-?}, after ${thr1:-?}"
  irq_where "window's end" "$cpu" counts
  info "SCHED softirq raised on CPU $cpu in the window, by the task interrupted and the raise's first kernel frames: $SCHED_RAISED"
  info "virtio IRQs (IRQ:affinity/effective/count on CPU $cpu; the kernel's isolated CPUs; the probe's cgroup partition)${IRQ_WHERE#;}"
  # Whether the load may run there at all: a count of 0 switches says
  # more next to it (c: the kernel's affinity reset let it; d: kept off).
  record "$s" "$r" loadallowed "$(noise_load_allowed "$cpu")"
  # noise_window ended oslat's run with the window (SIGINT: it prints its
  # summary), so that its maximum and histogram cover the window (its
  # "Duration" says how closely); its container sleeps on, holding the CPU
  # for the audit.
  noise_probe_stop "$pid" "b$s$r" probe "$win" || { tail -5 "$win.oslat"; die "oslat printed no summary after SIGINT"; }
  # The audit while the container still holds the CPU: what it says of it.
  "$REPO/bin/nri-cpupool" audit --config "/run/bench-$s.yaml" --state-file "$W/state/nri-cpupool.json" --sample 2s > "$win.audit" 2>&1
  record "$s" "$r" user "$(noise_count "$win" user)"
  record "$s" "$r" percpu "$(noise_count "$win" percpu)"
  record "$s" "$r" unbound "$(noise_count "$win" unbound)"
  record "$s" "$r" nvcsw "$(cat "$win.nvcsw")"
  record "$s" "$r" devirq "$(awk '$1 ~ /^[0-9]+:/ {n += $2} END {print n + 0}' "$win.irqs")"
  record "$s" "$r" lapic "$(awk '$1 !~ /^[0-9]+:/ {n += $2} END {print n + 0}' "$win.irqs")"
  record "$s" "$r" softirq "$(awk '{n += $2} END {print n + 0}' "$win.softirqs")"
  record "$s" "$r" lost "$(cat "$win.lost")"
  record "$s" "$r" work "$(awk '{n += $2} END {print n + 0}' "$win.work")"
  local k
  for k in user percpu unbound; do awk -v s="$s" -v k="$k" '$1 == k {print s, k, $2, $3}' "$win.tasks" >> "$NAMES"; done
  {
    awk -v s="$s" '{print s, "irq", $1, $2}' "$win.irqs"
    awk -v s="$s" '{print s, "softirq", $1, $2}' "$win.softirqs"
    awk -v s="$s" '{print s, "work", $1, $2}' "$win.work"
    awk -v s="$s" '{print s, "queued", $1 "@" $2 "(" $3 ",CPU" $4 ")", $5}' "$win.queued"
  } >> "$NAMES"
  info "CPU $cpu: user $(noise_names "$win" user), per-CPU kthreads $(noise_names "$win" percpu), unbound $(noise_names "$win" unbound); probe preempted $(cat "$win.nvcsw"); IRQs $(paste -sd' ' "$win.irqs"); softirqs $(paste -sd' ' "$win.softirqs")"
  info "work items run on CPU $cpu: $(noise_works "$win" 10); queued for it: $(noise_queuers "$win" 10)"
  info "audit: $(grep -E "^ *CPU $cpu " "$win.audit" | head -1); $(grep -A12 -E "^ *CPU $cpu " "$win.audit" | grep -m1 'kernel: domain-isolated' | sed 's/^ *//')"
  record "$s" "$r" oslatmax "$(noise_oslat "$win" max)"
  record "$s" "$r" oslatge10 "$(noise_oslat "$win" ge10)"
  echo "$s $(noise_oslat "$win" hist)" >> "$OUT/hist.txt"
  info "oslat: maximum $(noise_oslat "$win" max) us, average $(noise_oslat "$win" avg) us over $(noise_oslat "$win" duration) s; $(noise_oslat "$win" hist)"
  # Removed with the load frozen, as it was started.
  noise_load_pause || die "the host load could not be frozen"
  remove_pods "$pod"
  load_where "the pod's removal"
  stop_plugin -TERM
  load_where "the plugin's stop"
  plugin_where
}

# plugin_where: what this setup's plugin said of IRQs and partitions, to
# tell why an IRQ stayed on the probe's CPU or a
# partition was not in force when the lines above show one (in a 6.12
# window of b the virtio IRQs the harness steered there were still there
# at the window's start, 125 s after the thaw, with a 2 s rescan).
plugin_where() {
  local from
  from=$(grep -n '^---- start_plugin' "$W/plugin.log" | tail -1 | cut -d: -f1)
  tail -n +"${from:-1}" "$W/plugin.log" | grep -Ei 'irq|partition' > "$W/plugin-where.log"
  info "the plugin's log on IRQs and partitions since its start ($(wc -l < "$W/plugin-where.log") lines; the first and last 20):"
  { head -20 "$W/plugin-where.log"; [ "$(wc -l < "$W/plugin-where.log")" -le 40 ] || echo "..."; tail -n +21 "$W/plugin-where.log" | tail -20; } | cut -c1-400 | sed 's/^/      /'
}

# median and worst over the rounds of each setup x figure.
table() {
  local figs="user loadallowed percpu unbound nvcsw work devirq lapic softirq oslatmax oslatge10 lost" f s
  echo
  echo "Noise on the probe's CPU in a ${WINDOW} s window (the load thawed ${SETTLE} s before), $ROUNDS rounds; median (worst); Linux $(uname -r), $(systemctl --version | head -1), shape $VM_SHAPE, ${VM_ACCEL:-?}, $(date -u +%F)"
  printf '| %s ' setup "user-task switches" "load threads allowed there" "per-CPU kthread switches" "unbound kthread switches" "probe preempted" \
    "work items run" "device IRQs" "local timer/IPIs" softirqs "oslat max (us)" "oslat samples >= 10 us" "trace lost"; echo "|"
  printf '|---'; for _ in $figs; do printf '|---'; done; echo "|"
  for s in $SETUPS; do
    printf '| %s ' "$s: ${DOC[$s]}"
    for f in $figs; do
      awk -v s="$s" -v f="$f" '$1 == s && $3 == f {print $4}' "$RES" | sort -n |
        awk '{v[NR] = $1} END {if (!NR) {printf "| - "; exit}; m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "| %s (%s) ", m, v[NR]}'
    done
    echo "|"
  done
  echo
  echo "Who, summed over the rounds (switches to each; IRQs and softirqs by source):"
  for s in $SETUPS; do
    echo "  $s: ${DOC[$s]}"
    for k in user percpu unbound irq softirq work queued; do
      printf '    %-8s %s\n' "$k" "$(awk -v s="$s" -v k="$k" '$1 == s && $2 == k {n[$3] += $4} END {for (c in n) print n[c], c}' "$NAMES" | sort -rn | head -8 | awk '{printf "%s%s×%d", (NR > 1 ? ", " : ""), $2, $1}')"
    done
    printf '    %-8s %s\n' oslat "$(awk -v s="$s" '$1 == s {for (i = 2; i <= NF; i++) {split($i, kv, ":"); n[kv[1]] += kv[2]; if (!(kv[1] in o)) o[kv[1]] = i}} END {for (k in o) printf "%d %s:%.0f\n", o[k], k, n[k]}' "$OUT/hist.txt" | sort -n | cut -d' ' -f2- | paste -sd' ') (oslat's histogram, samples by latency)"
  done
}

noise_tracefs || die "no tracefs with sched_switch in this kernel"
[ -x "$REPO/bin/nri-cpupool" ] || die "build first: make build"
say "bench-isolation: Linux $(uname -r), $ROUNDS rounds of setups $SETUPS, ${WINDOW} s windows"
info "kernel command line: $(cat /proc/cmdline); PSI: $([ -r /proc/pressure/cpu ] && echo on || echo off)"
start_runtime
noise_load_start || die "the host load did not start"
info "host load: stress-ng $NOISE_STRESS (CPUQuota $((NOISE_CPU_QUOTA * $(getconf _NPROCESSORS_ONLN)))%); stress-ng $NOISE_TIMER; the 9p loop; in system.slice; frozen but for ${SETTLE} s before each window and the window"
sleep 2
load_where "the load's start"
n=0
read -ra ALL <<<"$SETUPS"
for r in $(seq 1 "$ROUNDS"); do
  # Alternated: round r starts r-1 setups later.
  for ((i = 0; i < ${#ALL[@]}; i++)); do
    one "${ALL[$(( (i + r - 1) % ${#ALL[@]} ))]}" "$r"; n=$((n + 1))
  done
done
table | tee "$OUT/table.md"
# The raw figures (setup round figure value): BENCH_OUT is in the VM's
# own /run unless a writable share holds it, so the output keeps them.
sed 's/^/raw: /' "$RES"
echo "bench-isolation: $n windows in $SECONDS s"
# The VM suite's short checks (test/vm/isolation.sh runs them without
# systemd), here under systemd too; BENCH_CHECK=0 leaves them out.
if [ "${BENCH_CHECK:-1}" = 1 ]; then
  noise_load_stop
  say "[$SECONDS s] the VM suite's noise checks, under systemd"
  noise_check_held 10
  noise_check_default 10
  echo "noise check: $PASSED passed, $FAILED failed"
fi
