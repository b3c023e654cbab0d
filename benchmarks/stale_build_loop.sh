#!/usr/bin/env bash
# The stale-build tests of issue 20, N times in a row (default 50) with every core busy:
#   bash benchmarks/stale_build_loop.sh [N]
# Stops at the first failure and prints its output. Needs .venv and a Docker engine with
# the test image (scripts/docker-up.sh); without one the Docker test skips, saying so.
set -uo pipefail
cd "$(dirname "$0")/.."
n=${1:-50}
for _ in $(seq "$(nproc)"); do python3 -c 'while True: pass' & done
trap 'kill $(jobs -p) 2>/dev/null' EXIT
for i in $(seq 1 "$n"); do
  if ! out=$(.venv/bin/python -m pytest -q -p no:cacheprovider tests/vcs/test_build_trees.py \
      tests/e2e/test_docker_backend.py -k "kept_build_tree or unbuildable or same_second or \
ahead_of or settle or newest" 2>&1); then
    echo "run $i failed:"; echo "$out"; exit 1
  fi
  echo "run $i: $(echo "$out" | tail -1)"
done
echo "passed $n of $n in a row"
