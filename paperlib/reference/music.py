"""Krause thesis Table 4.6 (§4.8): log-likelihood per frame (nats) on four polyphonic music corpora, to print beside
ours (never used as results). Data only, like the rest of :mod:`paperlib.reference`.

Columns are corpora; ``None`` marks no entry. Only JSB Chorales and Nottingham are in the data mirror; the thesis'
JSB Chorales column uses the same data and split as ours, its Nottingham column Boulanger-Lewandowski's older
conversion and split (see :mod:`paperlib.data.music`).
"""

from __future__ import annotations

TABLE_4_6_CORPORA = ("piano_midi", "nottingham", "muse_data", "jsb_chorales")

# (row key, label as printed in the thesis, values per corpus in TABLE_4_6_CORPORA order)
TABLE_4_6: tuple[tuple[str, str, tuple[float, float, float, float]], ...] = (
    ("nade", "NADE (1 frame only) (Boulanger-Lewandowski et al., 2012)", (-10.28, -5.48, -10.06, -7.19)),
    ("rnn", "RNN (HF) (Boulanger-Lewandowski et al., 2012)", (-7.66, -3.89, -7.19, -8.58)),
    ("rnn_nade", "RNN-NADE (HF) (Boulanger-Lewandowski et al., 2012)", (-7.05, -2.31, -5.60, -5.56)),
    ("rnn_rbm", "RNN-RBM (HF) (Boulanger-Lewandowski et al., 2012)", (-7.09, -2.39, -6.01, -6.27)),
    ("johnson_lstm_nade", "LSTM-NADE (Johnson, 2017)", (-7.39, -2.06, -5.03, -6.10)),
    ("tp_lstm_nade", "TP-LSTM-NADE (Johnson, 2017)", (-5.49, -1.64, -4.34, -5.92)),
    ("ba_lstm", "BA-LSTM (Johnson, 2017)", (-5.00, -1.62, -4.41, -5.86)),
    ("static", "LSTM-NADE", (-6.84, -1.96, -5.35, -5.28)),
    ("sgd", "LSTM-NADE + dynamic eval (SGD)", (-5.57, -1.30, -4.58, -5.14)),
    ("global_rms", "LSTM-NADE + dynamic eval (global RMS)", (-5.47, -1.27, -4.48, -5.11)),
)

# §4.8's network: a linear embedding, 2 stacked layers of 650 LSTM units, a NADE of 400 units; 7.2M parameters.
THESIS_LSTM_NADE = {"embedding_size": 650, "hidden_size": 650, "num_layers": 2, "nade_size": 400, "parameters": 7.2e6}


def table_4_6(corpus: str) -> dict[str, float]:
    """The thesis' value of every Table 4.6 row for one corpus (``jsb_chorales``, ``nottingham``, ...)."""
    if corpus not in TABLE_4_6_CORPORA:
        raise ValueError(f"Table 4.6 has no corpus {corpus!r}; its corpora: {', '.join(TABLE_4_6_CORPORA)}")
    column = TABLE_4_6_CORPORA.index(corpus)
    return {key: values[column] for key, _, values in TABLE_4_6}
