"""An encoder/decoder for sequence transduction (Melis thesis §2.3.3, the reverse-copy task of Fig. 2.4).

:class:`ReverseCopyModel`: embedding -> encoder :class:`~paperlib.models.layers.LSTMLayer` stack, decoder stack
started from the encoder's final (h, c) per layer, linear softmax; with a :class:`~paperlib.models.mogrifier.Mogrifier`
per layer for the Mogrifier model. :func:`count_parameters` gives its size in closed form and
:func:`hidden_size_for_budget` the largest hidden size within a parameter budget, so that models with different
embedding sizes can be matched in size, as in the thesis.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from paperlib.models.layers import LSTMLayer
from paperlib.models.lstm import LSTMState
from paperlib.models.mogrifier import Mogrifier


class ReverseCopyModel(nn.Module):
    """Encoder/decoder of Melis thesis §2.3.3: independent unidirectional encoder and decoder.

    ``mogrifier_rounds=None`` gives the LSTM model (eq. 2.1); an integer r gives the Mogrifier LSTM
    (eq. 2.2 with r rounds of rank ``mogrifier_rank``, full rank when <= 0) on every layer of both
    sides. Layer 1 of each side reads the embedding, layer l > 1 the output of layer l - 1; decoder
    layer l starts from encoder layer l's final (h, c). ``forward(source [B, L], decoder_inputs [B, L])
    -> logits [B, L, V]``: the targets are never an input, and position t of the decoder sees
    ``decoder_inputs[:, :t+1]`` only.
    """

    def __init__(
        self,
        vocab_size: int,
        embedding_size: int,
        hidden_size: int,
        num_layers: int = 1,
        mogrifier_rounds: int | None = None,
        mogrifier_rank: int = 0,
        mogrifier_zigzag: bool = True,
        capped_input_gate: bool = False,
    ):
        super().__init__()
        for name, value in (("vocab_size", vocab_size), ("embedding_size", embedding_size),
                            ("hidden_size", hidden_size), ("num_layers", num_layers)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if vocab_size < 2:
            raise ValueError(f"vocab_size must be at least 2, got {vocab_size}")
        if mogrifier_rounds is not None and (not isinstance(mogrifier_rounds, int) or mogrifier_rounds < 0):
            raise ValueError(f"mogrifier_rounds must be None (plain LSTM) or an integer >= 0, got {mogrifier_rounds!r}")
        self.vocab_size = vocab_size
        self.marker = vocab_size
        self.embedding_size = embedding_size
        self.hidden_size = hidden_size
        self.encoder_embedding = nn.Embedding(vocab_size, embedding_size)
        self.decoder_embedding = nn.Embedding(vocab_size + 1, embedding_size)  # + the marker

        def stack() -> nn.ModuleList:
            layers = []
            for index in range(num_layers):
                input_size = embedding_size if index == 0 else hidden_size
                mogrifier = None
                if mogrifier_rounds is not None:
                    mogrifier = Mogrifier(input_size, hidden_size, mogrifier_rounds, mogrifier_rank, mogrifier_zigzag)
                layers.append(LSTMLayer(input_size, hidden_size, capped_input_gate, mogrifier))
            return nn.ModuleList(layers)

        self.encoder = stack()
        self.decoder = stack()
        self.output = nn.Linear(hidden_size, vocab_size)

    @staticmethod
    def _run(layers: nn.ModuleList, x: Tensor, states: list[LSTMState]) -> tuple[Tensor, list[LSTMState]]:
        new_states = []
        for layer, state in zip(layers, states):
            x, state = layer(x, state)  # [T, B, H]
            new_states.append(state)
        return x, new_states

    def encode(self, source: Tensor) -> list[LSTMState]:
        """Read ``source`` [B, L]; the final (h, c) of every encoder layer."""
        x = self.encoder_embedding(source).transpose(0, 1)  # [L, B, E], time-major for the layers
        states = [layer.init_state(source.shape[0]) for layer in self.encoder]
        _, states = self._run(self.encoder, x, states)
        return states

    def decode(self, decoder_inputs: Tensor, states: list[LSTMState]) -> Tensor:
        """Logits [B, L, V] for ``decoder_inputs`` [B, L] (marker, then the reversed source shifted by one)."""
        x = self.decoder_embedding(decoder_inputs).transpose(0, 1)  # [L, B, E]
        out, _ = self._run(self.decoder, x, states)  # [L, B, H]
        return self.output(out.transpose(0, 1))  # [B, L, V]

    def forward(self, source: Tensor, decoder_inputs: Tensor) -> Tensor:
        return self.decode(decoder_inputs, self.encode(source))


def build_model(vocab_size: int, embedding_size: int, hidden_size: int, num_layers: int = 1,
                mogrifier_rounds: int | None = None, mogrifier_rank: int = 0, mogrifier_zigzag: bool = True,
                capped_input_gate: bool = False, seed: int | None = None) -> ReverseCopyModel:
    """A :class:`ReverseCopyModel` whose initial weights depend only on ``seed`` (when given)."""
    if seed is not None:
        torch.manual_seed(seed)
    return ReverseCopyModel(vocab_size, embedding_size, hidden_size, num_layers, mogrifier_rounds, mogrifier_rank,
                            mogrifier_zigzag, capped_input_gate)


def num_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def count_parameters(vocab_size: int, embedding_size: int, hidden_size: int, num_layers: int = 1,
                     mogrifier_rounds: int | None = None, mogrifier_rank: int = 0) -> int:
    """Parameters of :class:`ReverseCopyModel` in closed form (equals :func:`num_parameters` of the model).

    Per side and layer with input size m: LSTM 4n(m + n) + 8n (``nn.LSTM`` keeps two bias vectors);
    each Mogrifier round maps n -> m (odd rounds, Q^i) or m -> n (even rounds, R^i) with nm
    parameters at full rank or k(n + m) at rank k. Embeddings V E + (V + 1) E, softmax n V + V.
    """
    v, e, n = vocab_size, embedding_size, hidden_size
    side = 0
    for index in range(num_layers):
        m = e if index == 0 else n
        side += 4 * n * (m + n) + 8 * n
        if mogrifier_rounds:
            per_round = n * m if mogrifier_rank <= 0 else mogrifier_rank * (n + m)
            side += mogrifier_rounds * per_round
    return v * e + (v + 1) * e + 2 * side + n * v + v


def hidden_size_for_budget(budget: int, vocab_size: int, embedding_size: int, num_layers: int = 1,
                           mogrifier_rounds: int | None = None, mogrifier_rank: int = 0) -> int:
    """The largest hidden size whose model has at most ``budget`` parameters (the count grows with it)."""

    def count(n: int) -> int:
        return count_parameters(vocab_size, embedding_size, n, num_layers, mogrifier_rounds, mogrifier_rank)

    if count(1) > budget:
        raise ValueError(f"a parameter budget of {budget:,} is too small for embedding size {embedding_size} "
                         f"and vocabulary {vocab_size} (hidden size 1 needs {count(1):,})")
    low, high = 1, 2
    while count(high) <= budget:
        low, high = high, 2 * high
    while high - low > 1:  # invariant: count(low) <= budget < count(high)
        mid = (low + high) // 2
        low, high = (mid, high) if count(mid) <= budget else (low, mid)
    return low
