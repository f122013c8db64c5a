"""Small causal pre-norm Transformer LM, the attention baseline (Krause thesis §2.4.5, §6.2.1).

Each block computes x + Attn(LN(x)) then x + FF(LN(x)); a final LayerNorm
precedes the (optionally tied) output embedding; the feed-forward uses GELU
rather than the ReLU of Krause eq. (2.44). Positions are

* ``learned`` or ``sinusoidal`` (Krause eqs. 2.35-2.37): absolute encodings
  added to the input embedding;
* ``relative``: the Transformer-XL attention score of Krause eq. (6.2),
  (q_t + u)·k_n + (q_t + v)·W_kR U_{t-n}, with sinusoidal U and per-layer u, v.

Segment-level memory: with ``memory_length > 0`` every layer attends to the
last ``memory_length`` inputs of that layer from previous segments, carried in
the state without gradient (the stop-gradient of Transformer-XL). With absolute
positions the state also carries the number of tokens consumed, and positions
continue from there (learned positions then need offset + T <= ``max_len``);
with relative positions no offset is needed. Either way, when the memory covers
everything seen so far, a segmented forward equals one forward over the whole sequence.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from paperlib.models.recurrent_lm import EMBEDDING_INITS

POSITIONS = ("learned", "sinusoidal", "relative")


class TransformerState(NamedTuple):
    """Per-layer memories [B, M, d] (M may be 0) and the absolute position of the next token."""

    memory: list[Tensor]
    offset: int


def sinusoidal_positions(positions: Tensor, size: int) -> Tensor:
    """Sinusoidal encodings (Krause eq. 2.37 / Vaswani et al.) for integer ``positions`` [T] -> [T, size]."""
    half = torch.arange(0, size, 2, device=positions.device, dtype=torch.float32)
    inv_freq = torch.exp(-math.log(10000.0) * half / size)  # [ceil(size/2)]
    angles = positions.to(torch.float32).unsqueeze(1) * inv_freq  # [T, ceil(size/2)]
    enc = torch.zeros(positions.shape[0], size, device=positions.device)
    enc[:, 0::2] = torch.sin(angles)
    enc[:, 1::2] = torch.cos(angles[:, : size // 2])
    return enc


class TransformerBlock(nn.Module):
    """Pre-norm block: causal multi-head self-attention over [memory; x] then a GELU feed-forward."""

    def __init__(self, size: int, num_heads: int, ff_size: int, dropout: float, relative: bool = False):
        super().__init__()
        self.num_heads = num_heads
        self.relative = relative
        if relative:
            head_size = size // num_heads
            self.key_rel = nn.Linear(size, size, bias=False)  # W_kR of eq. (6.2)
            self.u = nn.Parameter(torch.zeros(num_heads, 1, head_size))
            self.v = nn.Parameter(torch.zeros(num_heads, 1, head_size))
        self.norm_attn = nn.LayerNorm(size)
        self.query = nn.Linear(size, size)
        self.key_value = nn.Linear(size, 2 * size)
        self.attn_out = nn.Linear(size, size)
        self.norm_ff = nn.LayerNorm(size)
        self.ff = nn.Sequential(nn.Linear(size, ff_size), nn.GELU(), nn.Linear(ff_size, size))
        self.dropout = nn.Dropout(dropout)
        self.attn_dropout = dropout

    def forward(self, x: Tensor, memory: Tensor) -> Tensor:
        batch, steps, size = x.shape
        mem_len = memory.shape[1]
        heads = self.num_heads
        normed = self.norm_attn(torch.cat([memory, x], dim=1))  # [B, M+T, d]
        q = self.query(normed[:, mem_len:]).view(batch, steps, heads, -1).transpose(1, 2)  # [B, h, T, d/h]
        k, v = self.key_value(normed).view(batch, mem_len + steps, 2, heads, -1).permute(2, 0, 3, 1, 4)
        # query t (absolute index mem_len + t) sees keys 0 .. mem_len + t
        key_idx = torch.arange(mem_len + steps, device=x.device)
        query_idx = torch.arange(steps, device=x.device) + mem_len
        allowed = key_idx.unsqueeze(0) <= query_idx.unsqueeze(1)  # [T, M+T]
        mask: Tensor = allowed
        if self.relative:
            # eq. (6.2): score = (q + u)·k + (q + v)·W_kR U_{t-n}; sdpa adds the float mask to the scaled q·k
            rel = self.key_rel(sinusoidal_positions(key_idx, size).to(x.dtype))  # [M+T, d], row = distance
            rel = rel.view(mem_len + steps, heads, -1).transpose(0, 1)  # [h, M+T, d/h]
            by_distance = (q + self.v) @ rel.transpose(-1, -2)  # [B, h, T, M+T]
            distance = (query_idx.unsqueeze(1) - key_idx.unsqueeze(0)).clamp(min=0)  # [T, M+T]
            positional = by_distance.gather(-1, distance.expand(batch, heads, steps, mem_len + steps))
            scale = 1.0 / math.sqrt(q.shape[-1])
            mask = (positional * scale).masked_fill(~allowed, float("-inf"))
            q = q + self.u
        attn = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=self.attn_dropout if self.training else 0.0
        )
        x = x + self.dropout(self.attn_out(attn.transpose(1, 2).reshape(batch, steps, size)))
        return x + self.dropout(self.ff(self.norm_ff(x)))


class TransformerLM(nn.Module):
    """Causal Transformer LM with ``forward(tokens [B, T], state=None) -> (logits [B, T, V], state)``."""

    def __init__(
        self,
        vocab_size: int,
        size: int,
        num_layers: int,
        num_heads: int = 4,
        ff_size: int | None = None,
        dropout: float = 0.0,
        input_dropout: float = 0.0,
        output_dropout: float = 0.0,
        positions: str = "learned",
        max_len: int = 512,
        memory_length: int = 0,
        tie_embeddings: bool = True,
        embedding_init: str = "normal",
    ):
        super().__init__()
        if positions not in POSITIONS:
            raise ValueError(f"positions must be one of {POSITIONS}, got {positions!r}")
        if size % num_heads != 0:
            raise ValueError(f"hidden_size ({size}) must be divisible by num_heads ({num_heads})")
        if memory_length < 0:
            raise ValueError(f"memory_length must be >= 0, got {memory_length}")
        if embedding_init not in EMBEDDING_INITS:
            raise ValueError(f"embedding_init must be one of {EMBEDDING_INITS}, got {embedding_init!r}")
        for name, rate in (("dropout", dropout), ("input_dropout", input_dropout), ("output_dropout", output_dropout)):
            if not 0.0 <= rate < 1.0:
                raise ValueError(f"{name} must lie in [0, 1), got {rate}")
        self.vocab_size = vocab_size
        self.size = size
        self.positions = positions
        self.max_len = max_len
        self.memory_length = memory_length
        self.embedding = nn.Embedding(vocab_size, size)
        # as in paperlib.models.recurrent_lm: PyTorch's N(0, 1) ("normal"), whose tied output makes the first logits
        # large (std about sqrt(size)), or U(-0.1, 0.1) ("uniform"), which a word-level model with a large
        # vocabulary learns from markedly faster in short runs
        if embedding_init == "uniform":
            nn.init.uniform_(self.embedding.weight, -0.1, 0.1)
        self.position_embedding = nn.Embedding(max_len, size) if positions == "learned" else None
        self.input_dropout = nn.Dropout(input_dropout)
        self.blocks = nn.ModuleList(
            TransformerBlock(size, num_heads, ff_size or 4 * size, dropout, relative=positions == "relative")
            for _ in range(num_layers)
        )
        self.final_norm = nn.LayerNorm(size)
        self.output_dropout = nn.Dropout(output_dropout)
        self.decoder = nn.Linear(size, vocab_size)
        if tie_embeddings:
            self.decoder.weight = self.embedding.weight

    def init_state(self, batch_size: int) -> TransformerState:
        like = self.embedding.weight
        return TransformerState([like.new_zeros(batch_size, 0, self.size) for _ in self.blocks], 0)

    def _positions(self, offset: int, steps: int, like: Tensor) -> Tensor | float:
        if self.positions == "relative":
            return 0.0
        idx = torch.arange(offset, offset + steps, device=like.device)
        if self.position_embedding is not None:
            if offset + steps > self.max_len:
                raise ValueError(
                    f"learned positions cover {self.max_len} tokens but positions up to {offset + steps} were "
                    "requested; use positions='sinusoidal', a larger max_len, or reset the state"
                )
            return self.position_embedding(idx)
        return sinusoidal_positions(idx, self.size).to(like.dtype)

    def forward(self, tokens: Tensor, state: TransformerState | None = None) -> tuple[Tensor, TransformerState]:
        batch, steps = tokens.shape
        if state is None:
            state = self.init_state(batch)
        x = self.embedding(tokens) + self._positions(state.offset, steps, self.embedding.weight)  # [B, T, d]
        x = self.input_dropout(x)
        new_memory = []
        for block, memory in zip(self.blocks, state.memory):
            if self.memory_length > 0:
                new_memory.append(torch.cat([memory, x], dim=1)[:, -self.memory_length :].detach())
            else:
                new_memory.append(memory)
            x = block(x, memory)
        logits = self.decoder(self.output_dropout(self.final_norm(x)))
        offset = state.offset + steps if self.memory_length > 0 and self.positions != "relative" else 0
        return logits, TransformerState(new_memory, offset)
