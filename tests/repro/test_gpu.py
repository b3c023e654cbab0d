"""The repro's verdicts on a real GPU. Skipped without CUDA; run on the device with
`python -m pytest tests/repro/test_gpu.py` (see BENCHMARKS.md for the recorded runs)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="needs PyTorch with CUDA")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="needs a CUDA GPU: run on the device machine")
ROOT = Path(__file__).resolve().parents[2]


def repro(*args, standin: bool = False):
    env = dict(os.environ)
    if standin:      # TE cannot be installed here: its stand-in (tests/repro/te_standin/README.md)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "tests" / "repro" / "te_standin"),
                                                          env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-m", "repro", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env=env)
    return proc.returncode, json.loads(proc.stdout.strip().splitlines()[-1])


def test_default_works():
    code, out = repro()
    assert code == 0 and out["verdict"] == "works" and out["fault_injection"] is False
    assert out["peak_mem_gib"] < 4 and out["wall_s"] <= 20
    assert out["order"] == [1, 1, -1, 1, -1, 1, -1, -1]


@pytest.mark.parametrize("args", [["--num-layers", "4", "--num-microbatches", "8",
                                   "--pipeline-warmup", "3"], ["--order", "layerwise"]])
def test_other_orders_work_and_fail_under_emulation(args):
    assert repro(*args)[0] == 0
    code, out = repro(*args, "--emulate-prefix-as-tensor")
    assert code == 1 and out["signature"] == "data-pointer-mismatch"


def test_te_called_as_megatron_does_works_and_fails_under_emulation():
    code, out = repro("--impl", "te", standin=True)
    assert code == 0 and out["settings"]["impl"] == "te"
    code, out = repro("--impl", "te", "--emulate-prefix-as-tensor", standin=True)
    assert code == 1 and out["signature"] == "data-pointer-mismatch"


def test_without_te_the_te_impl_cannot_test():
    code, out = repro("--impl", "te")
    assert code == 125 and "needs Transformer Engine" in out["reason"]


def test_emulated_prefix_as_tensor_is_the_data_pointer_failure():
    code, out = repro("--emulate-prefix-as-tensor")
    assert code == 1 and out["signature"] == "data-pointer-mismatch"
    assert out["fault_injection"] is True


def test_unrelated_error_cannot_test():
    code, out = repro("--inject-unrelated-error")
    assert code == 125 and out["signature"] is None


def test_without_weak_refs_the_emulation_is_harmless():
    code, out = repro("--emulate-prefix-as-tensor", "--no-weak-ref", "--num-layers", "1")
    assert code == 0


def test_measure_times_a_graphed_step_and_math_attention_is_slower():
    code, out = repro("--measure", "--seq-length", "2048", "--micro-batch-size", "2")
    assert code == 0 and out["cuda_graph"] is True and out["verdict"] == "works"
    assert 0 < out["step_ms_p25"] <= out["step_ms"] and out["tflops"] > 0
    assert out["tokens_per_s"] == pytest.approx(4096 / out["step_ms"] * 1e3, rel=1e-3)
    code, math = repro("--measure", "--seq-length", "2048", "--micro-batch-size", "2",
                       "--attention-backend", "math")
    assert code == 0 and math["step_ms"] > out["step_ms"] * 1.02


def test_measure_eager_and_errors_are_125():
    code, out = repro("--measure", "--no-cuda-graph", "--measure-steps", "10")
    assert code == 0 and out["cuda_graph"] is False and out["step_ms"] > 0
    code, out = repro("--measure", "--hidden-size", "1000", "--num-attention-heads", "16")
    assert code == 125 and out["exit_code"] == 125
