"""The README's commands run as shown, and print what it says they print. Every ```sh
block runs in order in one bash (so `cd` and `export PATH` carry on), with /tmp/demo moved
into a temporary directory and HOME there too; each ```text block's lines must appear in
what the blocks printed. The ```console block (two NGC releases) needs Docker, a GPU and
nvcr.io, so it is shown, not run."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.M | re.S)


def _blocks(kind: str) -> list[str]:
    return [body for k, body in BLOCK.findall((ROOT / "README.md").read_text()) if k == kind]


@pytest.mark.slow
def test_the_readme_commands_run_as_shown(tmp_path):
    demo = tmp_path / "demo"
    script = "set -euo pipefail\n" + "\n".join(_blocks("sh")).replace("/tmp/demo", str(demo))
    env = dict(os.environ, HOME=str(tmp_path / "home"),
               PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    for var in ("BISECT_NGC_STATE", "BISECT_NGC_CACHE", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        env.pop(var, None)
    done = subprocess.run(["bash", "-c", script], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    for block in _blocks("text"):
        for line in block.splitlines():
            assert line in done.stdout, (line, done.stdout[-3000:])
    assert (demo / "report.md").read_text().startswith("#")
