"""Melis' published language-model numbers (thesis Tables 2.1-2.3, 4.1, 4.2; Circling Back Tables 1-2), to print
beside ours (never used as results), and which paper row each of our models sits beside.

Each row names its source table and the setting it was measured in. Perplexities are word
level; bpc is bits per character. MC: Monte Carlo dropout evaluation.
"""

from __future__ import annotations

from typing import Any

from paperlib.reference.names import CHAPTER_4_MOGRIFIER, CHAPTER_4_SUFFIX

# Melis thesis Table 2.1 (Melis et al. 2020) and Table 4.1 (Circling Back Table 1): PTB, 2 layers,
# 24M parameters, no dynamic evaluation.
LM_PTB = [
    {"model": "lstm", "source": "Melis T2.1", "valid": 55.8, "test": 54.6, "valid_mc": 55.5, "test_mc": 54.1},
    {"model": "mogrifier_lstm", "source": "Melis T2.1", "valid": 52.1, "test": 51.0, "valid_mc": 51.4, "test_mc": 50.1},
    {"model": "mogrifier_lstm", "source": "Melis T4.1", "valid": 49.9, "test": 48.5, "valid_mc": None, "test_mc": None},
    {"model": "mogrifier_rlstm", "source": "Melis T4.1", "valid": 48.9, "test": 47.9, "valid_mc": None, "test_mc": None},
]

# Melis thesis Table 2.2 and Table 4.2 (Circling Back Table 2): PTB characters, 24M parameters.
LM_PTB_CHAR = [
    {"model": "lstm", "source": "Melis T2.2", "valid": 1.163, "test": 1.143, "valid_mc": 1.159, "test_mc": 1.139},
    {"model": "mogrifier_lstm", "source": "Melis T2.2", "valid": 1.149, "test": 1.131, "valid_mc": 1.137, "test_mc": 1.120},
    {"model": "mogrifier_lstm", "source": "Melis T4.2", "valid": 1.127, "test": 1.109, "valid_mc": None, "test_mc": None},
    {"model": "mogrifier_rlstm", "source": "Melis T4.2", "valid": 1.115, "test": 1.096, "valid_mc": None, "test_mc": None},
]

# Melis thesis Table 2.3 (PTB ablation, 24M parameters, validation perplexity; the shortened schedule of
# §2.3.1: 145 epochs, BPTT 35, deterministic dropout with a tuned softmax temperature), keyed by the name of
# the model of ours that sits beside each row. Fig. 2.3 (perplexity vs the number of rounds r) is a plot.
TABLE_2_3 = {"mogrifier_lstm": 54.1, "full_rank": 54.6, "no_zigzag": 55.0, "lstm": 57.5, "mlstm": 57.8}

REFERENCE = {"lm_ptb": LM_PTB, "lm_ptb_char": LM_PTB_CHAR, "lm_ptb_ablation": []}

def paper_rows(experiment: str) -> list[dict]:
    """The published rows for an experiment's table."""
    try:
        return REFERENCE[experiment]
    except KeyError:
        raise ValueError(f"no reference numbers for {experiment!r}; known: {', '.join(REFERENCE)}") from None




def rlstm_baseline(summary: dict[str, Any]) -> str:
    """The Mogrifier LSTM the Mogrifier RLSTM is compared with (Tables 4.1 / 4.2): the one trained with ch. 4's
    setup when the experiment has it, else the only one."""
    return CHAPTER_4_MOGRIFIER if CHAPTER_4_MOGRIFIER in summary else "mogrifier_lstm"


def reference_model(ref: dict[str, Any], summary: dict[str, Any]) -> str:
    """Which of our models a paper row sits beside: a Melis ch. 4 row goes to the model's run with
    :data:`CHAPTER_4_SUFFIX` when the experiment trained one with that chapter's setup, every other row to the
    model of its name."""
    chapter_4 = ref["model"] + CHAPTER_4_SUFFIX
    return chapter_4 if ref["source"].startswith("Melis T4") and chapter_4 in summary else ref["model"]
