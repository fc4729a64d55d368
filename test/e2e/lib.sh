# Shared by test/e2e/demo.sh and test/e2e/tools.sh: installs the runtime pieces,
# starts a private containerd with NRI and nri-cpupool, drives pods with
# crictl, and tears everything down. What it relies on, each handled below
# where it is needed: runc v1.4.0 (older releases refuse go install); the
# process may lack CAP_SYS_RESOURCE, hence restrict_oom_score_adj = true;
# there is no registry, so tools/mkimage packs a busybox image that also
# serves as the pinned pause image; there is no CNI, so pods use the host
# network.
# shellcheck shell=bash

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CONTAINERD_VERSION=${CONTAINERD_VERSION:-v2.4.2}
RUNC_VERSION=${RUNC_VERSION:-v1.4.0}
CRICTL_VERSION=${CRICTL_VERSION:-v1.37.0}
TOOLS=${E2E_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/nri-cpupool-e2e/bin}
IMAGE=docker.io/library/busybox:e2e
CGROUP_ROOT=${CGROUP_ROOT:-/sys/fs/cgroup}
# One cgroup tree per run, so that runs on the same machine never share or remove
# each other's cgroups.
CGROUP_TOP=${CGROUP_TOP:-nri-cpupool-e2e-$$}
CGROUP_PARENT=$CGROUP_TOP/kubepods
W=""            # private work directory
CONTAINERD_PID=""
PLUGIN_PID=""

# shellcheck source=../say.sh
source "$REPO/test/say.sh"

need_root_linux() {
  [ "$(uname -s)" = Linux ] || die "needs Linux"
  [ "$(id -u)" = 0 ] || die "needs root (it starts containerd and writes cgroups)"
}

# install_tools puts containerd, its shim, ctr, runc and crictl in $TOOLS
# (built with go install once, then reused) and busybox-static on the host.
install_tools() {
  mkdir -p "$TOOLS"
  local want="$CONTAINERD_VERSION $RUNC_VERSION $CRICTL_VERSION"
  if [ "$(cat "$TOOLS/.versions" 2>/dev/null)" != "$want" ] || \
     ! [ -x "$TOOLS/containerd" ] || ! [ -x "$TOOLS/containerd-shim-runc-v2" ] || ! [ -x "$TOOLS/ctr" ] || \
     ! [ -x "$TOOLS/runc" ] || ! [ -x "$TOOLS/crictl" ]; then
    say "building containerd $CONTAINERD_VERSION, runc $RUNC_VERSION and crictl $CRICTL_VERSION with go install (first run only, a few minutes on 2 cores)"
    GOBIN=$TOOLS GOFLAGS=-buildvcs=false go install \
      "github.com/containerd/containerd/v2/cmd/containerd@$CONTAINERD_VERSION" \
      "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION" \
      "github.com/containerd/containerd/v2/cmd/ctr@$CONTAINERD_VERSION"
    info "containerd built"
    GOBIN=$TOOLS GOFLAGS=-buildvcs=false go install "github.com/opencontainers/runc@$RUNC_VERSION"
    info "runc built"
    GOBIN=$TOOLS GOFLAGS=-buildvcs=false go install "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION"
    info "crictl built"
    echo "$want" > "$TOOLS/.versions"
  fi
  # The image needs a static busybox (ldd fails on static binaries).
  if ! [ -x /bin/busybox ] || ldd /bin/busybox >/dev/null 2>&1; then
    say "installing busybox-static (apt-get)"
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq busybox-static >/dev/null
  fi
}

# start_runtime starts a containerd whose every path is inside $W, a new
# directory below E2E_WORK_PARENT (default /tmp; test/vm/systemd.sh uses
# /run, since the packaged unit's PrivateTmp= hides the /tmp it would find
# the NRI socket in).
start_runtime() {
  W=$(mktemp -d "${E2E_WORK_PARENT:-/tmp}/nri-cpupool-e2e.XXXXXX")
  mkdir -p "$W/nri-plugins" "$W/nri-conf" "$W/logs" "$W/cni/net.d"
  export PATH="$TOOLS:$PATH"
  export CONTAINER_RUNTIME_ENDPOINT="unix://$W/containerd.sock" IMAGE_SERVICE_ENDPOINT="unix://$W/containerd.sock"
  export CRI_CONFIG_FILE="$W/crictl.yaml"
  printf 'runtime-endpoint: %s\nimage-endpoint: %s\ntimeout: %s\n' "$CONTAINER_RUNTIME_ENDPOINT" "$IMAGE_SERVICE_ENDPOINT" \
    "${E2E_CRICTL_TIMEOUT:-30}" > "$CRI_CONFIG_FILE"
  cat > "$W/containerd.toml" <<TOML
version = 3
root = "$W/root"
state = "$W/state"
[grpc]
  address = "$W/containerd.sock"
[ttrpc]
  address = "$W/containerd.sock.ttrpc"
[plugins.'io.containerd.nri.v1.nri']
  disable = false
  socket_path = "$W/nri.sock"
  plugin_path = "$W/nri-plugins"
  plugin_config_path = "$W/nri-conf"
[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  # containerd drops a container's hugepage limits from its OCI spec unless
  # told otherwise; the kubelet's hugepages-* limits must reach the plugin
  # and the hugetlb cgroup (test/vm/scenarios.sh checks both).
  disable_hugetlb_controller = false
[plugins.'io.containerd.cri.v1.runtime'.cni]
  # containerd makes its CNI config directory at start; /etc/cni is
  # read-only in the VM suite (the host's root), and need not exist on a
  # fresh host. The pods here use the host's network.
  conf_dir = "$W/cni/net.d"
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  SystemdCgroup = false
  BinaryName = "$TOOLS/runc"
[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = "$IMAGE"
TOML
  launch_containerd
  say "importing the busybox image"
  # E2E_IMAGE_TAR: an image archive built beforehand (test/vm builds it on the
  # host, because the VM's root is read-only and compiling there is slow).
  local tar=${E2E_IMAGE_TAR:-$W/busybox.tar}
  [ -n "${E2E_IMAGE_TAR:-}" ] || (cd "$REPO" && go run ./tools/mkimage -busybox /bin/busybox -name "$IMAGE" -out "$tar")
  ctr --address "$W/containerd.sock" -n k8s.io images import "$tar" >/dev/null
}

launch_containerd() {
  "$TOOLS/containerd" --config "$W/containerd.toml" >>"$W/containerd.log" 2>&1 &
  CONTAINERD_PID=$!
  for _ in $(seq 1 100); do
    crictl version >/dev/null 2>&1 && return 0
    kill -0 "$CONTAINERD_PID" 2>/dev/null || { tail -20 "$W/containerd.log"; die "containerd exited"; }
    sleep 0.2
  done
  die "containerd did not answer on $W/containerd.sock"
}

restart_containerd() {
  kill "$CONTAINERD_PID"; wait "$CONTAINERD_PID" 2>/dev/null || true
  launch_containerd
}

# pool_of CONFIG POOL: the pool's cpuset on this machine, from `topology --json`.
pool_of() {
  "$REPO/bin/nri-cpupool" topology --json --config "$1" | sed -n "s/^    \"$2\": \"\(.*\)\",\{0,1\}\$/\1/p" | head -1
}

stop_plugin() {
  [ -n "$PLUGIN_PID" ] || return 0
  kill "${1:--TERM}" "$PLUGIN_PID" 2>/dev/null
  # A plugin that ignores SIGTERM is a failure, diagnosed by its stacks, not
  # a test that waits for the VM's timeout.
  wait_exit "$PLUGIN_PID" 600 || { dump_plugin; die "the plugin did not exit within 60 s of SIG${1:-TERM}"; }
  wait "$PLUGIN_PID" 2>/dev/null || true
  PLUGIN_PID=""
}

# running PID: the process exists and has not exited (a child that exited
# and was not reaped yet is a zombie, which kill -0 still finds).
running() {
  local st
  { read -r _ _ st _ < "/proc/$1/stat"; } 2>/dev/null || return 1
  [ "$st" != Z ]
}

# wait_exit PID TENTHS: waits up to TENTHS tenths of a second for PID to end.
wait_exit() {
  local _i
  for _i in $(seq 1 "$2"); do running "$1" || return 0; sleep 0.1; done
  return 1
}

# start_plugin CONFIG_FILE: runs bin/nri-cpupool as an external plugin.
start_plugin() {
  # Counted before the start: counted after it, a plugin that synchronized
  # before the count (a second under emulation, while the shell forks grep)
  # is waited for a second time, and never says it again.
  local synced
  synced=$(log_count synchronized)
  # A marker, so that a report shows this start's lines whatever came before.
  echo "---- start_plugin $1 at $(date -u +%H:%M:%S.%3N)" >> "$W/plugin.log"
  "$REPO/bin/nri-cpupool" run --config "$1" --nri-socket "$W/nri.sock" --state-file "$W/state/nri-cpupool.json" \
    --log-level debug >>"$W/plugin.log" 2>&1 &
  PLUGIN_PID=$!
  # 60 s: a start is about a second, even under emulation; only a stall
  # (diagnosed by wait_for_log's stacks) takes longer.
  wait_for_log "synchronized" "$synced" 600
}

# log_count PATTERN: how many plugin log lines match.
log_count() {
  local n
  n=$(grep -c "$1" "$W/plugin.log" 2>/dev/null)
  echo "${n:-0}"
}

# wait_for_log PATTERN COUNT [TENTHS]: waits up to TENTHS tenths of a second
# (default 150) until the plugin log has more than COUNT matches.
wait_for_log() {
  for _ in $(seq 1 "${3:-150}"); do
    [ "$(log_count "$1")" -gt "${2:-0}" ] && return 0
    if [ -n "$PLUGIN_PID" ] && ! running "$PLUGIN_PID"; then
      local rc=0
      wait "$PLUGIN_PID" 2>/dev/null || rc=$?
      PLUGIN_PID=""
      die "the plugin exited (status $rc) before its log said '$1'; its last lines are in the report"
    fi
    sleep 0.1
  done
  dump_plugin
  die "the plugin log never said '$1'"
}

# dump_plugin: a plugin that did not get where it should is asked for its
# goroutines (SIGQUIT: Go prints every stack to stderr, the plugin log, and
# exits), so that a hang is diagnosed from the log and never outlives the
# test. The stacks are kept in $W/plugin-stacks.txt and their first lines
# printed, since the report shows only the log's tail.
dump_plugin() {
  [ -n "$PLUGIN_PID" ] && running "$PLUGIN_PID" || return 0
  local before
  before=$(wc -l < "$W/plugin.log")
  kill -QUIT "$PLUGIN_PID" 2>/dev/null
  wait_exit "$PLUGIN_PID" 50
  tail -n +"$((before + 1))" "$W/plugin.log" > "$W/plugin-stacks.txt"
  echo "---------- the plugin's goroutines when it was stopped ($W/plugin-stacks.txt) ----------" >&2
  # Goroutines blocked on a lock or a channel are what a hang is made of.
  grep -A14 -E '^goroutine [0-9]+ \[(sync\.|chan |select|semacquire)' "$W/plugin-stacks.txt" | head -300 >&2
  PLUGIN_PID=""
}

# run_pod NAME NAMESPACE QOS ANNOTATIONS_JSON: prints the pod sandbox id.
run_pod() {
  local name=$1 ns=$2 qos=$3 ann=${4:-"{}"} parent
  # A private parent keeps the test's cgroups apart from a kubelet's.
  parent="/$CGROUP_PARENT/poduid-$name"
  [ "$qos" = guaranteed ] || parent="/$CGROUP_PARENT/$qos/poduid-$name"
  cat > "$W/pod-$name.json" <<JSON
{"metadata": {"name": "$name", "namespace": "$ns", "uid": "uid-$name", "attempt": 0},
 "annotations": $ann,
 "log_directory": "$W/logs/$name",
 "linux": {"cgroup_parent": "$parent", "security_context": {"namespace_options": {"network": 2}}}}
JSON
  crictl runp "$W/pod-$name.json"
}

# create_ctr POD_ID POD_NAME CTR_NAME MILLICPU [ATTEMPT] [COMMAND_JSON]:
# creates and starts a container whose request is MILLICPU (as the kubelet
# passes it: shares, and a quota as the limit); prints its id. ATTEMPT is
# the run, as the kubelet counts restarts (same pod, same name, attempt+1).
create_ctr() {
  local pod=$1 podname=$2 name=$3 milli=$4 attempt=${5:-0} cmd=${6:-'["/bin/sleep", "inf"]'} shares quota
  shares=$(( milli * 1024 / 1000 )); [ "$shares" -ge 2 ] || shares=2
  quota=$(( milli * 100 )); [ "$milli" -gt 0 ] || quota=0
  cat > "$W/ctr-$podname-$name-$attempt.json" <<JSON
{"metadata": {"name": "$name", "attempt": $attempt}, "image": {"image": "$IMAGE"}, "command": $cmd,
 "log_path": "$name.$attempt.log",
 "linux": {"resources": {"cpu_shares": $shares, "cpu_quota": $quota, "cpu_period": 100000}}}
JSON
  local id
  id=$(crictl create "$pod" "$W/ctr-$podname-$name-$attempt.json" "$W/pod-$podname.json") || return 1
  crictl start "$id" >/dev/null || return 1
  echo "$id"
}

# remove_pods POD_ID...: stops and removes the pods (crictl rmp -f), or
# the test dies. A failed removal was silent before, and the next section
# failed for a reason it did not name: once in a VM under TCG, crictl's
# connection to containerd broke before the request was sent ("error
# reading server preface: use of closed network connection"), the pod
# stayed and held its CPUs, and the next pod was refused. So a failure is
# said and retried (twice) for the pods still there, and a third is fatal.
# A pod counts as gone only when the runtime says it has no such pod
# (NotFound): a failed question (the same broken connection) leaves it
# counted as still there.
remove_pods() {
  local try err left id
  left=("$@")
  for try in 1 2 3; do
    err=$(crictl rmp -f "${left[@]}" 2>&1 >/dev/null) && return 0
    local still=()
    for id in "${left[@]}"; do pod_gone "$id" || still+=("$id"); done
    [ "${#still[@]}" -eq 0 ] && return 0
    left=("${still[@]}")
    info "crictl rmp -f failed (attempt $try; ${#left[@]} pods still there): $(printf '%s' "$err" | tail -1 | cut -c1-300)"
    sleep 1
  done
  die "removing pods ${left[*]}: crictl rmp -f failed 3 times"
}

# stop_pod POD_ID: stops the pod's sandbox (crictl stopp: the path a
# kubelet takes, which releases the pod's CPUs before its removal), or the
# test dies. Retried like remove_pods: stopp of a stopped sandbox succeeds,
# so a retry after a request that did arrive is harmless.
stop_pod() {
  local try err
  for try in 1 2 3; do
    err=$(crictl stopp "$1" 2>&1 >/dev/null) && return 0
    info "crictl stopp $1 failed (attempt $try): $(printf '%s' "$err" | tail -1 | cut -c1-300)"
    sleep 1
  done
  die "stopping pod $1: crictl stopp failed 3 times"
}

# remove_all_pods: removes every pod the runtime has (remove_pods), or the
# test dies; a failed listing is not taken for "no pods".
remove_all_pods() {
  local try ids
  for try in 1 2 3; do
    if ids=$(crictl pods -q 2>/dev/null); then
      # shellcheck disable=SC2086 # one pod ID per word
      [ -z "$ids" ] || remove_pods $ids
      return 0
    fi
    info "crictl pods -q failed (attempt $try)"
    sleep 1
  done
  die "listing the pods to remove: crictl pods -q failed 3 times"
}

# pod_gone POD_ID: true when the runtime answers that it has no such pod.
pod_gone() {
  local out
  out=$(crictl inspectp "$1" 2>&1 >/dev/null) && return 1
  case "$out" in *NotFound*) return 0 ;; *) return 1 ;; esac
}

# cgroup_of ID: the container's (or sandbox's) cpuset cgroup directory.
cgroup_of() {
  local path="" try
  # A container's (tried three times: under emulation an inspect has
  # failed once in a run, which read the root cgroup), else a sandbox's.
  for try in 1 2 3; do
    path=$(crictl inspect -o go-template --template '{{.info.runtimeSpec.linux.cgroupsPath}}' "$1" 2>/dev/null) && break
    path=$(crictl inspectp -o go-template --template '{{.info.runtimeSpec.linux.cgroupsPath}}' "$1" 2>/dev/null) && break
    [ "$try" = 3 ] || sleep 1
  done
  if [ -d "$CGROUP_ROOT/cpuset" ]; then echo "$CGROUP_ROOT/cpuset$path"; else echo "$CGROUP_ROOT$path"; fi
}

cpus_of()  { cat "$(cgroup_of "$1")/cpuset.cpus"; }
# spec_cpus_of ID: the cpuset the container was created with (its cgroup is
# gone once it exited).
spec_cpus_of() { crictl inspect -o go-template --template '{{.info.runtimeSpec.linux.resources.cpu.cpus}}' "$1"; }
state_of() { crictl inspect -o go-template --template '{{.status.state}}' "$1"; }
# wait_exited ID: waits until the container has exited by itself.
wait_exited() {
  for _ in $(seq 1 100); do
    [ "$(state_of "$1")" = CONTAINER_EXITED ] && return 0
    sleep 0.1
  done
  die "container $1 did not exit"
}
# wait_cpus ID WANT: waits until the container's cgroup has WANT (updates
# sent after a handler returns arrive a moment later); prints what it has.
wait_cpus() {
  local got
  for _ in $(seq 1 50); do
    got=$(cpus_of "$1")
    [ "$got" = "$2" ] && break
    sleep 0.1
  done
  echo "$got"
}
# eventually WANT CMD [ARGS...]: runs CMD until it prints WANT (5 s at
# most) and prints its last output. The plugin pins sandboxes right after
# its reply, not before.
eventually() {
  local want=$1 got
  shift
  for _ in $(seq 1 50); do
    got=$("$@" 2>/dev/null)
    [ "$got" = "$want" ] && break
    sleep 0.1
  done
  echo "$got"
}
mems_of()  { cat "$(cgroup_of "$1")/cpuset.mems"; }
pid_of()   { crictl inspect -o go-template --template '{{.info.pid}}' "$1" 2>/dev/null || crictl inspectp -o go-template --template '{{.info.pid}}' "$1"; }
allowed_of() { awk '/^Cpus_allowed_list/ {print $2}' "/proc/$(pid_of "$1")/status"; }

report() {
  [ -n "$W" ] || return 0
  # The last start's lines come first: a failure is most often there, and
  # a long log's tail may not reach back to it.
  local last
  last=$(grep -n '^---- start_plugin ' "$W/plugin.log" 2>/dev/null | tail -1 | cut -d: -f1)
  if [ -n "$last" ]; then
    echo "---------- plugin log from its last start (first 40 lines) ----------"
    tail -n +"$last" "$W/plugin.log" | grep -v '^goroutine \|^\s\|^$\|^created by' | head -40
  fi
  echo "---------- plugin log (last 40 lines) ----------"
  tail -40 "$W/plugin.log" 2>/dev/null
  echo "---------- containerd log (last 25 lines) ----------"
  tail -25 "$W/containerd.log" 2>/dev/null
  echo "---------- cgroup cpusets ----------"
  find "$CGROUP_ROOT/cpuset/$CGROUP_TOP" "$CGROUP_ROOT/$CGROUP_TOP" -name cpuset.cpus 2>/dev/null | while read -r f; do
    printf '%s: %s\n' "$f" "$(cat "$f")"
  done
  echo "---------- state ----------"
  head -c 3000 "$W/state/nri-cpupool.json" 2>/dev/null; echo
}

# teardown removes pods, stops everything it started and leaves no process,
# mount or cgroup behind.
teardown() {
  [ -n "$W" ] || return 0
  if [ -n "$CONTAINERD_PID" ] && kill -0 "$CONTAINERD_PID" 2>/dev/null; then
    timeout 60 crictl rmp -fa >/dev/null 2>&1 || true
  fi
  [ -n "$PLUGIN_PID" ] && kill "$PLUGIN_PID" 2>/dev/null
  [ -n "$CONTAINERD_PID" ] && kill "$CONTAINERD_PID" 2>/dev/null
  # A plugin or containerd that does not exit on SIGTERM must not hold the
  # test (a VM run) until its timeout: 30 s, then the pgrep sweep's -9.
  if [ -n "$PLUGIN_PID" ] && ! wait_exit "$PLUGIN_PID" 300; then
    echo "teardown: the plugin ignored SIGTERM for 30 s" >&2
    dump_plugin
  fi
  [ -z "$CONTAINERD_PID" ] || wait_exit "$CONTAINERD_PID" 300 || echo "teardown: containerd ignored SIGTERM for 30 s" >&2
  # Shims and anything else started with a path inside $W (not this shell,
  # which may itself be $W/stop.sh).
  local p left
  for _ in $(seq 1 50); do
    left=""
    for p in $(pgrep -f "$W/"); do
      [ "$p" = "$$" ] || [ "$p" = "${BASHPID:-$$}" ] || { kill -9 "$p" 2>/dev/null; left="$left $p"; }
    done
    [ -z "$left" ] && break
    sleep 0.1
  done
  [ -n "$left" ] && echo "teardown: processes$left are still running" >&2
  grep " $W/" /proc/mounts | awk '{print $2}' | sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
  local d
  grep -q " $W/" /proc/mounts && echo "teardown: mounts under $W remain" >&2
  for d in "$CGROUP_ROOT"/*/"$CGROUP_TOP" "$CGROUP_ROOT/$CGROUP_TOP"; do
    [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null
  done
  rm -rf "$W"
  W=""
}

# quota_of ID: the container's CFS quota in microseconds, -1 for none:
# cpu.cfs_quota_us on cgroup v1, the first field of cpu.max on v2.
quota_of() {
  local path
  path=$(crictl inspect -o go-template --template '{{.info.runtimeSpec.linux.cgroupsPath}}' "$1") || return 1
  if [ -d "$CGROUP_ROOT/cpu" ]; then cat "$CGROUP_ROOT/cpu$path/cpu.cfs_quota_us"
  else awk '{print ($1 == "max") ? -1 : $1}' "$CGROUP_ROOT$path/cpu.max"; fi
}

# request_of NAME: a container's CPU request as the state file has it.
request_of() {
  "$REPO/bin/nri-cpupool" status --state-file "$W/state/nri-cpupool.json" | awk -v c="$1" '$3 == c {print $7}'
}

# metrics: the plugin's /metrics page.
metrics() {
  (exec 3<>"/dev/tcp/127.0.0.1/${E2E_METRICS_PORT:-19464}" && printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3 && cat <&3)
}
