#!/usr/bin/env bash
# Start local OCI registries for the tests (Debian's docker-registry, the CNCF distribution
# registry) on localhost over plain http, as CI has no other registry. Idempotent.
#   scripts/registry-up.sh          install if needed and start both
#   scripts/registry-up.sh stop     stop the registries this script started
# 127.0.0.1:5000 asks for basic auth: the tests log in as bisect / ngc-test. Its access log
# (which blobs were fetched) is /var/log/bisect-ngc-registry.log.
# 127.0.0.1:5001 serves the same storage and asks for bearer tokens, as nvcr.io and Docker
# Hub do. Its tokens come from the realm http://127.0.0.1:5002/token, which the tests serve
# themselves (tests/lib/token_server.py), signed with $CONF/token.key: a test-only key that
# this script makes, and the only one the registry trusts (rootcertbundle).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
ADDR=${BISECT_NGC_REGISTRY_ADDR:-127.0.0.1:5000}
TOKEN_ADDR=${BISECT_NGC_TOKEN_REGISTRY_ADDR:-127.0.0.1:5001}
REALM=${BISECT_NGC_TOKEN_REALM:-http://127.0.0.1:5002/token}
DIR=/var/lib/bisect-ngc-registry
CONF=/etc/bisect-ngc-registry
LOG=/var/log/bisect-ngc-registry.log
PIDFILE=/var/run/bisect-ngc-registry.pid
TOKEN_LOG=/var/log/bisect-ngc-registry-token.log
TOKEN_PIDFILE=/var/run/bisect-ngc-registry-token.pid
say() { echo "[registry-up] $*" >&2; }
alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }

if [ "${1:-}" = stop ]; then
  for f in "$PIDFILE" "$TOKEN_PIDFILE"; do
    p=$(cat "$f" 2>/dev/null || true)
    if alive "$p"; then kill "$p"; fi
  done
  exit 0
fi

need=()
command -v docker-registry >/dev/null || need+=(docker-registry)
command -v htpasswd >/dev/null || need+=(apache2-utils)
command -v curl >/dev/null || need+=(curl)
command -v openssl >/dev/null || need+=(openssl)
if [ ${#need[@]} -gt 0 ]; then
  say "installing ${need[*]}"
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

mkdir -p "$DIR" "$CONF"
[ -f "$CONF/htpasswd" ] || htpasswd -Bbc "$CONF/htpasswd" bisect ngc-test 2>/dev/null
if [ ! -f "$CONF/token.crt" ]; then
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=bisect-ngc test tokens" \
    -keyout "$CONF/token.key" -out "$CONF/token.crt" 2>/dev/null
fi
chmod 644 "$CONF/token.key"      # a test-only key: the tests' token server signs with it

config() {  # config NAME ADDR: the common part of a registry's config.yml
  cat <<YML
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
  addr: $2
YML
}
{ config basic "$ADDR"; cat <<YML
auth:
  htpasswd:
    realm: bisect-ngc-test
    path: $CONF/htpasswd
YML
} > "$CONF/config.yml"
{ config token "$TOKEN_ADDR"; cat <<YML
auth:
  token:
    realm: $REALM
    service: bisect-ngc-test
    issuer: bisect-ngc-test-tokens
    rootcertbundle: $CONF/token.crt
YML
} > "$CONF/token.yml"

serve() {  # serve CONFIG ADDR PIDFILE LOG WHAT
  local p
  p=$(cat "$3" 2>/dev/null || true)
  if ! alive "$p"; then
    say "starting the registry on $2"
    nohup docker-registry serve "$1" >>"$4" 2>&1 &
    echo $! > "$3"
  fi
  for _ in $(seq 50); do
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://$2/v2/" || true)
    if [ "$code" = 401 ]; then say "registry up on $2 ($5)"; return 0; fi
    sleep 0.2
  done
  say "the registry did not answer on $2; see $4"
  tail -20 "$4" >&2 || true
  exit 1
}
serve "$CONF/config.yml" "$ADDR" "$PIDFILE" "$LOG" "basic auth"
serve "$CONF/token.yml" "$TOKEN_ADDR" "$TOKEN_PIDFILE" "$TOKEN_LOG" "bearer tokens from $REALM"
