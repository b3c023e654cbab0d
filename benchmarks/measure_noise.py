"""The noise of `python -m repro --measure` between processes, on a CUDA machine.

    python -m benchmarks.measure_noise [--processes 10] [--out DIR] [-- extra repro flags]

Runs each configuration in its own processes, interleaved (A B C A B C ...), and prints per
configuration the median step_ms over processes, the spread between processes
((max - min) / median) and the median in-process IQR; then each configuration's ratio to the
first. Writes every JSON line to DIR/measure_runs.jsonl (default benchmarks/results).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

SHAPE = ["--seq-length", "2048", "--micro-batch-size", "2"]
CONFIGS = {
    "graphed": ["--measure", *SHAPE],
    "graphed-math": ["--measure", *SHAPE, "--attention-backend", "math"],
    "eager": ["--measure", *SHAPE, "--no-cuda-graph", "--measure-steps", "60"],
}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--processes", type=int, default=10)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--out", default=os.environ.get("OUT", "benchmarks/results"))
    args, extra = ap.parse_known_args()
    names = args.configs.split(",")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    runs: dict[str, list[dict]] = {n: [] for n in names}
    with open(out / "measure_runs.jsonl", "w") as log:
        for i in range(args.processes):
            for name in names:
                proc = subprocess.run([sys.executable, "-m", "repro", *CONFIGS[name], *extra],
                                      capture_output=True, text=True)
                line = json.loads(proc.stdout.strip().splitlines()[-1])
                line.update(config=name, process=i, exit=proc.returncode)
                log.write(json.dumps(line, sort_keys=True) + "\n")
                if proc.returncode == 0:
                    runs[name].append(line)
    first = None
    for name in names:
        ms = [r["step_ms"] for r in runs[name]]
        if not ms:
            print(f"{name}: no successful run")
            continue
        med = statistics.median(ms)
        first = first or med
        iqr = statistics.median(r["step_ms_iqr_pct"] for r in runs[name])
        print(f"{name}: {len(ms)} processes, median step {med:.4f} ms, between processes "
              f"{100 * (max(ms) - min(ms)) / med:.2f}% (min {min(ms):.4f}, max {max(ms):.4f}), "
              f"in-process IQR {iqr:.2f}%, tflops {statistics.median(r['tflops'] for r in runs[name]):.1f}, "
              f"ratio to {names[0]} {med / first:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
