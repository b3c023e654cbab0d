#!/usr/bin/env bash
# A real network filesystem for the tests: sshfs (FUSE over SFTP) of a local directory,
# served by an sshd on 127.0.0.1, mounted at $MNT. The state tests put a --state there
# (tests/question/test_memory.py), where the store must take SQLite's rollback journal. Idempotent.
#   scripts/sshfs-up.sh          install if needed, start sshd, mount
#   scripts/sshfs-up.sh stop     unmount and stop the sshd this script started
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
MNT=${BISECT_NGC_SSHFS:-/mnt/bisect-ngc-sshfs}
SRC=/var/lib/bisect-ngc-sshfs
PORT=${BISECT_NGC_SSHFS_PORT:-2222}
KEY=/etc/bisect-ngc-sshfs/id_ed25519
PIDFILE=/var/run/bisect-ngc-sshd.pid
say() { echo "[sshfs-up] $*" >&2; }

if [ "${1:-}" = stop ]; then
  fusermount -u "$MNT" 2>/dev/null || umount "$MNT" 2>/dev/null || true
  p=$(cat "$PIDFILE" 2>/dev/null || true)
  if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then kill "$p"; fi
  exit 0
fi

if awk -v m="$MNT" '$5 == m && / - fuse\.sshfs /' /proc/self/mountinfo | grep -q .; then
  if ls "$MNT" >/dev/null 2>&1; then
    say "already mounted at $MNT"
    exit 0
  fi
  say "the mount at $MNT is stale (its sshd is gone): mounting again"
  fusermount -u "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null || true
fi
if [ ! -e /dev/fuse ]; then
  say "no /dev/fuse on this machine: the network-filesystem test will skip"
  exit 0
fi
need=()
command -v sshfs >/dev/null || need+=(sshfs)
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
if [ ${#need[@]} -gt 0 ]; then
  say "installing ${need[*]}"
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
mkdir -p "$(dirname "$KEY")" "$SRC" "$MNT" /run/sshd
[ -f "$KEY" ] || ssh-keygen -q -t ed25519 -N "" -f "$KEY"
[ -f "$KEY.host" ] || ssh-keygen -q -t ed25519 -N "" -f "$KEY.host"
p=$(cat "$PIDFILE" 2>/dev/null || true)
if [ -z "$p" ] || ! kill -0 "$p" 2>/dev/null; then
  /usr/sbin/sshd -p "$PORT" -o ListenAddress=127.0.0.1 -o PidFile="$PIDFILE" \
    -o HostKey="$KEY.host" -o AuthorizedKeysFile="$KEY.pub" \
    -o PermitRootLogin=prohibit-password -o PasswordAuthentication=no
  sleep 0.5
fi
sshfs -p "$PORT" -o IdentityFile="$KEY",StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null \
  "root@127.0.0.1:$SRC" "$MNT"
say "sshfs of $SRC mounted at $MNT"
