"""Stand-in for `transformer_engine.pytorch.make_graphed_callables` of TE 2.6-2.12: TE's
parameters and argument checks (its assertion texts) on the `_order` path, then either
tagged callables or a capture by the repro's port. See ../../README.md."""
from __future__ import annotations

from typing import Any

import torch
from torch.utils._pytree import tree_flatten

MODE = "port"          # or "tags"
CALLS: list[dict[str, Any]] = []


class Tagged:
    """What MODE "tags" returns for sample i."""

    def __init__(self, index: int):
        self.index = index

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"tagged stand-in callable {self.index} was called")


def make_graphed_callables(modules, sample_args, num_warmup_iters=3, allow_unused_input=False,
                           sample_kwargs=None, fp8_enabled=False, fp8_calibrating=False,
                           fp8_recipe=None, fp8_group=None, fp8_weight_caching=False,
                           _order=None, _num_layers_per_chunk=None, pool=None,
                           retain_graph_in_backward=False,
                           _reuse_graph_input_output_buffers=False):
    CALLS.append(dict(modules=modules, sample_args=sample_args,
                      num_warmup_iters=num_warmup_iters, allow_unused_input=allow_unused_input,
                      sample_kwargs=sample_kwargs, fp8_enabled=fp8_enabled, _order=_order,
                      _num_layers_per_chunk=_num_layers_per_chunk,
                      _reuse_graph_input_output_buffers=_reuse_graph_input_output_buffers,
                      capture_attn_only=[getattr(m, "capture_attn_only", None)
                                         for m in (modules if isinstance(modules, tuple)
                                                   else (modules,))]))
    just_one = not isinstance(modules, tuple)
    callables = (modules,) if just_one else modules
    for module in callables:
        assert isinstance(module, torch.nn.Module), \
            f"Graphing for {type(module)} is not supported."
    if sample_kwargs is None:
        sample_kwargs = {} if just_one else tuple({} for _ in range(len(sample_args)))
    if just_one:
        sample_args, sample_kwargs = (sample_args,), (sample_kwargs,)

    is_training = all(c.training for c in callables)
    if not is_training and any(c.training for c in callables):
        assert False, ("make_graphed_callables only supports when modules are all in training "
                       "or all in inference mode.")
    if _order is None:
        assert len(sample_args) == len(callables)
        assert len(sample_kwargs) == len(callables)
    else:
        chunks = max(_order)
        microbatches = len(_order) // chunks // 2
        assert chunks * microbatches * 2 == len(_order)
        if _num_layers_per_chunk is None:
            assert len(sample_args) * 2 >= len(_order) and (
                len(sample_args) * 2 % len(_order) == 0
            ), (f"{len(sample_args)} * 2 >= {len(_order)} and {len(sample_args)} * 2 %"
                f" {len(_order)} == 0")
            _num_layers_per_chunk = [len(sample_args) // chunks // microbatches] * chunks
        else:
            assert isinstance(_num_layers_per_chunk, int) or \
                len(_num_layers_per_chunk) == chunks, (
                    "If _num_layers_per_chunk is provided, it must be an integer or a list of"
                    f" {chunks} integers, but got {_num_layers_per_chunk}.")
            if isinstance(_num_layers_per_chunk, int):
                _num_layers_per_chunk = [_num_layers_per_chunk] * chunks
        total = sum(_num_layers_per_chunk)
        assert len(callables) == total, (f"Callables should have ({total}) "
                                         f"entries when order input is provided but got "
                                         f"{len(callables)}.")
        assert len(sample_args) == total * microbatches, (
            f"Expected {total * microbatches}args tuple, but got {len(sample_args)}.")
        assert len(sample_kwargs) == len(sample_args)
    if _reuse_graph_input_output_buffers:
        assert _order is not None, \
            "`_order` must be provided when `_reuse_graph_input_output_buffers` is True."
        assert is_training, \
            "`_reuse_graph_input_output_buffers` is only available in training mode."
        assert isinstance(sample_args, list), \
            "sample_args must be a list for _reuse_graph_input_output_buffers."
        for args in sample_args:
            assert len(sample_args[0]) == len(args), ("Arguments must have same length and "
                                                      "shape for "
                                                      "`_reuse_graph_input_output_buffers`.")
        assert isinstance(sample_kwargs, list), \
            "sample_kwargs must be a list for _reuse_graph_input_output_buffers."
        for kwargs in sample_kwargs:
            assert len(sample_kwargs[0]) == len(kwargs), (
                "Keyword arguments must have same length and shape for "
                "`_reuse_graph_input_output_buffers`.")
    for c in callables:
        assert (len(c._backward_hooks) == 0 and len(c._forward_hooks) == 0
                and len(c._forward_pre_hooks) == 0), (
            "Modules must not have hooks registered at the time they are passed. "
            "However, registering hooks on modules after passing them "
            "through make_graphed_callables is allowed.")
        assert all(b.requires_grad is False for b in c.buffers()), (
            "In any :class:`~torch.nn.Module` passed to :func:`~make_graphed_callables`, "
            "only parameters may be trainable. All buffers must have ``requires_grad=False``.")
    for args in sample_args:
        flat, _ = tree_flatten(args)
        assert all(isinstance(arg, torch.Tensor) for arg in flat), (
            "In the beta API, sample_args for each callable must contain only Tensors. "
            "Other types are not allowed.")

    if MODE == "tags":
        fns = tuple(Tagged(i) for i in range(len(sample_args)))
    else:
        from repro.graphs import make_graphed_callables as port
        assert _order is not None, "the stand-in captures only with _order"
        fns = port(callables, list(sample_args), _order=_order,
                   num_warmup_iters=num_warmup_iters, allow_unused_input=allow_unused_input,
                   sample_kwargs=list(sample_kwargs), _num_layers_per_chunk=_num_layers_per_chunk,
                   _reuse_graph_input_output_buffers=_reuse_graph_input_output_buffers)
    return fns[0] if just_one else fns
