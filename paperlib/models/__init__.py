"""Language models of paperlib: LSTM, Mogrifier, RLSTM, mLSTM, GRU and a Transformer baseline; for polyphonic
music, the NADE and the LSTM-NADE (Krause §2.6), whose forward takes piano-roll frames instead of tokens.

Every model is built with :func:`build_lm` and has
``forward(tokens [B, T], state=None) -> (logits [B, T, V], state)`` and
``init_state(batch_size)``; :func:`detach_state` truncates BPTT between windows.
"""

from paperlib.models.build import CELL_OPTIONS, VALID_CELLS, build_lm
from paperlib.models.evaluation import (
    collect_logits,
    evaluate_nll,
    mc_dropout_log_likelihood,
    mc_dropout_nll,
    nll_at_temperature,
    optimal_temperature,
)
from paperlib.models.masks import DropoutMasks, DropoutRates
from paperlib.models.nade import NADE
from paperlib.models.objective import log_mean_exp, multi_sample_loss, multi_sample_nll
from paperlib.models.recurrent_lm import RecurrentLM
from paperlib.models.rnn_nade import LSTMNADE, frame_mean_log_likelihood, thesis_lstm_nade
from paperlib.models.state import detach_state
from paperlib.models.transformer import TransformerLM, TransformerState

__all__ = [
    "CELL_OPTIONS",
    "VALID_CELLS",
    "DropoutMasks",
    "DropoutRates",
    "LSTMNADE",
    "NADE",
    "RecurrentLM",
    "TransformerLM",
    "TransformerState",
    "build_lm",
    "collect_logits",
    "detach_state",
    "evaluate_nll",
    "frame_mean_log_likelihood",
    "log_mean_exp",
    "mc_dropout_log_likelihood",
    "mc_dropout_nll",
    "multi_sample_loss",
    "multi_sample_nll",
    "nll_at_temperature",
    "optimal_temperature",
    "thesis_lstm_nade",
]
