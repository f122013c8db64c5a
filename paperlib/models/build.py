"""One constructor for every language model of paperlib: :func:`build_lm`."""

from __future__ import annotations

from typing import Any

from torch import nn

from paperlib.models.gru import GRULayer
from paperlib.models.layers import LSTMLayer, RLSTMLayer
from paperlib.models.masks import DropoutRates
from paperlib.models.mlstm import MLSTMLayer
from paperlib.models.mogrifier import Mogrifier
from paperlib.models.recurrent_lm import CONNECTIONS, RecurrentLM
from paperlib.models.torch_lstm import TorchLSTMLM
from paperlib.models.transformer import POSITIONS, TransformerLM

VALID_CELLS = ("lstm", "mogrifier_lstm", "rlstm", "mogrifier_rlstm", "mlstm", "gru", "transformer", "torch_lstm")

_RECURRENT = {
    "embedding_size": None,  # None: equal to hidden_size
    "embedding_dropout": 0.0,
    "input_dropout": 0.0,
    "cell_output_dropout": 0.0,
    "state_dropout": 0.0,
    "output_dropout": 0.0,
    "connections": "residual",
    "tie_embeddings": True,
    "embedding_init": "normal",  # or "uniform": U(-0.1, 0.1) (paperlib.models.recurrent_lm)
}
_MOGRIFIER = {"mogrifier_rounds": 5, "mogrifier_rank": 40, "mogrifier_zigzag": True}

# Valid options and their defaults, per cell.
CELL_OPTIONS: dict[str, dict[str, Any]] = {
    "lstm": {**_RECURRENT, "capped_input_gate": True, "chrono_t_max": None},
    "mogrifier_lstm": {**_RECURRENT, **_MOGRIFIER, "capped_input_gate": True, "chrono_t_max": None},
    "rlstm": {**_RECURRENT, "chrono_t_max": None},
    "mogrifier_rlstm": {**_RECURRENT, **_MOGRIFIER, "chrono_t_max": None},
    "mlstm": {**_RECURRENT, "capped_input_gate": False, "chrono_t_max": None},
    "gru": {k: v for k, v in _RECURRENT.items() if k != "state_dropout"},
    "transformer": {
        "num_heads": 4,
        "ff_size": None,  # None: 4 * hidden_size
        "dropout": 0.0,
        "input_dropout": 0.0,
        "output_dropout": 0.0,
        "positions": "learned",
        "max_len": 512,
        "memory_length": 0,
        "tie_embeddings": True,
        "embedding_init": "normal",  # or "uniform": U(-0.1, 0.1) (paperlib.models.transformer)
    },
    # the pytorch/examples baseline (paperlib.models.torch_lstm): per-step dropout, untied by default
    "torch_lstm": {"embedding_size": None, "dropout": 0.0, "tie_embeddings": False},
}


def _positive_int(name: str, value: Any) -> None:
    if not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def build_lm(cell: str, vocab_size: int, hidden_size: int, num_layers: int, **options: Any) -> nn.Module:
    """Build a language model with ``forward(tokens [B, T], state=None) -> (logits [B, T, V], state)``.

    ``cell`` is one of :data:`VALID_CELLS`; ``options`` must be among
    ``CELL_OPTIONS[cell]`` (unknown ones raise ``ValueError``). Recurrent
    models follow Melis thesis eq. (4.1); the Mogrifier uses ``mogrifier_rounds``
    rounds of rank ``mogrifier_rank`` (full rank when <= 0).
    """
    if cell not in VALID_CELLS:
        raise ValueError(f"unknown cell {cell!r}; valid cells: {', '.join(VALID_CELLS)}")
    valid = CELL_OPTIONS[cell]
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise ValueError(f"unknown option(s) {unknown} for cell {cell!r}; valid options: {', '.join(sorted(valid))}")
    for name, value in (("vocab_size", vocab_size), ("hidden_size", hidden_size), ("num_layers", num_layers)):
        _positive_int(name, value)
    opts = {**valid, **options}

    if cell == "transformer":
        if opts["positions"] not in POSITIONS:
            raise ValueError(f"positions must be one of {POSITIONS}, got {opts['positions']!r}")
        return TransformerLM(
            vocab_size,
            hidden_size,
            num_layers,
            num_heads=opts["num_heads"],
            ff_size=opts["ff_size"],
            dropout=opts["dropout"],
            input_dropout=opts["input_dropout"],
            output_dropout=opts["output_dropout"],
            positions=opts["positions"],
            max_len=opts["max_len"],
            memory_length=opts["memory_length"],
            tie_embeddings=opts["tie_embeddings"],
            embedding_init=opts["embedding_init"],
        )

    if cell == "torch_lstm":
        return TorchLSTMLM(vocab_size, hidden_size, num_layers, opts["embedding_size"], opts["dropout"],
                           opts["tie_embeddings"])

    if opts["connections"] not in CONNECTIONS:
        raise ValueError(f"connections must be one of {CONNECTIONS}, got {opts['connections']!r}")
    embedding_size = opts["embedding_size"] or hidden_size
    _positive_int("embedding_size", embedding_size)
    chrono = opts.get("chrono_t_max")
    if chrono is not None and chrono <= 2.0:
        raise ValueError(f"chrono_t_max must exceed 2 (b^f ~ ln U(1, T_max - 1)), got {chrono}")
    rates = DropoutRates(
        embedding=opts["embedding_dropout"],
        input=opts["input_dropout"],
        cell_output=opts["cell_output_dropout"],
        state=opts.get("state_dropout", 0.0),
        output=opts["output_dropout"],
    )
    if cell.startswith("mogrifier_"):
        rounds = opts["mogrifier_rounds"]
        if not isinstance(rounds, int) or rounds < 0:
            raise ValueError(f"mogrifier_rounds must be a non-negative integer, got {rounds!r}")

    layers: list[nn.Module] = []
    for index in range(num_layers):
        input_size = embedding_size if index == 0 else hidden_size
        mogrifier = None
        if cell.startswith("mogrifier_"):
            mogrifier = Mogrifier(
                input_size, hidden_size, opts["mogrifier_rounds"], opts["mogrifier_rank"], opts["mogrifier_zigzag"]
            )
        if cell in ("lstm", "mogrifier_lstm"):
            layer: nn.Module = LSTMLayer(input_size, hidden_size, opts["capped_input_gate"], mogrifier, chrono)
        elif cell in ("rlstm", "mogrifier_rlstm"):
            layer = RLSTMLayer(input_size, hidden_size, mogrifier, chrono)
        elif cell == "mlstm":
            layer = MLSTMLayer(input_size, hidden_size, opts["capped_input_gate"], chrono)
        else:
            layer = GRULayer(input_size, hidden_size)
        layers.append(layer)
    return RecurrentLM(
        layers,
        vocab_size,
        embedding_size,
        hidden_size,
        connections=opts["connections"],
        tie_embeddings=opts["tie_embeddings"],
        dropout=rates,
        embedding_init=opts["embedding_init"],
    )
