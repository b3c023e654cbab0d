"""The repro's driver: parse flags, build the model, capture, train, check, report.

Exit 0 works, 1 the weak-ref capture failure (with a signature), 125 cannot test.
The last stdout line is one JSON object with the verdict and the details.
"""
from __future__ import annotations

import argparse
import json
import socket
import statistics
import sys
import time
from typing import Any

from . import measure
from . import verdict as V

DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
TOLERANCE = {"bf16": (2e-2, 2e-2), "fp16": (1e-2, 1e-2), "fp32": (1e-4, 1e-5)}  # rtol, atol
MEMORY_SLACK = 2 << 20


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m repro",
        description="Reduced-layer Mixtral-style MoE with attention-only CUDA graphs and weak "
                    "references to static outputs. Exit 0: works; 1: the weak-ref capture "
                    "failure reproduced; 125: cannot test. The last stdout line is JSON.")
    a = ap.add_argument
    a("--num-layers", type=int, default=2)
    a("--hidden-size", type=int, default=1024)
    a("--ffn-hidden-size", type=int, default=2048)
    a("--num-attention-heads", type=int, default=16)
    a("--num-query-groups", type=int, default=4)
    a("--num-experts", type=int, default=8)
    a("--moe-router-topk", type=int, default=2)
    a("--seq-length", type=int, default=1024)
    a("--micro-batch-size", type=int, default=1)
    a("--num-microbatches", type=int, default=4,
      help="microbatches per step; each gets its own graphs in the pipeline order")
    a("--order", choices=["1f1b", "layerwise"], default="1f1b",
      help="1f1b: Megatron's one-forward-one-backward order of one pipeline rank, the layers as "
           "one model chunk (default); layerwise: the first order of this repro, one chunk per "
           "layer, every forward before every backward")
    a("--pipeline-warmup", type=int, default=1, metavar="N",
      help="1f1b: forwards before the first backward, as Megatron's warmup microbatches "
           "(pipeline size - rank - 1, at most --num-microbatches); default 1")
    a("--iters", type=int, default=5, help="training steps after capture")
    a("--seed", type=int, default=1234)
    a("--dtype", choices=sorted(DTYPES), default="bf16")
    a("--cuda-graph-scope", choices=["attn", "full"], default="attn",
      help="attn: graph only each layer's attention; full: the whole layer (dense MoE)")
    a("--weak-ref", dest="weak_ref", action="store_true", default=True,
      help="replace the graphs' static outputs with weak references (default)")
    a("--no-weak-ref", dest="weak_ref", action="store_false",
      help="keep strong static outputs (the workaround, at the cost of memory)")
    a("--impl", choices=["port", "te"], default="port",
      help="port: this program's own port of TE's path; te: TE's make_graphed_callables, "
           "called as Megatron does (TE 2.6 or later for weak references)")
    a("--clone-grads", action="store_true",
      help="port only: return copies of the graphs' static grads (this repro's old behaviour); "
           "TE returns the static grads themselves")
    a("--emulate-prefix-as-tensor", action="store_true",
      help="FAULT INJECTION: make torch.as_tensor put __cuda_array_interface__ objects on the "
           "CPU when no device= is given, as before PyTorch PR #132595. Tests the detector; "
           "never a result about a build")
    a("--inject-unrelated-error", action="store_true",
      help="FAULT INJECTION: raise an unrelated error mid-step; must give exit 125")
    measure.add_flags(ap)
    return ap


def emit(v: V.Diagnosis, info: dict[str, Any]) -> int:
    info.update(verdict=v.name, exit_code=v.exit_code, signature=v.signature, reason=v.reason)
    print(json.dumps(info, sort_keys=True), flush=True)
    return v.exit_code


def main(argv: list[str] | None = None) -> int:
    ap = parser()
    args = ap.parse_args(argv)
    if args.clone_grads and args.impl == "te":
        ap.error("--clone-grads is for --impl port: TE never copies its grads")
    if args.pipeline_warmup < 0 or args.num_microbatches < 1 or args.num_layers < 1:
        ap.error("--pipeline-warmup must be >= 0, --num-microbatches and --num-layers >= 1")
    if args.measure and (args.emulate_prefix_as_tensor or args.inject_unrelated_error):
        ap.error("--measure times steps; the fault injections are for the weak-ref check")
    if args.measure_steps < 4 or args.warmup < 1:
        ap.error("--measure-steps must be >= 4 and --warmup >= 1")
    info: dict[str, Any] = {
        "settings": vars(args).copy(), "fault_injection": bool(
            args.emulate_prefix_as_tensor or args.inject_unrelated_error),
        "host": socket.gethostname(),
    }
    start = time.perf_counter()
    try:
        v = measure.measure(args, info) if args.measure else _run(args, info)
    except BaseException as exc:  # every exception gets a verdict
        v = V.cannot_test(f"--measure: {type(exc).__name__}") if args.measure else V.classify(exc)
        info["error"] = f"{type(exc).__name__}: {str(exc)[:2000]}"
        _peak(info)
    info["wall_s"] = round(time.perf_counter() - start, 3)
    return emit(v, info)


def cuda_torch(info: dict[str, Any]):
    """torch, with its versions noted in `info`; None when it sees no CUDA device."""
    import torch

    info.update(torch_version=torch.__version__,
                torch_git_version=getattr(torch.version, "git_version", None),
                torch_cuda=torch.version.cuda)
    return torch if torch.cuda.is_available() else None


def _run(args: argparse.Namespace, info: dict[str, Any]) -> V.Diagnosis:
    torch = cuda_torch(info)
    if torch is None:
        return V.cannot_test("no CUDA device")
    info["gpu"] = torch.cuda.get_device_name()
    if args.emulate_prefix_as_tensor:
        _emulate_prefix_as_tensor(torch)

    from .capture import capture
    from .model import Model
    from .schedule import layerwise, microbatch_steps, one_f_one_b

    torch.manual_seed(args.seed)
    dtype = getattr(torch, DTYPES[args.dtype])
    dev = torch.device("cuda")
    full = args.cuda_graph_scope == "full"
    model = Model(args.num_layers, args.hidden_size, args.ffn_hidden_size,
                  args.num_attention_heads, args.num_query_groups, args.num_experts,
                  args.moe_router_topk, dense=full).to(dev, dtype)
    reference = Model(args.num_layers, args.hidden_size, args.ffn_hidden_size,
                      args.num_attention_heads, args.num_query_groups, args.num_experts,
                      args.moe_router_topk, dense=full).to(dev, dtype)
    reference.load_state_dict(model.state_dict())
    for m in (model, reference):
        _main_grads(m)

    shape = (args.seq_length, args.micro_batch_size, args.hidden_size)
    mbs = args.num_microbatches
    if args.order == "1f1b":
        order, per_chunk = one_f_one_b(mbs, args.pipeline_warmup), [args.num_layers]
    else:
        order, per_chunk = layerwise(args.num_layers, mbs), [1] * args.num_layers
    steps = microbatch_steps(order)
    info["order"] = order
    sample = torch.randn(shape, device=dev, dtype=dtype)

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    graphed = capture(args.impl, list(model.layers), sample, order, per_chunk,
                      args.cuda_graph_scope, args.weak_ref, args.clone_grads)
    torch.cuda.synchronize()
    info["capture_s"] = round(time.perf_counter() - t0, 3)

    rtol, atol = TOLERANCE[args.dtype]
    gen = torch.Generator(device=dev).manual_seed(args.seed + 1)
    step_times, mem = [], []
    for step in range(args.iters):
        xs = [torch.randn(shape, device=dev, dtype=dtype, generator=gen) for _ in range(mbs)]
        ys = [torch.randn(shape, device=dev, dtype=dtype, generator=gen) for _ in range(mbs)]
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss_g = _step(model, xs, ys, [[graphed[(i, m)] for i in range(args.num_layers)]
                                       for m in range(mbs)], args.cuda_graph_scope, steps)
        torch.cuda.synchronize()
        step_times.append(time.perf_counter() - t0)
        if args.inject_unrelated_error and step == 1:
            raise RuntimeError("injected unrelated error (--inject-unrelated-error): "
                               "a stand-in for a crash that has nothing to do with weak refs")
        loss_e = _step(reference, xs, ys, None, args.cuda_graph_scope, steps)
        _compare(step, loss_g, loss_e, model, reference, rtol, atol)
        _sgd(model)
        _sgd(reference)
        torch.cuda.synchronize()
        mem.append(torch.cuda.memory_allocated())
        if step >= 2 and mem[-1] > mem[1] + MEMORY_SLACK:
            return V.cannot_test(f"memory grew by {(mem[-1] - mem[1]) / 2**20:.1f} MiB after "
                                 f"warm-up (step {step})")
    info.update(step_s=round(statistics.median(step_times), 4),
                mem_per_step_mib=[round(m / 2**20, 1) for m in mem])
    _peak(info)
    return V.works()


def _peak(info: dict[str, Any]) -> None:
    """The peak GPU memory so far, also for a run that failed (if CUDA was reached)."""
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            info["peak_mem_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 3)
    except Exception:  # noqa: BLE001 - a broken CUDA context has no figure to give
        pass


def _step(model, xs, ys, graphed, scope, steps):
    """One training step: forwards and backwards of the microbatches in the order the graphs
    were captured in (+1 the next forward, -1 the oldest backward)."""
    import torch
    pending, total, nxt = [], 0.0, 0
    for s in steps:
        if s > 0:
            out = model(xs[nxt], graphed[nxt] if graphed else None, scope)
            pending.append(torch.nn.functional.mse_loss(out.float(), ys[nxt].float()))
            nxt += 1
        else:
            loss = pending.pop(0)
            loss.backward()
            total += loss.item()
    return total


def _main_grads(model) -> None:
    """Megatron's main-grad path: each parameter's grad is added into its own fp32 buffer as
    soon as autograd makes it. A graph's static grad is then read before a later replay can
    reuse its memory, never kept as `.grad`."""
    import torch

    def to_main_grad(p):
        p.main_grad.add_(p.grad)
        p.grad = None

    for p in model.parameters():
        p.main_grad = torch.zeros_like(p, dtype=torch.float32)
        p.register_post_accumulate_grad_hook(to_main_grad)


def _compare(step, loss_g, loss_e, model, reference, rtol, atol):
    if abs(loss_g - loss_e) > atol + rtol * abs(loss_e):
        raise AssertionError(f"graph replay differs from eager at step {step}: loss "
                             f"{loss_g:.6g} vs {loss_e:.6g}")
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        diff = (p.main_grad - q.main_grad).abs().max().item()
        scale = q.main_grad.abs().max().item()
        if diff > atol * max(scale, 1e-6) + rtol * scale or diff != diff:
            raise AssertionError(f"graph replay differs from eager at step {step}: gradient of "
                                 f"{name} off by {diff:.3g} (scale {scale:.3g})")


def _sgd(model, lr: float = 1e-3):
    import torch
    with torch.no_grad():
        for p in model.parameters():
            p.add_(p.main_grad.to(p.dtype), alpha=-lr)
            p.main_grad.zero_()


def _emulate_prefix_as_tensor(torch) -> None:
    original = torch.as_tensor

    def as_tensor(data, *args, **kwargs):
        if hasattr(data, "__cuda_array_interface__") and "device" not in kwargs and len(args) < 2:
            return original(data, *args, **kwargs).to("cpu")
        return original(data, *args, **kwargs)

    torch.as_tensor = as_tensor


if __name__ == "__main__":
    sys.exit(main())
