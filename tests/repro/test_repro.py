"""The repro on the CPU: flags, the verdict classifier, the JSON line, no-CUDA exit 125.

The GPU verdicts themselves are in tests/repro/test_gpu.py (skipped here, run on the
device: see BENCHMARKS.md).
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from repro import verdict as V
from repro.run import parser

ROOT = Path(__file__).resolve().parents[2]
has_torch = shutil.which("python3") and subprocess.run(
    [sys.executable, "-c", "import torch"], capture_output=True).returncode == 0
needs_torch = pytest.mark.skipif(not has_torch, reason="PyTorch is not installed (scripts/test.sh "
                                                       "installs the CPU build)")


class OutOfMemoryError(RuntimeError):
    """Stands in for torch.cuda.OutOfMemoryError, matched by class name."""


class AcceleratorError(RuntimeError):
    pass


@pytest.mark.parametrize("exc,code,signature", [
    (RuntimeError("Data pointer mismatch after converting to torch.Tensor"), 1,
     V.DATA_POINTER),
    (RuntimeError("Data pointer mismatch"), 1, V.DATA_POINTER),
    (RuntimeError("weak ref materialized on cpu, not on the GPU"), 1, V.OFF_GPU),
    (RuntimeError("weak ref materialized off the GPU"), 1, V.OFF_GPU),
    (AssertionError("weak reference tensor expected on cuda, got cpu"), 1, V.OFF_GPU),
    (AssertionError("replay numerics differ from eager (max abs diff 0.3)"), 1, V.NUMERICS),
    (AssertionError("eager and graph replay outputs mismatch"), 1, V.NUMERICS),
    (RuntimeError("shape mismatch in graph capture"), 125, None),
    (AssertionError("graph replay differs from eager at step 3: loss 1.0 vs 2.0"), 1,
     V.NUMERICS),
    (AcceleratorError("CUDA error: an illegal memory access was encountered\nCUDA kernel "
                      "errors might be asynchronously reported"), 1, V.ILLEGAL_ACCESS),
    (RuntimeError("CUDA_ERROR_ILLEGAL_ADDRESS during replay"), 1, V.ILLEGAL_ACCESS),
    (OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), 125, None),
    (RuntimeError("CUDA error: out of memory"), 125, None),
    (ModuleNotFoundError("No module named 'torch'"), 125, None),
    (ImportError("libcudart.so.12: cannot open shared object file"), 125, None),
    (RuntimeError("Found no NVIDIA driver on your system"), 125, None),
    (RuntimeError("mat1 and mat2 shapes cannot be multiplied (4x8 and 16x4)"), 125, None),
    (RuntimeError("Expected all tensors to be on the same device, but found cuda:0 and cpu"),
     125, None),
    (ValueError("pointer is null"), 125, None),
    (KeyError("weak"), 125, None),
    (RuntimeError("injected unrelated error (--inject-unrelated-error)"), 125, None),
    (KeyboardInterrupt(), 125, None),
])
def test_classifier_table(exc, code, signature):
    v = V.classify(exc)
    assert (v.exit_code, v.signature) == (code, signature)
    assert v.reason


def test_classifier_follows_the_cause_chain():
    try:
        try:
            raise RuntimeError("Data pointer mismatch")
        except RuntimeError as inner:
            raise ValueError("capture failed") from inner
    except ValueError as outer:
        assert V.classify(outer).signature == V.DATA_POINTER


def test_unrelated_reasons_say_what_happened():
    assert V.classify(OutOfMemoryError("x")).reason.startswith("out of memory")
    assert V.classify(ImportError("x")).reason.startswith("import error")
    assert V.classify(RuntimeError("boom")).reason == "unrelated error: RuntimeError: boom"


def test_classifier_import_needs_no_torch():
    code = "import sys, repro.verdict; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


def test_flags_are_named_like_megatron():
    args = parser().parse_args([])
    assert (args.num_layers, args.cuda_graph_scope, args.weak_ref, args.impl) == (2, "attn", True,
                                                                                   "port")
    args = parser().parse_args(["--num-layers", "4", "--hidden-size", "512",
                                "--ffn-hidden-size", "1024", "--num-attention-heads", "8",
                                "--num-query-groups", "2", "--num-experts", "4",
                                "--moe-router-topk", "1", "--seq-length", "256",
                                "--micro-batch-size", "2", "--iters", "3", "--seed", "7",
                                "--dtype", "fp32", "--cuda-graph-scope", "full",
                                "--no-weak-ref", "--impl", "te"])
    assert (args.num_layers, args.hidden_size, args.num_query_groups, args.dtype,
            args.weak_ref) == (4, 512, 2, "fp32", False)
    with pytest.raises(SystemExit):
        parser().parse_args(["--dtype", "fp64"])


def _run_repro(cwd: Path, *args: str) -> tuple[int, dict]:
    proc = subprocess.run([sys.executable, "-m", "repro", *args], cwd=cwd, capture_output=True,
                          text=True, env={"CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin:/bin"})
    return proc.returncode, json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@needs_torch
def test_no_cuda_exits_125_with_json():
    code, out = _run_repro(ROOT, "--num-layers", "1", "--emulate-prefix-as-tensor")
    assert code == 125 == out["exit_code"]
    assert out["verdict"] == "cannot-test" and out["reason"] == "no CUDA device"
    assert out["signature"] is None
    assert out["fault_injection"] is True
    assert out["settings"]["num_layers"] == 1
    for key in ("torch_version", "torch_git_version", "torch_cuda", "wall_s"):
        assert key in out


@pytest.mark.slow
@needs_torch
def test_runs_when_the_folder_alone_is_copied(tmp_path):
    shutil.copytree(ROOT / "repro", tmp_path / "repro")
    code, out = _run_repro(tmp_path)
    assert code == 125 and out["reason"] == "no CUDA device"
    assert out["fault_injection"] is False


def test_without_torch_it_is_an_import_error(tmp_path):
    shutil.copytree(ROOT / "repro", tmp_path / "repro")
    (tmp_path / "torch.py").write_text("raise ImportError('torch is broken here')\n")
    code, out = _run_repro(tmp_path)
    assert code == 125 and out["reason"].startswith("import error")


@pytest.mark.slow
def test_measure_without_cuda_is_125_and_flops_count_the_routed_experts():
    import argparse

    from repro.measure import model_flops
    code, out = _run_repro(ROOT, "--measure", "--measure-steps", "4")
    assert code == 125 and out["settings"]["measure"] is True
    a = argparse.Namespace(hidden_size=8, seq_length=4, micro_batch_size=1,
                           num_attention_heads=2, num_query_groups=1, num_experts=4,
                           moe_router_topk=2, ffn_hidden_size=16, num_layers=1)
    per_token = (2 * 8 * 4 * 4 + 2 * 64 + 2 * 2 * 2 * 8 + 2 * 8 * 4
                 + 2 * (2 * 8 * 32 + 2 * 16 * 8))
    assert model_flops(a) == 3 * 4 * per_token
    assert model_flops(argparse.Namespace(**{**vars(a), "moe_router_topk": 1})) < model_flops(a)


@pytest.mark.parametrize("args", [["--measure", "--inject-unrelated-error"],
                                  ["--measure", "--measure-steps", "2"]])
def test_measure_flag_errors(args):
    proc = subprocess.run([sys.executable, "-m", "repro", *args], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "--measure" in proc.stderr
