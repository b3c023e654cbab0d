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
    a("--num-microbatches", type=int, default=2,
      help="microbatches per step; each gets its own graphs in the pipeline order")
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
      help="port: this program's own port of TE's path; te: TE's make_graphed_callables")
    a("--emulate-prefix-as-tensor", action="store_true",
      help="FAULT INJECTION: make torch.as_tensor put __cuda_array_interface__ objects on the "
           "CPU when no device= is given, as before PyTorch PR #132595. Tests the detector; "
           "never a result about a build")
    a("--inject-unrelated-error", action="store_true",
      help="FAULT INJECTION: raise an unrelated error mid-step; must give exit 125")
    return ap


def emit(v: V.Verdict, info: dict[str, Any]) -> int:
    info.update(verdict=v.name, exit_code=v.exit_code, signature=v.signature, reason=v.reason)
    print(json.dumps(info, sort_keys=True), flush=True)
    return v.exit_code


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    info: dict[str, Any] = {
        "settings": vars(args).copy(), "fault_injection": bool(
            args.emulate_prefix_as_tensor or args.inject_unrelated_error),
        "host": socket.gethostname(),
    }
    start = time.perf_counter()
    try:
        v = _run(args, info)
    except BaseException as exc:  # every exception gets a verdict
        v = V.classify(exc)
        info["error"] = f"{type(exc).__name__}: {str(exc)[:2000]}"
    info["wall_s"] = round(time.perf_counter() - start, 3)
    return emit(v, info)


def _run(args: argparse.Namespace, info: dict[str, Any]) -> V.Verdict:
    import torch

    info.update(torch_version=torch.__version__,
                torch_git_version=getattr(torch.version, "git_version", None),
                torch_cuda=torch.version.cuda)
    if not torch.cuda.is_available():
        return V.cannot_test("no CUDA device")
    info["gpu"] = torch.cuda.get_device_name()
    if args.emulate_prefix_as_tensor:
        _emulate_prefix_as_tensor(torch)

    from .graphs import make_graphed, pipeline_order
    from .model import Model

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

    shape = (args.seq_length, args.micro_batch_size, args.hidden_size)
    mbs = args.num_microbatches
    order = pipeline_order(args.num_layers, mbs)
    info["order"] = order
    units = [layer if full else layer.attn for layer in model.layers]
    sample = torch.randn(shape, device=dev, dtype=dtype)

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    if args.impl == "te":
        graphed = _te_graphed(units, sample, order, args.weak_ref, mbs)
    else:
        graphed = make_graphed(units, sample, order, weak_ref=args.weak_ref)
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
                                       for m in range(mbs)], args.cuda_graph_scope)
        torch.cuda.synchronize()
        step_times.append(time.perf_counter() - t0)
        if args.inject_unrelated_error and step == 1:
            raise RuntimeError("injected unrelated error (--inject-unrelated-error): "
                               "a stand-in for a crash that has nothing to do with weak refs")
        loss_e = _step(reference, xs, ys, None, args.cuda_graph_scope)
        _compare(step, loss_g, loss_e, model, reference, rtol, atol)
        _sgd(model)
        _sgd(reference)
        torch.cuda.synchronize()
        mem.append(torch.cuda.memory_allocated())
        if step >= 2 and mem[-1] > mem[1] + MEMORY_SLACK:
            return V.cannot_test(f"memory grew by {(mem[-1] - mem[1]) / 2**20:.1f} MiB after "
                                 f"warm-up (step {step})")
    info.update(step_s=round(statistics.median(step_times), 4),
                peak_mem_gib=round(torch.cuda.max_memory_allocated() / 2**30, 3),
                mem_per_step_mib=[round(m / 2**20, 1) for m in mem])
    return V.works()


def _step(model, xs, ys, graphed, scope):
    import torch
    losses = [torch.nn.functional.mse_loss(model(x, graphed[m] if graphed else None, scope)
                                           .float(), y.float())
              for m, (x, y) in enumerate(zip(xs, ys))]
    for loss in losses:  # backwards first-in first-out, as the capture order says
        loss.backward()
    return sum(loss.item() for loss in losses)


def _compare(step, loss_g, loss_e, model, reference, rtol, atol):
    if abs(loss_g - loss_e) > atol + rtol * abs(loss_e):
        raise AssertionError(f"graph replay differs from eager at step {step}: loss "
                             f"{loss_g:.6g} vs {loss_e:.6g}")
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        if (p.grad is None) != (q.grad is None):
            raise AssertionError(f"graph replay differs from eager at step {step}: gradient "
                                 f"of {name} missing on one side")
        if p.grad is None:
            continue
        diff = (p.grad.float() - q.grad.float()).abs().max().item()
        scale = q.grad.float().abs().max().item()
        if diff > atol * max(scale, 1e-6) + rtol * scale or diff != diff:
            raise AssertionError(f"graph replay differs from eager at step {step}: gradient of "
                                 f"{name} off by {diff:.3g} (scale {scale:.3g})")


def _sgd(model, lr: float = 1e-3):
    import torch
    with torch.no_grad():
        for p in model.parameters():
            if p.grad is not None:
                p.add_(p.grad, alpha=-lr)
                p.grad = None


def _emulate_prefix_as_tensor(torch) -> None:
    original = torch.as_tensor

    def as_tensor(data, *args, **kwargs):
        if hasattr(data, "__cuda_array_interface__") and "device" not in kwargs and len(args) < 2:
            return original(data, *args, **kwargs).to("cpu")
        return original(data, *args, **kwargs)

    torch.as_tensor = as_tensor


def _te_graphed(units, sample, order, weak_ref, mbs):
    import inspect
    try:
        import transformer_engine
        import transformer_engine.pytorch as te
    except Exception as exc:  # noqa: BLE001
        raise ImportError(f"--impl te needs Transformer Engine: {exc}") from exc
    params = inspect.signature(te.make_graphed_callables).parameters
    option = next((o for o in ("_reuse_graph_input_output_buffers", "io_memory_reduction")
                   if o in params), None)
    if option is None or "_order" not in params:
        raise ImportError(f"Transformer Engine {transformer_engine.__version__} has no weak-ref "
                          "option (_reuse_graph_input_output_buffers / io_memory_reduction) "
                          "with _order")
    samples = tuple((sample.clone().requires_grad_(True),) for _ in range(len(units) * mbs))
    fns = te.make_graphed_callables(tuple(units), samples, _order=order,
                                    **{option: weak_ref})
    fns = fns if isinstance(fns, (list, tuple)) else (fns,)
    return {(i, m): fns[i] for i in range(len(units)) for m in range(mbs)}


if __name__ == "__main__":
    sys.exit(main())
