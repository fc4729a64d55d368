#!/usr/bin/env bash
# The Helm chart (deploy/helm/nri-cpupool), offline, for make lint: helm
# lint with each values file of its ci/ directory, helm template of each,
# checked by tools/chartcheck (every object decoded strictly into its API
# type, the config parsed as the daemon does, the pod's mounts and probes
# consistent) against the kinds the file's "# chartcheck:" line expects;
# the drop-ins it renders say what packaging/'s do; and values that cannot
# work are refused with the chart's message.
set -euo pipefail
cd "$(dirname "$0")/.."
HELM=${HELM:-helm}
CHART=deploy/helm/nri-cpupool
out=$(mktemp -d /tmp/nri-cpupool-helm.XXXXXX)
trap 'rm -rf "$out"' EXIT

go build -o "$out/chartcheck" ./tools/chartcheck
"$HELM" lint --strict "$CHART" >/dev/null || { "$HELM" lint --strict "$CHART"; exit 1; }
args=()
for values in "$CHART"/ci/*-values.yaml; do
  name=$(basename "$values" -values.yaml)
  "$HELM" lint --strict "$CHART" -f "$values" >"$out/lint-$name" 2>&1 || { cat "$out/lint-$name"; exit 1; }
  "$HELM" template nri-cpupool "$CHART" --namespace nri-cpupool -f "$values" >"$out/$name.yaml"
  expect=$(sed -n 's/^# chartcheck: //p' "$values")
  [ -n "$expect" ] || { echo "$values: no '# chartcheck: KIND=N,...' line"; exit 1; }
  args+=("$name")
  "$out/chartcheck" -expect "$expect" "$out/$name.yaml"
done
echo "helm lint --strict: the chart and ${#args[@]} values files (${args[*]})"

# dropin FILE KEY: the lines of the drop-in KEY of a rendered ConfigMap,
# or of a packaged drop-in, without comments and blank lines.
settings() { grep -v -E '^\s*(#|$)' | sed 's/^ *//'; }
rendered() { awk -v key="  $2: |" '$0 == key {on = 1; next} on && /^  [^ ]/ {on = 0} on {print}' "$1" | settings; }
"$HELM" template nri-cpupool "$CHART" --show-only templates/runtime-configmap.yaml --set runtime.failClosed=true >"$out/containerd-dropin.yaml"
"$HELM" template nri-cpupool "$CHART" --show-only templates/runtime-configmap.yaml --set runtime.failClosed=true --set runtime.name=crio >"$out/crio-dropin.yaml"
for pair in containerd-dropin:nri-cpupool.toml:packaging/containerd/nri-cpupool.toml \
  containerd-dropin:nri-cpupool-fail-closed.toml:packaging/containerd/nri-cpupool-fail-closed.toml \
  crio-dropin:10-nri-cpupool.conf:packaging/crio/10-nri-cpupool.conf \
  crio-dropin:20-nri-cpupool-fail-closed.conf:packaging/crio/20-nri-cpupool-fail-closed.conf; do
  IFS=: read -r file key packaged <<<"$pair"
  if ! diff <(rendered "$out/$file.yaml" "$key") <(settings <"$packaged") >"$out/diff"; then
    echo "the chart's $key differs from $packaged (< chart, > packaged):"; cat "$out/diff"; exit 1
  fi
done
echo "the chart's runtime drop-ins set what packaging/'s do"

# A fail-closed drop-in the chart copied outlives helm uninstall, and a
# runtime restarted with it and no plugin creates no unannotated container:
# the notes name the file to delete.
for pair in containerd:/etc/containerd/conf.d/nri-cpupool-fail-closed.toml crio:/etc/crio/crio.conf.d/20-nri-cpupool-fail-closed.conf; do
  notes=$("$HELM" install nri-cpupool "$CHART" --dry-run=client --set runtime.name="${pair%%:*}" --set runtime.failClosed=true --set runtime.dropIn.install=true)
  case $notes in *"delete ${pair#*:}"*) ;; *) echo "the notes of a fail-closed ${pair%%:*} install do not say to delete ${pair#*:} at uninstall"; exit 1 ;; esac
done
echo "the notes say which fail-closed drop-in to delete at uninstall"

# helm upgrade from runtime.failClosed=true to false (runtime.dropIn.install
# on): the new release's init container, run against a directory standing
# for the node's drop-in directory, deletes the fail-closed drop-in the old
# one copied there, or the runtime would require the plugin at its next
# start; and the new pod keeps the tolerate annotation, or a runtime still
# running with that validator would refuse it (and its init container).
upgrade() { # RUNTIME FAILCLOSED NODE_DIR: render, then run the init container's script
  local r=$out/upgrade-$1-$2 key
  "$HELM" template nri-cpupool "$CHART" --set runtime.name="$1" --set runtime.failClosed="$2" --set runtime.dropIn.install=true >"$r.yaml"
  "$HELM" template nri-cpupool "$CHART" --set runtime.name="$1" --set runtime.failClosed="$2" --show-only templates/runtime-configmap.yaml >"$r-cm.yaml"
  mkdir -p "$r.d"
  while read -r key; do
    awk -v key="  $key: |" '$0 == key {on = 1; next} on && /^  [^ ]/ {on = 0} on {print}' "$r-cm.yaml" >"$r.d/$key"
  done < <(sed -n 's/^  \([^ ]*\): |$/\1/p' "$r-cm.yaml")
  "$out/chartcheck" -init-script "$r.yaml" | sed -e "s#/host-drop-in/#$3/#g" -e "s#/drop-in/#$r.d/#g" >"$r.sh"
  sh "$r.sh"
  grep -q '^        tolerate-missing-plugins.nri.io: "true"$' "$r.yaml" || { echo "runtime.failClosed=$2: the chart's pod is not annotated tolerate-missing-plugins.nri.io"; exit 1; }
}
for pair in containerd:nri-cpupool-fail-closed.toml crio:20-nri-cpupool-fail-closed.conf; do
  node=$out/node-${pair%%:*}; mkdir -p "$node"
  upgrade "${pair%%:*}" true "$node"
  [ -f "$node/${pair#*:}" ] || { echo "${pair%%:*}: runtime.failClosed=true did not copy ${pair#*:} (node: $(find "$node" -mindepth 1 -printf '%f '))"; exit 1; }
  upgrade "${pair%%:*}" false "$node"
  [ ! -e "$node/${pair#*:}" ] || { echo "${pair%%:*}: after an upgrade to runtime.failClosed=false, ${pair#*:} is still in the drop-in directory: at its next restart the runtime requires the plugin"; exit 1; }
  [ "$(find "$node" -mindepth 1 | wc -l)" -eq 1 ] || { echo "${pair%%:*}: after an upgrade to runtime.failClosed=false the drop-in directory holds $(find "$node" -mindepth 1 -printf '%f '), want the plugin's drop-in only"; exit 1; }
done
echo "an upgrade to runtime.failClosed=false deletes the fail-closed drop-in; the chart's pod always tolerates a missing plugin"

# podAnnotations that set tolerate-missing-plugins.nri.io themselves: the
# pod's annotations hold the key once (twice is a duplicate key, which a
# strict YAML reader refuses and others resolve either way).
for value in true false; do
  n=$("$HELM" template nri-cpupool "$CHART" --show-only templates/daemonset.yaml --set-string "podAnnotations.tolerate-missing-plugins\\.nri\\.io=$value" \
    | grep -c '^        tolerate-missing-plugins\.nri\.io:' || true)
  [ "$n" -eq 1 ] || { echo "podAnnotations.tolerate-missing-plugins.nri.io=$value: the pod's annotations hold the key $n times, want once"; exit 1; }
done
echo "podAnnotations that set tolerate-missing-plugins.nri.io give the key once"

# One name on the node for each fail-closed drop-in, whoever puts it there:
# every "cp .../examples/X DEST" the docs and the packaged files show copies
# it to the file name the chart's init container writes (and its notes name).
chart_names=$(sed -n 's/^  \([^ ]*-fail-closed\.[a-z]*\): |$/\1/p' "$out/containerd-dropin.yaml" "$out/crio-dropin.yaml" | sort -u | tr '\n' ' ')
[ "$(wc -w <<<"$chart_names")" -eq 2 ] || { echo "the chart's fail-closed drop-ins: '$chart_names', want one per runtime"; exit 1; }
copies=$(grep -h -o 'cp /usr/share/doc/nri-cpupool/examples/[^ ]* [^ `]*' docs/*.md packaging/containerd/* packaging/crio/*)
[ -n "$copies" ] || { echo "no 'cp .../examples/...' instruction found in docs/ or packaging/"; exit 1; }
while read -r _ _ dest; do
  case " $chart_names" in *" ${dest##*/} "*) ;; *) echo "'cp ... $dest' installs the fail-closed drop-in under another name than the chart's ($chart_names)"; exit 1 ;; esac
done <<<"$copies"
echo "the docs copy each fail-closed drop-in to the chart's name ($chart_names)"

# The notes' validate hint runs in the plugin's container: the binary the
# image's entrypoint is (tools/mkimage) with the --config the pod runs with.
"$HELM" template nri-cpupool "$CHART" --show-only templates/daemonset.yaml >"$out/ds.yaml"
config_path=$(awk '/- --config$/ {getline; print $2; exit}' "$out/ds.yaml")
binary=/usr/bin/nri-cpupool
grep -q "\"Entrypoint\": \[\]string{\"$binary\"}" tools/mkimage/main.go || { echo "tools/mkimage: the image's entrypoint is not $binary"; exit 1; }
notes=$("$HELM" install nri-cpupool "$CHART" --dry-run=client --namespace nri-cpupool)
want="kubectl -n nri-cpupool exec POD -c nri-cpupool -- $binary validate --config $config_path"
case $notes in *"$want"*) ;; *) echo "the notes do not say '$want':"; echo "$notes"; exit 1 ;; esac
echo "the notes' validate hint runs $binary validate --config $config_path in the plugin's container"

# refused VALUES... NEEDLE: helm template fails, saying NEEDLE.
refused() {
  local needle=${*: -1} msg
  if msg=$("$HELM" template nri-cpupool "$CHART" "${@:1:$#-1}" 2>&1); then echo "helm template $*: rendered, want refused"; exit 1; fi
  case $msg in *"$needle"*) ;; *) echo "helm template $*: refused with '$msg', want '$needle'"; exit 1 ;; esac
}
refused --set config.dra.enabled=true --set config.kubelet.devicePlugin=true "would both hand out the exclusive pool"
refused --set config.metricsAddress= "the probes need config.metricsAddress"
refused --set runtime.name=docker 'runtime.name is "docker"'
refused --set config.sandboxAffinity=true "cannot set pause processes' affinity"
for tuning in config.pools.exclusive.irqIsolation=optOut config.pools.shared.housekeeping=always \
  config.kernelWork.receivePacketSteering=held config.kernelWork.workqueues=held config.power.classes.fast.governor=performance; do
  key=${tuning%%.fast.*}
  refused --set "$tuning" "${key%%=*}"
  refused --set "$tuning" "which the chart's unprivileged pod cannot; set privileged=true"
done
# values.schema.json: what the binary would refuse in the config (an
# unknown key, a value outside its set) and unknown values of the chart.
refused --set config.pools.sahred.count=2 "additional properties 'sahred' not allowed"
refused --set-string config.pools.exclusive.cpus=2-x "/config/pools/exclusive/cpus"
refused --set config.logLevel=verbose "/config/logLevel"
refused --set config.pools.shared.irqIsolation=optIn "/config/pools/shared/irqIsolation"
refused --set privilged=true "additional properties 'privilged' not allowed"
# Values the API server would take into a pod no kubelet starts:
# a hostPath volume with an empty or relative path, the image ":dev";
# and values removed with null, which stopped the rendering at a template's
# nil pointer ("index of untyped nil", "nil pointer evaluating").
refused --set host.sysfs= "at '/host/sysfs': '' does not match pattern '^/'"
refused --set host.cgroup=relative "at '/host/cgroup': 'relative' does not match pattern '^/'"
refused --set host.procCmdline=proc/cmdline "at '/host/procCmdline'"
refused --set runtime.dropIn.dir=etc/containerd/conf.d "at '/runtime/dropIn/dir'"
refused --set image.repository= "at '/image/repository': minLength"
refused --set config=null "missing property 'config'"
refused --set probes=null "missing property 'probes'"
refused --set probes.liveness=null "missing property 'liveness'"
# A probe without a path (review of session 63): the kubelet GETs /, the
# daemon serves /healthz, /readyz and /metrics only, so liveness restarted
# the plugin every ~35 s for ever and readiness never passed. Nor a path it
# does not serve: /livez or /healthz/ installed, 404 at every
# probe. tools/chartcheck's TestProbePathsAreWhatTheDaemonServes keeps the
# schema's pattern to the daemon's routes.
refused --set probes.liveness.path=null "at '/probes/liveness': missing property 'path'"
refused --set probes.liveness.path= "at '/probes/liveness/path': '' does not match pattern"
refused --set probes.liveness.path=/livez "at '/probes/liveness/path': '/livez' does not match pattern"
refused --set probes.liveness.path=/healthz/ "at '/probes/liveness/path': '/healthz/' does not match pattern"
# Liveness on readiness: /readyz fails while the plugin is merely not
# ready (before the runtime's first Synchronize), and the kubelet would
# restart a healthy plugin then. Readiness on /readyz is the default.
refused --set probes.liveness.path=/readyz "at '/probes/liveness/path': value must be '/healthz'"
refused --set probes.liveness.path=/readyz?verbose "at '/probes/liveness/path': value must be '/healthz'"
refused --set probes.readiness.path=null "at '/probes/readiness': missing property 'path'"
refused --set probes.readiness.path=readyz "at '/probes/readiness/path': 'readyz' does not match pattern"
refused --set probes.readiness.path=/health "at '/probes/readiness/path': '/health' does not match pattern"
# A value read only while a feature is on is required only then.
refused --set config.dra.enabled=true --set config.dra.cdiDir=null "at '/config/dra': missing property 'cdiDir'"
refused --set config.dra.enabled=true --set config.dra.pluginDir=var/lib "at '/config/dra/pluginDir': 'var/lib' does not match pattern '^/'"
refused --set config.dra.enabled=true --set deviceClasses=null "missing property 'deviceClasses'"
refused --set config.kubelet.devicePlugin=true --set config.kubelet.devicePluginDir=null "at '/config/kubelet': missing property 'devicePluginDir'"
refused --set runtime.dropIn.install=true --set runtime.dropIn.image=null "at '/runtime/dropIn': missing property 'image'"
# Two volume mounts at one path, which the API server refuses at install
# ("must be unique"): the state directory at the NRI socket's, over the
# config's mount, a DRA directory at another mount's.
refused --set config.stateFile=/var/run/nri/state.json "config.stateFile's directory and config.nriSocket's directory are both /var/run/nri"
refused --set config.stateFile=/etc/nri-cpupool/state.json "the config file's mount and config.stateFile's directory are both /etc/nri-cpupool"
refused --set config.dra.enabled=true --set config.dra.cdiDir=/var/run/nri/ "config.nriSocket's directory and config.dra.cdiDir are both /var/run/nri"
refused --set config.kubelet.devicePlugin=true --set config.kubelet.devicePluginDir=/var/lib/nri-cpupool "config.stateFile's directory and config.kubelet.devicePluginDir are both /var/lib/nri-cpupool"
# One line per other entry of nri-cpupool.check's mount list (an
# entry dropped from it failed no test); tools/chartcheck's
# TestHelperListsTheDaemonSetsMounts keeps the list to daemonset.yaml's.
refused --set config.stateFile=/host/sys/state.json "config.stateFile's directory and the host's /sys mount are both /host/sys"
refused --set config.stateFile=/host/proc/cmdline/state.json "config.stateFile's directory and the host's /proc/cmdline mount are both /host/proc/cmdline"
refused --set config.stateFile=/host/sys/fs/cgroup/state.json "config.stateFile's directory and the host's cgroup tree mount are both /host/sys/fs/cgroup"
refused --set config.dra.enabled=true --set config.dra.pluginDir=/var/lib/nri-cpupool "config.stateFile's directory and config.dra.pluginDir are both /var/lib/nri-cpupool"
refused --set config.dra.enabled=true --set config.dra.registryDir=/var/lib/kubelet/plugins/cpupool.dev "config.dra.pluginDir and config.dra.registryDir are both /var/lib/kubelet/plugins/cpupool.dev"
# A mount inside the config's (a read-only ConfigMap: the runtime cannot
# make the mount point, the pod never starts) or above it (the node's
# directory over the image's): the API server takes both.
refused --set config.stateFile=/etc/nri-cpupool/state/state.json "config.stateFile's directory is /etc/nri-cpupool/state, inside the config file's mount /etc/nri-cpupool"
refused --set config.stateFile=/etc//nri-cpupool/./state/state.json "config.stateFile's directory is /etc/nri-cpupool/state, inside the config file's mount /etc/nri-cpupool"
refused --set config.nriSocket=/etc/nri-cpupool/nri/nri.sock "config.nriSocket's directory is /etc/nri-cpupool/nri, inside the config file's mount /etc/nri-cpupool"
refused --set config.stateFile=/etc/state.json "config.stateFile's directory is /etc, above the config file's mount /etc/nri-cpupool"
refused --set config.stateFile=/state.json "config.stateFile's directory is /, above the config file's mount /etc/nri-cpupool"
refused --set config.dra.enabled=true --set config.dra.cdiDir=/etc/nri-cpupool/cdi "config.dra.cdiDir is /etc/nri-cpupool/cdi, inside the config file's mount /etc/nri-cpupool"
# A mount inside one of the pod's fixed host mounts or above one, which the
# API server takes: in the read-only sysfs the runtime cannot make the mount
# point (the pod never starts), under the file /proc/cmdline nothing can be
# mounted, in the cgroup tree the mount point is a cgroup made on the host;
# above one (/host) the node's directory is mounted read-write and the
# fixed mount's point made in it. tools/chartcheck refuses the same
# (checkNestedInHostMounts).
refused --set config.stateFile=/host/sys/nri-cpupool/state.json "config.stateFile's directory is /host/sys/nri-cpupool, inside the host's /sys mount /host/sys"
refused --set privileged=true --set config.stateFile=/host/sys/nri-cpupool/state.json "config.stateFile's directory is /host/sys/nri-cpupool, inside the host's /sys mount /host/sys"
refused --set config.stateFile=/host/proc/cmdline/x/state.json "config.stateFile's directory is /host/proc/cmdline/x, inside the host's /proc/cmdline mount /host/proc/cmdline, a file"
refused --set config.stateFile=/host/sys/fs/cgroup/nri-cpupool/state.json "config.stateFile's directory is /host/sys/fs/cgroup/nri-cpupool, inside the host's cgroup tree mount /host/sys/fs/cgroup"
refused --set config.stateFile=/host/state.json "config.stateFile's directory is /host, above the host's /sys mount /host/sys"
refused --set config.stateFile=/host/proc/state.json "config.stateFile's directory is /host/proc, above the host's /proc/cmdline mount /host/proc/cmdline"
refused --set config.stateFile=/host/sys/fs/state.json "config.stateFile's directory is /host/sys/fs, inside the host's /sys mount /host/sys"
refused --set config.nriSocket=/host/sys/nri/nri.sock "config.nriSocket's directory is /host/sys/nri, inside the host's /sys mount /host/sys"
refused --set config.kubelet.devicePlugin=true --set config.kubelet.devicePluginDir=/host/sys/fs/cgroup/dp "config.kubelet.devicePluginDir is /host/sys/fs/cgroup/dp, inside the host's cgroup tree mount"
refused --set config.dra.enabled=true --set config.dra.cdiDir=/host "config.dra.cdiDir is /host, above the host's /sys mount /host/sys"
# Nested otherwise is fine: the state directory below the NRI socket's.
"$HELM" template nri-cpupool "$CHART" --set config.stateFile=/var/run/nri/state/state.json >"$out/nested.yaml" || { echo "helm template --set config.stateFile=/var/run/nri/state/state.json: refused, want rendered"; exit 1; }
"$out/chartcheck" "$out/nested.yaml" >/dev/null || { echo "chartcheck refuses the state directory below the NRI socket's"; exit 1; }
echo "values that cannot work are refused"

# Every key of values.yaml removed (--set KEY=null, Helm's way to remove a
# key), with the chart's defaults and with the features on whose templates
# read the most (DRA, the drop-in's init container, Events): the chart
# renders what chartcheck passes, or refuses it naming the key; never a
# template's nil-pointer error, which names a template line instead. Only
# the keys listed here are refused: each of them never rendered a pod that
# starts (at f85a0cf, before the schema required anything, a template's nil
# pointer, a hostPath without a path, a daemon looking where the pod
# mounts nothing, or a probe without a path, which GETs / and gets 404:
# liveness restarts the plugin for ever, readiness never passes). Any other key refused is a regression: a release that
# removed it could no longer be upgraded (docs/install.md, "With Helm").
# The helm runs are parallel: they wait more than they compute.
keys() { # the dotted paths of a values file's keys (block mappings)
  awk '/^[[:space:]]*(#|$)/ || /^[[:space:]]*- / {next}
    { match($0, /^ */); d = RLENGTH / 2; line = substr($0, RLENGTH + 1) }
    line ~ /^[A-Za-z0-9_-]+:/ { p[d] = substr(line, 1, index(line, ":") - 1); s = p[0]; for (i = 1; i <= d; i++) s = s "." p[i]; print s }' "$1"
}
null_refused_always="config config.cgroupRoot config.dra config.kubelet config.kubernetes config.metricsAddress config.nriSocket
  config.stateFile config.sysfsRoot host host.cgroup host.procCmdline host.sysfs image image.repository probes probes.liveness
  probes.liveness.path probes.readiness.path runtime runtime.dropIn runtime.name"
null_refused_features="$null_refused_always config.dra.cdiDir config.dra.pluginDir config.dra.registryDir deviceClasses runtime.dropIn.image"
null_one() { # SWEEP KEY VALUES...: one line, "SWEEP KEY ok", "SWEEP KEY refused ERROR" or "SWEEP KEY bad WHY"
  local sweep=$1 key=$2 r=$out/null-$1-$2 err; shift 2
  if "$HELM" template nri-cpupool "$CHART" "$@" --set "$key=null" >"$r.yaml" 2>"$r.err"; then
    if "$out/chartcheck" "$r.yaml" >/dev/null 2>"$r.err"; then echo "$sweep $key ok"; else echo "$sweep $key bad renders what chartcheck refuses: $(tr '\n' ' ' <"$r.err")"; fi
  else
    err=$(tr '\n' ' ' <"$r.err")
    case $err in
      *"nil pointer"* | *"untyped nil"* | *"error calling"* | *"interface conversion"* | *"%!"* | *"<nil>"*) echo "$sweep $key bad a template's error, not a refusal of the value: $err" ;;
      *"${key##*.}"*) echo "$sweep $key refused $err" ;;
      *) echo "$sweep $key bad refused without naming ${key##*.}: $err" ;;
    esac
  fi
  rm -f "$r.yaml" "$r.err"
}
export -f null_one; export HELM CHART out
keys "$CHART/values.yaml" >"$out/keys"
n=$(wc -l <"$out/keys")
[ "$n" -gt 100 ] || { echo "values.yaml: $n keys found, the key reader is broken"; exit 1; }
while read -r key; do
  echo "defaults $key"
  echo "features $key -f $CHART/ci/dra-values.yaml --set runtime.dropIn.install=true --set config.kubernetes.events=true"
done <"$out/keys" | xargs -P 4 -L 1 bash -c 'null_one "$@"' _ >"$out/null-results"
[ "$(wc -l <"$out/null-results")" -eq $((2 * n)) ] || { echo "the null sweep gave $(wc -l <"$out/null-results") results, want $((2 * n))"; exit 1; }
failed=0
while read -r sweep key result why; do
  case $sweep in defaults) listed=$null_refused_always ;; *) listed=$null_refused_features ;; esac
  case " ${listed//$'\n'/ } " in *" $key "*) want=refused ;; *) want=ok ;; esac
  if [ "$result" = bad ]; then
    echo "$sweep: --set $key=null: $why"; failed=1
  elif [ "$result" != "$want" ]; then
    if [ "$want" = ok ]; then
      echo "$sweep: --set $key=null is refused, but it rendered a pod that starts before the chart required anything: a release that removed it cannot be upgraded ($why)"
    else
      echo "$sweep: --set $key=null renders a pod chartcheck passes: take it off test/helm.sh's refused list"
    fi
    failed=1
  fi
done <"$out/null-results"
[ "$failed" -eq 0 ] || exit 1
echo "each of the $n keys of values.yaml removed, with the defaults and with DRA, the drop-in's init container and Events on, renders a pod chartcheck passes, or is refused by name when it never rendered one"

# Values as --set and values files give them: a whole-number image tag is
# an int64 from --set, taken as written. A values file's unquoted number is
# a float64 by then, its spelling lost (0123 read as 83, 0x1F as 31, 2.0 as
# 2, a long one rounded): refused, saying to quote it; quoted, it renders as
# written. A fraction (1.20 is YAML's 1.2) is refused by the schema; a null
# node selector (Helm's way to remove a key) is no "<nil>" label.
image_of() { "$HELM" template nri-cpupool "$CHART" --show-only templates/daemonset.yaml --set image.repository=r.example/p "$@" | sed -n 's/^ *image: r\.example\/p://p'; }
printf 'image:\n  tag: "0123"\n' >"$out/tag-quoted.yaml"
for pair in "2:--set image.tag=2" "20261206235959123:--set image.tag=20261206235959123" "0123:-f $out/tag-quoted.yaml" \
  "v1.2.3:--set image.tag=v1.2.3" "2:--set-string image.tag=2"; do
  # shellcheck disable=SC2086 # the pair's flags are two words
  got=$(image_of ${pair#*:} 2>&1) || { echo "helm template ${pair#*:}: $got"; exit 1; }
  [ "$got" = "${pair%%:*}" ] || { echo "helm template ${pair#*:}: image tag '$got', want '${pair%%:*}'"; exit 1; }
done
for tag in 20261206 0123 0x1F 2.0 20261206235959123; do
  printf 'image:\n  tag: %s\n' "$tag" >"$out/tag-values.yaml"
  refused -f "$out/tag-values.yaml" "quote the image tag in a values file"
done
printf 'image:\n  tag: 1.20\n' >"$out/tag-values.yaml"
refused -f "$out/tag-values.yaml" "/image/tag"
if "$HELM" template nri-cpupool "$CHART" --show-only templates/daemonset.yaml --set nodeSelector.a=null --set nodeSelector.b=true | grep -q ': "<nil>"'; then
  echo "helm template --set nodeSelector.a=null: renders a '<nil>' label, which no node has"; exit 1
fi
echo "an image tag given as a number with --set renders as written, one unquoted in a values file is refused; a null node selector is left out"
