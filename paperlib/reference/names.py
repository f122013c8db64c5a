"""How the seeds name our models, for claims, the index and tables (data; imports nothing): a config key -> the
thesis' name, and the key of the Mogrifier LSTM trained with Melis ch. 4's setup (Tables 4.1 / 4.2) beside the one
trained with ch. 2's (Tables 2.1 / 2.2) under the plain name."""

from __future__ import annotations

CHAPTER_4_SUFFIX = "_ch4"
CHAPTER_4_MOGRIFIER = "mogrifier_lstm" + CHAPTER_4_SUFFIX

MODEL_NAMES = {"lstm": "LSTM", "mogrifier_lstm": "Mogrifier", CHAPTER_4_MOGRIFIER: "Mogrifier (ch. 4 setup)",
               "mogrifier_rlstm": "Mogrifier RLSTM", "mlstm": "mLSTM", "full_rank": "full-rank Mogrifier",
               "no_zigzag": "no-zigzag Mogrifier", "transformer": "Transformer"}


def model_name(key: str) -> str:
    """A model's plain name: ``mogrifier_r4`` -> "Mogrifier r=4", ``mogrifier_rlstm`` -> "Mogrifier RLSTM"."""
    prefix = "mogrifier_r"
    if key.startswith(prefix) and key[len(prefix):].isdigit():
        return f"Mogrifier r={key[len(prefix):]}"
    return MODEL_NAMES.get(key, key)
