"""Plain words for the PTB MICMCO curves and comparison keys, as the claims and the results index write them:
"5.8 dreg16_kl.train" -> "Fig. 5.8 DReG 16 KL (training fit)"; the estimator family and objective of a curve name.

Pure Python at import.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

_REGIMES = {"train": "training fit", "shared": "validation, shared masks", "naive": "validation, naive dropout",
            "l2": "validation, L2"}
_BASES = {"dreg": "DReG", "vimco": "VIMCO", "kl": "KL", "renyi": "Rényi", "power": "power"}


def plain_key(key: str, curves: Mapping[str, Mapping[str, Any]]) -> str:
    """A PTB claim's comparison key in plain words: "5.8 dreg16_kl.train" -> "Fig. 5.8 DReG 16 KL (training fit)",
    "dreg16_kl" -> "DReG 16 KL", "renyi" -> "Rényi"."""
    figure, _, rest = key.partition(" ")
    if not re.fullmatch(r"\d+\.\d+", figure):
        figure, rest = "", key
    if rest in curves:
        regime = curves[rest].get("regime")
        rest = curves[rest]["label"] + (f" ({_REGIMES[regime]})" if regime in _REGIMES else "")
    else:
        stem = next((c for c in curves if c.startswith(f"{rest}.")), None)
        rest = curves[stem]["label"] if stem else re.sub(r"\b(dreg|vimco|kl|renyi)\b", lambda m: _BASES[m[1]], rest)
    return " ".join(x for x in (f"Fig. {figure}" if figure else "", rest) if x)


def _base(name: str) -> str:
    """The estimator family of a curve name: "dreg16_kl.train" -> "dreg"."""
    return re.match(r"[a-z]+", name)[0]


def _objective(name: str) -> str:
    """ "dreg16_power.train" -> "power" (plain)."""
    return _BASES[name.split(".")[0].split("_")[1]]
