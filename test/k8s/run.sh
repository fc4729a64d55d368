#!/usr/bin/env bash
# Kubernetes end-to-end suite: a private one-node cluster (etcd,
# kube-apiserver, kube-scheduler, kubelet on a private containerd with
# nri-cpupool), driven with kubectl. Asserts on the kubelet-made cgroups,
# pause containers included. Run as root: make k8s-e2e (make test runs it
# when the Kubernetes binaries are there). Binaries: $NRI_CPUPOOL_K8S_TOOLS
# (.ci/run points it at ../shared/tools/kubernetes-v1.36.3), else built once
# and cached.
set -uo pipefail
source "$(dirname "$0")/cluster.sh"
source "$(dirname "$0")/checks.sh"
source "$(dirname "$0")/events.sh"
source "$(dirname "$0")/chart.sh"

wait_allocatable() { # N: the node's allocatable cpupool.dev/exclusive
  for _ in $(seq 1 150); do
    [ "$(node_res allocatable cpupool.dev/exclusive)" = "$1" ] && return 0
    sleep 0.4
  done
  return 1
}

cat > /tmp/nri-cpupool-k8s-dp.$$.yaml <<YAML
isolatedCPUs: "$LAST"
pools: {exclusive: {cpus: "$LAST"}}
guaranteedExclusive: true
kubelet: {devicePlugin: true}
YAML
# The kubelet settings nri-cpupool validate recommends for this node and config.
"$REPO/bin/nri-cpupool" validate --config /tmp/nri-cpupool-k8s-dp.$$.yaml > /tmp/nri-cpupool-k8s-validate.$$ 2>&1
VALIDATE=$(cat /tmp/nri-cpupool-k8s-validate.$$)
KUBELET_EXTRA=$(sed -n 's/^    \(kubeReserved: .*\)$/\1/p' /tmp/nri-cpupool-k8s-validate.$$)
[ -n "$KUBELET_EXTRA" ] || die "validate recommends no kubeReserved: $VALIDATE"
setup_cluster /tmp/nri-cpupool-k8s-dp.$$.yaml
mv /tmp/nri-cpupool-k8s-dp.$$.yaml "$W/dp.yaml"; rm -f /tmp/nri-cpupool-k8s-validate.$$
say "machine: CPUs $ONLINE; CPU $LAST is the exclusive pool, $INFRA infra; kubelet: $KUBELET_EXTRA"

# ------------------------------------------------------------------ capacity
say "the node advertises the exclusive pool"
wait_allocatable 1 || true
check "capacity cpupool.dev/exclusive" "$(node_res capacity cpupool.dev/exclusive)" 1
check "allocatable cpupool.dev/exclusive" "$(node_res allocatable cpupool.dev/exclusive)" 1
check "allocatable cpu is infra only (validate's kubeReserved)" "$(node_res allocatable cpu)" "$(echo "$INFRA" | awk -F- '{print ($2==""?1:$2-$1+1)}')"

say "Guaranteed pod under guaranteedExclusive with the device plugin on: defaultPool (no exclusive-non-isolcpus here)"
pod guaranteed --request cpu=1 --request memory=16Mi --limit cpu=1 --limit memory=16Mi
assert_pinned guaranteed guaranteed "$INFRA"
delete_pods guaranteed

# ------------------------------------------------------------------ resource route
say "a Guaranteed pod requesting cpupool.dev/exclusive and a token cpu: 10m, an infra pod"
pod excl --request cpu=10m --request memory=16Mi --limit cpu=10m --limit memory=16Mi --limit cpupool.dev/exclusive=1
pod infra --request cpu=100m --limit cpu=200m
assert_pinned excl guaranteed "$LAST"
assert_pinned infra burstable "$INFRA"
EXCL=$(ctr_of excl)
check "excl: no CFS quota on its own CPU (the kubelet's for 10m is 1000)" "$(quota_of "$EXCL")" -1
check "infra: the kubelet's CFS quota for its 200m limit" "$(quota_of "$(ctr_of infra)")" 20000
# The kubelet puts the pod's limits on the pod cgroup too, and lifts that
# only for its own CPU manager's exclusive CPUs: the plugin lifts it.
check "excl: no CFS quota on its pod cgroup either (the kubelet's for 10m is 1000)" "$(pod_quota_of "$EXCL")" -1
check "infra: its pod cgroup keeps the kubelet's CFS quota for its 200m limit" "$(pod_quota_of "$(ctr_of infra)")" 20000
TOKEN=$(env_of "$EXCL" | sed -n 's/^CPUPOOL_GRANT=//p')
check "the kubelet passed the grant token from Allocate" "${#TOKEN}" 32
check_contains "the container is told its CPUs" "$(env_of "$EXCL")" "CPUPOOL_CPUS=$LAST"

say "a ResourceQuota on cpupool.dev/exclusive limits a namespace natively"
kubectl apply -f - >/dev/null <<YAML || die "creating the capped namespace"
apiVersion: v1
kind: Namespace
metadata: {name: capped}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: default, namespace: capped}
automountServiceAccountToken: false
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: exclusive-cpus, namespace: capped}
spec: {hard: {requests.cpupool.dev/exclusive: "0"}}
YAML
# No kube-controller-manager here: fill in the status its quota controller would.
kubectl -n capped patch resourcequota exclusive-cpus --subresource status --type merge \
  -p '{"status": {"hard": {"requests.cpupool.dev/exclusive": "0"}, "used": {"requests.cpupool.dev/exclusive": "0"}}}' >/dev/null
OUT=$(kubectl -n capped run capped --image "$IMAGE" --image-pull-policy Never --restart Never \
  --overrides '{"spec": {"hostNetwork": true, "containers": [{"name": "capped", "image": "'"$IMAGE"'", "imagePullPolicy": "Never", "command": ["/bin/sleep", "inf"], "resources": {"limits": {"cpupool.dev/exclusive": "1"}}}]}}' 2>&1)
check_contains "a pod over its namespace's quota is refused at admission" "$OUT" "exceeded quota: exclusive-cpus"

say "a pod asking for more than is free stays Pending"
pod more --limit cpupool.dev/exclusive=1
sleep 3
check "more: phase" "$(kubectl get pod more -o jsonpath='{.status.phase}')" Pending
check_contains "more: the scheduler's reason" "$(kubectl get pod more -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].message}')" "Insufficient cpupool.dev/exclusive"

say "annotations cannot reach the exclusive pool nor forge a grant"
pod annotated --annotation pool.cpupool.dev=exclusive --request cpu=100m
check_contains "annotated exclusive pod is refused, saying why" "$(waiting_message annotated)" "given only through the resource"
pod replay --env "CPUPOOL_GRANT=$TOKEN" --request cpu=100m
check_contains "a replayed grant token is refused" "$(waiting_message replay)" "the grant belongs to container default/excl/app"
pod guess --env CPUPOOL_GRANT=0123456789abcdef0123456789abcdef --request cpu=100m
check_contains "a guessed grant token is refused" "$(waiting_message guess)" "unknown grant token"
pod by-annotation --annotation "CPUPOOL_GRANT=$TOKEN" --request cpu=100m
assert_pinned by-annotation burstable "$INFRA"
delete_pods annotated replay guess by-annotation


# ------------------------------------------------------------------ restarts
say "a kubelet restart keeps the advertised capacity and moves no container"
stop_kubelet
start_kubelet
wait_allocatable 1 || true
check "allocatable after the kubelet restart" "$(node_res allocatable cpupool.dev/exclusive)" 1
check "excl: same container" "$(ctr_of excl)" "$EXCL"
check "excl: same CPUs" "$(cpuset_of "$EXCL")" "$LAST"
check "excl: its pod cgroup's CFS quota still lifted" "$(pod_quota_of "$EXCL")" -1
check "more: still Pending" "$(kubectl get pod more -o jsonpath='{.status.phase}')" Pending

say "a plugin restart keeps the advertised capacity and moves no container"
REGS=$(grep -c 'registered cpupool.dev/exclusive' "$W/plugin.log")
stop_plugin
start_plugin "$W/dp.yaml"
wait_for "the plugin to register again" log_grew 'registered cpupool.dev/exclusive' "$REGS"
wait_allocatable 1 || true
check "allocatable after the plugin restart" "$(node_res allocatable cpupool.dev/exclusive)" 1
check "excl: same container" "$(ctr_of excl)" "$EXCL"
check "excl: same CPUs" "$(cpuset_of "$EXCL")" "$LAST"
check "infra: same CPUs" "$(cpuset_of "$(ctr_of infra)")" "$INFRA"
check "more: still Pending" "$(kubectl get pod more -o jsonpath='{.status.phase}')" Pending

say "a deleted pod gives its capacity back"
delete_pods excl
assert_pinned more besteffort "$LAST"
delete_pods more infra

say "a pod whose init container and app container both request cpupool.dev/exclusive"
# The kubelet allocates for both at admission, init container first; the app
# container reuses the init container's CPU, so both tokens name it.
kubectl apply -f - >/dev/null <<YAML || die "creating pod initapp"
apiVersion: v1
kind: Pod
metadata: {name: initapp, annotations: {e2e: "yes"}}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 0
  initContainers:
  - name: init
    image: $IMAGE
    imagePullPolicy: Never
    command: ["/bin/sh", "-c", "grep Cpus_allowed_list /proc/self/status"]
    resources: {limits: {cpupool.dev/exclusive: "1"}}
  containers:
  - name: app
    image: $IMAGE
    imagePullPolicy: Never
    command: ["/bin/sleep", "inf"]
    resources: {limits: {cpupool.dev/exclusive: "1"}}
YAML
assert_pinned initapp besteffort "$LAST"
init_of() { crictl ps -a -q --label io.kubernetes.pod.name=initapp --label io.kubernetes.container.name=init | head -1; }
INIT=$(init_of) APP=$(ctr_of initapp) SB=$(sandbox_of initapp)
check "initapp: the init container completed" "$(kubectl get pod initapp -o jsonpath='{.status.initContainerStatuses[0].state.terminated.exitCode}')" 0
check_contains "initapp: the init container ran on the exclusive CPU" "$(crictl logs "$INIT" 2>&1)" "Cpus_allowed_list:	$LAST"
INIT_TOKEN=$(env_of "$INIT" | sed -n 's/^CPUPOOL_GRANT=//p') APP_TOKEN=$(env_of "$APP" | sed -n 's/^CPUPOOL_GRANT=//p')
check "initapp: two tokens, one per container" "${#INIT_TOKEN} ${#APP_TOKEN} $([ "$INIT_TOKEN" != "$APP_TOKEN" ] && echo distinct)" "32 32 distinct"

say "the kubelet re-creates initapp's sandbox: the init container runs again with its token, then the app container"
crictl stopp "$SB" >/dev/null || die "stopping initapp's sandbox"
new_sandbox() { local s; s=$(sandbox_of initapp); [ -n "$s" ] && [ "$s" != "$SB" ]; }
wait_for "the kubelet to re-create initapp's sandbox" new_sandbox
wait_for "initapp's app container in the new sandbox" sh -c "[ -n \"\$(crictl ps -q --pod \"\$(crictl pods -q --name '^initapp\$' --state ready | head -1)\" --label io.kubernetes.container.name=app)\" ]"
assert_pinned initapp besteffort "$LAST"
check "initapp: a new app container" "$([ "$(ctr_of initapp)" != "$APP" ] && echo new)" new
check "initapp: the init container ran twice on the exclusive CPU" "$(grep -c "container default/initapp/init: pool exclusive, CPUs $LAST, " "$W/plugin.log")" 2
delete_pods initapp

# ------------------------------------------------------------------ annotation route
say "without the device plugin: annotated exclusive pod, Guaranteed pod with guaranteedExclusive"
cat > "$W/annotations.yaml" <<YAML
isolatedCPUs: "$LAST"
pools: {exclusive: {cpus: "$LAST"}}
guaranteedExclusive: true
YAML
stop_plugin
start_plugin "$W/annotations.yaml"
pod annotated --annotation pool.cpupool.dev=exclusive --request cpu=1
assert_pinned annotated burstable "$LAST"
delete_pods annotated
pod guaranteed --request cpu=1 --request memory=16Mi --limit cpu=1 --limit memory=16Mi
assert_pinned guaranteed guaranteed "$LAST"
delete_pods guaranteed
check_pod_events "$W/annotations.yaml"

say "an in-place resize of an exclusive pod (kubectl patch --subresource resize)"
pod resized --annotation pool.cpupool.dev=exclusive --request cpu=500m
assert_pinned resized burstable "$LAST"
RESIZED=$(ctr_of resized)
RESIZES=$(grep -c 'container default/resized/app resized from 500m to 800m' "$W/plugin.log")
kubectl patch pod resized --subresource resize \
  --patch '{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"800m"}}}]}}' >/dev/null || die "resizing pod resized"
wait_for "the kubelet to apply the resize" sh -c \
  "[ \"\$(kubectl get pod resized -o jsonpath='{.status.containerStatuses[0].resources.requests.cpu}')\" = 800m ]"
wait_for "the plugin to see the resize" log_grew 'container default/resized/app resized from 500m to 800m' "$RESIZES"
check "resized: same container (in place)" "$(ctr_of resized)" "$RESIZED"
check "resized: still its exclusive CPU (800m is one CPU)" "$(cpuset_of "$RESIZED")" "$LAST"
check "resized: the kubelet's cpu.shares follow the request" "$(cat "$CGROUP_FS/cpu$(cgroup_path "$RESIZED")/cpu.shares")" 819
delete_pods resized

say "shared and infra pods"
cat > "$W/shared.yaml" <<YAML
isolatedCPUs: "$LAST"
pools: {shared: {cpus: "$LAST"}}
YAML
stop_plugin
start_plugin "$W/shared.yaml"
pod shared --annotation pool.cpupool.dev=shared --request cpu=100m
pod infra --request cpu=100m
assert_pinned shared burstable "$LAST"
assert_pinned infra burstable "$INFRA"
pod besteffort
assert_pinned besteffort besteffort "$INFRA"
delete_pods shared infra besteffort

# ------------------------------------------------------------------ DaemonSet
# deploy/kubernetes/nri-cpupool.yaml with this cluster's paths. This cluster
# runs no kube-controller-manager, so the suite does the DaemonSet
# controller's one job here: it creates the pod from the DaemonSet's own
# template (as stored and defaulted by the API server) on this node.
say "the plugin as a DaemonSet pod pins other pods, survives its own restarts, and its metrics answer"
stop_plugin
DS_IMAGE=ghcr.io/cpupool/nri-cpupool:e2e
(cd "$REPO" && CGO_ENABLED=0 go build -trimpath -o "$W/nri-cpupool-static" ./cmd/nri-cpupool &&
  CGO_ENABLED=0 go build -trimpath -o "$W/nri-cpupool-dra-static" ./cmd/nri-cpupool/nri-cpupool-dra &&
  go run ./tools/mkimage -plugin "$W/nri-cpupool-static" -plugin-dra "$W/nri-cpupool-dra-static" -name "$DS_IMAGE" -out "$W/plugin-image.tar") || die "building the plugin image"
"$E2E_TOOLS/ctr" --address "$W/containerd.sock" -n k8s.io images import "$W/plugin-image.tar" >/dev/null || die "importing the plugin image"
METRICS_PORT=$(free_port)
mkdir -p "$W/ds-state"
sed -e "s|ghcr.io/cpupool/nri-cpupool:dev|$DS_IMAGE|" -e "s|9464|$METRICS_PORT|g" \
    -e "s|{path: /var/run/nri, |{path: $W, |" -e "s|{path: /var/lib/nri-cpupool, |{path: $W/ds-state, |" \
    -e "s|{path: /sys/fs/cgroup, |{path: $CGROUP_FS, |" \
    -e "s|^    sandboxAffinity: false\$|    sandboxAffinity: false\n    isolatedCPUs: \"$LAST\"\n    pools: {exclusive: {cpus: \"$LAST\"}}|" \
    "$REPO/deploy/kubernetes/nri-cpupool.yaml" > "$W/ds.yaml"
kubectl apply -f "$W/ds.yaml" >/dev/null || die "applying the DaemonSet manifest"
# The manifest's pod has a service account token (for its pod Events),
# which mounts the namespace's kube-root-ca.crt.
publish_root_ca nri-cpupool
ds_pod() { # NAME: the DaemonSet's pod template as a pod on this node
  kubectl -n nri-cpupool get daemonset nri-cpupool -o json | python3 -c '
import json, sys
ds = json.load(sys.stdin)
t = ds["spec"]["template"]
pod = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": sys.argv[1], "namespace": "nri-cpupool", "labels": t["metadata"]["labels"],
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "nri-cpupool",
                                         "uid": ds["metadata"]["uid"], "controller": True}]},
       "spec": dict(t["spec"], nodeName="localhost")}
print(json.dumps(pod))' "$1" | kubectl apply -f - >/dev/null || die "creating the DaemonSet pod $1"
  kubectl -n nri-cpupool wait --for=condition=Ready "pod/$1" --timeout=120s >/dev/null ||
    die "DaemonSet pod $1 not Ready: $(kubectl -n nri-cpupool get pod "$1" -o jsonpath='{.status}')"
}
metrics_answer() { # (not curl | grep -q: with pipefail, grep's early exit fails curl)
  local m
  m=$(curl -sf "http://127.0.0.1:$METRICS_PORT/metrics") && grep -q '^cpupool_pool_cpus{pool="infra"}' <<<"$m"
}
ds_pod nri-cpupool-localhost
wait_for "the DaemonSet pod's metrics" metrics_answer
check "DaemonSet pod: metrics answer on the node's loopback" "$(metrics_answer && echo yes)" yes
# Ready (the readiness probe passed, above) means registered and synchronized.
check "DaemonSet pod: /healthz and /readyz answer ok" \
  "$(curl -sf "http://127.0.0.1:$METRICS_PORT/healthz") $(curl -sf "http://127.0.0.1:$METRICS_PORT/readyz")" "ok ok"
DS_CTR=$(crictl ps -q --label io.kubernetes.pod.namespace=nri-cpupool | head -1)
check "DaemonSet pod: no capabilities, no new privileges, read-only root" "$(crictl inspect -o json "$DS_CTR" | python3 -c '
import json, sys
spec = json.load(sys.stdin)["info"]["runtimeSpec"]
caps = spec["process"].get("capabilities", {})
print(len(caps.get("effective", [])), len(caps.get("bounding", [])), spec["process"].get("noNewPrivileges", False), spec["root"].get("readonly", False))')" "0 0 True True"
pod dsexcl --annotation pool.cpupool.dev=exclusive --request cpu=500m
pod dsinfra --request cpu=100m
assert_pinned dsexcl burstable "$LAST"
assert_pinned dsinfra burstable "$INFRA"
check "DaemonSet pod: itself confined to infra" "$(cpuset_of "$DS_CTR")" "$INFRA"
DSEXCL=$(ctr_of dsexcl) DSINFRA=$(ctr_of dsinfra)

say "the DaemonSet pod's container is restarted by the kubelet"
crictl stop "$DS_CTR" >/dev/null || die "stopping the plugin's container"
wait_for "the kubelet to restart the plugin's container" sh -c \
  "[ \"\$(kubectl -n nri-cpupool get pod nri-cpupool-localhost -o jsonpath='{.status.containerStatuses[0].restartCount}')\" -ge 1 ]"
wait_for "the restarted plugin's metrics" metrics_answer
check "dsexcl: same container" "$(ctr_of dsexcl)" "$DSEXCL"
check "dsexcl: same CPUs" "$(cpuset_of "$DSEXCL")" "$LAST"
check "dsinfra: same CPUs" "$(cpuset_of "$DSINFRA")" "$INFRA"

say "the DaemonSet pod is deleted and created again (a rollout)"
kubectl -n nri-cpupool delete pod nri-cpupool-localhost --wait=true --timeout=90s >/dev/null || die "deleting the DaemonSet pod"
check "metrics gone with the pod" "$(metrics_answer && echo yes || echo no)" no
ds_pod nri-cpupool-localhost
wait_for "the new DaemonSet pod's metrics" metrics_answer
check "dsexcl: same container after the rollout" "$(ctr_of dsexcl)" "$DSEXCL"
check "dsexcl: same CPUs after the rollout" "$(cpuset_of "$DSEXCL")" "$LAST"
check "dsinfra: same CPUs after the rollout" "$(cpuset_of "$DSINFRA")" "$INFRA"
say "the DaemonSet controller rolls the plugin out (maxSurge 1) under a create storm (issue 34)"
# The real controller now: the new pod starts beside the old one, waits for
# the state directory lock, and takes over when the controller deletes the
# old one. Pods created meanwhile are pinned by one of the two, or, created
# in between, at the new one's Synchronize: none is left unpinned, and no
# record is lost.
kubectl -n nri-cpupool delete pod nri-cpupool-localhost --wait=true --timeout=90s >/dev/null || die "deleting the DaemonSet pod"
start_controller_manager daemonset-controller,garbage-collector-controller
ds_pods() { kubectl -n nri-cpupool get pods -l app.kubernetes.io/name=nri-cpupool -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}'; }
ds_settled() { # one plugin pod, ready, of the DaemonSet's current template
  [ "$(kubectl -n nri-cpupool get daemonset nri-cpupool -o jsonpath='{.status.numberReady}/{.status.updatedNumberScheduled}/{.status.desiredNumberScheduled}')" = 1/1/1 ] &&
    [ "$(ds_pods | wc -l)" = 1 ]
}
wait_for "the DaemonSet controller's pod" ds_settled
wait_for "its metrics" metrics_answer
OLD_DS_POD=$(ds_pods)
STORM=20
(for i in $(seq 1 "$STORM"); do pod "storm$i" --request cpu=10m; done) &
STORM_PID=$!
kubectl -n nri-cpupool patch daemonset nri-cpupool --type merge \
  -p '{"spec": {"template": {"metadata": {"annotations": {"example.com/rollout": "2"}}}}}' >/dev/null || die "patching the DaemonSet"
wait "$STORM_PID" || die "creating the storm's pods"
kubectl -n nri-cpupool rollout status daemonset/nri-cpupool --timeout=180s >/dev/null || die "the rollout did not finish: $(ds_pods)"
wait_for "one plugin pod of the new template" ds_settled
NEW_DS_POD=$(ds_pods)
check "rollout: one plugin pod, not the old one" "$(ds_pods | wc -l) $([ "$NEW_DS_POD" != "$OLD_DS_POD" ] && echo new)" "1 new"
NEW_LOG=$(kubectl -n nri-cpupool logs "$NEW_DS_POD" 2>&1)
if grep -q "waiting for it to exit" <<<"$NEW_LOG"; then
  check_contains "rollout: the new pod waited for the old one's lock and says it took over" "$NEW_LOG" "took the state directory lock"
else
  info "the new pod found the lock free (the old one had exited before it asked)"
fi
wait_for "the new pod's metrics" metrics_answer
pinned=0 unpinned=""
for i in $(seq 1 "$STORM"); do
  running "storm$i"
  ctr=$(ctr_of "storm$i") sb=$(sandbox_of "storm$i")
  if [ "$(cpuset_of "$ctr")" = "$INFRA" ] && [ "$(cpuset_of "$sb")" = "$INFRA" ]; then
    pinned=$((pinned + 1))
  else
    unpinned="$unpinned storm$i:$(cpuset_of "$ctr")/$(cpuset_of "$sb")"
  fi
done
check "rollout: every storm pod and its pause container on infra$unpinned" "$pinned" "$STORM"
storm_recorded() {
  local n=0 i
  for i in $(seq 1 "$STORM"); do grep -q "$(ctr_of "storm$i")" "$W"/ds-state/*.json && n=$((n + 1)); done
  [ "$n" = "$STORM" ]
}
wait_for "every storm container in the state file" storm_recorded
check "rollout: every storm container in the state file" "$(storm_recorded && echo yes)" yes
check "dsexcl: same container after the controller's rollout" "$(ctr_of dsexcl)" "$DSEXCL"
check "dsexcl: same CPUs after the controller's rollout" "$(cpuset_of "$DSEXCL")" "$LAST"
storms=()
for i in $(seq 1 "$STORM"); do storms+=("storm$i"); done
delete_pods "${storms[@]}"
pod dsexcl2 --annotation pool.cpupool.dev=exclusive --request cpu=100m
check_contains "a second exclusive pod is refused: the restarted plugin remembers the first" "$(waiting_message dsexcl2)" "pool exclusive cannot fit"
delete_pods dsexcl dsexcl2 dsinfra
kubectl delete -f "$W/ds.yaml" --wait=true --timeout=90s >/dev/null 2>&1 || true
# The Helm chart, with the same image and the DaemonSet controller (chart.sh).
chart_suite
stop_pids "$PIDS_controller_manager"; PIDS_controller_manager=""
