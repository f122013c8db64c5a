"""Krause thesis §3.5's numbers for byte-level WikiText-2 (Table 3.3), for display beside ours (data; imports
nothing)."""

from __future__ import annotations

# Table 3.3: word-level perplexity on WikiText-2 (valid, test); every row but the last is a word-level model.
TABLE_3_3: dict[str, tuple[float, float]] = {
    "LSTM (Grave et al., 2017b)": (104.2, 99.3),
    "LSTM + VD (untied) (Inan et al., 2017)": (98.8, 93.1),
    "LSTM + VD (tied) (Inan et al., 2017)": (91.5, 87.0),
    "Pointer Sentinel LSTM (Merity et al., 2017)": (84.8, 80.8),
    "LSTM (tied) + VD + BB tuning (Melis et al., 2018)": (69.1, 65.9),
    "AWD-LSTM (tied) (Merity et al., 2018b)": (68.6, 65.8),
    "byte mLSTM +emb +WN +VD": (92.8, 88.8),
}
BYTE_MLSTM = "byte mLSTM +emb +WN +VD"  # the one byte-level row of Table 3.3
# §3.5.4: that row is "the best mLSTM configuration from the enwik8 dataset" (§3.5.2's large mLSTM, also Table 4.4's).
BYTE_MLSTM_SETUP = {"parameters": 46_000_000, "hidden_units": 2800, "embedding_size": 400,
                    "dropout": "0.5 / 0.5 / – (variational; + weight norm.)", "optimizer": "Adam, 0.001 decayed linearly"}
TEST_BITS_PER_BYTE = 1.2649  # the byte mLSTM's test loss (§3.5.4)
TEST_BYTES, TEST_WORDS = 1_256_449, 245_569  # the test file's bytes and word-level tokens (eq. 3.15's ratio)
# The word-level LSTMs with variational dropout (Inan et al., tied and untied) the thesis calls the byte mLSTM
# "similar" to.
VD_LSTM_RANGE = (TABLE_3_3["LSTM + VD (tied) (Inan et al., 2017)"][1],
                 TABLE_3_3["LSTM + VD (untied) (Inan et al., 2017)"][1])
