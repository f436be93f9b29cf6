#!/usr/bin/env bash
# Copyright (c) 2026 The Optcast Authors. SPDX-License-Identifier: BSD-3-Clause
#
# Makes the Debian packages (cpack) from a build and checks them.
#
#   scripts/package-check.sh [BUILD_DIR]                  # contents and dependencies (default: build)
#   scripts/package-check.sh [BUILD_DIR] --debian12 DIR  # and an install into a fresh Debian 12
#
# Always: each package holds what it should (optcast: the command, the unit, the conffile and the
# maintainer scripts; optcast-nccl-plugin and optcast-mpi: their libraries) and depends on what it
# should (the plugin on the C/C++ runtime alone).
# With --debian12 DIR (root, and Debian's package archive reachable): debootstrap makes a
# minimal Debian 12 with systemd in DIR (kept for later runs), `apt install ./optcast_*.deb`
# runs in it with chroot, and the result is checked: the secret made with mode 600, the unit
# accepted by `systemd-analyze verify`, and the server started inside as the unit starts it
# (its ExecStart, as an unprivileged user, the secret as the credential), answering a benchmark
# and stopping on SIGTERM within the unit's TimeoutStopSec.
# What it does not do: boot systemd in DIR (`systemctl start` needs systemd as PID 1, which a
# chroot lacks), so the unit's sandboxing (DynamicUser, LoadCredential, ProtectSystem) is
# exercised only on a real host.
set -euo pipefail
cd "$(dirname "$0")/.."

build=build
debian12=""
while (($#)); do
  case "$1" in
    --debian12) debian12=${2:?--debian12 needs a directory}; shift 2 ;;
    -h | --help) sed -n '3,20p' "$0"; exit 0 ;;
    *) build=$1; shift ;;
  esac
done

fail() { echo "package-check: FAIL: $*" >&2; exit 1; }
pass() { echo "package-check: ok: $*"; }

(cd "$build" && rm -f ./*.deb && cpack -G DEB >/dev/null) || fail "cpack in $build"
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt")
arch=$(dpkg --print-architecture)
deb() { echo "$build/${1}_${version}_${arch}.deb"; }

# has PACKAGE PATH...: the package holds every PATH (as dpkg-deb -c lists them).
has() {
  local pkg=$1 listing
  shift
  listing=$(dpkg-deb -c "$(deb "$pkg")" | awk '{print $NF}')
  for path in "$@"; do
    grep -qx "$path" <<<"$listing" || fail "$pkg does not hold $path; it holds: $(tr '\n' ' ' <<<"$listing")"
  done
  pass "$pkg holds $*"
}
field() { dpkg-deb -f "$(deb "$1")" "$2"; }

[[ -f $(deb optcast) ]] || fail "no $(deb optcast)"
has optcast ./usr/bin/optcast ./usr/lib/systemd/system/optcast-server.service ./etc/optcast/server.yaml \
  ./usr/share/doc/optcast/copyright
control=$(mktemp -d)
trap 'rm -rf "$control"' EXIT
dpkg-deb -e "$(deb optcast)" "$control"
grep -qx /etc/optcast/server.yaml "$control/conffiles" || fail "/etc/optcast/server.yaml is not a conffile"
for script in postinst prerm postrm; do
  [[ -x $control/$script ]] || fail "optcast has no executable $script"
done
pass "optcast: conffile and maintainer scripts"
# Read whole before matching: grep -q stops at the first match, and with pipefail the writer's
# SIGPIPE would then fail the pipeline.
unit=$(dpkg-deb --fsys-tarfile "$(deb optcast)" | tar -xO ./usr/lib/systemd/system/optcast-server.service)
grep -q '^ExecStart=/usr/bin/optcast server --config /etc/optcast/server.yaml' <<<"$unit" ||
  fail "the packaged unit does not start /usr/bin/optcast"
pass "the packaged unit starts /usr/bin/optcast"
depends=$(field optcast Depends)
for lib in libyaml-cpp libhwy libssl3 libstdc++6; do
  grep -q "$lib" <<<"$depends" || fail "optcast does not depend on $lib: $depends"
done
grep -q libfabric <<<"$depends" && fail "optcast depends on libfabric (it should only recommend it): $depends"
grep -q libfabric1 <<<"$(field optcast Recommends)" || fail "optcast does not recommend libfabric1"
pass "optcast depends on: $depends"

has optcast-nccl-plugin ./usr/lib/libnccl-net-optcast.so
plugin_depends=$(field optcast-nccl-plugin Depends)
extra=$(tr ',' '\n' <<<"$plugin_depends" | sed 's/(.*//; s/ //g' | grep -vxE 'libc6|libgcc-s1|libstdc\+\+6' || true)
[[ -z $extra ]] || fail "optcast-nccl-plugin depends on more than the C/C++ runtime: $plugin_depends"
pass "optcast-nccl-plugin depends on: $plugin_depends"

if [[ -f $(deb optcast-mpi) ]]; then
  mpi_libs=()
  [[ -f $build/src/mpi/liboptcast-mpi.so ]] && mpi_libs+=(./usr/lib/liboptcast-mpi.so)
  [[ -f $build/src/mpi/liboptcast-mpi-mpich.so ]] && mpi_libs+=(./usr/lib/liboptcast-mpi-mpich.so)
  has optcast-mpi "${mpi_libs[@]}"
  pass "optcast-mpi depends on: $(field optcast-mpi Depends); suggests: $(field optcast-mpi Suggests)"
else
  echo "package-check: no optcast-mpi package (this build has no MPI interposer)"
fi

[[ -n $debian12 ]] || exit 0

# ---- an install into a fresh Debian 12 ------------------------------------------------------
[[ $(id -u) -eq 0 ]] || fail "--debian12 needs root (debootstrap, chroot)"
command -v debootstrap >/dev/null || fail "--debian12 needs debootstrap (apt-get install debootstrap)"
root=$(realpath -m "$debian12")
if [[ ! -x $root/usr/bin/apt-get ]]; then
  echo "package-check: debootstrap of Debian 12 (minbase and systemd) into $root"
  debootstrap --variant=minbase --include=systemd bookworm "$root" >"$root.debootstrap.log" 2>&1 ||
    fail "debootstrap (log: $root.debootstrap.log)"
fi
mounted=()
cleanup() {
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -R -l "${mounted[$i]}" || true; done
  rm -rf "$control"
}
trap cleanup EXIT
for fs in proc sys dev; do
  mountpoint -q "$root/$fs" || { mount --rbind "/$fs" "$root/$fs" && mounted+=("$root/$fs"); }
done
cp /etc/resolv.conf "$root/etc/resolv.conf"
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive "$@"; }

# A fresh state each run: the packages removed and purged, then installed as a user would.
in_root dpkg --purge optcast optcast-nccl-plugin >/dev/null 2>&1 || true
mkdir -p "$root/tmp/debs"
cp "$(deb optcast)" "$(deb optcast-nccl-plugin)" "$root/tmp/debs/"
in_root apt-get update -qq || fail "apt-get update in $root"
in_root apt-get install -y -qq --no-install-recommends "/tmp/debs/$(basename "$(deb optcast)")" \
  "/tmp/debs/$(basename "$(deb optcast-nccl-plugin)")" >"$root.install.log" 2>&1 ||
  fail "apt install of the packages in Debian 12 (log: $root.install.log)"
pass "apt install ./optcast_${version}_${arch}.deb ./optcast-nccl-plugin_${version}_${arch}.deb in a fresh Debian 12"

[[ $(stat -c %a "$root/etc/optcast/secret") == 600 ]] || fail "/etc/optcast/secret is not mode 600"
[[ $(wc -c <"$root/etc/optcast/secret") -ge 32 ]] || fail "/etc/optcast/secret is short"
pass "postinst made /etc/optcast/secret (mode 600)"
in_root systemd-analyze verify /usr/lib/systemd/system/optcast-server.service ||
  fail "systemd-analyze verify refused the unit"
pass "systemd-analyze verify accepts optcast-server.service"
plugin_libs=$(in_root ldd /usr/lib/libnccl-net-optcast.so)
grep -q "not found" <<<"$plugin_libs" && fail "the plugin misses a library in Debian 12"
pass "the plugin's libraries all resolve in Debian 12"

# The unit's ExecStart, as the unit runs it: an unprivileged user, the secret as a credential
# (a copy only that user may read), and a stop with SIGTERM within TimeoutStopSec.
unit=$root/usr/lib/systemd/system/optcast-server.service
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
stop_s=$(sed -n 's/^TimeoutStopSec=//p' "$unit")
cred=/run/optcast-credentials
mkdir -p "$root$cred"
install -m 400 -o 65534 -g 65534 "$root/etc/optcast/secret" "$root$cred/secret"
cmd=${exec_start//%d/$cred}
# The shipped configuration listens on 0.0.0.0:8918; here on loopback, on a port of its own.
port=$((20000 + RANDOM % 20000))
log=$root.server.log
# shellcheck disable=SC2086  # the unit's command line, split as systemd splits it
chroot --userspec=65534:65534 "$root" /usr/bin/env -i PATH=/usr/bin:/bin $cmd --listen "127.0.0.1:$port" \
  --metrics-listen 127.0.0.1:0 >"$log" 2>&1 &
server=$!
for _ in $(seq 100); do
  grep -q "listening on" "$log" && break
  kill -0 "$server" 2>/dev/null || fail "the server exited: $(cat "$log")"
  sleep 0.1
done
grep -q "listening on" "$log" || fail "the server did not start: $(cat "$log")"
pass "the server runs in Debian 12 as the unit starts it: $(grep -m1 'listening on' "$log")"
# Through the client library, then through the installed NCCL plugin (CollNet, as NCCL drives it).
for through in client nccl-plugin; do
  chroot --userspec=65534:65534 "$root" /usr/bin/env -i PATH=/usr/bin:/bin OPTCAST_SECRET_FILE=$cred/secret \
    optcast bench --algo server --through "$through" --plugin /usr/lib/libnccl-net-optcast.so --nranks 2 \
    --servers "127.0.0.1:$port" -b 1M -e 1M -n 3 -w 1 -c 1 --progress off >"$root.bench.log" 2>&1 ||
    fail "optcast bench --through $through against it: $(cat "$root.bench.log")"
  row=$(grep -E '^ *1048576 ' "$root.bench.log" || true)
  # nccl-tests' columns: size count type redop time algbw busbw #wrong ...
  [[ -n $row && $(awk '{print $8}' <<<"$row") == 0 ]] && grep -q "Out of bounds values : 0 OK" "$root.bench.log" ||
    fail "optcast bench --through $through reported no row or wrong results: $(cat "$root.bench.log")"
  pass "optcast bench --through $through against it: $(tr -s ' ' <<<"$row")"
done
kill -TERM "$server"
for _ in $(seq $((stop_s * 10))); do
  kill -0 "$server" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$server" 2>/dev/null; then
  kill -KILL "$server"
  fail "the server did not stop within TimeoutStopSec=$stop_s after SIGTERM"
fi
wait "$server" || fail "the server exited with status $? on SIGTERM: $(cat "$log")"
pass "the server stopped on SIGTERM with status 0 (TimeoutStopSec=$stop_s)"
in_root apt-get purge -y -qq optcast optcast-nccl-plugin >/dev/null || fail "apt-get purge"
[[ ! -e $root/etc/optcast/secret ]] || fail "purging optcast left /etc/optcast/secret"
pass "apt-get purge removes the packages and the secret"
echo "package-check: all passed (not run: systemd as PID 1, so the unit's own sandbox)"
