"""Melis thesis ch. 5's published numbers for MICMCO on PTB (Table 5.1), to print beside ours (data; imports
nothing)."""

from __future__ import annotations

# Melis §5.7.1: the synthetic task's data are single symbols drawn uniformly from this many (the optimum NLL is ln V).
SYNTHETIC_VOCAB_SIZE = 10_000

# Melis thesis Table 5.1 (§5.7.2): best test results of the sentence VAEs on PTB, IWAE with 500 samples; keyed by
# the hidden size, then by column. "K / R": single-sample runs, where the KL and Rényi objectives coincide. NLL and
# KL in nats per token.
MICMCO_PTB_TABLE_5_1: dict[int, dict[str, dict[str, float]]] = {
    128: {
        "DReG 1 K/R": {"perplexity": 92.5, "nll": 4.527, "kl": 0.047},
        "DReG 16 K": {"perplexity": 91.7, "nll": 4.518, "kl": 0.131},
        "DReG 16 R": {"perplexity": 91.6, "nll": 4.517, "kl": 0.126},
        "VIMCO 1 K/R": {"perplexity": 94.6, "nll": 4.549, "kl": 0.000},
        "VIMCO 16 K": {"perplexity": 92.1, "nll": 4.523, "kl": 0.164},
        "VIMCO 16 R": {"perplexity": 92.5, "nll": 4.527, "kl": 0.120},
    },
    256: {
        "DReG 1 K/R": {"perplexity": 83.9, "nll": 4.429, "kl": 0.000},
        "DReG 16 K": {"perplexity": 82.8, "nll": 4.416, "kl": 0.140},
        "DReG 16 R": {"perplexity": 82.2, "nll": 4.409, "kl": 0.138},
        "VIMCO 1 K/R": {"perplexity": 84.7, "nll": 4.439, "kl": 0.001},
        "VIMCO 16 K": {"perplexity": 83.4, "nll": 4.424, "kl": 0.167},
        "VIMCO 16 R": {"perplexity": 83.1, "nll": 4.420, "kl": 0.094},
    },
}
