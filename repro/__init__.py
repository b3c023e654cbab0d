"""Reduced-layer, attention-graphed MoE repro of the weak-ref capture failure.

Run as `python -m repro`; see `python -m repro --help`. Needs only PyTorch.
"""
