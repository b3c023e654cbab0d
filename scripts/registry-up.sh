#!/usr/bin/env bash
# Start a local OCI registry for the tests (Debian's docker-registry, the CNCF distribution
# registry), with basic auth on localhost over plain http, as CI has no other registry.
# Idempotent.
#   scripts/registry-up.sh          install if needed and start it on 127.0.0.1:5000
#   scripts/registry-up.sh stop     stop the registry this script started
# The tests log in as bisect / ngc-test. Its access log (which blobs were fetched) is
# /var/log/bisect-ngc-registry.log.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
ADDR=${BISECT_NGC_REGISTRY_ADDR:-127.0.0.1:5000}
DIR=/var/lib/bisect-ngc-registry
CONF=/etc/bisect-ngc-registry
LOG=/var/log/bisect-ngc-registry.log
PIDFILE=/var/run/bisect-ngc-registry.pid
say() { echo "[registry-up] $*" >&2; }
alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }

if [ "${1:-}" = stop ]; then
  p=$(cat "$PIDFILE" 2>/dev/null || true)
  if alive "$p"; then kill "$p"; fi
  exit 0
fi

need=()
command -v docker-registry >/dev/null || need+=(docker-registry)
command -v htpasswd >/dev/null || need+=(apache2-utils)
command -v curl >/dev/null || need+=(curl)
if [ ${#need[@]} -gt 0 ]; then
  say "installing ${need[*]}"
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

mkdir -p "$DIR" "$CONF"
[ -f "$CONF/htpasswd" ] || htpasswd -Bbc "$CONF/htpasswd" bisect ngc-test 2>/dev/null
cat > "$CONF/config.yml" <<YML
version: 0.1
log:
  level: info
  accesslog:
    disabled: false
storage:
  filesystem:
    rootdirectory: $DIR
  delete:
    enabled: true
http:
  addr: $ADDR
auth:
  htpasswd:
    realm: bisect-ngc-test
    path: $CONF/htpasswd
YML

p=$(cat "$PIDFILE" 2>/dev/null || true)
if ! alive "$p"; then
  say "starting the registry on $ADDR"
  nohup docker-registry serve "$CONF/config.yml" >>"$LOG" 2>&1 &
  echo $! > "$PIDFILE"
fi
for _ in $(seq 50); do
  code=$(curl -s -o /dev/null -w '%{http_code}' "http://$ADDR/v2/" || true)
  if [ "$code" = 401 ]; then say "registry up on $ADDR (basic auth)"; exit 0; fi
  sleep 0.2
done
say "the registry did not answer on $ADDR; see $LOG"
tail -20 "$LOG" >&2 || true
exit 1
