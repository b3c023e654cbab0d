"""The open accuracy benchmark's quick subset, as CI runs it: no wrong `found` in a family
(or cell) the tool claims to handle; the families it does not handle yet are in the table,
with their wrong answers, not hidden."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ("linear", "merges", "intermittent", "null", "metric", "components",
            "not-in-component")


@pytest.mark.slow
def test_the_quick_subset_gives_no_wrong_answer_where_the_tool_claims_to_be_right(tmp_path):
    done = subprocess.run([sys.executable, "-m", "benchmarks.accuracy", "--quick", "--out",
                           str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    table = json.loads((tmp_path / "accuracy-quick.json").read_text())
    claimed_wrong = [w for w in table["wrong"] if w["who"].startswith("bisect-ngc") and any(
        r["claimed"] and (r["family"], r["cell"]) == (w["family"], w["cell"])
        for r in table["rows"])]
    assert done.returncode == 0 and not claimed_wrong, claimed_wrong or done.stdout[-3000:]
    reported = {r["family"] for r in table["rows"]}
    assert reported == set(FAMILIES)
    text = (tmp_path / "accuracy-quick.md").read_text()
    assert "git bisect run" in text and "Calibration" in text and "against the in-process" in text
