"""A port of the path under test: Transformer Engine's `make_graphed_callables` as Megatron
calls it (TE v2.6+, with `_order` and `_reuse_graph_input_output_buffers`). Written from the
behaviour, not from TE's code.

Every graph is captured in one memory pool, in the pipeline order. With the reuse option,
after each backward capture:
- its forward's static outputs become weak references (TE's `make_weak_ref`);
- so do the previous backward's static grad inputs;
- one static grad-output buffer serves every backward;
- a later forward takes the static inputs of a microbatch whose backward is done.
The pool may then hand that memory to later captures. That is safe only while replays keep
the capture order, and while a weak reference really aliases GPU memory.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import nn
from torch.autograd.function import once_differentiable

from .schedule import callable_index, check

# __cuda_array_interface__ type strings; bf16 has none, so it travels as f2 and is
# viewed back, as TE does.
_TYPESTR = {torch.float32: "<f4", torch.float16: "<f2", torch.bfloat16: "<f2",
            torch.float64: "<f8", torch.int64: "<i8", torch.int32: "<i4", torch.uint8: "|u1",
            torch.int8: "|i1", torch.bool: "|b1"}


class _WeakRefTensor:
    """Only a device pointer, a dtype and a shape: owns nothing."""

    def __init__(self, tensor: torch.Tensor):
        self._ptr = tensor.data_ptr()
        self.dtype = tensor.dtype
        self.shape = tuple(tensor.shape)

    def data_ptr(self) -> int:
        return self._ptr

    @property
    def __cuda_array_interface__(self) -> dict:
        numel = 1
        for s in self.shape:
            numel *= s
        return {"shape": self.shape, "typestr": _TYPESTR[self.dtype],
                "data": (self._ptr if numel else 0, False), "version": 3}


def make_weak_ref(x):
    """A tensor aliasing x's GPU memory without keeping x alive; containers recurse, CPU
    tensors, numbers and None pass through. Errors are TE's, word for word."""
    if isinstance(x, torch.Tensor):
        if not x.is_cuda:
            return x
        ref = _WeakRefTensor(x)
        new = torch.as_tensor(ref).view(ref.dtype)   # no device=: the code under test
        if ref.data_ptr() != new.data_ptr():
            raise RuntimeError("Data pointer mismatch after converting to torch.Tensor")
        return new
    if isinstance(x, (tuple, list)):
        return type(x)(make_weak_ref(t) for t in x)
    if isinstance(x, dict):
        return {k: make_weak_ref(v) for k, v in x.items()}
    if x is None or isinstance(x, (int, float, bool)):
        return x
    raise TypeError(f"Invalid type {type(x)} to make weak ref")


@dataclass
class _Graph:
    """One (chunk, microbatch, layer): its two graphs and their static tensors."""
    module: nn.Module
    inputs: tuple
    params: tuple
    fwd: torch.cuda.CUDAGraph = field(default_factory=torch.cuda.CUDAGraph)
    bwd: torch.cuda.CUDAGraph = field(default_factory=torch.cuda.CUDAGraph)
    outputs: tuple = ()
    single: bool = True
    grad_outputs: tuple = ()
    grad_inputs: tuple = ()
    clone_grads: bool = False

    @property
    def surface(self) -> tuple:
        return self.inputs + self.params


class _Replay(torch.autograd.Function):
    @staticmethod
    def forward(ctx, g: _Graph, *inputs):
        ctx.g = g
        for static, new in zip(g.inputs, inputs):
            if static.data_ptr() != new.data_ptr():
                static.copy_(new)
        g.fwd.replay()
        return tuple(o.detach() for o in g.outputs)

    @staticmethod
    @once_differentiable
    def backward(ctx, *grads):
        g = ctx.g
        for buf, grad in zip(g.grad_outputs, grads):
            if buf is not None and buf.data_ptr() != grad.data_ptr():
                buf.copy_(grad)
        g.bwd.replay()
        # TE returns the static grads themselves (detached); the old port cloned them.
        keep: Callable = torch.Tensor.clone if g.clone_grads else torch.Tensor.detach
        return (None, *(None if b is None else keep(b) for b in g.grad_inputs))


def _callable(g: _Graph) -> Callable:
    training = g.module.training

    def run(*args):
        if g.module.training != training:      # as TE: another mode runs eagerly
            return g.module(*args)
        out = _Replay.apply(g, *args, *g.params)
        return out[0] if g.single else out
    return run


def _flatten(out: Any) -> tuple[tuple, bool]:
    if isinstance(out, torch.Tensor):
        return (out,), True
    return tuple(out), False


def make_graphed_callables(modules: tuple[nn.Module, ...], sample_args: list[tuple], *,
                           _order: list[int], num_warmup_iters: int = 3,
                           allow_unused_input: bool = False,
                           sample_kwargs: list[dict] | None = None,
                           _num_layers_per_chunk: list[int] | None = None,
                           _reuse_graph_input_output_buffers: bool = False,
                           clone_grads: bool = False) -> tuple[Callable, ...]:
    """TE's call, `_order` required: one callable per (chunk, microbatch, layer), in
    `schedule.callable_index` order. `sample_kwargs` must be empty dicts (the repro's
    layers take none). `clone_grads` restores the old port's copies of the grads."""
    chunks, microbatches = check(_order)
    per_chunk = list(_num_layers_per_chunk or
                     [len(sample_args) // chunks // microbatches] * chunks)
    if len(modules) != sum(per_chunk) or len(sample_args) != sum(per_chunk) * microbatches:
        raise ValueError(f"{len(modules)} modules and {len(sample_args)} samples do not fit "
                         f"{per_chunk} layers per chunk and {microbatches} microbatches")
    if any(sample_kwargs or ()):
        raise ValueError("the port passes no keyword arguments")
    first = [sum(per_chunk[:c]) for c in range(chunks)]
    at = lambda chunk, mb, layer: callable_index(per_chunk, microbatches, chunk, mb, layer)  # noqa
    owners = [modules[first[c] + layer] for c in range(chunks) for _ in range(microbatches)
              for layer in range(per_chunk[c])]
    reuse = _reuse_graph_input_output_buffers
    samples = _reused_inputs(list(sample_args), _order, per_chunk, microbatches) if reuse \
        else list(sample_args)
    graphs = [_Graph(mod, tuple(args), tuple(mod.parameters()), clone_grads=clone_grads)
              for mod, args in zip(owners, samples)]

    def forwards():          # the graph of each forward, in the order
        seen = [0] * chunks
        for c in _order:
            if c > 0:
                for layer in range(per_chunk[c - 1]):
                    yield graphs[at(c - 1, seen[c - 1], layer)]
                seen[c - 1] += 1

    torch.cuda.synchronize()
    with torch.cuda.stream(torch.cuda.Stream()):
        for g in forwards():
            for _ in range(num_warmup_iters):
                outs, _ = _flatten(g.module(*g.inputs))
                torch.autograd.grad(
                    tuple(o for o in outs if o.requires_grad),
                    tuple(t for t in g.surface if t.requires_grad),
                    grad_outputs=tuple(torch.empty_like(o) for o in outs if o.requires_grad),
                    only_inputs=True, allow_unused=allow_unused_input)
                del outs
    torch.cuda.synchronize()

    pool = torch.cuda.graph_pool_handle()
    fwd_iter = forwards()
    done = [0] * chunks
    shared_grad_outputs: dict[tuple, tuple] = {}
    previous: _Graph | None = None
    for c in _order:
        if c > 0:
            for _ in range(per_chunk[c - 1]):
                g = next(fwd_iter)
                with torch.cuda.graph(g.fwd, pool=pool):
                    out = g.module(*g.inputs)
                g.outputs, g.single = _flatten(out)
            continue
        chunk = -c - 1
        for layer in reversed(range(per_chunk[chunk])):
            g = graphs[at(chunk, done[chunk], layer)]
            key = tuple((o.shape, o.dtype) for o in g.outputs)
            if not reuse or key not in shared_grad_outputs:
                shared_grad_outputs[key] = tuple(torch.empty_like(o) if o.requires_grad else None
                                                 for o in g.outputs)
            g.grad_outputs = shared_grad_outputs[key]
            wanted = [t for t in g.surface if t.requires_grad]
            with torch.cuda.graph(g.bwd, pool=pool):
                grads = torch.autograd.grad(
                    tuple(o for o in g.outputs if o.requires_grad), tuple(wanted),
                    grad_outputs=tuple(b for b in g.grad_outputs if b is not None),
                    only_inputs=True, allow_unused=allow_unused_input)
            it = iter(grads)
            g.grad_inputs = tuple(next(it) if t.requires_grad else None for t in g.surface)
            if reuse:
                # The real tensors are dropped: the pool may give their memory to graphs
                # captured later, and the callables keep only weak references.
                g.outputs = make_weak_ref(g.outputs)
                if previous is not None:
                    previous.grad_inputs = make_weak_ref(previous.grad_inputs)
                previous = g
        done[chunk] += 1
    torch.cuda.synchronize()
    return tuple(_callable(g) for g in graphs)


def _reused_inputs(samples: list, order: list[int], per_chunk: list[int],
                   microbatches: int) -> list:
    """Each forward takes the static inputs of the oldest consumed one (a microbatch whose
    backward is captured), first in, first out, as TE does under the reuse option."""
    waiting: dict[int, list[int]] = {}
    consumed: list[int] = []
    seen = [0] * len(per_chunk)
    for c in order:
        chunk = abs(c) - 1
        if c > 0:
            idx = [callable_index(per_chunk, microbatches, chunk, seen[chunk], layer)
                   for layer in range(per_chunk[chunk])]
            waiting[chunk] = waiting.get(chunk, []) + idx
            for i in idx:
                if consumed:
                    samples[i] = samples[consumed.pop(0)]
            seen[chunk] += 1
        else:
            n = min(len(waiting[chunk]), per_chunk[chunk])
            consumed += waiting[chunk][:n]
            waiting[chunk] = waiting[chunk][n:]
    return samples
