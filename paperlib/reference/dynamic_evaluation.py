"""Krause thesis' published numbers on dynamic evaluation, to print beside ours (never used as results): the
word-level Tables 4.1/4.2 and the chapter-5 studies (read by :mod:`paperlib.experiments.dynamic_evaluation.dyneval`, its claims and
``notebooks/dyneval.ipynb``), and the character-level and out-of-domain tables and figures (read by
:mod:`paperlib.experiments.dynamic_evaluation.dyneval_char`). Perplexities are word level, bpc bits per character. Data only: it
imports nothing of paperlib but :mod:`paperlib.reference.byte_lm` (the mLSTM's size, written there once) and no
torch, like :mod:`paperlib.reference`, whose bytes the training stages' run caches key on, which is why these
numbers sit in a module of their own."""

from __future__ import annotations

from paperlib.reference.byte_lm import BYTE_MLSTM_SETUP


# Word level (paperlib.experiments.dynamic_evaluation.dyneval and its claims.py, notebooks/dyneval.ipynb).
# Perplexities (valid, test) of the AWD-LSTM rows of Krause Table 4.1 (PTB, 24M) and Table 4.2
# (WikiText-2, 33M); the neural cache row is AWD-LSTM + neural cache (Merity et al., 2018b) from the
# same tables. Sparse dynamic evaluation has no word-level result in the thesis (Table 4.4: enwik8 test
# bits/char 1.24 static, 1.13 sparse with 250k adaptation parameters, 1.08 full).
DYNEVAL_TABLES: dict[str, dict[str, tuple[float, float] | None]] = {
    "ptb": {
        "static": (59.8, 57.7),
        "traditional_sgd": (54.9, 53.5),
        "sgd": (54.7, 53.3),
        "sgd_decay": (54.0, 52.4),
        "global_rms_decay": (52.7, 52.0),
        "global_rms_rms_decay": (51.6, 51.1),
        "sparse": None,
        "neural_cache": (53.9, 52.8),
    },
    "wikitext2": {
        "static": (68.9, 66.1),
        "traditional_sgd": (51.6, 49.0),
        "sgd": (51.5, 48.8),
        "sgd_decay": (49.8, 47.4),
        "global_rms_decay": (46.9, 44.7),
        "global_rms_rms_decay": (46.4, 44.3),
        "sparse": None,
        "neural_cache": (53.8, 52.0),
    },
}
# PTB validation perplexities of Krause §5.4 (static 59.7).
DYNEVAL_STATIC_VALID_PTB = 59.7
DYNEVAL_MOMENTUM = {0.0: 54.7, 0.5: 54.8, 0.75: 55.0, 0.875: 55.3, 0.9375: 55.7, 0.96875: 56.2, 0.984375: 56.7}  # Table 5.3
DYNEVAL_ADAPTIVE = {  # Table 5.4
    "rmsprop_alpha_0.9": 59.1, "rmsprop_alpha_0.99": 58.6, "rmsprop_alpha_0.999": 58.1,
    "adam_mu_0.9": 58.1, "adam_mu_0.0": 58.0, "sgd": 54.7,
}
DYNEVAL_EPSILON = {1e-6: 57.5, 1e-5: 56.3, 1e-4: 55.2, 1e-3: 54.6, 1e-2: 54.4, 1e-1: 54.6, 1.0: 54.7, 10.0: 54.7}  # Table 5.5
DYNEVAL_EPSILON_BASELINES = {"sgd": 54.7, "global_rms": 52.7}
DYNEVAL_SEEN_UNSEEN = {"static": (3.24, 6.92), "dynamic": (2.78, 6.99), "neural_cache": (2.91, 7.06)}  # Table 5.1, nats
DYNEVAL_UNSEEN_SHARE = 0.426  # §5.2: share of unseen words on which dynamic evaluation beats static (the cache: none)
# Table 5.2 (WikiText-2 test, tied embeddings): an update on the segment containing "production" in the
# context below; word -> (embedding cosine with "production", Δ log p). The column is headed "cos distance"
# but holds cosine similarities (1.00 for the target); the median row is over the whole vocabulary.
DYNEVAL_RELATED_WORDS = {
    "production": (1.00, 2.42), "development": (0.55, 1.14), "construction": (0.53, 1.29), "filming": (0.52, 0.80),
    "recording": (0.50, 1.27), "photography": (0.46, 0.15), "release": (0.45, 1.25), "performance": (0.45, 1.01),
    "design": (0.44, 0.90), "work": (0.44, 1.23), "productions": (0.44, 0.50),
}
DYNEVAL_RELATED_WORDS_MEDIAN = (-0.02, -0.66)  # (cosine, Δ log p)
DYNEVAL_RELATED_WORDS_CONTEXT = ("He appeared on a 2006 episode of the television series , Doctors, followed by a role "
                               "in the 2007 theatre production")
# Tables 5.6 and 5.7 (PTB validation perplexity; both captions in the thesis repeat Table 5.4's by mistake).
# Global RMS has no decay prior here (as in Table 5.5); RMSprop is the ε = 0.01 row of Table 5.5.
DYNEVAL_STATISTICS_AMOUNT = {"static": 59.7, "rmsprop": 54.4, 0.01: 52.5, 0.1: 52.5, 1.0: 52.7}  # keys: data fraction
DYNEVAL_STATISTICS_LOCALITY = {"static": 59.7, "rmsprop": 54.4, "global_rms": 52.7, "nonlocal_rmsprop": 52.6}


# Character models and out of domain (paperlib.experiments.dynamic_evaluation.dyneval_char), in bits per character unless stated.
# Table 4.4 (enwik8 test, §4.7.3): the 46M-parameter mLSTM of §3.5.2 (2800 units, one recurrent layer);
# sparse dynamic evaluation adapted 500 of the hidden units: a 500 x 500 M, 250k adaptation parameters.
DYNEVAL_CHAR_TABLE_4_4 = {"static": 1.24, "sparse_recurrent": 1.13, "global_rms": 1.08,
                          "parameters": BYTE_MLSTM_SETUP["parameters"], "hidden_units": BYTE_MLSTM_SETUP["hidden_units"],
                          "sparse_units": 500, "sparse_parameters": 250_000}
# Table 6.1 (enwik8 test, §6.2.3): Transformer-XL retrained at 42M parameters (static 1.053, global RMS
# + RMS decay 1.012; no SGD row at this size) and the 277M pretrained model (0.993, SGD 0.946, global RMS 0.940).
DYNEVAL_CHAR_TABLE_6_1 = {
    "42M": {"static": 1.053, "sgd": None, "global_rms": 1.012},
    "277M": {"static": 0.993, "sgd": 0.946, "global_rms": 0.940},
}
# Table 6.3 (§6.2.4): the pretrained Transformer-XL of Dai et al. (2019) (257M parameters, adaptive softmax) on
# WikiText-103, word-level perplexity, static / SGD dynamic eval / global RMS dynamic eval (no decay rate).
DYNEVAL_TRANSFORMER_TABLE_6_3 = {
    "static": {"valid": 17.3, "test": 18.1},
    "sgd": {"valid": 16.3, "test": 17.0},
    "global_rms": {"valid": 15.8, "test": 16.4},
}
# Table 6.4 (§6.3.2): GPT-2 345M evaluated out of domain (no Wikipedia in its training data), static /
# SGD dynamic eval / global RMS dynamic eval; enwik8 and text8 in bits/char, WikiText-103 in perplexity.
DYNEVAL_CHAR_TABLE_6_4 = {
    "enwik8": {"static": 1.017, "sgd": 0.893, "global_rms": 0.869},
    "text8": {"static": 1.066, "sgd": 1.017, "global_rms": 1.003},
    "wikitext103_ppl": {"static": 26.6, "sgd": 23.0, "global_rms": 21.9},
}
# Fig. 5.2 (§5.1) has no numbers in the text: on enwik8 the dynamic advantage peaks after 2-3k characters,
# on Spanish (out of domain) it keeps growing; 500 sequences of 10k characters, bins of 100.
DYNEVAL_CHAR_FIG_5_2 = {"sequences": 500, "length": 10_000, "bin": 100, "in_domain_peak_chars": (2000, 3000)}
# Fig. 3.3 (§3.5.2): mLSTM vs 2-layer stacked LSTM on enwik8 (RMSprop-trained, 3-20M parameters).
DYNEVAL_CHAR_FIG_3_3 = {
    "fraction": 0.1,
    "after_bits": {"mlstm": [6.27, 2.26, 2.04, 1.61, 1.51], "lstm": [6.29, 2.48, 2.25, 1.79, 1.67]},
    "overall_bits": {"mlstm": 1.42, "lstm": 1.53},
}
# Melis thesis §2.3.2: the recovery hypothesis did not hold for the Mogrifier LSTM (no numbers given).
DYNEVAL_CHAR_MELIS_RECOVERY = {"mogrifier_recovers_faster_than_lstm": False}
