"""What the seeds say about the setups behind the figures that our notebooks redraw: the model, its size, the data
and the evaluation design, so that a figure's title can set the thesis' setup beside ours. Data only. No training
stage reads it, so the run caches that key on :mod:`paperlib.reference`'s numbers do not depend on these words.
"""

from __future__ import annotations

# Krause thesis §4.7.1, Tables 4.1 and 4.2: the base models of word-level dynamic evaluation, which chapter 5's
# studies of the same corpora reuse ("using the same setup and base model as in Section 4.7.1").
KRAUSE_WORD_MODELS: dict[str, dict[str, str | int]] = {
    "ptb": {"model": "AWD-LSTM", "parameters": 24_000_000},
    "wikitext2": {"model": "AWD-LSTM", "parameters": 33_000_000},
}
# Krause §5.1, Fig. 5.1: the WikiText-2 test set divided into 122 sequences of 2,000 words.
KRAUSE_FIG_5_1 = {"corpus": "wikitext2", "sequences": 122, "length": 2000}
# Krause §5.1, Fig. 5.2: the mLSTM of Table 4.4 on enwik8's test set; out of domain, the first 5 million characters
# of the Spanish European Parliament data.
KRAUSE_FIG_5_2_DATA = {"in_domain": "enwik8", "out_of_domain": "Spanish European Parliament text"}
# Krause §3.5.2, Figs. 3.2 and 3.3: mLSTM against a 2-layer stacked LSTM on enwik8, sizes of about 3-20 million
# parameters, trained with RMSprop for 4 epochs on the first 95 million characters.
KRAUSE_FIG_3_2 = {"corpus": "enwik8", "parameters": (3_000_000, 20_000_000), "characters": 95_000_000, "epochs": 4}
# Melis thesis §3.6, Fig. 3.3: a recurrent language model on Penn Treebank trained with Rectified Adam, evaluated
# every 1000 optimisation steps (the evaluation period E).
MELIS_AVERAGING = {"corpus": "ptb", "optimizer": "RAdam", "period": 1000}
# Melis thesis Tables 2.1, 2.2, 4.1 and 4.2 (and Circling Back's Tables 1 and 2): every PTB language model, words and
# characters, at 24M parameters.
MELIS_LM_PARAMETERS = 24_000_000
# Melis thesis §2.3.1, the PTB ablation (Fig. 2.3, Table 2.3): 24M-parameter models tuned and trained on a shortened
# schedule of 145 epochs (instead of 964) with a BPTT window of 35; the best Mogrifier settings had r in {5, 6}.
MELIS_ABLATION = {"parameters": 24_000_000, "epochs": 145, "bptt": 35, "best_rounds": (5, 6)}
# Melis thesis §2.3.3, Fig. 2.4b: the reverse-copy task with a larger model and vocabulary, which no profile runs.
MELIS_FIG_2_4B = "Fig. 2.4b (a larger model and vocabulary)"
# Melis thesis §5.7.2: the PTB MICMCO models' vocabulary (Mikolov's PTB) and optimisation steps (80,000 in the
# longer runs of Figs. 5.17-5.21).
MELIS_PTB_MICMCO = {"vocab_size": 10_000, "steps": 40_000}
