#!/usr/bin/env bash
# enroot and pyxis, built from source, on the single-node cluster of scripts/slurm-up.sh.
#   scripts/enroot-pyxis-up.sh SRC_DIR   build, install, register pyxis, restart slurmd
#   scripts/enroot-pyxis-up.sh stop      unregister pyxis, uninstall both, restart slurmd
# SRC_DIR holds enroot and pyxis sources: folders enroot/ and pyxis/, or tarballs
# enroot-*.tar.gz and pyxis-*.tar.gz that unpack into them (enroot with its deps/ filled
# in: musl, makeself, linux-headers, libbsd). Get them from github.com/NVIDIA/enroot
# (`git clone --recursive`, v4.1.2 or later) and github.com/NVIDIA/pyxis (v0.24.0).
# Idempotent: what is installed from the same sources is not built again.
# Env: ENROOT_PYXIS_BUILD (/var/tmp/bisect-ngc-enroot-pyxis), PREFIX (/usr/local),
#      SLURM_ROOT (as for slurm-up.sh).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
B=${ENROOT_PYXIS_BUILD:-/var/tmp/bisect-ngc-enroot-pyxis}
PREFIX=${PREFIX:-/usr/local}
R=${SLURM_ROOT:-/tmp/bisect-ngc-slurm}
CONF=/etc/slurm/plugstack.conf.d/pyxis.conf
say() { echo "[enroot-pyxis-up] $*" >&2; }

restart_slurmd() {
  local pid; pid=$(cat "$R/slurmd.pid" 2>/dev/null || true)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid"; for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  slurmd
  local H; H=$(hostname -s)
  for _ in $(seq 150); do
    sinfo -h -n "$H" -o %T | grep -Eq '^(idle|mixed|allocated|completing)' && return 0
    sleep 0.2
  done
  scontrol update nodename="$H" state=resume >/dev/null 2>&1 || true
}

if [ "${1:-}" = stop ]; then
  rm -f "$CONF"
  [ -d "$B/pyxis" ] && make -s -C "$B/pyxis" uninstall prefix="$PREFIX" >/dev/null 2>&1 || true
  [ -d "$B/enroot" ] && make -s -C "$B/enroot" uninstall prefix="$PREFIX" >/dev/null 2>&1 || true
  rm -f "$B/.installed"
  command -v slurmd >/dev/null && restart_slurmd
  say "pyxis unregistered, enroot and pyxis uninstalled"
  exit 0
fi

SRC=${1:?usage: scripts/enroot-pyxis-up.sh SRC_DIR | stop}
SRC=$(cd "$SRC" && pwd)
command -v slurmd >/dev/null || { say "no Slurm here: run scripts/slurm-up.sh first"; exit 1; }

need=()
for b in mksquashfs:squashfs-tools jq:jq parallel:parallel pigz:pigz setcap:libcap2-bin \
         make:make gcc:gcc curl:curl gawk:gawk squashfuse:squashfuse \
         fuse-overlayfs:fuse-overlayfs; do
  command -v "${b%%:*}" >/dev/null || need+=("${b#*:}")
done
[ -f /usr/include/slurm/spank.h ] || need+=(libslurm-dev)
if [ ${#need[@]} -gt 0 ]; then
  say "installing ${need[*]}"
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# The sources, unpacked once per set of inputs.
stamp=$( (cd "$SRC" && ls -l --time-style=+%s enroot* pyxis* 2>/dev/null) | sha256sum | cut -c1-16)
if [ "$(cat "$B/.sources" 2>/dev/null)" != "$stamp" ]; then
  rm -rf "$B"; mkdir -p "$B"
  for p in enroot pyxis; do
    if [ -d "$SRC/$p" ]; then cp -a "$SRC/$p" "$B/$p"
    else
      tarball=$(ls "$SRC"/$p-*.tar.gz 2>/dev/null | head -1)
      [ -n "$tarball" ] || { say "no $p sources in $SRC (a $p/ folder or $p-*.tar.gz)"; exit 1; }
      tar -xzf "$tarball" -C "$B"
    fi
  done
  # Some archives of enroot store their relative symlinks (linux-headers' include dirs,
  # pkg/rpm) with 'enroot.' in place of the leading '..': point them back.
  find "$B/enroot" -type l -lname 'enroot./*' | while read -r link; do
    target=$(readlink "$link"); ln -sfn "..${target#enroot.}" "$link"
  done
  echo "$stamp" > "$B/.sources"
fi

if [ "$(cat "$B/.installed" 2>/dev/null)" != "$stamp" ]; then
  say "building enroot (musl toolchain, static utilities)"
  make -s -C "$B/enroot" install prefix="$PREFIX" >"$B/enroot-build.log" 2>&1 \
    || { tail -20 "$B/enroot-build.log" >&2; say "enroot did not build"; exit 1; }
  say "building pyxis"
  make -s -C "$B/pyxis" install prefix="$PREFIX" >"$B/pyxis-build.log" 2>&1 \
    || { tail -20 "$B/pyxis-build.log" >&2; say "pyxis did not build"; exit 1; }
  echo "$stamp" > "$B/.installed"
fi

mkdir -p "$(dirname "$CONF")"
# use_squashfuse=1: a step starts straight from the squashfs instead of unpacking it
# (where FUSE is there to do it).
want="required $PREFIX/lib/slurm/spank_pyxis.so"
[ -c /dev/fuse ] && want="$want use_squashfuse=1"
if [ "$(cat "$CONF" 2>/dev/null)" != "$want" ]; then
  echo "$want" > "$CONF"
  restart_slurmd
fi
srun --help 2>&1 | grep -q -- --container-image \
  || { say "srun does not know --container-image: pyxis is not loaded"; exit 1; }
say "enroot $("$PREFIX/bin/enroot" version) and pyxis up ($CONF)"
