"""`python -m repro --measure`: the training step's speed instead of the weak-ref check.

The whole step (forward, loss, backward, SGD update) is captured in one CUDA graph by
default, so the host's launch jitter stays out of the timing; `--no-cuda-graph` times eager
execution with the routed MoE, as the thread's TFLOPS figures were taken. Every error is
exit 125: a measurement that could not be taken says nothing about the build.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import time
from typing import Any

from . import verdict as V

ATTENTION_BACKENDS = ("default", "math", "flash", "efficient", "cudnn")


def model_flops(args: argparse.Namespace) -> float:
    """FLOPs of one training step (3x the forward), counting the routed experts (top-k)
    and the causal half of the attention matrix, as the model defines its work."""
    h, s = args.hidden_size, args.seq_length
    tokens = s * args.micro_batch_size
    head = h // args.num_attention_heads
    qkv = 2 * h * (args.num_attention_heads + 2 * args.num_query_groups) * head
    proj = 2 * h * h
    scores = 2 * 2 * (s / 2) * h                 # QK^T and AV, per token, causal
    router = 2 * h * args.num_experts
    experts = args.moe_router_topk * (2 * h * 2 * args.ffn_hidden_size
                                      + 2 * args.ffn_hidden_size * h)
    per_token = qkv + proj + scores + router + experts
    return 3.0 * tokens * args.num_layers * per_token


def gpu_clocks() -> dict[str, Any]:
    """The GPU's name and clocks as nvidia-smi reports them now; {} without nvidia-smi."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return {}
    fields = ["name", "clocks.sm", "clocks.mem", "clocks.max.sm", "temperature.gpu"]
    try:
        out = subprocess.run([exe, f"--query-gpu={','.join(fields)}",
                              "--format=csv,noheader,nounits", "--id=0"],
                             capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    values = [v.strip() for v in out.strip().splitlines()[0].split(",")] if out.strip() else []
    return dict(zip(fields, values)) if len(values) == len(fields) else {}


def _attention(torch, backend: str):
    import contextlib
    if backend == "default":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel
    return sdpa_kernel({"math": SDPBackend.MATH, "flash": SDPBackend.FLASH_ATTENTION,
                        "efficient": SDPBackend.EFFICIENT_ATTENTION,
                        "cudnn": SDPBackend.CUDNN_ATTENTION}[backend])


def measure(args: argparse.Namespace, info: dict[str, Any]) -> V.Diagnosis:
    from .model import Model
    from .run import DTYPES, cuda_torch

    torch = cuda_torch(info)
    if torch is None:
        return V.cannot_test("no CUDA device")
    graphed = args.cuda_graph
    torch.manual_seed(args.seed)
    dev, dtype = torch.device("cuda"), getattr(torch, DTYPES[args.dtype])
    model = Model(args.num_layers, args.hidden_size, args.ffn_hidden_size,
                  args.num_attention_heads, args.num_query_groups, args.num_experts,
                  args.moe_router_topk, dense=graphed).to(dev, dtype)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    shape = (args.seq_length, args.micro_batch_size, args.hidden_size)
    x = torch.randn(shape, device=dev, dtype=dtype)
    y = torch.randn(shape, device=dev, dtype=dtype)

    def step():
        loss = torch.nn.functional.mse_loss(model(x).float(), y.float())
        loss.backward()
        opt.step()
        return loss

    with _attention(torch, args.attention_backend):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(args.warmup):
                opt.zero_grad(set_to_none=not graphed)
                step()
        torch.cuda.current_stream().wait_stream(side)
        if graphed:
            graph = torch.cuda.CUDAGraph()
            opt.zero_grad(set_to_none=False)
            with torch.cuda.graph(graph):
                step()
            run = graph.replay
            for _ in range(3):
                run()
        else:
            def run():
                opt.zero_grad(set_to_none=True)
                step()
        torch.cuda.synchronize()
        # clocks drop while a fresh process starts; keep the GPU busy until they are up
        warm_until = time.perf_counter() + args.warmup_s
        while time.perf_counter() < warm_until:
            run()
            torch.cuda.synchronize()
        clocks_before = gpu_clocks()
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(args.measure_steps)]
        for start, end in events:
            start.record()
            run()
            end.record()
        torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in events)
    median = statistics.median(times)
    q1, _, q3 = statistics.quantiles(times, n=4)
    info.update(step_ms=round(median, 4), step_ms_p25=round(q1, 4),
                step_ms_iqr_pct=round(100 * (q3 - q1) / median, 3),
                tokens_per_s=round(args.seq_length * args.micro_batch_size / median * 1e3, 1),
                tflops=round(model_flops(args) / (median * 1e-3) / 1e12, 3),
                cuda_graph=graphed, gpu=torch.cuda.get_device_name(),
                clocks_before=clocks_before, clocks_after=gpu_clocks(),
                peak_mem_gib=round(torch.cuda.max_memory_allocated() / 2**30, 3))
    return V.Diagnosis(V.WORKS, None, f"timed {len(times)} steps")


def add_flags(ap: argparse.ArgumentParser) -> None:
    g = ap.add_argument_group("throughput (--measure)")
    g.add_argument("--measure", action="store_true",
                   help="time training steps instead of checking the weak-ref failure; prints "
                        "step_ms (median), step_ms_p25, tokens_per_s and tflops; exit 0, or "
                        "125 on any error")
    g.add_argument("--no-cuda-graph", dest="cuda_graph", action="store_false", default=True,
                   help="--measure: time eager steps (routed MoE) instead of replays of one "
                        "graph of the whole step (dense MoE)")
    g.add_argument("--measure-steps", type=int, default=100, metavar="N",
                   help="--measure: timed steps (default 100)")
    g.add_argument("--warmup", type=int, default=20, metavar="N",
                   help="--measure: untimed steps first (default 20)")
    g.add_argument("--warmup-s", type=float, default=1.0, metavar="SECONDS",
                   help="--measure: then keep stepping for this long before timing, so the "
                        "GPU's clocks are up (default 1.0)")
    g.add_argument("--attention-backend", choices=ATTENTION_BACKENDS, default="default",
                   help="--measure: force one scaled-dot-product-attention kernel "
                        "(math is the slow reference path)")
