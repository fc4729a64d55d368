# What runs on one CPU while a probe runs there (issue 42): the pieces the
# noise harness (test/vm/bench-isolation.sh, `make bench-isolation`) and
# the VM suite's short check (test/vm/noise-check.sh) share. Sourced INSIDE
# a VM of test/vm (the real kernel's tracefs, /proc/interrupts), after
# test/e2e/lib.sh.
#
#   noise_load_start / noise_load_stop   the host load, the same in every
#       setup: stress-ng CPU and memory workers on every CPU, a timer-heavy
#       stress-ng, and uncached 9p reads and writes (virtio IRQs), all in
#       system.slice (systemd-run with systemd as PID 1; else a leaf cgroup
#       below a top-level system.slice)
#   noise_load_pause / noise_load_resume   freezes the load's cgroups and
#       thaws them (cgroup v2's freezer): the same processes, with the
#       affinities and CPUs they had, go on where they stopped
#   noise_probe_start POD PODNAME CTR SECONDS   an oslat container (Debian's
#       rt-tests, in the image test/vm/e2e.sh builds) on the container's CPU
#   noise_probe_pid CTR PODNAME NAME   tells oslat to begin, and prints
#       its PID once it measures
#   noise_probe_stop PID PODNAME CTR OUT   ends oslat's run (SIGINT) and
#       writes its summary to OUT.oslat; noise_oslat OUT FIELD reads it
#   noise_window CPU SECONDS OUT PID [stop]   traces sched_switch on CPU for SECONDS and
#       writes OUT.tasks (kind name count), OUT.irqs, OUT.softirqs (source
#       delta), OUT.nvcsw (the probe thread's involuntary switches), and
#       the work items the CPU's kworkers ran (OUT.work: function count)
#       and who queued work for that CPU (OUT.queued: function workqueue
#       queuer queuer's-CPU count)
# shellcheck shell=bash

NOISE_TRACEFS=/sys/kernel/tracing
NOISE_INSTANCE=$NOISE_TRACEFS/instances/nri-cpupool-noise
# A second instance for the work queued for the probe's CPU: queueing is
# traced on the CPU that queues (often another one), so this instance
# traces every CPU and keeps the events whose target is the probe's CPU.
NOISE_WQ_INSTANCE=$NOISE_TRACEFS/instances/nri-cpupool-noise-wq
# The load's processes when there is no systemd (their PIDs), and the file
# the 9p loop writes on the VM's read-write share.
NOISE_LOAD_PIDS=""
NOISE_TRAFFIC=/run/vm/noise-traffic
# stress-ng's arguments: a worker per online CPU (--cpu 0) at a fifth of
# its time, a memory worker that rests a second between passes; and a
# 1 kHz POSIX timer with its signal. Under TCG every vCPU is emulated by
# one host thread: at half load and a memory worker that never rests (the
# issue's first measurement) a pod took minutes to start on a shared
# 2-core host.
NOISE_STRESS=${NOISE_STRESS:---cpu 0 --cpu-load 20 --vm 1 --vm-bytes 16M --vm-hang 1}
# NOISE_CPU_QUOTA (percent of one CPU, per online CPU; unset: none): a CPU
# quota on the stress-ng workers' unit (cpu.max). The noise harness, which
# freezes the load while a setup's pod starts (noise_load_pause), runs its
# CPU workers flat out under this quota instead of --cpu-load: stress-ng's
# --cpu-load sleeps after each busy slice for a time computed from how long
# the slice took, so a worker frozen in its slice sleeps four times as long
# as the freeze (minutes, through the window) and one frozen in its sleep
# runs flat out until it has made up the time. A quota has no memory of
# the freeze: 20 per CPU is the same fifth of each CPU on average.
NOISE_CPU_QUOTA=${NOISE_CPU_QUOTA:-}
NOISE_TIMER=${NOISE_TIMER:---timer 1 --timer-freq 1000}
NOISE_9P_LOOP="while :; do dd if=/dev/zero of=$NOISE_TRAFFIC bs=64k count=8 2>/dev/null; cat $NOISE_TRAFFIC >/dev/null; sleep 0.1; done"

# noise_tracefs: tracefs mounted (systemd's sys-kernel-tracing.mount is
# masked in test/vm) and a private instance, so that nothing else's tracing
# is disturbed.
noise_tracefs() {
  [ -d "$NOISE_TRACEFS/instances" ] || mount -t tracefs nodev "$NOISE_TRACEFS" || return 1
  [ -d "$NOISE_INSTANCE" ] || mkdir "$NOISE_INSTANCE" || return 1
  [ -d "$NOISE_WQ_INSTANCE" ] || mkdir "$NOISE_WQ_INSTANCE" || return 1
  [ -e "$NOISE_INSTANCE/events/sched/sched_switch/enable" ]
}

# noise_wq_events: whether this kernel has the workqueue trace events.
noise_wq_events() {
  [ -e "$NOISE_INSTANCE/events/workqueue/workqueue_execute_start/enable" ] &&
    [ -e "$NOISE_WQ_INSTANCE/events/workqueue/workqueue_queue_work/enable" ]
}

# noise_spawn NAME QUOTA COMMAND...: COMMAND in system.slice, as a host
# service; QUOTA, when not empty, its CPU quota in percent of one CPU.
noise_spawn() {
  local name=$1 quota=$2
  shift 2
  if [ "${VM_SYSTEMD:-}" = 1 ]; then
    systemd-run -q --collect --unit="noise-$name" --slice=system.slice ${quota:+-p CPUQuota="$quota%"} "$@"
    return
  fi
  # No systemd: a leaf below a top-level system.slice (a v2 inner cgroup
  # holds no process), where housekeeping finds it as a top-level cgroup.
  local cg=/sys/fs/cgroup/system.slice/noise-$name
  mkdir -p "$cg" || return 1
  if [ -n "$quota" ]; then
    { echo +cpu > /sys/fs/cgroup/system.slice/cgroup.subtree_control &&
      echo "$((quota * 1000)) 100000" > "$cg/cpu.max"; } ||
      { echo "noise: no CPU quota for noise-$name (the cpu controller in system.slice)" >&2; return 1; }
  fi
  ( echo "$BASHPID" > "$cg/cgroup.procs" && exec "$@" ) >/dev/null 2>&1 &
  NOISE_LOAD_PIDS="$NOISE_LOAD_PIDS $!"
}

# noise_load_cgroups: the load's cgroup directories.
noise_load_cgroups() {
  local n
  for n in stress timer 9p; do
    if [ "${VM_SYSTEMD:-}" = 1 ]; then echo "/sys/fs/cgroup/system.slice/noise-$n.service"; else echo "/sys/fs/cgroup/system.slice/noise-$n"; fi
  done
}

# noise_load_freeze 1|0: freezes or thaws the load's cgroups (their
# cgroup.freeze, which is what systemctl freeze writes too) and waits (5 s
# at most) until the kernel says they are (cgroup.events). Without
# systemctl, so that the step does not wait on PID 1 (the time from a thaw
# to the window was 15 to 300 s under TCG either way: whatever runs after
# a thaw runs among the load). systemd does not know the units frozen, so
# noise_load_stop thaws them before it stops them.
noise_load_freeze() {
  local want=$1 cg
  for cg in $(noise_load_cgroups); do echo "$want" > "$cg/cgroup.freeze" || return 1; done
  for cg in $(noise_load_cgroups); do
    for _ in $(seq 1 50); do grep -q "^frozen $want\$" "$cg/cgroup.events" && break; sleep 0.1; done
    grep -q "^frozen $want\$" "$cg/cgroup.events" || { echo "noise: $cg not $( [ "$want" = 1 ] && echo frozen || echo thawed ) in 5 s" >&2; return 1; }
  done
}
noise_load_pause() { noise_load_freeze 1; }
noise_load_resume() { noise_load_freeze 0; }

noise_load_start() {
  command -v stress-ng >/dev/null || { echo "noise: no stress-ng (Debian's stress-ng on the host)" >&2; return 1; }
  local quota=""
  # Per online CPU, as --cpu 0 starts a worker per online CPU: not nproc,
  # which counts the CPUs this shell may use (isolcpus= ones left out).
  [ -z "$NOISE_CPU_QUOTA" ] || quota=$((NOISE_CPU_QUOTA * $(getconf _NPROCESSORS_ONLN)))
  # shellcheck disable=SC2086 # the argument lists
  noise_spawn stress "$quota" "$(command -v stress-ng)" $NOISE_STRESS --quiet &&
    noise_spawn timer "" "$(command -v stress-ng)" $NOISE_TIMER --quiet &&
    noise_spawn 9p "" /bin/sh -c "$NOISE_9P_LOOP"
}

noise_load_stop() {
  # A frozen load is thawed first: its processes then end on SIGTERM.
  local cg
  for cg in $(noise_load_cgroups); do
    if grep -q '^frozen 1$' "$cg/cgroup.events" 2>/dev/null; then noise_load_resume; break; fi
  done
  if [ "${VM_SYSTEMD:-}" = 1 ]; then
    systemctl stop noise-stress.service noise-timer.service noise-9p.service 2>/dev/null
  else
    local p
    # shellcheck disable=SC2086
    for p in $NOISE_LOAD_PIDS; do kill "$p" 2>/dev/null; done
    # shellcheck disable=SC2086
    for p in $NOISE_LOAD_PIDS; do wait_exit "$p" 100 || kill -9 "$p" 2>/dev/null; done
    NOISE_LOAD_PIDS=""
    for p in stress timer 9p; do
      local cg=/sys/fs/cgroup/system.slice/noise-$p
      # stress-ng's workers end a moment after their parent.
      [ -d "$cg" ] || continue
      for _ in $(seq 1 50); do [ -s "$cg/cgroup.procs" ] || break; sleep 0.1; done
      xargs -r kill -9 < "$cg/cgroup.procs" 2>/dev/null
      rmdir "$cg" 2>/dev/null
    done
    rmdir /sys/fs/cgroup/system.slice 2>/dev/null
  fi
  rm -f "$NOISE_TRAFFIC"
  return 0
}

# noise_probe_start POD PODNAME CTR SECONDS: creates and starts an oslat
# container in POD that asks 1 CPU; prints the container id. oslat does
# not begin until noise_probe_pid tells it to, and SECONDS is only a
# bound: noise_probe_stop ends its run when the window ends, so that
# oslat's figures cover the window. Under TCG crictl start returned more
# than a minute after the container's process began, and oslat took 44 to
# 160 s to begin measuring: a probe that began on its own had measured for
# minutes (329 s in a 10 s window's run) before the window. It runs on
# the container's CPU (its main thread too: the container's only CPU), as
# the shell's child, not its PID 1, and the shell sleeps after it: the
# container keeps its CPU (for an audit after the window) once oslat has
# printed its summary. The image's stop signal is SIGKILL (tools/mkimage),
# which ends oslat without its summary: the summary needs SIGINT, SIGTERM
# or SIGALRM (rt-tests' oslat.c sets all three to end the run and print
# it). A terminal (tty) makes its output line-buffered, so that its "Test
# starts..." is in the log as it begins measuring, not at its exit. oslat
# wants to lock its memory and may raise its priority: IPC_LOCK and
# SYS_NICE, as OpenShift's latency tests give it.
noise_probe_start() {
  local pod=$1 podname=$2 name=$3 secs=$4 id
  cat > "$W/ctr-$podname-$name.json" <<JSON
{"metadata": {"name": "$name", "attempt": 0}, "image": {"image": "$IMAGE"},
 "command": ["/bin/sh", "-c", "read -r c < /sys/fs/cgroup/cpuset.cpus.effective && until [ -e /go ]; do sleep 1; done && /bin/oslat -D $secs -c \$c -C \$c; exec /bin/sleep inf"],
 "log_path": "$name.0.log", "tty": true,
 "linux": {"resources": {"cpu_shares": 1024, "cpu_quota": 100000, "cpu_period": 100000},
           "security_context": {"capabilities": {"add_capabilities": ["IPC_LOCK", "SYS_NICE"]}}}}
JSON
  id=$(crictl create "$pod" "$W/ctr-$podname-$name.json" "$W/pod-$podname.json") || return 1
  crictl start "$id" >/dev/null || return 1
  echo "$id"
}

# noise_probe_log PODNAME CTR: the container's output (CRI log lines less
# their time, stream and tag, and the terminal's carriage returns).
noise_probe_log() { cut -d' ' -f4- "$W/logs/$1/$2.0.log" 2>/dev/null | tr -d '\r'; }

# noise_probe_pid CTR PODNAME NAME: tells the probe's shell to begin oslat
# (/go in its root), waits (NOISE_PROBE_WAIT, 300 s, at most) until oslat
# says "Test starts..." (its one second of pre-heat is over and its worker
# measures) and prints oslat's PID, the shell's child.
noise_probe_pid() {
  local start=$SECONDS end=$((SECONDS + ${NOISE_PROBE_WAIT:-300})) init="" p kids
  while [ "$SECONDS" -lt "$end" ]; do
    init=$(crictl inspect -o go-template --template '{{.info.pid}}' "$1" 2>/dev/null)
    [ -n "$init" ] && [ "$init" != 0 ] && break
    sleep 1
  done
  if ! { [ -n "$init" ] && : > "/proc/$init/root/go"; }; then
    echo "noise: the probe's shell (the runtime's PID ${init:-none}) could not be told to begin" >&2
    return 1
  fi
  while [ "$SECONDS" -lt "$end" ]; do
    if noise_probe_log "$2" "$3" | grep -q '^Test starts'; then
      kids=$(cat /proc/"$init"/task/*/children 2>/dev/null)
      for p in $kids; do
        [ "$(cat "/proc/$p/comm" 2>/dev/null)" = oslat ] || continue
        echo "noise: oslat measures $((SECONDS - start)) s after it was told to begin" >&2
        echo "$p"
        return
      done
    fi
    sleep 0.2
  done
  echo "noise: oslat did not begin measuring in $((SECONDS - start)) s; the runtime's PID $init: $(cat "/proc/$init/comm" 2>/dev/null || echo gone), its children: $(cat /proc/"$init"/task/*/children 2>/dev/null); the log's last lines: $(noise_probe_log "$2" "$3" | tail -3 | paste -sd'|')" >&2
  return 1
}

# noise_probe_stop PID PODNAME CTR OUT: ends oslat's run with SIGINT
# (oslat then stops its workers and prints its summary, as at the end of
# its -D) and writes the container's output to OUT.oslat once the summary
# is there (NOISE_STOP_WAIT, 60 s, at most: the runtime copies the output
# after the process ends). Returns 1 when no summary came.
noise_probe_stop() {
  local pid=$1 end=$((SECONDS + ${NOISE_STOP_WAIT:-60}))
  kill -INT "$pid" 2>/dev/null
  while [ "$SECONDS" -lt "$end" ]; do
    noise_probe_log "$2" "$3" > "$4.oslat"
    ! running "$pid" && grep -q 'Maximum:' "$4.oslat" && return 0
    sleep 0.5
  done
  return 1
}

# noise_oslat OUT FIELD: from oslat's summary in OUT.oslat: "max", "avg",
# "duration" (seconds measured), "ge10" (samples of 10 us and more: the
# histogram's buckets 010 up, the last of which holds every longer one),
# or "hist" (the histogram as "1-9us:N 10-31us:N >=32us:N").
noise_oslat() {
  awk -v f="$2" '
    /^ *Maximum:/ {max = $2} /^ *Average:/ {avg = $2} /^ *Duration:/ {dur = $2}
    /^ *[0-9]+ \(us\):/ {b = $1 + 0; n = $3 + 0; if (b < 10) lo += n; else if (b < 32) mid += n; else hi += n}
    END {
      if (max == "") exit 1
      if (f == "max") print max; else if (f == "avg") print avg; else if (f == "duration") print dur
      else if (f == "ge10") printf "%.0f\n", mid + hi
      else if (f == "hist") printf "1-9us:%.0f 10-31us:%.0f >=32us:%.0f\n", lo, mid, hi
    }' "$1.oslat"
}

# noise_irq_snapshot CPU: "source count" on CPU, one line per /proc/interrupts
# row (a device IRQ as "N:name", the architecture's as their short name).
noise_irq_snapshot() {
  awk -v c="$1" 'NR > 1 {
    id = $1; sub(":", "", id); n = $(c + 2); name = id
    if (id ~ /^[0-9]+$/) { name = id ":" $NF }
    if (n ~ /^[0-9]+$/) print name, n
  }' /proc/interrupts
}
noise_softirq_snapshot() { awk -v c="$1" 'NR > 1 {id = $1; sub(":", "", id); print id, $(c + 2)}' /proc/softirqs; }
# noise_delta BEFORE AFTER: "source delta" for the sources that fired.
noise_delta() {
  awk 'NR == FNR {b[$1] = $2; next} {d = $2 - b[$1]; if (d > 0) print $1, d}' "$1" "$2"
}

# noise_nvcsw PID: the involuntary context switches of PID's threads but
# the main one (oslat's workers; its main thread sleeps).
noise_nvcsw() {
  local t n=0
  for t in /proc/"$1"/task/*; do
    [ "${t##*/}" = "$1" ] && continue
    n=$((n + $(awk '/^nonvoluntary_ctxt_switches/ {print $2}' "$t/status" 2>/dev/null || echo 0)))
  done
  echo "$n"
}

# noise_kind PID COMM: user, percpu (a kernel thread bound to one CPU) or
# unbound (one that may run on several). A task gone by now is told by its
# name: kernel threads have theirs from the kernel (kworker/4:1,
# ksoftirqd/4, kworker/u16:2).
noise_kind() {
  local rest flags allowed
  if rest=$(cat "/proc/$1/stat" 2>/dev/null); then
    rest=${rest##*) }
    flags=$(echo "$rest" | awk '{print $7}')
    if (( flags & 0x00200000 )); then # PF_KTHREAD
      allowed=$(awk '/^Cpus_allowed_list/ {print $2}' "/proc/$1/status" 2>/dev/null)
      case "$allowed" in *[,-]*) echo unbound ;; *) echo percpu ;; esac
    else
      echo user
    fi
    return
  fi
  case "$2" in
    kworker/u*|kworker/R-*) echo unbound ;;
    kworker/[0-9]*|ksoftirqd/*|migration/*|rcuc/*|cpuhp/*|idle_inject/*|irq_work/*) echo percpu ;;
    *) echo user ;;
  esac
}

# noise_window CPU SECONDS OUT PROBE_PID [stop]: the measurement. Every task the
# scheduler switched to on CPU (sched_switch's next_pid; the idle task and
# the probe's threads aside), with how often, by kind; the IRQ and softirq
# deltas on CPU; the probe's involuntary switches; the work items run on
# CPU (workqueue_execute_start, by function) and those queued for it from
# any CPU (workqueue_queue_work whose target is CPU, by function,
# workqueue, and the task and CPU that queued them), which say what a
# kworker/CPU:N switch was for. OUT.lost: events the ring buffers dropped
# (0, or the counts are low). "stop": SIGINT to the probe as the window
# ends. NOISE_TRACE_ALSO: more tracefs instances (directories) whose
# tracing is on exactly while the window's is.
noise_window() {
  local cpu=$1 secs=$2 out=$3 probe=$4 t=$NOISE_INSTANCE q=$NOISE_WQ_INSTANCE wq=no nv0
  noise_wq_events && wq=yes
  echo 0 > "$t/tracing_on"
  echo 0 > "$q/tracing_on"
  echo > "$t/trace"
  echo > "$q/trace"
  printf '%x\n' $((1 << cpu)) > "$t/tracing_cpumask"
  echo 4096 > "$t/buffer_size_kb"
  echo 1 > "$t/events/sched/sched_switch/enable"
  if [ "$wq" = yes ]; then
    echo 1 > "$t/events/workqueue/workqueue_execute_start/enable"
    echo 1024 > "$q/buffer_size_kb"
    echo "cpu == $cpu" > "$q/events/workqueue/workqueue_queue_work/filter"
    echo 1 > "$q/events/workqueue/workqueue_queue_work/enable"
  fi
  noise_irq_snapshot "$cpu" > "$out.irq0"
  noise_softirq_snapshot "$cpu" > "$out.soft0"
  nv0=$(noise_nvcsw "$probe")
  # The probe's threads, taken before the window as well as after: under
  # TCG an oslat that was slow to start can reach its -D limit and exit
  # during the window, and its threads, gone by then, were counted as
  # foreign user tasks (the 6.12 isolation set once saw "oslat×12").
  local threads0
  threads0=$(find "/proc/$probe/task" -mindepth 1 -maxdepth 1 -printf '%f ' 2>/dev/null)
  local also
  for also in ${NOISE_TRACE_ALSO:-}; do echo 1 > "$also/tracing_on"; done
  echo 1 > "$q/tracing_on"
  echo 1 > "$t/tracing_on"
  sleep "$secs"
  echo 0 > "$t/tracing_on"
  echo 0 > "$q/tracing_on"
  for also in ${NOISE_TRACE_ALSO:-}; do echo 0 > "$also/tracing_on"; done
  # The counts end with the trace, before anything else runs and before
  # the probe is stopped: the CPU of a stopped oslat is idle, and an idle
  # CPU takes what a busy one does not (other CPUs' idle-balance kicks,
  # each a SCHED softirq); counted until after the SIGINT, as until
  # 2026-12-06, seconds of that were in the window's figures under TCG.
  noise_irq_snapshot "$cpu" > "$out.irq1"
  noise_softirq_snapshot "$cpu" > "$out.soft1"
  echo $(( $(noise_nvcsw "$probe") - nv0 )) > "$out.nvcsw"
  local threads1
  threads1=$(find "/proc/$probe/task" -mindepth 1 -maxdepth 1 -printf '%f ' 2>/dev/null)
  # With "stop", oslat's run ends here (SIGINT, noise_probe_stop reads its
  # summary): reading the trace below took 30 s under TCG, which oslat's
  # figures would cover too (41 s for a 10 s window).
  [ "${5:-}" != stop ] || kill -INT "$probe" 2>/dev/null
  cat "$t/trace" > "$out.trace"
  cat "$q/trace" > "$out.wqtrace"
  # Lost events: the probe CPU's buffer, and every CPU's of the queueing
  # instance.
  cat "$t/per_cpu/cpu$cpu/stats" "$q"/per_cpu/cpu*/stats | awk '/^overrun:/ {n += $2} END {print n + 0}' > "$out.lost"
  echo 0 > "$t/events/sched/sched_switch/enable"
  if [ "$wq" = yes ]; then
    echo 0 > "$t/events/workqueue/workqueue_execute_start/enable"
    echo 0 > "$q/events/workqueue/workqueue_queue_work/enable"
    echo 0 > "$q/events/workqueue/workqueue_queue_work/filter"
  fi
  echo > "$t/trace"
  echo > "$q/trace"
  noise_work "$out"
  noise_delta "$out.irq0" "$out.irq1" > "$out.irqs"
  noise_delta "$out.soft0" "$out.soft1" > "$out.softirqs"
  local skip
  skip=" 0 $threads0 $threads1"
  # "pid comm count" per task switched to, then its kind.
  awk -v skip="$skip" '/sched_switch:/ {
      s = $0; sub(/.*==> next_comm=/, "", s)
      pid = s; sub(/ next_pid=.*/, "", s); sub(/.* next_pid=/, "", pid); sub(/ .*/, "", pid)
      gsub(/ /, "_", s)
      if (index(skip, " " pid " ")) next
      n[pid] += 1; comm[pid] = s
    } END {for (p in n) print p, comm[p], n[p]}' "$out.trace" |
    while read -r pid comm n; do echo "$(noise_kind "$pid" "$comm") $comm $n"; done > "$out.tasks"
}

# noise_work OUT: OUT.work ("function(worker) count": the work items run
# on the probe's CPU, from workqueue_execute_start's "function NAME", and
# the kworker that ran each: kworker/4:2 is the CPU's own pool,
# kworker/u34:1 an unbound one that ran there) and
# OUT.queued ("function workqueue queuer cpu count": who queued work for
# it, from workqueue_queue_work's fields and the event's task and CPU; a
# kworker's name keeps its number, kworker/4:2, which says whose it is).
noise_work() {
  awk '/workqueue_execute_start:/ {
      f = $0; sub(/.*function /, "", f); sub(/ .*/, "", f)
      who = $0; sub(/ +\[[0-9]+\].*/, "", who); sub(/^ +/, "", who); sub(/-[0-9]+$/, "", who); gsub(/ /, "_", who)
      n[f "(" who ")"]++
    } END {for (f in n) print f, n[f]}' "$1.trace" | sort -k2,2nr > "$1.work"
  awk '/workqueue_queue_work:/ {
      f = $0; sub(/.*function=/, "", f); sub(/ .*/, "", f)
      w = $0; sub(/.*workqueue=/, "", w); sub(/ .*/, "", w)
      who = $0; sub(/ +\[[0-9]+\].*/, "", who); sub(/^ +/, "", who); sub(/-[0-9]+$/, "", who); gsub(/ /, "_", who)
      c = $0; sub(/^[^[]*\[/, "", c); sub(/\].*/, "", c); c += 0
      n[f " " w " " who " " c]++
    } END {for (k in n) print k, n[k]}' "$1.wqtrace" | sort -k5,5nr > "$1.queued"
}

# noise_works OUT: "function×count" of the work items run, most first.
noise_works() {
  head -"${2:-6}" "$1.work" | awk '{printf "%s%s×%d", (NR > 1 ? ", " : ""), $1, $2}'
}
# noise_queuers OUT: "function@workqueue×count (queuer, CPU c)", most first.
noise_queuers() {
  head -"${2:-6}" "$1.queued" | awk '{printf "%s%s@%s×%d (%s, CPU %s)", (NR > 1 ? ", " : ""), $1, $2, $5, $3, $4}'
}

# noise_count OUT KIND: switches to tasks of KIND in OUT.tasks.
noise_count() { awk -v k="$2" '$1 == k {n += $3} END {print n + 0}' "$1.tasks"; }
# noise_names OUT KIND: "name×count" of KIND, most first.
noise_names() {
  awk -v k="$2" '$1 == k {n[$2] += $3} END {for (c in n) print n[c], c}' "$1.tasks" | sort -rn | head -"${3:-6}" |
    awk '{printf "%s%s×%d", (NR > 1 ? ", " : ""), $2, $1}'
}
