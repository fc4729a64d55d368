# The scheduler's sched_switch events on one CPU, from tracefs, for the VM
# checks that count which tasks ran on a held CPU (issue 42): a count of
# switches, not a time, so that it carries from TCG to a real node. Only
# inside a VM: it turns tracing on for the whole kernel.
#   sched_switch_record CPU SECONDS OUT   traces CPU for SECONDS into OUT
#   sched_switch_foreign OUT EXCLUDE...   the user-space switches of OUT
# shellcheck shell=bash

# sched_switch_tracefs: where tracefs is, mounted if it is not (a VM booted
# without systemd does not mount it).
sched_switch_tracefs() {
  local d
  for d in /sys/kernel/tracing /sys/kernel/debug/tracing; do
    [ -e "$d/trace" ] && { echo "$d"; return 0; }
  done
  mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null && [ -e /sys/kernel/tracing/trace ] && { echo /sys/kernel/tracing; return 0; }
  return 1
}

# sched_switch_record CPU SECONDS OUT: records the sched_switch events of
# CPU alone during SECONDS into OUT (its per-CPU trace). Fails, saying why,
# when tracefs is missing or the ring buffer overran (events lost: a count
# would be too low).
sched_switch_record() {
  local cpu=$1 secs=$2 out=$3 t mask overrun
  t=$(sched_switch_tracefs) || { echo "no tracefs" >&2; return 1; }
  echo 0 > "$t/tracing_on"
  mask=$(cat "$t/tracing_cpumask")
  printf '%x\n' $((1 << cpu)) > "$t/tracing_cpumask"
  echo 4096 > "$t/per_cpu/cpu$cpu/buffer_size_kb"
  echo > "$t/trace"
  echo 1 > "$t/events/sched/sched_switch/enable"
  echo 1 > "$t/tracing_on"
  sleep "$secs"
  echo 0 > "$t/tracing_on"
  echo 0 > "$t/events/sched/sched_switch/enable"
  cat "$t/per_cpu/cpu$cpu/trace" > "$out"
  overrun=$(awk '/^overrun:/ {print $2}' "$t/per_cpu/cpu$cpu/stats")
  echo "$mask" > "$t/tracing_cpumask"
  echo > "$t/trace"
  [ "${overrun:-0}" = 0 ] || { echo "the trace buffer of CPU $cpu overran ($overrun events lost)" >&2; return 1; }
}

# sched_switch_kernel PID COMM: whether the task is a kernel thread
# (PF_KTHREAD in its stat's flags); for a task gone since, by its name.
sched_switch_kernel() {
  local flags
  flags=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | awk '{print $7}')
  if [ -n "$flags" ]; then
    [ $((flags & 0x00200000)) -ne 0 ]
    return
  fi
  case "$2" in kworker/* | ksoftirqd/* | migration/* | rcu* | cpuhp/* | kthreadd | irq/* | idle_inject/* | watchdog/*) return 0 ;; esac
  return 1
}

# sched_switch_foreign OUT EXCLUDE...: the switches in OUT to user-space
# tasks other than the EXCLUDE task ids (the probe's threads), as
# "COUNT[ comm×n ...]": the idle task and kernel threads are not counted.
sched_switch_foreign() {
  local out=$1 pid comm n=0 names="" seen=" ${*:2} "
  # kernel: each task's kind, read once (a read per switch is seconds
  # under emulation when the load is switched in hundreds of times).
  declare -A by=() kernel=()
  # A file, not a process substitution: a VM without systemd has no /dev/fd.
  sed -n 's/.*==> next_comm=\(.*\) next_pid=\([0-9]*\) next_prio=.*/\2 \1/p' "$out" > "$out.in"
  while read -r pid comm; do
    [ "$pid" = 0 ] && continue
    case "$seen" in *" $pid "*) continue ;; esac
    if [ -z "${kernel[$pid]:-}" ]; then
      kernel[$pid]=no
      sched_switch_kernel "$pid" "$comm" && kernel[$pid]=yes
    fi
    [ "${kernel[$pid]}" = yes ] && continue
    n=$((n + 1))
    by[$comm]=$((${by[$comm]:-0} + 1))
  done < "$out.in"
  for comm in "${!by[@]}"; do names="$names $comm×${by[$comm]}"; done
  echo "$n$names"
}

# sched_switch_seen OUT PID: whether OUT has a switch to PID (the check's
# own control task: the trace is live and on the right CPU).
sched_switch_seen() {
  if grep -q "==> next_comm=.* next_pid=$2 next_prio=" "$1"; then echo yes; else echo no; fi
}
