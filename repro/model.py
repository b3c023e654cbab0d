"""A scaled-down Mixtral block: RMSNorm, GQA attention (SDPA), top-k router, SwiGLU experts."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        var = x.float().pow(2).mean(-1, keepdim=True)
        return (x.float() * torch.rsqrt(var + self.eps)).to(x.dtype) * self.weight


class Attention(nn.Module):
    """Pre-norm GQA self-attention with its residual: the part that gets graphed."""

    def __init__(self, hidden: int, heads: int, groups: int):
        super().__init__()
        if hidden % heads or heads % groups:
            raise ValueError("hidden size must divide by heads, and heads by query groups")
        self.heads, self.groups, self.head_dim = heads, groups, hidden // heads
        self.norm = RMSNorm(hidden)
        self.qkv = nn.Linear(hidden, (heads + 2 * groups) * self.head_dim, bias=False)
        self.proj = nn.Linear(hidden, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seq, batch, hidden = x.shape
        qkv = self.qkv(self.norm(x)).view(seq, batch, self.heads + 2 * self.groups, self.head_dim)
        q, k, v = qkv.split([self.heads, self.groups, self.groups], dim=2)
        q, k, v = (t.permute(1, 2, 0, 3) for t in (q, k, v))       # [b, h, s, d]
        rep = self.heads // self.groups
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out = out.permute(2, 0, 1, 3).reshape(seq, batch, hidden)
        return x + self.proj(out)


class MoE(nn.Module):
    """Pre-norm top-k softmax router over SwiGLU experts, with its residual (run eagerly)."""

    def __init__(self, hidden: int, ffn: int, experts: int, topk: int, dense: bool = False):
        super().__init__()
        if not 1 <= topk <= experts:
            raise ValueError("moe-router-topk must be between 1 and num-experts")
        self.topk = topk
        self.dense = dense  # every expert on every token, masked: static shapes, capturable
        self.norm = RMSNorm(hidden)
        self.router = nn.Linear(hidden, experts, bias=False)
        self.w_gate_up = nn.Parameter(torch.empty(experts, hidden, 2 * ffn))
        self.w_down = nn.Parameter(torch.empty(experts, ffn, hidden))
        nn.init.normal_(self.w_gate_up, std=0.02)
        nn.init.normal_(self.w_down, std=0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seq, batch, hidden = x.shape
        tokens = self.norm(x).reshape(-1, hidden)
        probs = torch.softmax(self.router(tokens).float(), dim=-1)
        weights, chosen = probs.topk(self.topk, dim=-1)
        weights = (weights / weights.sum(-1, keepdim=True)).to(x.dtype)
        if self.dense:
            gates = torch.zeros_like(probs, dtype=x.dtype).scatter(1, chosen, weights)  # [T, E]
            # bmm, not einsum: its weight grads come out contiguous. TE's weak references
            # keep a pointer and a shape, not strides, so a graphed layer's grads must be.
            gate, up = torch.bmm(tokens.expand(len(self.w_gate_up), -1, -1),
                                 self.w_gate_up).chunk(2, dim=-1)                   # [E, T, F]
            y = torch.bmm(F.silu(gate) * up, self.w_down)                           # [E, T, H]
            out = torch.einsum("eth,te->th", y, gates)
            return x + out.view(seq, batch, hidden)
        out = torch.zeros_like(tokens)
        for e in range(self.w_gate_up.shape[0]):
            rows, slot = (chosen == e).nonzero(as_tuple=True)
            if rows.numel() == 0:
                continue
            gate, up = (tokens[rows] @ self.w_gate_up[e]).chunk(2, dim=-1)
            y = (F.silu(gate) * up) @ self.w_down[e]
            out = out.index_add(0, rows, y * weights[rows, slot].unsqueeze(-1))
        return x + out.view(seq, batch, hidden)


class Layer(nn.Module):
    def __init__(self, hidden: int, ffn: int, heads: int, groups: int, experts: int, topk: int,
                 dense: bool = False):
        super().__init__()
        self.attn = Attention(hidden, heads, groups)
        self.moe = MoE(hidden, ffn, experts, topk, dense)
        self.capture_attn_only = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.capture_attn_only:    # Megatron's capture of a layer with graph scope "attn"
            return self.attn(x)
        return self.moe(self.attn(x))


class Model(nn.Module):
    def __init__(self, layers: int, hidden: int, ffn: int, heads: int, groups: int,
                 experts: int, topk: int, dense: bool = False):
        super().__init__()
        self.layers = nn.ModuleList(Layer(hidden, ffn, heads, groups, experts, topk, dense)
                                    for _ in range(layers))
        self.final_norm = RMSNorm(hidden)

    def forward(self, x: torch.Tensor, graphed=None, scope: str = "attn") -> torch.Tensor:
        """graphed[i] replaces layer i's attention (scope attn) or the whole layer (full)."""
        for i, layer in enumerate(self.layers):
            if graphed is None:
                x = layer(x)
            elif scope == "full":
                x = graphed[i](x)
            else:
                x = layer.moe(graphed[i](x))
        return self.final_norm(x)
