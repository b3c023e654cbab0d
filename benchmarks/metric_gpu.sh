#!/usr/bin/env bash
# bisect --metric on a CUDA machine, with the repro's --measure as the test (BENCHMARKS.md).
#   [CHANGE=ffn|math] [MAX_RUNS=10] [LIMIT=SECONDS] [RESUME=DIR] \
#       bash benchmarks/metric_gpu.sh found|null [N]
# found: a generated history of N commits (default 8) where the commit at N/2 makes the step
# slower for a real reason: CHANGE=ffn (default) a 3% larger expert FFN, --ffn-hidden-size
# 2048 -> ${FFN:-2112} (2112: about 2.25% slower; FFN=2128: about 2.8%); CHANGE=math the attention on PyTorch's math backend
# (about twice as slow). null: no commit changes anything. Writes the bisect JSON, the report and the session's state under
# ${OUT:-benchmarks/results}. LIMIT stops the bisection after that many seconds (the device's
# calls are capped); the same command with RESUME=<a state it wrote> goes on from there.
set -uo pipefail
cd "$(dirname "$0")/.."
MODE=${1:?found or null}; N=${2:-8}
[[ ${FFN:-2112} =~ ^[0-9]+$ ]] || { echo "FFN must be a whole number" >&2; exit 2; }
DEST=${OUT:-benchmarks/results}; mkdir -p "$DEST"
if [ -d .whl ]; then     # the device has no gitpython or docker SDK: carried wheels
  python3 -m pip install -q --upgrade --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
WORK=/tmp/metric_gpu_$MODE      # fixed: a resumed session finds the same paths
rm -rf "$WORK"; mkdir -p "$WORK"
[ -n "${RESUME:-}" ] && cp -r "$RESUME" "$WORK/state" && chmod -R u+w "$WORK/state"
[ "$MODE" = found ] && TRANSITION=$((N / 2)) || TRANSITION=$N
python3 -c "
from pathlib import Path; from tests.lib.repos import make_repo
print(make_repo(Path('$WORK/repo'), $N, $TRANSITION)[min($TRANSITION, $N - 1)])" > "$DEST/metric_gpu_$MODE.expected"
if [ "${CHANGE:-ffn}" = math ]; then
  TEST='B=default; [ "$(cat behaviour)" = new ] && B=math; python3 -m repro --measure --seq-length 2048 --micro-batch-size 2 --attention-backend $B'
else
  TEST='F=2048; [ "$(cat behaviour)" = new ] && F='"${FFN:-2112}"'; python3 -m repro --measure --seq-length 2048 --micro-batch-size 2 --ffn-hidden-size $F'
fi
t0=$(date +%s)
(cd "$WORK/repo" && timeout -s INT "${LIMIT:-0}" python3 -m bisect_ngc bisect --repo . --old "main~$((N - 1))" --new main \
    --test "$TEST" --metric step_ms --runs-per-round 5 --max-runs "${MAX_RUNS:-10}" \
    --state "$WORK/state" --cache-dir "$WORK/cache" --quiet --json) > "$DEST/metric_gpu_$MODE.json"
rc=$?
echo "exit $rc in $(( $(date +%s) - t0 )) s; expected first new: $(cat "$DEST/metric_gpu_$MODE.expected")"
python3 - "$DEST/metric_gpu_$MODE.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(r["status"], r["first_new"], r["explanation"][:300])
m = r.get("metric") or {}
for k in ("endpoints", "culprit"):
    if k in m:
        print(k, {x: m[k][x] for x in ("change", "low", "high", "p", "call")})
print("runs", r["runs"], "probes", r["probes"], "per commit", {s["index"]: s["n"] for s in m.get("samples", {}).values()})
PY
rm -rf "$DEST/metric_gpu_${MODE}_state"; mkdir -p "$DEST/metric_gpu_${MODE}_state"
(cd "$WORK/state" && cp -r $(ls | grep -v "^worktrees$") "$DEST/metric_gpu_${MODE}_state/")
cp "$WORK"/state/reports/*.md "$WORK"/state/reports/*.svg "$DEST/" 2>/dev/null
python3 - "$WORK/state/state.db" > "$DEST/metric_gpu_${MODE}_runs.txt" <<'PY'
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
for rnd, idx, details in db.execute("SELECT round, idx, details FROM probes ORDER BY rowid"):
    d = json.loads(details)
    print(rnd, idx, d.get("step_ms"), d.get("attention_backend") or d.get("settings", {}).get("attention_backend"),
          (d.get("clocks_before") or {}).get("clocks.sm"), (d.get("clocks_after") or {}).get("clocks.sm"))
PY
exit $rc
