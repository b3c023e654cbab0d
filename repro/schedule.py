"""Pipeline orders in Transformer Engine's `_order` form, and where TE puts each graphed
callable. Needs no torch.

An order lists +c for a forward of model chunk c (1-based) and -c for a backward of it;
each chunk's microbatches go forward and backward first in, first out.
"""
from __future__ import annotations


def schedule_table(microbatches: int, chunks: int,
                   group: int | None = None) -> list[tuple[int, int]]:
    """(microbatch, chunk) in the order forwards run, as Megatron's get_schedule_table: groups
    of `group` microbatches go through every chunk before the next group starts."""
    group = group or microbatches
    table = []
    for start in range(0, microbatches, group):
        end = microbatches if start + group >= microbatches else start + group
        table += [(m, c) for c in range(chunks) for m in range(start, end)]
    return table


def one_f_one_b(microbatches: int, warmup: int, chunks: int = 1,
                group: int | None = None) -> list[int]:
    """The 1F1B order of one pipeline rank, as Megatron's convert_schedule_table_to_order:
    `warmup` forwards, then one forward and one backward in turn, then the backwards left.
    Backwards go through the chunks last first. PP8, 128 microbatches, rank 0 (warmup 7):
    [1]*7 + [1, -1]*121 + [-1]*7. With several chunks the warmup must cover
    (chunks - 1) x group forwards at least, as Megatron's does."""
    if microbatches < 1 or chunks < 1 or warmup < 0:
        raise ValueError("need at least one microbatch and one chunk, and warmup >= 0")
    table = schedule_table(microbatches, chunks, group)
    warmup = min(warmup, len(table))
    forwards = [c + 1 for _, c in table]
    backwards = [c - chunks for _, c in table]
    order = forwards[:warmup]
    for i in range(warmup, len(table)):
        order += [forwards[i], backwards[i - warmup]]
    order += backwards[-warmup:] if warmup else []
    check(order)
    return order


def layerwise(layers: int, microbatches: int) -> list[int]:
    """The repro's first order: one chunk per layer, every forward, then every backward."""
    return list(range(1, layers + 1)) * microbatches + list(range(-layers, 0)) * microbatches


def callable_index(layers_per_chunk: list[int], microbatches: int, chunk: int, microbatch: int,
                   layer: int) -> int:
    """Where make_graphed_callables puts the graph of (chunk, microbatch, layer in the chunk),
    all 0-based: chunk first, then microbatch, then layer."""
    return (sum(layers_per_chunk[:chunk]) * microbatches + microbatch * layers_per_chunk[chunk]
            + layer)


def microbatch_steps(order: list[int]) -> list[int]:
    """The whole model's steps for a driver that runs every chunk at once: +1 a forward of the
    next microbatch, -1 a backward of the oldest, taken from chunk 1's entries."""
    return [1 if c > 0 else -1 for c in order if abs(c) == 1]


def check(order: list[int]) -> tuple[int, int]:
    """(chunks, microbatches) of a valid order; ValueError otherwise."""
    if not order or 0 in order:
        raise ValueError("an order is a non-empty list of non-zero chunk numbers")
    chunks = max(abs(c) for c in order)
    microbatches = len(order) // chunks // 2
    if chunks * microbatches * 2 != len(order):
        raise ValueError(f"{len(order)} entries do not make {chunks} chunks x 2 passes")
    done = {c: [0, 0] for c in range(1, chunks + 1)}
    for c in order:
        fwd, bwd = done[abs(c)]
        if c < 0 and bwd >= fwd:
            raise ValueError(f"a backward of chunk {-c} comes before its forward")
        done[abs(c)][0 if c > 0 else 1] += 1
    if any(counts != [microbatches, microbatches] for counts in done.values()):
        raise ValueError(f"every chunk needs {microbatches} forwards and backwards")
    return chunks, microbatches
