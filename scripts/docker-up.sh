#!/usr/bin/env bash
# Start a Docker engine on a Debian machine without systemd (as CI has), and make the
# base image the Docker tests use: no registry is reachable there, so it is built with
# debootstrap from the apt mirror and `docker import`ed. Idempotent.
#   scripts/docker-up.sh          install if needed, start dockerd, build the test image
#   scripts/docker-up.sh stop     stop the dockerd this script started
# Env: BISECT_NGC_TEST_IMAGE (default bisect-ngc-test/debian-build:bookworm-git)
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
IMAGE=${BISECT_NGC_TEST_IMAGE:-bisect-ngc-test/debian-build:bookworm-git}
LOG=/var/log/bisect-ngc-dockerd.log
PIDFILE=/var/run/docker.pid
say() { echo "[docker-up] $*" >&2; }

alive() {  # alive PID NAME: a live, non-zombie process of that name
  [ -n "${1:-}" ] || return 1
  local st; st=$(ps -o stat=,comm= -p "$1" 2>/dev/null) || return 1
  case "$st" in Z*) return 1;; esac
  [ "${st##* }" = "$2" ]
}

if [ "${1:-}" = stop ]; then
  p=$(cat "$PIDFILE" 2>/dev/null || true)
  if alive "$p" dockerd; then kill "$p"; for _ in $(seq 50); do alive "$p" dockerd || break; sleep 0.2; done; fi
  exit 0
fi

need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v debootstrap >/dev/null || need+=(debootstrap)
if [ ${#need[@]} -gt 0 ]; then
  say "installing ${need[*]}"
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
  p=$(cat "$PIDFILE" 2>/dev/null || true)
  alive "$p" dockerd || rm -f "$PIDFILE"
  c=$(cat /var/run/docker/containerd/containerd.pid 2>/dev/null || true)
  alive "$c" containerd || rm -f /var/run/docker/containerd/containerd.pid
  setsid nohup dockerd >>"$LOG" 2>&1 </dev/null &
  for _ in $(seq 300); do docker info >/dev/null 2>&1 && break; sleep 0.1; done
  docker info >/dev/null 2>&1 || { say "dockerd did not start; tail of $LOG:"; tail -5 "$LOG" >&2; exit 1; }
  say "dockerd up"
fi

# The marker file tells a container of the image from this host (the container tests read it).
MARKER=/etc/bisect-ngc-test-image
if ! docker run --rm "$IMAGE" test -f "$MARKER" >/dev/null 2>&1; then
  . /etc/os-release
  MIRROR=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null \
           | grep -oE '^(URIs:|deb) +[^ ]*/debian/?( |$)' | awk '{print $2}' | head -1 || true)
  [ -n "$MIRROR" ] || { say "no Debian mirror in the apt sources"; exit 1; }
  ROOT=$(mktemp -d)
  say "debootstrap $VERSION_CODENAME from $MIRROR (a minute or two)"
  debootstrap --variant=minbase \
    --include=python3,python3-dev,python3-setuptools,python3-wheel,python3-pip,gcc,libc6-dev,ccache,git \
    "$VERSION_CODENAME" "$ROOT" "$MIRROR" >/var/log/bisect-ngc-debootstrap.log 2>&1 \
    || { say "debootstrap failed: $(tail -3 /var/log/bisect-ngc-debootstrap.log)"; exit 1; }
  echo "bisect-ngc test image ($VERSION_CODENAME)" > "$ROOT$MARKER"
  tar -C "$ROOT" -c . | docker import -c 'CMD ["/bin/bash"]' -c 'ENV PIP_BREAK_SYSTEM_PACKAGES=1' - "$IMAGE" >/dev/null
  rm -rf "$ROOT"
  say "imported $IMAGE"
fi
docker run --rm "$IMAGE" python3 -c 'import setuptools, wheel' && say "ready: $IMAGE"
