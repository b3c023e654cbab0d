"""The repro's capture on the CPU: Megatron's 1F1B order, TE's callable layout, the inputs
TE reuses, and `--impl te` called as Megatron calls it (against a stand-in of TE 2.6-2.12
that makes TE's argument checks: TE cannot be installed here). The captures themselves
run on the GPU: tests/repro/test_gpu.py."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from repro.schedule import (callable_index, check, layerwise, microbatch_steps, one_f_one_b,
                            schedule_table)
from tests.lib.properties import examples

torch = pytest.importorskip("torch", reason="PyTorch is not installed (scripts/test.sh "
                                            "installs the CPU build)")

STANDIN = Path(__file__).resolve().parent / "te_standin"


def test_1f1b_orders_worked_by_hand():
    assert one_f_one_b(4, 1) == [1, 1, -1, 1, -1, 1, -1, -1]
    assert one_f_one_b(3, 0) == [1, -1, 1, -1, 1, -1]
    assert one_f_one_b(2, 5) == [1, 1, -1, -1]          # warmup is at most the microbatches
    assert one_f_one_b(5, 2) == [1, 1, 1, -1, 1, -1, 1, -1, -1, -1]


def test_the_thread_setting_pp8_128_microbatches_rank_0():
    assert one_f_one_b(128, 7) == [1] * 7 + [1, -1] * 121 + [-1] * 7


def test_interleaved_order_worked_by_hand():
    # 2 chunks, 4 microbatches in groups of 2: forwards go (mb, chunk) (0,0) (1,0) (0,1) (1,1)
    # (2,0) (3,0) (2,1) (3,1); backwards take the chunks last first.
    assert schedule_table(4, 2, 2) == [(0, 0), (1, 0), (0, 1), (1, 1),
                                       (2, 0), (3, 0), (2, 1), (3, 1)]
    assert one_f_one_b(4, 3, chunks=2, group=2) == [1, 1, 2, 2, -2, 1, -2, 1, -1, 2, -1, 2, -2,
                                                    -2, -1, -1]


def test_layerwise_is_the_old_order():
    assert layerwise(2, 2) == [1, 2, 1, 2, -2, -1, -2, -1]
    assert microbatch_steps(layerwise(3, 2)) == [1, 1, -1, -1]


@settings(max_examples=examples(200), deadline=None)
@given(st.integers(1, 40), st.integers(0, 50), st.integers(1, 4), st.integers(1, 8))
def test_every_1f1b_order_is_valid(microbatches, extra, chunks, group):
    warmup = extra + (chunks - 1) * min(group, microbatches)   # Megatron's least warmup
    order = one_f_one_b(microbatches, warmup, chunks, group)
    assert check(order) == (chunks, microbatches)
    forwards = microbatches * chunks
    leading = next((i for i, c in enumerate(order) if c < 0), len(order))
    assert leading == min(warmup + 1, forwards)     # warmup, then the first steady forward
    if chunks == 1:
        assert microbatch_steps(order) == order


def test_too_short_a_warmup_for_several_chunks_is_refused():
    with pytest.raises(ValueError, match="backward of chunk 2 comes before"):
        one_f_one_b(1, 0, chunks=2)


@pytest.mark.parametrize("bad", [[], [1, 0, -1], [1, -1, -1, 1], [1, 1, -1], [-1, 1]])
def test_invalid_orders_are_refused(bad):
    with pytest.raises(ValueError):
        check(bad)


@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.integers(1, 6))
def test_callable_index_numbers_every_graph_once(per_chunk, microbatches):
    seen = [callable_index(per_chunk, microbatches, c, m, layer)
            for c, n in enumerate(per_chunk) for m in range(microbatches) for layer in range(n)]
    assert sorted(seen) == list(range(sum(per_chunk) * microbatches))


def test_later_forwards_take_the_inputs_of_consumed_microbatches():
    from repro.graphs import _reused_inputs
    samples = [(object(),) for _ in range(8)]
    out = _reused_inputs(list(samples), one_f_one_b(4, 1), [2], 4)
    # mb2 reuses mb0's inputs (its backward is done), mb3 mb1's, layer by layer.
    assert [samples.index(s) for s in out] == [0, 1, 2, 3, 0, 1, 2, 3]
    assert _reused_inputs(list(samples[:4]), layerwise(2, 2), [1, 1], 2) == samples[:4]


@pytest.fixture
def te(monkeypatch):
    monkeypatch.syspath_prepend(str(STANDIN))
    import transformer_engine.pytorch as te
    monkeypatch.setattr(te, "MODE", "tags")
    te.CALLS.clear()
    yield te
    for name in ("transformer_engine.pytorch", "transformer_engine"):   # no TE after this
        sys.modules.pop(name, None)


def layers(n: int, hidden: int = 16):
    from repro.model import Layer
    return [Layer(hidden, 32, 4, 2, 4, 2) for _ in range(n)]


@pytest.mark.parametrize("order,per_chunk,expected", [
    ("1f1b", [2], lambda layer, mb: mb * 2 + layer),        # one chunk of L layers
    ("layerwise", [1, 1], lambda layer, mb: layer * 3 + mb),  # one chunk per layer
])
def test_te_graphs_are_mapped_chunk_then_microbatch_then_layer(te, order, per_chunk, expected):
    from repro.capture import capture
    o = one_f_one_b(3, 1) if order == "1f1b" else layerwise(2, 3)
    graphed = capture("te", layers(2), torch.zeros(8, 1, 16), o, per_chunk, "attn",
                      weak_ref=True)
    assert {key: fn.index for key, fn in graphed.items()} == \
        {(layer, mb): expected(layer, mb) for layer in range(2) for mb in range(3)}


def test_te_is_called_as_megatron_calls_it(te):
    from repro.capture import capture
    mods = layers(2)
    order = one_f_one_b(3, 1)
    capture("te", mods, torch.zeros(8, 1, 16), order, [2], "attn", weak_ref=True)
    call = te.CALLS[-1]
    assert call["modules"] == tuple(mods)               # whole layers
    assert call["capture_attn_only"] == [True, True]    # scope attn: attention only, in capture
    assert [m.capture_attn_only for m in mods] == [False, False]
    assert isinstance(call["sample_args"], list) and len(call["sample_args"]) == 6
    assert all(len(a) == 1 and a[0].requires_grad for a in call["sample_args"])
    assert call["sample_kwargs"] == [{}] * 6 and isinstance(call["sample_kwargs"], list)
    assert (call["num_warmup_iters"], call["allow_unused_input"], call["_order"],
            call["_num_layers_per_chunk"], call["_reuse_graph_input_output_buffers"],
            call["fp8_enabled"]) == (11, True, order, [2], True, False)
    capture("te", mods, torch.zeros(8, 1, 16), order, [2], "full", weak_ref=False)
    assert te.CALLS[-1]["capture_attn_only"] == [False, False]
    assert te.CALLS[-1]["_reuse_graph_input_output_buffers"] is False


def test_the_standin_asserts_what_te_asserts(te):
    mods, order = tuple(layers(2)), one_f_one_b(2, 1)
    args = [(torch.zeros(4, 1, 16, requires_grad=True),) for _ in range(4)]
    with pytest.raises(AssertionError, match="sample_args must be a list"):
        te.make_graphed_callables(mods, tuple(args), _order=order,
                                  _reuse_graph_input_output_buffers=True)
    with pytest.raises(AssertionError, match="sample_kwargs must be a list"):
        te.make_graphed_callables(mods, args, _order=order,
                                  _reuse_graph_input_output_buffers=True)
    with pytest.raises(AssertionError, match=r"Expected 4args tuple, but got 2"):
        te.make_graphed_callables(mods, args[:2], _order=order, _num_layers_per_chunk=[2])
    with pytest.raises(AssertionError, match="Callables should have"):
        te.make_graphed_callables(mods[:1], args, _order=order, _num_layers_per_chunk=[2])
    assert len(te.make_graphed_callables(mods, args, _order=order, sample_kwargs=[{}] * 4,
                                         _reuse_graph_input_output_buffers=True)) == 4


def test_kwargs_by_te_version():
    from repro.capture import megatron_kwargs
    te26 = {"_order", "_num_layers_per_chunk", "_reuse_graph_input_output_buffers",
            "sample_kwargs", "fp8_enabled"}
    assert megatron_kwargs(te26, [1, -1], [2], True, 2) == dict(
        num_warmup_iters=11, allow_unused_input=True, _order=[1, -1], _num_layers_per_chunk=[2],
        _reuse_graph_input_output_buffers=True, sample_kwargs=[{}, {}], fp8_enabled=False)
    te25 = {"_order", "sample_kwargs", "fp8_enabled"}
    with pytest.raises(ImportError, match="TE 2.6 or later"):
        megatron_kwargs(te25, [1, -1], [2], True, 2, "2.5.0")
    assert megatron_kwargs(te25, [1, -1], [2], False, 2) == dict(
        num_warmup_iters=11, allow_unused_input=True, _order=[1, -1], sample_kwargs=[{}, {}],
        fp8_enabled=False)
    with pytest.raises(ImportError, match="has no _order"):
        megatron_kwargs({"sample_kwargs"}, [1, -1], [2], False, 2, "1.8")


def test_bad_flag_combinations_are_usage_errors():
    from repro.run import main
    with pytest.raises(SystemExit) as err:
        main(["--impl", "te", "--clone-grads"])
    assert err.value.code == 2
    with pytest.raises(SystemExit):
        main(["--pipeline-warmup", "-1"])


@pytest.mark.slow
@pytest.mark.parametrize("dense,attn_only", [(False, True), (True, False)])
def test_a_graphed_layers_grads_are_contiguous(dense, attn_only):
    """TE's weak references keep a pointer and a shape, not strides: a non-contiguous static
    grad would be read back transposed (it was, with einsum in the dense MoE)."""
    from repro.model import Layer
    layer = Layer(64, 128, 4, 2, 4, 2, dense=dense)
    layer.capture_attn_only = attn_only
    x = torch.randn(16, 1, 64, requires_grad=True)
    out = layer(x)
    grads = torch.autograd.grad(out, (x, *layer.parameters()), torch.ones_like(out),
                                allow_unused=True)
    assert all(g is None or g.is_contiguous() for g in grads)
    assert sum(g is not None for g in grads) == (4 if attn_only else 8)
