"""Capture the layers' graphs the way Megatron's TE path does (`cuda_graph_capture()` with
`cuda_graph_impl=transformer_engine`), with TE itself or with the port in graphs.py.

Megatron hands TE whole layers. Under graph scope "attn", a layer being captured runs only
its attention (`_te_cuda_graph_capture`), and the MoE runs eagerly after each replay. The
layers' MoE parameters are then part of each graph's input surface without being used,
hence `allow_unused_input=True`.

The keyword arguments, by TE version (found from the signature, not the version string):
- TE 2.6 and later (`_reuse_graph_input_output_buffers` exists): `num_warmup_iters=11`,
  `allow_unused_input=True`, `_order`, `_num_layers_per_chunk`,
  `_reuse_graph_input_output_buffers` (True unless --no-weak-ref), `sample_kwargs` (a list of
  empty dicts: TE asserts a list under the reuse option), `fp8_enabled=False`;
- TE with `_order` but before 2.6: the same without the last two TE 2.6 options. It has no
  weak references at all, so only --no-weak-ref can run on it (otherwise exit 125);
- without `_order`: cannot run the pipeline order (exit 125).
"""
from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Callable

from .schedule import callable_index, check

if TYPE_CHECKING:
    import torch

WARMUP_ITERS = 11           # Megatron's num_warmup_iters


def megatron_kwargs(accepted: set[str], order: list[int], per_chunk: list[int],
                    weak_ref: bool, samples: int, te_version: str = "?") -> dict:
    """The keyword arguments Megatron passes to make_graphed_callables, for a function that
    accepts the parameter names `accepted`; ImportError where it cannot do what is asked."""
    if "_order" not in accepted:
        raise ImportError(f"Transformer Engine {te_version}: make_graphed_callables has no "
                          "_order (pipeline order)")
    reuse = "_reuse_graph_input_output_buffers" in accepted
    if weak_ref and not reuse:
        raise ImportError(f"Transformer Engine {te_version} has no "
                          "_reuse_graph_input_output_buffers (TE 2.6 or later): it makes no weak "
                          "references; run with --no-weak-ref")
    kwargs: dict = {"num_warmup_iters": WARMUP_ITERS, "allow_unused_input": True,
                    "_order": order}
    if reuse:
        kwargs.update(_num_layers_per_chunk=per_chunk, _reuse_graph_input_output_buffers=weak_ref)
    if "sample_kwargs" in accepted:
        kwargs["sample_kwargs"] = [{} for _ in range(samples)]
    if "fp8_enabled" in accepted:
        kwargs["fp8_enabled"] = False
    return kwargs


def capture(impl: str, layers: list, sample: torch.Tensor, order: list[int],
            per_chunk: list[int], scope: str, weak_ref: bool,
            clone_grads: bool = False) -> dict[tuple[int, int], Callable]:
    """Graph every layer for every microbatch; {(layer, microbatch): callable}."""
    chunks, microbatches = check(order)
    if sum(per_chunk) != len(layers) or len(per_chunk) != chunks:
        raise ValueError(f"{len(layers)} layers do not fit {per_chunk} layers per chunk")
    samples = [(sample.clone().requires_grad_(True),) for _ in range(len(layers) * microbatches)]
    if impl == "te":
        make, accepted, version = _te()
        kwargs = megatron_kwargs(accepted, order, per_chunk, weak_ref, len(samples), version)
    else:
        from . import graphs
        make = graphs.make_graphed_callables
        kwargs = megatron_kwargs({"_order", "_reuse_graph_input_output_buffers",
                                  "sample_kwargs"}, order, per_chunk, weak_ref, len(samples))
        kwargs["clone_grads"] = clone_grads
    for layer in layers:
        layer.capture_attn_only = scope == "attn"
    try:
        fns = make(tuple(layers), samples, **kwargs)
    finally:
        for layer in layers:
            layer.capture_attn_only = False
    fns = fns if isinstance(fns, (list, tuple)) else (fns,)
    graphed = {}
    for chunk, n in enumerate(per_chunk):
        for layer in range(n):
            for mb in range(microbatches):
                graphed[(sum(per_chunk[:chunk]) + layer, mb)] = \
                    fns[callable_index(per_chunk, microbatches, chunk, mb, layer)]
    return graphed


def _te() -> tuple[Callable, set[str], str]:
    try:
        import transformer_engine
        import transformer_engine.pytorch as te
    except Exception as exc:  # noqa: BLE001
        raise ImportError(f"--impl te needs Transformer Engine: {exc}") from exc
    accepted = set(inspect.signature(te.make_graphed_callables).parameters)
    return te.make_graphed_callables, accepted, getattr(transformer_engine, "__version__", "?")
