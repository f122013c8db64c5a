"""Multi-layer recurrent language model, Melis thesis §4.2 (eq. 4.1).

    x̂⁰_t = onehot(w_t) E^in ⊙ M^in_t
    x̂ˡ_t = hˡ_t ⊙ M^cell,l_t,        ĥˡ_t = hˡ_t ⊙ M^state,l
    c¹_t, h¹_t = cell(c¹_{t-1}, mogrify(ĥ¹_{t-1}, x̂⁰_t))
    cˡ_t, hˡ_t = cell(cˡ_{t-1}, mogrify(ĥˡ_{t-1}, Σ_{i<l} x̂ⁱ_t))        (residual)
    p(· | w_<t) = softmax((Σ_l x̂ˡ_t) ⊙ M^out_t E^out + b^out)

Connections: ``residual`` is eq. (4.1); ``skip`` feeds layer l with x̂^{l-1}
only but sums all layer outputs into the softmax (the Mogrifier baseline; for two
layers it coincides with ``residual``, as noted in §4.7); ``stacked`` feeds
x̂^{l-1} and uses only x̂^L. With tied embeddings E^out = (E^in)ᵀ, and a linear
projection from the hidden size to the embedding size is inserted when they differ.
Layer 1 has input size E (embedding size), all other layers the hidden size.

Reading of the seeds: the thesis writes c⁰_{t-1} for the first layer's previous
cell state, which we read as c¹_{t-1}; Circling Back restricts M^cell,l to l > 1
while the thesis applies it to every layer, which is what we do.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from paperlib.models.masks import DropoutMasks, DropoutRates, apply_embedding_dropout, sample_masks

CONNECTIONS = ("residual", "skip", "stacked")
EMBEDDING_INITS = ("normal", "uniform")


class RecurrentLM(nn.Module):
    """Language model of eq. (4.1) over recurrent layers (LSTM, RLSTM, mLSTM, GRU, ± Mogrifier).

    ``forward(tokens [B, T], state=None, masks=None) -> (logits [B, T, V], state)``.
    The state is a list over layers of each layer's state ((h, c) of shape [B, H]
    for the LSTM family, h for the GRU). Without explicit ``masks``, masks are
    sampled in training mode and no dropout is applied in eval mode (the
    deterministic approximation); explicit masks are used in either mode.
    """

    def __init__(
        self,
        layers: list[nn.Module],
        vocab_size: int,
        embedding_size: int,
        hidden_size: int,
        connections: str = "residual",
        tie_embeddings: bool = True,
        dropout: DropoutRates | None = None,
        embedding_init: str = "normal",
    ):
        super().__init__()
        if connections not in CONNECTIONS:
            raise ValueError(f"connections must be one of {CONNECTIONS}, got {connections!r}")
        if embedding_init not in EMBEDDING_INITS:
            raise ValueError(f"embedding_init must be one of {EMBEDDING_INITS}, got {embedding_init!r}")
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size
        self.hidden_size = hidden_size
        self.connections = connections
        self.dropout = dropout or DropoutRates()
        self.embedding = nn.Embedding(vocab_size, embedding_size)
        # The seeds do not state the embedding's initialisation. "normal" is PyTorch's N(0, 1), which with tied
        # embeddings also makes the first softmax logits large; "uniform" is U(-0.1, 0.1) (Zaremba et al. 2014,
        # pytorch/examples), which learns markedly faster in short runs (results/recipes/lm_ptb-lstm.json).
        if embedding_init == "uniform":
            nn.init.uniform_(self.embedding.weight, -0.1, 0.1)
        self.layers = nn.ModuleList(layers)
        self.projection: nn.Linear | None = None
        if tie_embeddings:
            if hidden_size != embedding_size:
                self.projection = nn.Linear(hidden_size, embedding_size, bias=False)
            self.decoder = nn.Linear(embedding_size, vocab_size)
            self.decoder.weight = self.embedding.weight
        else:
            self.decoder = nn.Linear(hidden_size, vocab_size)

    def init_state(self, batch_size: int) -> list[Any]:
        return [layer.init_state(batch_size) for layer in self.layers]

    def sample_masks(
        self,
        batch_size: int,
        seq_len: int,
        generator: torch.Generator | None = None,
        rate_scale: float = 1.0,
    ) -> DropoutMasks:
        """Draw one set of eq. (4.1) masks for a [batch_size, seq_len] batch."""
        return sample_masks(
            self.dropout,
            self.embedding.weight,
            batch_size,
            seq_len,
            self.vocab_size,
            self.embedding_size,
            [layer.hidden_size for layer in self.layers],
            generator=generator,
            rate_scale=rate_scale,
        )

    def features(
        self, tokens: Tensor, state: list[Any] | None = None, masks: DropoutMasks | None = None
    ) -> tuple[Tensor, list[Any]]:
        """Everything up to the output embedding: returns ([B, T, E or H], new state)."""
        batch, steps = tokens.shape
        if state is None:
            state = self.init_state(batch)
        if masks is None and self.training:
            masks = self.sample_masks(batch, steps)
        x = self.embedding(tokens)  # [B, T, E]
        if masks is not None:
            x = apply_embedding_dropout(x, tokens, masks.embedding)
            if masks.input is not None:
                x = x * masks.input
        x = x.transpose(0, 1)  # [T, B, E], time-major for the recurrences
        total: Tensor | None = None
        new_state = []
        for index, layer in enumerate(self.layers):
            state_mask = masks.state[index] if masks is not None else None
            out, layer_state = layer(x, state[index], state_mask)  # [T, B, H]
            new_state.append(layer_state)
            if masks is not None and masks.cell[index] is not None:
                out = out * masks.cell[index].transpose(0, 1)
            if self.connections == "residual":
                total = out if total is None else total + out
                x = total
            elif self.connections == "skip":
                total = out if total is None else total + out
                x = out
            else:
                total = x = out
        y = total.transpose(0, 1)  # [B, T, H]
        if masks is not None and masks.output is not None:
            y = y * masks.output
        if self.projection is not None:
            y = self.projection(y)
        return y, new_state

    def forward(
        self, tokens: Tensor, state: list[Any] | None = None, masks: DropoutMasks | None = None
    ) -> tuple[Tensor, list[Any]]:
        y, new_state = self.features(tokens, state, masks)
        return self.decoder(y), new_state
