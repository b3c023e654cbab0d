"""The repro under `--with`, on a GPU: the test that the Docker and Slurm backends render
for a companion (bisect_ngc.companions.install_prelude), run by a real shell, with the TE
stand-in (tests/repro/te_standin) packed as a wheel in place of a TE build, and the repro
graphing through it (`--impl te`, which release mode adds for a TE companion).

    python -m benchmarks.companion_gpu [OUT_DIR]

Runs in a virtual environment that sees this interpreter's torch (so the wheel installs without
touching it). Cases: the repro works; it fails under the prefix emulation (the detector
still sees the failure through the companion); a companion that does not import is a skip
(exit 125) with its reason. Writes one JSON line per case to OUT_DIR/companion_gpu.jsonl.
"""
from __future__ import annotations

import json
import site as sitepkgs
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.lib.companion_repos import wheel
from bisect_ngc.companions.specs import Installed, install_prelude, parse

ROOT = Path(__file__).resolve().parents[1]


def standin_wheel(out: Path, broken: bool = False) -> Path:
    """tests/repro/te_standin as transformer_engine-2.6.0 (broken: its import raises)."""
    files = {str(p.relative_to(ROOT / "tests" / "te_standin")): p.read_bytes()
             for p in (ROOT / "tests" / "te_standin").rglob("*.py")}
    if broken:
        files["transformer_engine/pytorch/__init__.py"] = \
            b"raise ImportError('undefined symbol: _ZN2at6Tensor (built for another torch)')\n"
    return wheel(out, "transformer_engine", "2.6.0+standin", files, purelib=True)


def main() -> None:
    dest = Path(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/results")
    dest.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        # The venv sees this interpreter's packages (torch), after its own.
        site = next((venv / "lib").glob("python*/site-packages"))
        (site / "parent.pth").write_text("\n".join(sitepkgs.getsitepackages()) + "\n")
        env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "BISECT_ARTIFACTS": str(Path(tmp) / "a"),
               "HOME": tmp}
        (Path(tmp) / "a").mkdir()
        cases = [("works", False, "python3 -m repro --impl te"),
                 ("fails under emulation", False,
                  "python3 -m repro --impl te --emulate-prefix-as-tensor"),
                 ("companion does not import", True, "python3 -m repro --impl te")]
        for label, broken, test in cases:
            wheel = standin_wheel(Path(tmp) / ("broken" if broken else "ok"), broken)
            script = install_prelude([Installed(parse(str(wheel)), str(wheel))], test)
            start = time.monotonic()
            proc = subprocess.run(["sh", "-c", script], cwd=ROOT, env=env, capture_output=True,
                                  text=True, timeout=600)
            last = (proc.stdout.strip().splitlines() or ["{}"])[-1]
            try:
                found = json.loads(last)
            except ValueError:
                found = {"unparsed": last, "stderr": proc.stderr[-500:]}
            rows.append({"case": label, "exit": proc.returncode,
                         "wall_s": round(time.monotonic() - start, 2),
                         "verdict": found.get("verdict"), "impl": (found.get("settings") or {})
                         .get("impl"), "skip_reason": found.get("skip_reason"),
                         "signature": found.get("signature")})
            print(json.dumps(rows[-1]), flush=True)
    (dest / "companion_gpu.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


if __name__ == "__main__":
    main()
