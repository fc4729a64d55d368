#!/usr/bin/env bash
# Checks that `make install` and the packages (`make package`: .deb and .rpm from
# packaging/nfpm.yaml) lay out what docs/install.md promises, that
# the unit passes `systemd-analyze verify`, that the .deb installs into a
# scratch root, and that an upgrade keeps a changed config and the state file.
# Needs dpkg-deb and rpm (apt-get install rpm); NFPM names the nfpm binary.
set -euo pipefail
cd "$(dirname "$0")/.."
NFPM=${NFPM:-nfpm}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0 failed=0
expect() { if "$@" >/dev/null 2>&1; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $*"; fi; }
expect_not() { if "$@" >/dev/null 2>&1; then failed=$((failed + 1)); echo "FAIL: not $*"; else passed=$((passed + 1)); fi; }
# capture FILE CMD...: runs CMD with its stderr in FILE (expect discards it).
capture() { local out=$1; shift; "$@" 2>"$out"; }
# output FILE CMD...: runs CMD with its stdout and stderr in FILE.
output() { local out=$1; shift; "$@" >"$out" 2>&1; }

if ! command -v rpm >/dev/null || ! command -v dpkg-deb >/dev/null || ! command -v systemd-analyze >/dev/null; then
  echo "packaging: installing rpm (and dpkg, systemd) with apt-get"
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rpm dpkg systemd >/dev/null
fi

# --- make install ------------------------------------------------------------
root=$work/install
make --no-print-directory install DESTDIR="$root" >/dev/null
for f in usr/local/bin/nri-cpupool usr/local/bin/nri-cpupool-dra etc/systemd/system/nri-cpupool.service etc/nri-cpupool/config.yaml \
         etc/containerd/conf.d/nri-cpupool.toml etc/crio/crio.conf.d/10-nri-cpupool.conf var/lib/nri-cpupool; do
  expect test -e "$root/$f"
done
expect "$root/usr/local/bin/nri-cpupool" validate --config "$root/etc/nri-cpupool/config.yaml"
expect "$root/usr/local/bin/nri-cpupool-dra" validate --config "$root/etc/nri-cpupool/config.yaml"
echo "custom: keep me" > "$root/etc/nri-cpupool/config.yaml"
make --no-print-directory install DESTDIR="$root" >/dev/null
expect grep -q "keep me" "$root/etc/nri-cpupool/config.yaml"   # an operator's config survives reinstalls
# An operator's edited runtime drop-in survives make install, as the config
# does, and make uninstall: the shipped one goes to share/doc (never beside it
# as a .new: CRI-O reads every file of crio.conf.d, whatever its name).
# An unedited one is replaced and removed.
examples=$root/usr/local/share/doc/nri-cpupool/examples
expect cmp packaging/containerd/nri-cpupool.toml "$examples/containerd.toml"
expect cmp packaging/crio/10-nri-cpupool.conf "$examples/crio.conf"
printf "# the operator's: a raised timeout\nversion = 3\n[plugins.'io.containerd.nri.v1.nri']\n  plugin_request_timeout = '10s'\n" \
  > "$root/etc/containerd/conf.d/nri-cpupool.toml"
cp "$root/etc/containerd/conf.d/nri-cpupool.toml" "$work/operator.toml"
make --no-print-directory install DESTDIR="$root" >"$work/install.out" 2>&1
expect cmp "$work/operator.toml" "$root/etc/containerd/conf.d/nri-cpupool.toml"
expect grep -qF "keeping $root/etc/containerd/conf.d/nri-cpupool.toml:" "$work/install.out"
expect grep -qF "$examples/containerd.toml" "$work/install.out"
expect test -z "$(find "$root/etc/containerd/conf.d" -name 'nri-cpupool.toml?*')"   # no .new beside it
expect cmp packaging/crio/10-nri-cpupool.conf "$root/etc/crio/crio.conf.d/10-nri-cpupool.conf"
expect_not grep -qF "keeping $root/etc/crio" "$work/install.out"
expect test -z "$(find "$root/etc/crio/crio.conf.d" -name '10-nri-cpupool.conf?*')"
expect grep -q "ExecStart=/usr/local/bin/nri-cpupool run --config /etc/nri-cpupool/config.yaml" "$root/etc/systemd/system/nri-cpupool.service"
# shellcheck disable=SC2016 # $MAINPID is systemd's, not the shell's
expect grep -qxF 'ExecReload=/bin/kill -HUP $MAINPID' "$root/etc/systemd/system/nri-cpupool.service" # systemctl reload: SIGHUP
# Ordered after the runtimes, never starting one: Wants=containerd.service
# started containerd on a CRI-O node that has its unit, and its NRI took
# over CRI-O's socket.
expect grep -qxF 'After=containerd.service crio.service' "$root/etc/systemd/system/nri-cpupool.service"
expect_not grep -qE '^(Wants|Requires|BindsTo|Requisite)=.*(containerd|crio)' "$root/etc/systemd/system/nri-cpupool.service"

# make uninstall with DESTDIR removes files only; the edited drop-in stays.
make --no-print-directory uninstall DESTDIR="$root" >"$work/uninstall.out" 2>&1
expect cmp "$work/operator.toml" "$root/etc/containerd/conf.d/nri-cpupool.toml"
expect grep -qF "keeping $root/etc/containerd/conf.d/nri-cpupool.toml:" "$work/uninstall.out"
expect_not test -e "$root/etc/crio/crio.conf.d/10-nri-cpupool.conf"
expect_not test -e "$examples/containerd.toml"
expect_not test -e "$root/usr/local/bin/nri-cpupool"

# --- the runtime drop-ins keep the operator's settings --------------------------------
# A drop-in is merged key by key over the runtime's config and wins: every key
# it sets replaces the operator's own (a raised plugin_request_timeout, a
# moved NRI socket). It sets only what the plugin needs: NRI on, and
# containerd's hugepage limits in the OCI spec.
nri_keys='^\s*(socket_path|plugin_path|plugin_config_path|plugin_registration_timeout|plugin_request_timeout|nri_listen|nri_plugin_dir|nri_plugin_config_dir|nri_plugin_registration_timeout|nri_plugin_request_timeout)\s*='
expect_not grep -qE "$nri_keys" packaging/containerd/nri-cpupool.toml
expect_not grep -qE "$nri_keys" packaging/crio/10-nri-cpupool.conf
containerd=${CONTAINERD:-${XDG_CACHE_HOME:-$HOME/.cache}/nri-cpupool-e2e/bin/containerd}
if [ -x "$containerd" ]; then
  # `containerd config dump` merges the config and its imports; no daemon runs.
  mkdir -p "$work/containerd/conf.d"; cp packaging/containerd/nri-cpupool.toml "$work/containerd/conf.d/"
  cat > "$work/containerd/config.toml" <<EOT
version = 3
imports = ["$work/containerd/conf.d/*.toml"]
[plugins.'io.containerd.nri.v1.nri']
  disable = true
  socket_path = '/run/custom/nri.sock'
  plugin_path = '/usr/local/nri/plugins'
  plugin_config_path = '/usr/local/nri/conf.d'
  plugin_registration_timeout = '9s'
  plugin_request_timeout = '10s'
EOT
  timeout 60 "$containerd" --config "$work/containerd/config.toml" config dump >"$work/containerd/dump" 2>&1 || true
  for want in "socket_path = '/run/custom/nri.sock'" "plugin_path = '/usr/local/nri/plugins'" "plugin_config_path = '/usr/local/nri/conf.d'" \
              "plugin_registration_timeout = '9s'" "plugin_request_timeout = '10s'" "disable = false" "disable_hugetlb_controller = false"; do
    expect grep -qF "$want" "$work/containerd/dump"
  done
else
  echo "packaging: no containerd binary ($containerd; make e2e caches one): the containerd drop-in checked by its keys only"
fi
crio=${CRIO:-${XDG_CACHE_HOME:-$HOME/.cache}/nri-cpupool-e2e/crio-v1.36.3/crio}
if [ -x "$crio" ] && unshare -rm true 2>/dev/null; then
  # `crio config` prints the merged config; in a private mount namespace with
  # its run and state directories on a tmpfs, so that it leaves nothing here.
  mkdir -p "$work/crio/crio.conf.d"; cp packaging/crio/10-nri-cpupool.conf "$work/crio/crio.conf.d/"
  cat > "$work/crio/crio.conf" <<EOT
[crio.nri]
enable_nri = false
nri_listen = "/run/custom/nri.sock"
nri_plugin_dir = "/usr/local/nri/plugins"
nri_plugin_config_dir = "/usr/local/nri/conf.d"
nri_plugin_registration_timeout = "9s"
nri_plugin_request_timeout = "10s"
EOT
  # shellcheck disable=SC2016 # "$@" is the inner shell's
  unshare -rm sh -c 'mount -t tmpfs none /run && mount -t tmpfs none /var/lib && exec timeout 60 "$@"' sh \
    "$crio" --config "$work/crio/crio.conf" --config-dir "$work/crio/crio.conf.d" config >"$work/crio/dump" 2>/dev/null || true
  for want in 'nri_listen = "/run/custom/nri.sock"' 'nri_plugin_dir = "/usr/local/nri/plugins"' 'nri_plugin_config_dir = "/usr/local/nri/conf.d"' \
              'nri_plugin_registration_timeout = "9s"' 'nri_plugin_request_timeout = "10s"' 'enable_nri = true'; do
    expect grep -qF "$want" "$work/crio/dump"
  done
else
  echo "packaging: no crio binary ($crio; make e2e unpacks one) or no user namespaces: the CRI-O drop-in checked by its keys only"
fi

# --- make uninstall's restore step (test/uninstall.sh: fake binaries, never this machine's) ---
if bash test/uninstall.sh; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: test/uninstall.sh"; fi

# --- versions that sort (packaging/version.sh) --------------------------------------
# A bare commit hash (538d4e5-1) orders packages at random; without a tag the
# version is 0.0.0~git<commit date>.<hash>, so the later commit is the newer
# package for dpkg and rpm whatever the hashes. A tag is the release; commits
# after it come between it and the next one. VERSION= overrides it.
top=$(pwd)
repo=$work/repo
git init -q "$repo"
commit() { GIT_AUTHOR_DATE="$1" GIT_COMMITTER_DATE="$1" git -C "$repo" -c user.name=t -c user.email=t@example.org commit -q --allow-empty -m "$1"; }
version() { (cd "$repo" && bash "$top/packaging/version.sh"); }
both_order() { # both_order OLDER NEWER: dpkg and rpm agree that OLDER < NEWER
  dpkg --compare-versions "$1-1" lt "$2-1" &&
    [ "$(rpm --eval "%{lua: print(rpm.vercmp('$1', '$2'))}")" = -1 ]
}
commit 2026-01-01T00:00:00Z; v1=$(version)
commit 2026-02-01T00:00:00Z; v2=$(version)
expect grep -qxE '0\.0\.0~git20260101000000\.[0-9a-f]{7,}' <<<"$v1"
expect both_order "$v1" "$v2"
expect_not both_order "$v2" "$v1"   # the check itself can fail
git -C "$repo" tag v1.2.0
expect test "$(version)" = 1.2.0
expect both_order "$v2" 1.2.0
commit 2026-03-01T00:00:00Z; v3=$(version)
expect grep -qxE '1\.2\.0\+git20260301000000\.[0-9a-f]{7,}' <<<"$v3"
expect both_order 1.2.0 "$v3"
expect both_order "$v3" 1.2.1
commit 2026-04-01T00:00:00Z; git -C "$repo" tag v1.3.0-rc1
expect test "$(version)" = 1.3.0~rc1
expect both_order "$v3" 1.3.0~rc1
expect both_order 1.3.0~rc1 1.3.0
echo x > "$repo/f"; git -C "$repo" add f
expect test "$(version)" = 1.3.0~rc1.dirty
expect grep -qF "Version=$(bash packaging/version.sh)'" <(make --no-print-directory -n build)
expect grep -qF "Version=9.9.9'" <(make --no-print-directory -n build VERSION=9.9.9)
v2_deb=$(NFPM=$NFPM bash packaging/package.sh "$v2" deb)
expect test "$(dpkg-deb -f "$v2_deb" Version)" = "$v2-1"
rm -f "$v2_deb"

# --- the packages --------------------------------------------------------------
old=$(NFPM=$NFPM bash packaging/package.sh 1.0.0 deb rpm)
new=$(NFPM=$NFPM bash packaging/package.sh 1.0.1 deb rpm)
old_deb=$(grep '\.deb$' <<<"$old"); old_rpm=$(grep '\.rpm$' <<<"$old")
new_deb=$(grep '\.deb$' <<<"$new"); new_rpm=$(grep '\.rpm$' <<<"$new")
mv "$old_deb" "$old_rpm" "$new_deb" "$new_rpm" "$work/"
old_deb=$work/${old_deb#bin/}; old_rpm=$work/${old_rpm#bin/}; new_deb=$work/${new_deb#bin/}; new_rpm=$work/${new_rpm#bin/}
files=(/usr/bin/nri-cpupool /usr/bin/nri-cpupool-dra /usr/lib/systemd/system/nri-cpupool.service /etc/nri-cpupool/config.yaml
       /etc/containerd/conf.d/nri-cpupool.toml /etc/crio/crio.conf.d/10-nri-cpupool.conf /var/lib/nri-cpupool)
conffiles=(/etc/nri-cpupool/config.yaml /etc/containerd/conf.d/nri-cpupool.toml /etc/crio/crio.conf.d/10-nri-cpupool.conf)

# .deb: contents, metadata, conffiles, scripts, modes.
contents=$(dpkg-deb -c "$old_deb")
for f in "${files[@]}"; do expect grep -qE " \.$f/?\$" <<<"$contents"; done
expect grep -qE '^drwx------ .* \./var/lib/nri-cpupool/$' <<<"$contents"
expect grep -qE '^-rwxr-xr-x .* \./usr/bin/nri-cpupool$' <<<"$contents"
expect grep -qE '^-rwxr-xr-x .* \./usr/bin/nri-cpupool-dra$' <<<"$contents"
expect test "$(dpkg-deb -f "$old_deb" Package)" = nri-cpupool
expect test "$(dpkg-deb -f "$old_deb" Version)" = 1.0.0-1
expect test "$(dpkg-deb -f "$old_deb" Architecture)" = "$(go env GOARCH)"
ctrl=$work/ctrl; mkdir -p "$ctrl"; dpkg-deb -e "$old_deb" "$ctrl"
for f in "${conffiles[@]}"; do expect grep -qx "$f" "$ctrl/conffiles"; done
for s in postinst prerm postrm; do expect test -x "$ctrl/$s"; done

# .rpm: contents, metadata, config files, scripts, modes.
expect test "$(rpm -qp --queryformat '%{NAME} %{VERSION} %{RELEASE}' "$old_rpm" 2>/dev/null)" = "nri-cpupool 1.0.0 1"
rpmfiles=$(rpm -qlp "$old_rpm" 2>/dev/null)
for f in "${files[@]}"; do expect grep -qx "$f" <<<"$rpmfiles"; done
rpmconf=$(rpm -qcp "$old_rpm" 2>/dev/null)
for f in "${conffiles[@]}"; do expect grep -qx "$f" <<<"$rpmconf"; done
expect grep -qE '^drwx------ .* /var/lib/nri-cpupool$' <(rpm -qlvp "$old_rpm" 2>/dev/null)
scripts=$(rpm -qp --scripts "$old_rpm" 2>/dev/null)
for s in 'postinstall scriptlet' 'preuninstall scriptlet' 'postuninstall scriptlet' 'try-restart' 'disable --now' 'nri-cpupool restore-host'; do
  expect grep -q "$s" <<<"$scripts"
done
expect grep -q 'noreplace' <(rpm -qp --queryformat '[%{FILEFLAGS:fflags} %{FILENAMES}\n]' "$old_rpm" 2>/dev/null | sed -n 's|^.*n.* /etc/nri-cpupool/config.yaml$|noreplace|p')

# --- the .deb in a scratch root: install, edit, upgrade, remove, reinstall ----------
# --log=/dev/null: not into this machine's /var/log/dpkg.log.
# --force-script-chrootless runs the maintainer scripts on the host with
# DPKG_ROOT set; they must then leave systemd alone.
droot=$work/deb-root
mkdir -p "$droot/var/lib/dpkg/info" "$droot/var/lib/dpkg/updates" "$droot/var/lib/dpkg/triggers"
touch "$droot/var/lib/dpkg/status" "$droot/var/lib/dpkg/available"
dpkg_root() { dpkg --root="$droot" --log=/dev/null --force-script-chrootless --force-not-root --force-depends --force-confold --no-triggers "$@"; }
expect dpkg_root -i "$old_deb"
expect test "$(dpkg-query --admindir="$droot/var/lib/dpkg" -W -f '${Version} ${Status}' nri-cpupool)" = "1.0.0-1 install ok installed"
for f in "${files[@]}"; do expect test -e "$droot$f"; done
expect test "$(stat -c %a "$droot/var/lib/nri-cpupool")" = 700
expect "$droot/usr/bin/nri-cpupool" validate --config "$droot/etc/nri-cpupool/config.yaml"
# systemd-analyze verify needs the binary where ExecStart says: point it into the
# scratch root. It exits 0 on unknown keys (only warning), so any output fails.
# Outside a systemd-booted host, systemd-analyze leaves the marker
# /run/systemd/systemd-units-load behind: removed unless it was there before.
verify_unit() {
  local unit=$work/verify/nri-cpupool.service out marker=/run/systemd/systemd-units-load had=0 rc=0
  mkdir -p "$work/verify"
  sed "s|/usr/bin/nri-cpupool|$droot/usr/bin/nri-cpupool|g" "$1" > "$unit"
  [ -e "$marker" ] && had=1
  out=$(systemd-analyze verify "$unit" 2>&1) || rc=$?
  if [ "$had" = 0 ]; then rm -f "$marker"; fi
  if [ "$rc" != 0 ] || [ -n "$out" ]; then
    echo "$out" >&2
    return 1
  fi
}
expect verify_unit "$droot/usr/lib/systemd/system/nri-cpupool.service"
printf '[Service]\nNoSuchKey=1\n' > "$work/bad.service"; cat "$droot/usr/lib/systemd/system/nri-cpupool.service" >> "$work/bad.service"
expect_not verify_unit "$work/bad.service"   # the check itself can fail
printf '# edited by the operator\nlogLevel: debug\n' >> "$droot/etc/nri-cpupool/config.yaml"
edited=$(sha256sum < "$droot/etc/nri-cpupool/config.yaml")
echo '{"schema":1,"note":"state written by the running plugin"}' > "$droot/var/lib/nri-cpupool/state.json"
state=$(sha256sum < "$droot/var/lib/nri-cpupool/state.json")
# The fail-closed drop-in, copied as docs/install.md says: the removal warns of
# it (the runtime refuses containers without the plugin), an upgrade does not.
cp packaging/containerd/nri-cpupool-fail-closed.toml "$droot/etc/containerd/conf.d/nri-cpupool-fail-closed.toml"
expect capture "$work/upgrade.err" dpkg_root -i "$new_deb"
expect_not grep -q 'makes the runtime require the plugin' "$work/upgrade.err"
expect test "$(dpkg-query --admindir="$droot/var/lib/dpkg" -W -f '${Version}' nri-cpupool)" = 1.0.1-1
expect test "$(sha256sum < "$droot/etc/nri-cpupool/config.yaml")" = "$edited"
expect test "$(sha256sum < "$droot/var/lib/nri-cpupool/state.json")" = "$state"
expect capture "$work/remove.err" dpkg_root -r nri-cpupool
expect grep -q 'nri-cpupool-fail-closed.toml makes the runtime require the plugin' "$work/remove.err"
expect_not test -e "$droot/usr/bin/nri-cpupool"
expect_not test -e "$droot/usr/bin/nri-cpupool-dra"
expect test "$(sha256sum < "$droot/etc/nri-cpupool/config.yaml")" = "$edited"   # removal keeps conffiles
expect test "$(sha256sum < "$droot/var/lib/nri-cpupool/state.json")" = "$state"  # and the state
# Reinstalled after a removal: dpkg runs postinst "configure 1.0.1-1" (the
# conffiles' version), as on an upgrade, but the removal disabled the unit:
# the install says how to enable it, as a first install does.
expect output "$work/reinstall.out" dpkg_root -i "$new_deb"
expect grep -q "systemctl enable --now nri-cpupool" "$work/reinstall.out"

# Conffile handling leaves files beside the CRI-O drop-in (dpkg: .dpkg-old with
# --force-confnew, .dpkg-dist with --force-confold, .dpkg-new after a failed
# configure; rpm: .rpmnew, and .rpmsave at an upgrade or erase). CRI-O reads
# every file of crio.conf.d whatever its name, so their settings apply (crio
# 1.36.3 loads them). postinstall names each, as on the node, and says
# to delete it; it deletes none (they are the operator's). postremove says so
# at a removal only (rpm's erase leaves the .rpmsave of an edited drop-in).
crio_d=$droot/etc/crio/crio.conf.d
# A real upgrade first: the operator edited the drop-in and the next release
# changed it too (this package repacked as 1.0.2-1); --force-confold keeps the
# operator's and leaves the package's as .dpkg-dist, which postinst names.
dropin=etc/crio/crio.conf.d/10-nri-cpupool.conf
repack=$work/repack; dpkg-deb -R "$new_deb" "$repack"
echo '# changed by the next release' >> "$repack/$dropin"
sed -i 's/^Version: .*/Version: 1.0.2-1/' "$repack/DEBIAN/control"
sum=$(md5sum < "$repack/$dropin"); sed -i "s|^[0-9a-f]*\( *\(\./\)\{0,1\}$dropin\)\$|${sum%% *}\1|" "$repack/DEBIAN/md5sums"
dpkg-deb -b --root-owner-group "$repack" "$work/next.deb" >/dev/null
echo '# edited by the operator' >> "$droot/$dropin"
expect capture "$work/confold.err" dpkg_root -i "$work/next.deb"
expect test -e "$crio_d/10-nri-cpupool.conf.dpkg-dist"
expect grep -qF "WARNING: /$dropin.dpkg-dist is left over" "$work/confold.err"
leftovers=(dpkg-old dpkg-dist dpkg-new rpmnew rpmsave)
for s in "${leftovers[@]}"; do echo '# left over' > "$crio_d/10-nri-cpupool.conf.$s"; done
expect capture "$work/leftover.err" env DPKG_ROOT="$droot" sh packaging/scripts/postinstall.sh configure 1.0.1-1
for s in "${leftovers[@]}"; do
  expect grep -qF "WARNING: /etc/crio/crio.conf.d/10-nri-cpupool.conf.$s " "$work/leftover.err"
  expect test -e "$crio_d/10-nri-cpupool.conf.$s"
done
expect grep -qF "CRI-O reads every file in /etc/crio/crio.conf.d" "$work/leftover.err"
expect_not grep -qF "$droot" "$work/leftover.err"
expect capture "$work/leftover-rm.err" env DPKG_ROOT="$droot" sh packaging/scripts/postremove.sh 0
expect grep -qF "WARNING: /etc/crio/crio.conf.d/10-nri-cpupool.conf.rpmsave " "$work/leftover-rm.err"
expect capture "$work/leftover-up.err" env DPKG_ROOT="$droot" sh packaging/scripts/postremove.sh 1
expect_not grep -qF "WARNING" "$work/leftover-up.err"   # an upgrade: postinstall said it
rm -f "$crio_d"/10-nri-cpupool.conf.?*
expect capture "$work/leftover.err" env DPKG_ROOT="$droot" sh packaging/scripts/postinstall.sh configure 1.0.1-1
expect_not grep -qF "WARNING" "$work/leftover.err"
# Under DPKG_ROOT the enable links are checked in the scratch root: `systemctl
# enable` makes absolute links, which [ -e ] followed onto this machine, where
# no such unit is: an enabled unit got the hint.
wants=$droot/etc/systemd/system/multi-user.target.wants
mkdir -p "$wants"; ln -sf /usr/lib/systemd/system/nri-cpupool.service "$wants/nri-cpupool.service"
expect output "$work/enabled.out" env DPKG_ROOT="$droot" sh packaging/scripts/postinstall.sh configure 1.0.1-1
expect_not grep -qF "systemctl enable --now" "$work/enabled.out"
rm -f "$wants/nri-cpupool.service"

# --- postinstall under a systemd (a fake systemctl, in a private mount namespace) ---
# After every install, upgrade or reinstall that leaves the unit disabled, the
# enable hint; never with the unit enabled; an upgrade try-restarts it.
# postinst SYSTEMCTL_IS_ENABLED_STATUS ARGS...: output in $work/postinst.out,
# the systemctl calls in $work/systemctl.calls.
postinst() {
  local enabled=$1; shift
  mkdir -p "$work/fakebin"; : > "$work/systemctl.calls"
  # shellcheck disable=SC2016 # the fake's "$*" and "$1" are its own
  printf '#!/bin/sh\necho "$*" >> %s\ncase "$1" in is-enabled) exit %s ;; esac\nexit 0\n' "$work/systemctl.calls" "$enabled" > "$work/fakebin/systemctl"
  chmod +x "$work/fakebin/systemctl"
  # shellcheck disable=SC2016 # $0 (the fake's directory) and "$@" are the inner shell's
  unshare -rm sh -c 'mount -t tmpfs none /run && mkdir -p /run/systemd/system && PATH=$0:$PATH exec sh "$@"' \
    "$work/fakebin" packaging/scripts/postinstall.sh "$@" >"$work/postinst.out" 2>&1
}
if unshare -rm true 2>/dev/null; then
  hint="systemctl enable --now nri-cpupool"
  expect postinst 1 configure ""                       # deb, first install
  expect grep -qF "$hint" "$work/postinst.out"
  expect postinst 1 configure 1.0.1-1                  # deb, reinstall after apt remove (the unit disabled)
  expect grep -qF "$hint" "$work/postinst.out"
  expect grep -qx "is-enabled --quiet nri-cpupool.service" "$work/systemctl.calls"
  expect_not grep -qE '^(enable|start|restart)' "$work/systemctl.calls"   # a hint, never enabled by itself
  expect postinst 0 configure 1.0.0-1                  # deb, upgrade of an enabled unit
  expect_not grep -qF "$hint" "$work/postinst.out"
  expect grep -qx "try-restart nri-cpupool.service" "$work/systemctl.calls"
  expect postinst 1 2                                  # rpm, upgrade of a disabled unit
  expect grep -qF "$hint" "$work/postinst.out"
  expect postinst 0 2                                  # rpm, upgrade of an enabled unit
  expect_not grep -qF "$hint" "$work/postinst.out"
else
  echo "packaging: no user namespaces (unshare -rm): postinstall under a systemd not checked"
fi

# --- the .rpm in a scratch root (files only: rpm runs scriptlets in a chroot) --------
rroot=$work/rpm-root
mkdir -p "$rroot"
if rpm --root "$rroot" --initdb 2>/dev/null; then
  rpm_root() { rpm --root "$rroot" --nodeps --noscripts --nosignature "$@"; }
  expect rpm_root -i "$old_rpm"
  for f in "${files[@]}"; do expect test -e "$rroot$f"; done
  printf '# edited by the operator\n' >> "$rroot/etc/nri-cpupool/config.yaml"
  edited=$(sha256sum < "$rroot/etc/nri-cpupool/config.yaml")
  echo '{"schema":1}' > "$rroot/var/lib/nri-cpupool/state.json"
  expect rpm_root -U "$new_rpm"
  expect test "$(rpm --root "$rroot" -q --queryformat '%{VERSION}' nri-cpupool)" = 1.0.1
  expect test "$(sha256sum < "$rroot/etc/nri-cpupool/config.yaml")" = "$edited"
  expect test -e "$rroot/var/lib/nri-cpupool/state.json"
  expect_not test -e "$rroot/etc/nri-cpupool/config.yaml.rpmnew"   # unchanged in the package: nothing to offer
else
  echo "packaging: rpm --initdb failed in a scratch root; rpm install not checked"
fi

echo "packaging: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
