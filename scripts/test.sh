#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs the package with its test extras
# into .venv, then runs pytest. Usage: scripts/test.sh [--fast] [pytest args...]
# --fast: the one-minute loop (no slow or statistics tests, few property examples).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install -q -e '.[test]'
# The repro's CPU tests need PyTorch (only repro/ does; the tool itself does not).
.venv/bin/python -c 'import torch' 2>/dev/null || .venv/bin/python -m pip install -q 'torch==2.13.0'
if [ "${1:-}" = --fast ]; then
  shift
  export HYPOTHESIS_PROFILE=dev
  exec .venv/bin/python -m pytest -q -m "not slow and not stats" "$@"
fi
exec .venv/bin/python -m pytest "$@"
