"""A port of the path under test: graphed callables in one shared pool, captured in a
pipeline order, whose static outputs are swapped for weak references the way
Transformer Engine's `make_weak_ref` does it (TE's io_memory_reduction /
_reuse_graph_input_output_buffers). Written from the behaviour, not from TE's code.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

# __cuda_array_interface__ type strings; bf16 has none, so it travels as f2 and is
# viewed back, as TE does.
_TYPESTR = {torch.float32: "<f4", torch.float16: "<f2", torch.bfloat16: "<f2",
            torch.float64: "<f8", torch.int64: "<i8", torch.int32: "<i4", torch.uint8: "|u1",
            torch.int8: "|i1", torch.bool: "|b1"}


class _WeakRefTensor:
    """Only a device pointer, a dtype and a shape: owns nothing."""

    def __init__(self, tensor: torch.Tensor):
        if not tensor.is_contiguous():
            raise ValueError("weak refs need contiguous tensors")
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
    """A tensor aliasing x's memory without keeping x alive; lists and tuples recurse."""
    if isinstance(x, (list, tuple)):
        return type(x)(make_weak_ref(t) for t in x)
    if not isinstance(x, torch.Tensor) or not x.is_cuda:
        return x
    ref = _WeakRefTensor(x)
    new = torch.as_tensor(ref).view(ref.dtype)
    if new.data_ptr() != ref.data_ptr():
        raise RuntimeError(f"Data pointer mismatch after converting the weak ref to a tensor: "
                           f"{ref.data_ptr():#x} became {new.data_ptr():#x} on {new.device}")
    if not new.is_cuda:
        raise RuntimeError(f"weak ref materialized on {new.device}, not on the GPU")
    return new


def pipeline_order(chunks: int, microbatches: int) -> list[int]:
    """TE-style _order: +c is a forward of chunk c, -c a backward; each chunk's backwards
    take its microbatches first-in first-out. Here: all forwards, then the backwards."""
    return list(range(1, chunks + 1)) * microbatches + list(range(-chunks, 0)) * microbatches


@dataclass
class _Slot:
    static_in: torch.Tensor
    params: tuple[nn.Parameter, ...]
    fwd: torch.cuda.CUDAGraph = field(default_factory=torch.cuda.CUDAGraph)
    bwd: torch.cuda.CUDAGraph = field(default_factory=torch.cuda.CUDAGraph)
    static_out: torch.Tensor | None = None
    static_grad_out: torch.Tensor | None = None
    static_grads: tuple = ()


class _Replay(torch.autograd.Function):
    @staticmethod
    def forward(ctx, slot: _Slot, x: torch.Tensor, *params):
        ctx.slot = slot
        slot.static_in.copy_(x)
        slot.fwd.replay()
        return slot.static_out.detach()

    @staticmethod
    def backward(ctx, grad):
        slot = ctx.slot
        slot.static_grad_out.copy_(grad)
        slot.bwd.replay()
        return (None, *(None if g is None else g.clone() for g in slot.static_grads))


class GraphedCallable:
    def __init__(self, slot: _Slot):
        self.slot = slot

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return _Replay.apply(self.slot, x, *self.slot.params)


def make_graphed(modules: list[nn.Module], sample: torch.Tensor, order: list[int], *,
                 weak_ref: bool, warmup: int = 3) -> dict[tuple[int, int], GraphedCallable]:
    """Capture forward and backward graphs of each (module, microbatch) in `order`,
    all in one memory pool. Replays must follow the same order."""
    pool = torch.cuda.graph_pool_handle()
    slots: dict[tuple[int, int], _Slot] = {}
    seen_f: dict[int, int] = {}
    for c in order:
        if c > 0:
            m = seen_f.get(c, 0)
            seen_f[c] = m + 1
            mod = modules[c - 1]
            slots[(c - 1, m)] = _Slot(sample.clone().requires_grad_(True),
                                      tuple(p for p in mod.parameters() if p.requires_grad))

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for (c, _), slot in slots.items():
            for _ in range(warmup):
                out = modules[c](slot.static_in)
                torch.autograd.grad(out, (slot.static_in, *slot.params),
                                    grad_outputs=torch.ones_like(out), allow_unused=True)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()

    seen_b: dict[int, int] = {}
    seen_f.clear()
    for c in order:
        if c > 0:
            m = seen_f.get(c, 0)
            seen_f[c] = m + 1
            slot = slots[(c - 1, m)]
            with torch.cuda.graph(slot.fwd, pool=pool):
                slot.static_out = modules[c - 1](slot.static_in)
        else:
            m = seen_b.get(-c, 0)
            seen_b[-c] = m + 1
            slot = slots[(-c - 1, m)]
            slot.static_grad_out = torch.empty_like(slot.static_out)
            with torch.cuda.graph(slot.bwd, pool=pool):
                slot.static_grads = torch.autograd.grad(
                    slot.static_out, (slot.static_in, *slot.params),
                    grad_outputs=slot.static_grad_out, allow_unused=True)
            if weak_ref:
                # The real output is dropped: the pool may hand its memory to graphs
                # captured later, and the callable keeps only a weak reference.
                slot.static_out = make_weak_ref(slot.static_out)
    torch.cuda.synchronize()
    return {key: GraphedCallable(slot) for key, slot in slots.items()}
