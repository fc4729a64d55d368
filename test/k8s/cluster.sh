# A private one-node Kubernetes cluster for the end-to-end suite: etcd,
# kube-apiserver (private CA made with openssl), kube-scheduler, and a kubelet
# on a private containerd with nri-cpupool. Everything lives in $W and in a
# cgroup tree of its own, and is removed by teardown. Facts it relies on:
# shared/RUNTIME-NOTES.md, sections "Kubernetes" and containerd.
# shellcheck shell=bash

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
K8S_VERSION=v1.36.3
CONTAINERD_VERSION=${CONTAINERD_VERSION:-v2.4.2}
RUNC_VERSION=${RUNC_VERSION:-v1.4.0}
CRICTL_VERSION=${CRICTL_VERSION:-v1.37.0}
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}
# containerd, its shim, ctr and crictl: shared with test/e2e.
E2E_TOOLS=${E2E_TOOLS:-$CACHE/nri-cpupool-e2e/bin}
# runc with seccomp (the kubelet always asks for RuntimeDefault) and the
# unpacked Kubernetes binaries: this suite's own cache.
K8S_CACHE=${K8S_CACHE:-$CACHE/nri-cpupool-k8s}
IMAGE=docker.io/library/busybox:e2e
CGROUP_FS=${CGROUP_FS:-/sys/fs/cgroup}
# The kubelet's cgroupRoot: kubepods and its QoS cgroups go under it, so the
# suite never touches a real kubelet's /kubepods.
KUBE_CGROUP_ROOT=/nri-cpupool-k8s-$$
DP_DIR=/var/lib/kubelet/device-plugins # hardcoded in the kubelet
LOCK=/run/lock/nri-cpupool-k8s.lock
W=""
PIDS_etcd="" PIDS_apiserver="" PIDS_scheduler="" PIDS_controller_manager="" PIDS_containerd="" PIDS_kubelet="" PIDS_plugin=""
CREATED=() # paths outside $W this run created, removed by teardown
# More flags for kube-scheduler and kube-controller-manager (scale.sh
# raises their client QPS).
SCHEDULER_ARGS=() CONTROLLER_MANAGER_ARGS=()

# shellcheck source=../say.sh
source "$REPO/test/say.sh"

# k8s_bin_dir prints where unpacked Kubernetes binaries are, unpacking the
# .xz files of $NRI_CPUPOOL_K8S_TOOLS (checked against SHA256SUMS) or, when
# that is unset or missing, building them with the recipe of its README.
k8s_bin_dir() {
  local out=$K8S_CACHE/kubernetes-$K8S_VERSION b
  # A cache unpacked before the DRA suite lacks kube-controller-manager.
  if [ -f "$out/.complete" ] && [ -x "$out/kube-controller-manager" ]; then echo "$out"; return; fi
  mkdir -p "$out"
  local src=${NRI_CPUPOOL_K8S_TOOLS:-}
  if [ -n "$src" ] && [ -f "$src/kubelet.xz" ]; then
    (cd "$src" && sha256sum --quiet -c SHA256SUMS) >&2 || die "$src: checksums do not match SHA256SUMS"
    for b in kubelet kube-apiserver kube-scheduler kube-controller-manager kubectl etcd; do
      xz -dc "$src/$b.xz" > "$out/$b" && chmod +x "$out/$b"
    done
  else
    build_k8s "$out" >&2
  fi
  touch "$out/.complete"
  echo "$out"
}

# build_k8s DIR: the documented recipe (shared/tools/kubernetes-v1.36.3/README.md);
# 15-25 minutes on 2 cores with a cold module cache.
build_k8s() {
  local out=$1 tmp m n dir
  say "building Kubernetes $K8S_VERSION and etcd from the Go module proxy (NRI_CPUPOOL_K8S_TOOLS is not set; 15-25 min)"
  tmp=$(mktemp -d /tmp/nri-cpupool-k8s-build.XXXXXX)
  dir=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  cp -r "$dir" "$tmp/src" && chmod -R u+w "$tmp/src"
  (
    cd "$tmp/src" && rm -rf vendor go.work go.work.sum && mkdir -p staging/src/k8s.io
    awk '/=> \.\/staging/ {print $1}' go.mod | while read -r m; do
      n=${m#k8s.io/}
      if go mod download -json "$m@v0${K8S_VERSION#v1}" >/dev/null 2>&1; then
        cp -r "$(go env GOMODCACHE)/k8s.io/$n@v0${K8S_VERSION#v1}" "staging/src/k8s.io/$n"
      else
        mkdir -p "staging/src/k8s.io/$n" && printf 'module %s\n\ngo 1.26.0\n' "$m" > "staging/src/k8s.io/$n/go.mod"
      fi
    done
    chmod -R u+w staging
    LD="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 \
        -X k8s.io/component-base/version.gitMinor=36 -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION"
    for c in kubelet kube-apiserver kube-scheduler kube-controller-manager kubectl; do
      GOWORK=off CGO_ENABLED=0 go build -mod=mod -trimpath -ldflags "$LD" -o "$out/$c" "./cmd/$c" || exit 1
    done
  ) || die "building Kubernetes failed"
  mkdir -p "$tmp/etcd" || die "building etcd failed"
  (
    cd "$tmp/etcd" && printf 'module local/etcdbuild\n\ngo 1.26.0\n' > go.mod &&
      go get go.etcd.io/etcd/server/v3@v3.6.8 && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$out/etcd" go.etcd.io/etcd/server/v3
  ) || die "building etcd failed"
  rm -rf "$tmp"
}

# install_tools: containerd/crictl from the e2e cache (built there if
# missing), runc with seccomp in this suite's cache, busybox-static.
install_tools() {
  mkdir -p "$K8S_CACHE/bin"
  local t
  for t in containerd containerd-shim-runc-v2 ctr crictl; do
    if ! [ -x "$E2E_TOOLS/$t" ] && ! [ -x "$K8S_CACHE/bin/$t" ]; then
      say "building $t (not in $E2E_TOOLS)"
      case $t in
        crictl) GOBIN=$K8S_CACHE/bin GOFLAGS=-buildvcs=false go install "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION" ;;
        *) GOBIN=$K8S_CACHE/bin GOFLAGS=-buildvcs=false go install "github.com/containerd/containerd/v2/cmd/$t@$CONTAINERD_VERSION" ;;
      esac || die "go install $t failed"
    fi
  done
  if ! [ -x "$K8S_CACHE/bin/runc" ]; then
    say "building runc $RUNC_VERSION with seccomp (the kubelet asks every pod for the RuntimeDefault profile)"
    dpkg -s libseccomp-dev >/dev/null 2>&1 || { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libseccomp-dev >/dev/null; }
    GOBIN=$K8S_CACHE/bin CGO_ENABLED=1 GOFLAGS=-buildvcs=false go install -tags seccomp "github.com/opencontainers/runc@$RUNC_VERSION" || die "building runc failed"
  fi
  if ! [ -x /bin/busybox ] || ldd /bin/busybox >/dev/null 2>&1; then
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq busybox-static >/dev/null
  fi
  command -v openssl >/dev/null || { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssl >/dev/null; }
  command -v xz >/dev/null || { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq xz-utils >/dev/null; }
  KBIN=$(k8s_bin_dir)
  # The shim finds runc through PATH: the seccomp one first.
  export PATH="$K8S_CACHE/bin:$E2E_TOOLS:$KBIN:$PATH"
}

# free_port prints a port nothing listens on, outside the kernel's
# ephemeral range and not given before in this run. A port is bound some
# seconds after it is picked (the scheduler's after the API server is up):
# picked in the ephemeral range (32768-60999 by default), a connection of
# the API server to etcd could take it as its local port meanwhile, and
# the bind failed (CI, 2026-12-06: the scheduler on 127.0.0.1:38002,
# "address already in use"). Two picks before either is bound could also
# give the same port; the ports given are kept in $W/ports-given.
free_port() {
  local p lo=32768 hi=60999 base=20000 span=12000 given=${W:-/tmp}/ports-given
  read -r lo hi </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
  # Below the ephemeral range when there is room, else above it.
  if [ "$lo" -gt 11024 ]; then
    span=$(( lo - 11024 > 20000 ? 20000 : lo - 11024 )); base=$(( lo - span ))
  elif [ "$hi" -lt 64000 ]; then
    base=$(( hi + 1 )); span=$(( 65000 - hi ))
  fi
  while :; do
    p=$(( base + RANDOM % span ))
    grep -qx "$p" "$given" 2>/dev/null && continue
    (echo >"/dev/tcp/127.0.0.1/$p") 2>/dev/null && continue
    echo "$p" >>"$given"
    echo "$p"
    return
  done
}

# wait_for WHAT CMD...: retries CMD for up to 60 s.
wait_for() {
  local what=$1; shift
  for _ in $(seq 1 300); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  die "timed out waiting for $what"
}

# cert NAME SUBJECT [SAN]: a certificate of the private CA.
cert() {
  local d=$W/pki
  openssl req -newkey rsa:2048 -nodes -keyout "$d/$1.key" -out "$d/$1.csr" -subj "$2" 2>/dev/null
  if [ -n "${3:-}" ]; then printf 'subjectAltName=%s\n' "$3" > "$d/$1.ext"; else : > "$d/$1.ext"; fi
  openssl x509 -req -in "$d/$1.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -days 2 -extfile "$d/$1.ext" -out "$d/$1.crt" 2>/dev/null
}

# certs makes a private CA and the certificates of every component.
certs() {
  local d=$W/pki
  mkdir -p "$d"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$d/ca.key" -out "$d/ca.crt" -days 2 -subj "/CN=nri-cpupool-e2e-ca" 2>/dev/null
  openssl genrsa -out "$d/sa.key" 2048 2>/dev/null && openssl rsa -in "$d/sa.key" -pubout -out "$d/sa.pub" 2>/dev/null
  cert apiserver "/CN=kube-apiserver" "IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
  cert admin "/O=system:masters/CN=admin"
  cert kubelet "/O=system:nodes/CN=system:node:localhost"
  cert scheduler "/CN=system:kube-scheduler"
  cert apiserver-kubelet "/O=system:masters/CN=kube-apiserver-kubelet-client"
}

kubeconfig() { # NAME CERT
  cat > "$W/$1.kubeconfig" <<YAML
apiVersion: v1
kind: Config
clusters: [{name: e2e, cluster: {server: "https://127.0.0.1:$API_PORT", certificate-authority: "$W/pki/ca.crt"}}]
users: [{name: $2, user: {client-certificate: "$W/pki/$2.crt", client-key: "$W/pki/$2.key"}}]
contexts: [{name: e2e, context: {cluster: e2e, user: $2}}]
current-context: e2e
YAML
}

start_control_plane() {
  local etcd_port peer_port
  etcd_port=$(free_port); peer_port=$(free_port); API_PORT=$(free_port); SCHED_PORT=$(free_port)
  "$KBIN/etcd" --name e2e --data-dir "$W/etcd" --listen-client-urls "http://127.0.0.1:$etcd_port" \
    --advertise-client-urls "http://127.0.0.1:$etcd_port" --listen-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" --initial-cluster "e2e=http://127.0.0.1:$peer_port" \
    --listen-metrics-urls "" >"$W/etcd.log" 2>&1 &
  PIDS_etcd=$!
  "$KBIN/kube-apiserver" --etcd-servers "http://127.0.0.1:$etcd_port" --bind-address 127.0.0.1 --advertise-address 127.0.0.1 \
    --secure-port "$API_PORT" --cert-dir "$W/apiserver" --tls-cert-file "$W/pki/apiserver.crt" --tls-private-key-file "$W/pki/apiserver.key" \
    --client-ca-file "$W/pki/ca.crt" --service-account-key-file "$W/pki/sa.pub" --service-account-signing-key-file "$W/pki/sa.key" \
    --service-account-issuer https://kubernetes.default.svc --service-cluster-ip-range 10.0.0.0/24 \
    --authorization-mode Node,RBAC --disable-admission-plugins TaintNodesByCondition \
    --kubelet-client-certificate "$W/pki/apiserver-kubelet.crt" --kubelet-client-key "$W/pki/apiserver-kubelet.key" \
    --kubelet-preferred-address-types Hostname,InternalIP --profiling=false >"$W/apiserver.log" 2>&1 &
  PIDS_apiserver=$!
  kubeconfig admin admin; kubeconfig kubelet kubelet; kubeconfig scheduler scheduler
  export KUBECONFIG=$W/admin.kubeconfig
  wait_for "kube-apiserver" kubectl get --raw /readyz
  "$KBIN/kube-scheduler" --kubeconfig "$W/scheduler.kubeconfig" --authentication-kubeconfig "$W/scheduler.kubeconfig" \
    --authorization-kubeconfig "$W/scheduler.kubeconfig" --leader-elect=false --bind-address 127.0.0.1 --secure-port "$SCHED_PORT" \
    "${SCHEDULER_ARGS[@]}" >"$W/scheduler.log" 2>&1 &
  PIDS_scheduler=$!
  wait_for "the default namespace" kubectl get namespace default
  kubectl apply -f - >/dev/null <<YAML || die "creating the default ServiceAccount"
apiVersion: v1
kind: ServiceAccount
metadata: {name: default, namespace: default}
automountServiceAccountToken: false
YAML
}

start_containerd() {
  mkdir -p "$W/nri-plugins" "$W/nri-conf" "$W/cdi"
  export CONTAINER_RUNTIME_ENDPOINT="unix://$W/containerd.sock" IMAGE_SERVICE_ENDPOINT="unix://$W/containerd.sock"
  export CRI_CONFIG_FILE="$W/crictl.yaml"
  printf 'runtime-endpoint: %s\nimage-endpoint: %s\ntimeout: 30\n' "$CONTAINER_RUNTIME_ENDPOINT" "$IMAGE_SERVICE_ENDPOINT" > "$CRI_CONFIG_FILE"
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
  cdi_spec_dirs = ['$W/cdi']
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  SystemdCgroup = false
  BinaryName = "$K8S_CACHE/bin/runc"
[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = "$IMAGE"
TOML
  containerd --config "$W/containerd.toml" >>"$W/containerd.log" 2>&1 &
  PIDS_containerd=$!
  wait_for "containerd" crictl version
  (cd "$REPO" && go run ./tools/mkimage -busybox /bin/busybox -name "$IMAGE" -out "$W/busybox.tar") || die "building the image"
  ctr --address "$W/containerd.sock" -n k8s.io images import "$W/busybox.tar" >/dev/null || die "importing the image"
}

# restart_containerd: the runtime goes away and comes back; containers keep
# running (their shims stay).
restart_containerd() {
  stop_pids "$PIDS_containerd"
  containerd --config "$W/containerd.toml" >>"$W/containerd.log" 2>&1 &
  PIDS_containerd=$!
  wait_for "containerd" crictl version
}

# start_controller_manager CONTROLLERS: kube-controller-manager with the
# controllers given (comma-separated): DRA needs resourceclaim-controller
# (claims from templates, deallocation when pods end) and the garbage
# collector (pod-owned claims); the rollout test the DaemonSet controller.
start_controller_manager() {
  local controllers=$1
  # As admin: the controllers' own roles are bound to service accounts this
  # cluster does not make.
  kubeconfig controller-manager admin
  "$KBIN/kube-controller-manager" --kubeconfig "$W/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$W/controller-manager.kubeconfig" --authorization-kubeconfig "$W/controller-manager.kubeconfig" \
    --controllers "$controllers" --leader-elect=false \
    --bind-address 127.0.0.1 --secure-port "$(free_port)" "${CONTROLLER_MANAGER_ARGS[@]}" >"$W/controller-manager.log" 2>&1 &
  PIDS_controller_manager=$!
}

# start_plugin CONFIG: bin/nri-cpupool as an external NRI plugin (and device
# plugin when the config says so).
start_plugin() {
  local before
  before=$(grep -c synchronized "$W/plugin.log" 2>/dev/null); before=${before:-0}
  "$REPO/bin/nri-cpupool" run --config "$1" --nri-socket "$W/nri.sock" --state-file "$W/plugin-state/state.json" \
    --cgroup-root "$CGROUP_FS" --log-level debug >>"$W/plugin.log" 2>&1 &
  PIDS_plugin=$!
  wait_for "the plugin to synchronize" log_grew synchronized "$before"
}

# log_grew PATTERN N: the plugin log has more than N lines matching PATTERN.
log_grew() {
  local n
  n=$(grep -c "$1" "$W/plugin.log" 2>/dev/null)
  [ "${n:-0}" -gt "$2" ]
}

stop_plugin() {
  stop_pids "$PIDS_plugin"
  PIDS_plugin=""
}

# remember_outside PATH: PATH is created by the kubelet if it does not exist
# yet; teardown then removes it.
remember_outside() { [ -e "$1" ] || CREATED+=("$1"); }

# make_cgroup_root creates the kubelet's cgroupRoot in every hierarchy (the
# kubelet refuses one that does not exist); a v1 cpuset child starts empty,
# so it gets its parent's CPUs and memory nodes.
make_cgroup_root() {
  local d
  if [ -f "$CGROUP_FS/cgroup.controllers" ]; then
    mkdir -p "$CGROUP_FS$KUBE_CGROUP_ROOT"
    return
  fi
  for d in "$CGROUP_FS"/*/; do
    d=${d%/}
    [ -L "$d" ] || [ "$(basename "$d")" = unified ] && continue
    mkdir -p "$d$KUBE_CGROUP_ROOT"
  done
  cat "$CGROUP_FS/cpuset/cpuset.cpus" > "$CGROUP_FS/cpuset$KUBE_CGROUP_ROOT/cpuset.cpus"
  cat "$CGROUP_FS/cpuset/cpuset.mems" > "$CGROUP_FS/cpuset$KUBE_CGROUP_ROOT/cpuset.mems"
}

start_kubelet() {
  if [ -z "${KUBELET_PORT:-}" ]; then
    make_cgroup_root
    KUBELET_PORT=$(free_port); KUBELET_HEALTHZ=$(free_port)
    remember_outside /var/lib/kubelet; remember_outside "$DP_DIR"; remember_outside /var/log/containers
    cat > "$W/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: $KUBE_CGROUP_ROOT
containerRuntimeEndpoint: unix://$W/containerd.sock
cpuManagerPolicy: none
address: 127.0.0.1
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ
authentication: {webhook: {enabled: false}, anonymous: {enabled: false}, x509: {clientCAFile: "$W/pki/ca.crt"}}
authorization: {mode: AlwaysAllow}
volumePluginDir: $W/volume-plugins
podLogsDir: $W/pod-logs
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
$KUBELET_EXTRA
YAML
  fi
  "$KBIN/kubelet" --config "$W/kubelet.yaml" --kubeconfig "$W/kubelet.kubeconfig" --root-dir "$W/kubelet" \
    --cert-dir "$W/kubelet/pki" --hostname-override localhost --v 2 >>"$W/kubelet.log" 2>&1 &
  PIDS_kubelet=$!
  wait_for "the kubelet's healthz" curl -sf "http://127.0.0.1:$KUBELET_HEALTHZ/healthz"
  wait_for "the node" kubectl get node localhost
}

stop_kubelet() {
  stop_pids "$PIDS_kubelet"
  PIDS_kubelet=""
}

report() {
  [ -n "$W" ] || return 0
  local f
  for f in plugin kubelet containerd scheduler controller-manager apiserver; do
    echo "---------- $f log (last 30 lines) ----------"
    # The kubelet asks the DRA driver for resource health every 5 s and logs
    # the driver's Unimplemented answer: left out, it would fill the tail.
    grep -v 'WatchResources' "$W/$f.log" 2>/dev/null | tail -30
  done
  echo "---------- plugin log: DRA lines (last 30) ----------"
  grep 'DRA' "$W/plugin.log" 2>/dev/null | tail -30
  echo "---------- kubelet log: resource claims (last 20) ----------"
  grep -i -E 'claim|prepar' "$W/kubelet.log" 2>/dev/null | grep -v 'WatchResources' | tail -20
  echo "---------- pods ----------"
  kubectl get pods -A -o wide 2>&1 | head -30
}

# stop_pids PID...: SIGTERM, then SIGKILL after 10 s.
stop_pids() {
  local p alive
  for p in "$@"; do [ -n "$p" ] && kill "$p" 2>/dev/null; done
  for _ in $(seq 1 50); do
    alive=""
    for p in "$@"; do [ -n "$p" ] && kill -0 "$p" 2>/dev/null && alive="$alive $p"; done
    [ -z "$alive" ] && break
    sleep 0.2
  done
  for p in $alive; do kill -9 "$p" 2>/dev/null; done
  for p in "$@"; do [ -n "$p" ] && wait "$p" 2>/dev/null; done
  return 0
}

# teardown: pods first (so the kubelet removes their cgroups), then every
# process this run started, then what the kubelet wrote outside $W.
teardown() {
  [ -n "$W" ] || return 0
  if [ -n "$PIDS_kubelet" ] && [ -n "$PIDS_apiserver" ]; then
    timeout 60 kubectl delete pods --all --grace-period 0 --force >/dev/null 2>&1 || true
  fi
  stop_pids "$PIDS_kubelet" "$PIDS_scheduler" "$PIDS_controller_manager" "$PIDS_apiserver" "$PIDS_etcd" "$PIDS_plugin"
  if [ -n "$PIDS_containerd" ] && kill -0 "$PIDS_containerd" 2>/dev/null; then
    timeout 60 crictl rmp -fa >/dev/null 2>&1 || true
    stop_pids "$PIDS_containerd"
  fi
  local p left
  for _ in $(seq 1 50); do
    left=""
    for p in $(pgrep -f "$W/"); do
      [ "$p" = "$$" ] || [ "$p" = "${BASHPID:-$$}" ] || { kill -9 "$p" 2>/dev/null; left="$left $p"; }
    done
    [ -z "$left" ] && break
    sleep 0.1
  done
  grep " $W/" /proc/mounts | awk '{print $2}' | sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
  local d
  for d in "$CGROUP_FS"/*"$KUBE_CGROUP_ROOT" "$CGROUP_FS$KUBE_CGROUP_ROOT"; do
    [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null
  done
  # The kubelet's files outside its root dir: our sockets and checkpoint,
  # log symlinks into $W; whole directories only if this run created them.
  rm -f "$DP_DIR/kubelet.sock" "$DP_DIR/cpupool-exclusive.sock" "$DP_DIR/kubelet_internal_checkpoint"
  find /var/log/containers -maxdepth 1 -lname "$W/*" -delete 2>/dev/null
  for d in "${CREATED[@]}"; do rm -rf "$d"; done
  rm -rf "$W"
  W=""
}

# setup_cluster CONFIG [HOOK]: everything up to a kubelet with nri-cpupool
# (config CONFIG); HOOK, if given, runs before the plugin starts (with the
# control plane and containerd up).
setup_cluster() {
  if [ "$(id -u)" != 0 ] || [ "$(uname -s)" != Linux ]; then die "needs root on Linux"; fi
  exec 9>"$LOCK"
  flock -n 9 || { say "another Kubernetes suite runs on this machine (it owns $DP_DIR); waiting"; flock 9; }
  install_tools
  W=$(mktemp -d /tmp/nri-cpupool-k8s.XXXXXX)
  say "private cluster in $W (cgroups under $KUBE_CGROUP_ROOT)"
  certs
  start_control_plane
  start_containerd
  if [ -n "${2:-}" ]; then "$2"; fi
  start_plugin "$1"
  start_kubelet
}
