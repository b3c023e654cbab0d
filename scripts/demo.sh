#!/usr/bin/env bash
# Fresh machine to a finished bisection in one command: installs bisect-ngc into .venv,
# generates a 500-commit repository with a known transition and two unbuildable
# stretches, and bisects it with 4 parallel probes. Usage: scripts/demo.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q -e .
DIR=${1:-$(mktemp -d)}
.venv/bin/python -m benchmarks.genrepo "$DIR/repo" --commits 500 --transition 313 \
  --unbuildable 90-130,300-309
exec .venv/bin/bisect-ngc bisect --repo "$DIR/repo" --old main~499 --new main \
  --build 'test ! -e broken && cp behaviour "$BISECT_ARTIFACTS/out"' \
  --test 'test "$(cat "$BISECT_ARTIFACTS/out")" = old' \
  --jobs 4 --state "$DIR/state"
