# The plugin installed with its Helm chart (deploy/helm/nri-cpupool) on the
# one-node cluster of run.sh, its pods made by kube-controller-manager's
# DaemonSet controller: it pins a pod and itself, its probes pass, and
# `helm uninstall` leaves nothing: no DaemonSet, pod, ConfigMap, service
# account, RBAC or DeviceClass, no plugin on the runtime (a new pod runs
# on every CPU again, as before any plugin), and no host file held (the
# state directory's journal of host originals records none). A second
# release with DRA on, for no node, checks its ClusterRole, binding and
# DeviceClasses come and go with it. The first release is installed fail
# closed (runtime.failClosed) with its init container copying the
# runtime's drop-ins into a directory of the node (runtime.dropIn): the
# files there are the ConfigMap's, the plugin's pod tolerates a missing
# plugin, and the files stay after the uninstall, as documented (this
# suite's containerd does not read that directory: a containerd reading
# the fail-closed drop-in through its imports is test/e2e's FailClosed).
# Sourced by run.sh, which has imported the plugin image $DS_IMAGE and
# runs the controller manager with the daemonset and garbage-collector
# controllers.
# shellcheck shell=bash

# helm: $HELM (make k8s-e2e passes the one make tools installs), or PATH's.
helm() {
  local bin=${HELM:-}
  [ -n "$bin" ] || bin=$(command -v helm) || die "no helm: run the suite with make k8s-e2e (it installs helm), or set HELM"
  "$bin" "$@"
}

# manifest_gone: no pod of the plain manifest's namespace runs.
manifest_gone() { [ -z "$(crictl ps -q --label io.kubernetes.pod.namespace=nri-cpupool)" ]; }
# chart_pods_gone NS: no pod in NS, for the API server nor the runtime.
chart_pods_gone() { [ -z "$(kubectl -n "$1" get pods -o name 2>/dev/null)" ] && [ -z "$(crictl ps -a -q --label io.kubernetes.pod.namespace="$1")" ]; }
# recorded ID FILE: the state file FILE names container ID.
recorded() { grep -q "$1" "$2"; }
# files_in DIR: the names of DIR's files, sorted, each followed by a space.
files_in() { find "$1" -mindepth 1 -printf '%f\n' 2>&1 | LC_ALL=C sort | tr '\n' ' '; }
# ds_observed NS NAME: the DaemonSet controller has seen the DaemonSet.
ds_observed() { [ -n "$(kubectl -n "$1" get daemonset "$2" -o jsonpath='{.status.observedGeneration}')" ]; }

chart_suite() {
  local ns=cpupool-chart chart=$REPO/deploy/helm/nri-cpupool port state=$W/chart-state dropin=$W/chart-drop-in
  port=$(free_port)
  mkdir -p "$state"
  # The manifest's DaemonSet is deleted; its pod goes with the garbage
  # collector: two plugins must not both serve the runtime.
  wait_for "the manifest's plugin pod to go" manifest_gone
  say "the plugin installed with the Helm chart pins pods and itself"
  helm install nri-cpupool "$chart" --namespace "$ns" --create-namespace \
    --set image.tag="${DS_IMAGE##*:}" --set image.pullPolicy=Never \
    --set config.nriSocket="$W/nri.sock" --set config.stateFile="$state/state.json" \
    --set host.cgroup="$CGROUP_FS" --set config.metricsAddress="127.0.0.1:$port" \
    --set-string config.isolatedCPUs="$LAST" --set-string config.pools.exclusive.cpus="$LAST" \
    --set runtime.failClosed=true --set runtime.dropIn.install=true --set runtime.dropIn.dir="$dropin" \
    --set runtime.dropIn.image="$IMAGE" --set runtime.dropIn.imagePullPolicy=Never \
    --set nodeSelector."kubernetes\.io/hostname"=localhost >"$W/helm-install.log" 2>&1 ||
    die "helm install: $(cat "$W/helm-install.log")"
  kubectl -n "$ns" rollout status daemonset/nri-cpupool --timeout=120s >/dev/null ||
    die "the chart's DaemonSet did not become ready: $(kubectl -n "$ns" get pods -o wide 2>&1)"
  local ready
  ready=$(kubectl -n "$ns" get pods -l app.kubernetes.io/instance=nri-cpupool -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{end}')
  check "chart: its pod is Ready (readiness probe on the metrics port)" "$ready" True
  check "chart: fail closed, its pod tolerates a missing plugin" \
    "$(kubectl -n "$ns" get pods -l app.kubernetes.io/instance=nri-cpupool -o jsonpath='{.items[0].metadata.annotations.tolerate-missing-plugins\.nri\.io}')" true
  check "chart: the init container installed the runtime's drop-ins" "$(files_in "$dropin")" "nri-cpupool-fail-closed.toml nri-cpupool.toml "
  local f
  for f in nri-cpupool.toml nri-cpupool-fail-closed.toml; do
    check "chart: drop-in $f is the ConfigMap's" \
      "$(kubectl -n "$ns" get configmap nri-cpupool-runtime -o jsonpath="{.data.${f//./\\.}}" | cmp -s - "$dropin/$f" && echo same)" same
  done
  grep -q "required_plugins = \['cpupool'\]" "$dropin/nri-cpupool-fail-closed.toml" ||
    die "chart: the fail-closed drop-in requires no plugin cpupool: $(cat "$dropin/nri-cpupool-fail-closed.toml")"
  local ctr
  ctr=$(crictl ps -q --label io.kubernetes.pod.namespace="$ns" | head -1)
  pod chartexcl --annotation pool.cpupool.dev=exclusive --request cpu=500m
  pod chartinfra --request cpu=100m
  assert_pinned chartexcl burstable "$LAST"
  assert_pinned chartinfra burstable "$INFRA"
  check "chart: the plugin's own container confined to infra" "$(cpuset_of "$ctr")" "$INFRA"
  local excl
  excl=$(ctr_of chartexcl)
  wait_for "the exclusive pod in the chart's state file" recorded "$excl" "$state/state.json"
  check "chart: the exclusive pod in the chart's state file" "$(grep -q "$excl" "$state/state.json" && echo yes)" yes
  delete_pods chartexcl chartinfra

  say "helm uninstall leaves nothing of the plugin, in the cluster or on the node"
  helm uninstall nri-cpupool --namespace "$ns" --wait --timeout 120s >"$W/helm-uninstall.log" 2>&1 ||
    die "helm uninstall: $(cat "$W/helm-uninstall.log")"
  wait_for "the chart's pod to go" chart_pods_gone "$ns"
  check "chart: nothing left in its namespace" "$(kubectl -n "$ns" get all,configmaps,serviceaccounts,secrets -o name 2>&1)" ""
  check "chart: no cluster-wide object left" "$(kubectl get clusterroles,clusterrolebindings,deviceclasses -l app.kubernetes.io/instance=nri-cpupool -o name 2>&1)" ""
  check "chart: metrics port closed" "$( (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && echo open || echo closed)" closed
  check "chart: no host file held (journal of host originals)" "$(python3 - "$state/host-originals.json" <<'PY'
import json, os, sys
if not os.path.exists(sys.argv[1]):
    print("none"); sys.exit()
doc = json.load(open(sys.argv[1]))
content = doc.get("content", doc)
print("none" if not content.get("records") else sorted(content["records"]))
PY
)" none
  check "chart: the drop-ins stay after the uninstall (remove them by hand)" "$(files_in "$dropin")" "nri-cpupool-fail-closed.toml nri-cpupool.toml "
  # The runtime asks no plugin any more: a new pod gets the kubelet's
  # cpuset, every CPU, as before any plugin ran.
  pod chartafter --request cpu=100m
  running chartafter
  check "chart: a pod created after the uninstall is pinned by nobody" "$(cpuset_of "$(ctr_of chartafter)")" "$ONLINE"
  delete_pods chartafter

  say "a release with DRA on brings its ClusterRole, binding, DeviceClasses and ResourceSlice admission policy, and takes them away"
  helm install cpupool-dra "$chart" --namespace "$ns" --set config.dra.enabled=true \
    --set nodeSelector."cpupool\.dev/none"=true >"$W/helm-install-dra.log" 2>&1 ||
    die "helm install with DRA: $(cat "$W/helm-install-dra.log")"
  check "chart with DRA: its cluster-wide objects" \
    "$(kubectl get clusterroles,clusterrolebindings,deviceclasses,validatingadmissionpolicies,validatingadmissionpolicybindings -l app.kubernetes.io/instance=cpupool-dra -o name | sort | tr '\n' ' ')" \
    "clusterrole.rbac.authorization.k8s.io/cpupool-dra-nri-cpupool-dra clusterrolebinding.rbac.authorization.k8s.io/cpupool-dra-nri-cpupool-dra deviceclass.resource.k8s.io/cpupool-exclusive deviceclass.resource.k8s.io/cpupool-exclusive-cpus deviceclass.resource.k8s.io/cpupool-exclusive-non-isolcpus validatingadmissionpolicy.admissionregistration.k8s.io/cpupool-dra-nri-cpupool-dra-resourceslices validatingadmissionpolicybinding.admissionregistration.k8s.io/cpupool-dra-nri-cpupool-dra-resourceslices "
  wait_for "the DaemonSet controller to see the DRA release" ds_observed "$ns" cpupool-dra-nri-cpupool
  check "chart with DRA: no node selected, no pod" "$(kubectl -n "$ns" get daemonset cpupool-dra-nri-cpupool -o jsonpath='{.status.desiredNumberScheduled}')" 0
  helm uninstall cpupool-dra --namespace "$ns" --wait --timeout 60s >/dev/null 2>&1 || die "helm uninstall of the DRA release"
  check "chart with DRA: nothing left" "$(kubectl get clusterroles,clusterrolebindings,deviceclasses,validatingadmissionpolicies,validatingadmissionpolicybindings -l app.kubernetes.io/instance=cpupool-dra -o name 2>&1; kubectl -n "$ns" get all,configmaps,serviceaccounts -o name 2>&1)" ""
}
