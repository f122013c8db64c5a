"""Krause thesis numbers of the tables no profile runs (enwik8, text8, the 1948 book), for display beside the row's
reason (data; imports nothing). Each table keeps the thesis' own rows that the row's sentence compares, in its order;
the values are test bits per character (Tables 3.1, 3.2, 4.5, 5.8, 6.2) or test perplexity (Table 4.3)."""

from __future__ import annotations

# item -> (what the numbers are, the decimals the thesis prints, {row: value})
UNRUN_TABLES: dict[str, tuple[str, int, dict[str, float]]] = {
    "K-T3.1": ("enwik8 test bpc", 2, {"stacked LSTM (7-layer) (Graves, 2013)": 1.67,
                                   "unregularized mLSTM": 1.40, "mLSTM +emb +WN +VD": 1.28,
                                   "large mLSTM +emb +WN +VD (46M)": 1.24}),
    "K-T3.2": ("text8 test bpc", 2, {"small LSTM (RMSprop)": 1.64, "small mLSTM (RMSprop)": 1.59,
                                  "unregularized mLSTM (RMSprop)": 1.40, "large mLSTM +emb +WN +VD": 1.27}),
    "K-T4.3": ("text8 word-level test ppl", 1, {"AWD-LSTM": 87.5, "AWD-LSTM + neural cache": 75.1,
                                             "AWD-LSTM + dynamic eval": 70.3}),
    "K-T4.5": ("text8 test bpc", 2, {"mLSTM": 1.27, "mLSTM + dynamic eval": 1.19}),
    "K-T5.8": ("bits per character on the excerpt", 2, {"human (avg subject)": 1.59, "human (best of 12)": 1.29,
                                                      "human (ensemble of 12)": 1.25, "text8 mLSTM": 1.44,
                                                      "text8 mLSTM + dynamic eval": 1.31}),
    "K-T6.2": ("text8 test bpc", 3, {"Transformer-XL (277M)": 1.085, "Transformer-XL + dynamic eval (SGD)": 1.042,
                                  "Transformer-XL + dynamic eval (global RMS, RMS decay)": 1.038}),
}
