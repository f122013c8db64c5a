"""The one look of the compendium's figures: type sizes legible at 100% zoom, human names, a colour per method.

Every notebook calls :func:`use` before it draws, names a series with :func:`name` (the words a paper would print,
not a config key) and colours it with :func:`colour`, so that a method keeps its colour from figure to figure
(2TA is the same green in Fig. 3.3 and Fig. 3.4; the Mogrifier the same orange in every language-model plot).
Figures are saved by :func:`paperlib.compendium.notebooks.save_figure` at 150 dpi; at ``font_scale`` 1.15 of seaborn's
``paper`` context the smallest text (tick labels, legends) is 9-10 pt, about the size of a paper's captions.
"""

from __future__ import annotations

import zlib

# seaborn's colour-blind palette, in its order (fixed here so that no library update changes a figure)
PALETTE = ("#0173b2", "#de8f05", "#029e73", "#d55e00", "#cc78bc", "#ca9161", "#fbafe4", "#949494", "#ece133",
           "#56b4e9")
BASELINE_GREY = "#7f7f7f"

# config key -> the name a reader sees
NAMES = {
    # language models (Melis chs. 2 and 4, Krause ch. 3)
    "lstm": "LSTM", "mogrifier_lstm": "Mogrifier", "mogrifier": "Mogrifier", "mogrifier_rlstm": "Mogrifier RLSTM",
    "mlstm": "mLSTM", "transformer": "Transformer", "gru": "GRU", "dssm": "Deep state space model",
    "full_rank": "full-rank Mogrifier", "no_zigzag": "no-zigzag Mogrifier",
    # weight averaging (Melis ch. 3)
    "raw": "no averaging", "ta": "TA", "2ta": "2TA", "ema": "EMA", "swa": "SWA",
    # dynamic evaluation (Krause chs. 4-5)
    "static": "static evaluation", "sgd": "SGD", "global_rms": "global RMS", "rmsprop": "RMSprop", "adam": "Adam",
    "nonlocal_rmsprop": "non-local RMSprop", "sparse": "sparse dynamic evaluation", "neural_cache": "neural cache",
    # MICMCO (Melis ch. 5): estimators and objectives
    "elbo": "ELBO", "iwae": "IWAE", "stl": "STL", "dreg": "DReG", "reinforce": "REINFORCE", "vimco": "VIMCO",
    "kl": "KL", "renyi": "Rényi", "power": "power", "vq": "VQ-VAE", "vqvae": "VQ-VAE",
    # corpora
    "ptb": "PTB", "ptb_char": "PTB characters", "wikitext2": "WikiText-2", "jsb_chorales": "JSB Chorales",
    "nottingham": "Nottingham", "piano_midi": "Piano-midi.de", "muse_data": "MuseData",
}

# methods that share a figure get distinct colours; the baselines of a comparison are grey
COLOURS = {
    "LSTM": PALETTE[0], "Mogrifier": PALETTE[1], "Mogrifier RLSTM": PALETTE[2], "mLSTM": PALETTE[4],
    "Transformer": PALETTE[5], "GRU": PALETTE[0], "Deep state space model": PALETTE[3],
    "full-rank Mogrifier": PALETTE[3], "no-zigzag Mogrifier": PALETTE[9],
    "no averaging": BASELINE_GREY, "TA": PALETTE[1], "2TA": PALETTE[2], "EMA": PALETTE[0], "SWA": PALETTE[4],
    "static evaluation": BASELINE_GREY, "SGD": PALETTE[0], "global RMS": PALETTE[1], "RMSprop": PALETTE[2],
    "Adam": PALETTE[3], "non-local RMSprop": PALETTE[4], "sparse dynamic evaluation": PALETTE[5],
    "neural cache": PALETTE[9],
    "ELBO": PALETTE[7], "IWAE": PALETTE[8], "STL": PALETTE[5], "DReG": PALETTE[0], "REINFORCE": PALETTE[3],
    "VIMCO": PALETTE[1], "VQ-VAE": PALETTE[4],
    "PTB": PALETTE[9], "PTB characters": PALETTE[5], "WikiText-2": PALETTE[4], "JSB Chorales": PALETTE[2],
    "Nottingham": PALETTE[3],
}

FONT_SCALE = 1.15


def use(font_scale: float = FONT_SCALE) -> None:
    """Set the compendium's matplotlib style (seaborn's ``paper`` context on a white grid)."""
    import matplotlib as mpl
    import seaborn as sns

    sns.set_theme(context="paper", style="whitegrid", font_scale=font_scale)
    mpl.rcParams.update({
        "figure.dpi": 100, "savefig.dpi": 150, "axes.titleweight": "bold", "axes.spines.top": False,
        "axes.spines.right": False, "legend.frameon": False, "lines.linewidth": 1.6, "lines.markersize": 4.5,
        "errorbar.capsize": 3, "svg.hashsalt": "paperlib",  # no random ids in vector output
    })


def name(key: str) -> str:
    """The human name of a config key (itself if it is already one, or unknown)."""
    return NAMES.get(key, NAMES.get(str(key).lower(), str(key)))


def ladder_title(reading: str | None, verdict: str | None = None,
                 top: tuple[float, float] | None = None) -> str:
    """A scale ladder's reading (``paperlib.experiments.common.claims.LADDER_WORDS``) as a panel title says it:
    "trend against" spelled out as "trend against the claim", beside "trend toward the claim"; "not judged" for
    none. With ``verdict``, the part verdict the results index gives the ladder
    (``paperlib.experiments.common.claims.ladder_part``) leads, the reading beside it: "not reproduced (no trend)".
    With no trend the verdict is the top rung's direction alone; ``top``, that rung's (gap, margin) with the gap
    signed positive the paper's way, then says where it lies: "not reproduced (no trend; top rung the other way,
    inside its margin)"."""
    if not reading:
        return "not judged"
    said = "trend against the claim" if reading == "trend against" else reading
    if reading == "no trend" and top is not None and top[0] is not None and top[1] is not None:
        gap, margin = top
        way = "the paper's way" if gap > 0 else "the other way"
        said += f"; top rung {way}, {'inside' if abs(gap) <= margin else 'beyond'} its margin"
    return said if verdict is None or verdict == reading else f"{verdict} ({said})"


def colour(key: str) -> str:
    """The colour of a method, the same in every figure; keys without an assigned colour get a stable one from
    :data:`PALETTE` (by a checksum of the name, not Python's per-process ``hash``)."""
    label = name(key)
    if label in COLOURS:
        return COLOURS[label]
    return PALETTE[zlib.crc32(label.encode("utf-8")) % len(PALETTE)]


# Which image draws which thesis figure where one notebook draws many: notebooks/micmco_ptb.ipynb saves one image
# figures/micmco_ptb_<group>.png per grouping of Melis ch. 5's PTB figures (title, panels as rows of figure numbers);
# the results index links each figure's row to its image.
MICMCO_PTB_GROUPS: dict[str, tuple[str, list[list[str]]]] = {
    "training_fit": ("Training fit: one sample against 16 (Figs. 5.8, 5.9)", [["5.8", "5.9"]]),
    "validation": ("Validation: dropout masks and L2 (Figs. 5.10-5.12)", [["5.10", "5.11", "5.12"]]),
    "equal_compute": ("One sample given the compute of 16 (Figs. 5.13, 5.14, 5.24, 5.25)",
                      [["5.13", "5.14"], ["5.24", "5.25"]]),
    "robustness": ("Batch size, optimisation length and hidden size (Figs. 5.16-5.21, validation)",
                   [["5.16", "5.17", "5.18"], ["5.19", "5.20", "5.21"]]),
    "asymmetric_samples": ("Multiple samples in one term only (Figs. 5.22, 5.23)", [["5.22", "5.23"]]),
    "power": ("The power objective (Figs. 5.28, 5.29)", [["5.28", "5.29"]]),
}


def micmco_ptb_figure_file(fig: str) -> str:
    """The image that draws thesis figure ``fig`` of Melis ch. 5 on PTB ("5.8" -> figures/micmco_ptb_training_fit.png)."""
    for group, (_, rows) in MICMCO_PTB_GROUPS.items():
        if any(fig in row for row in rows):
            return f"figures/micmco_ptb_{group}.png"
    raise KeyError(f"thesis figure {fig!r} is in no group of MICMCO_PTB_GROUPS")
