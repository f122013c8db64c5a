"""Index rows of polyphonic music (Krause §4.8, Table 4.6): the LSTM-NADE with static and dynamic evaluation."""

from __future__ import annotations

from typing import Any

from paperlib.experiments.music.claims import CORPUS_NAMES, table_claim
from paperlib.reference.music import TABLE_4_6, TABLE_4_6_CORPORA, THESIS_LSTM_NADE

from paperlib.compendium.results_index.text import Results, _claim_verdict, _f, _profile_note

_ROWS = ("static", "sgd", "global_rms")
_MIRROR = ("jsb_chorales", "nottingham")


def _music(results: Results) -> dict[str, Any]:
    return results["music"]


def music_paper() -> str:
    """K-T4.6: Table 4.6's LSTM-NADE rows per corpus, the corpora outside the data mirror named."""
    values = {key: dict(zip(TABLE_4_6_CORPORA, row)) for key, _, row in TABLE_4_6}
    chains = "; ".join(f"{CORPUS_NAMES[c]} " + " → ".join(_f(values[k][c]) for k in _ROWS) for c in TABLE_4_6_CORPORA)
    outside = ", ".join(CORPUS_NAMES[c] for c in TABLE_4_6_CORPORA if c not in _MIRROR)
    return (f"test log-likelihood per frame (nats), static → SGD → global RMS: {chains} "
            f"({THESIS_LSTM_NADE['parameters'] / 1e6:.1f}M-parameter LSTM-NADE; {outside} not in the data mirror)")


def music_paper_short() -> str:
    values = {key: dict(zip(TABLE_4_6_CORPORA, row)) for key, _, row in TABLE_4_6}
    return "; ".join(f"{CORPUS_NAMES[c]} " + " → ".join(_f(values[k][c]) for k in _ROWS) for c in _MIRROR) + " nats/frame"


def music_ours(results: Results) -> str:
    parts = []
    for corpus, c in _music(results)["corpora"].items():
        rows = c["rows"]
        spread = f" (seeds {_f(c['static_test_mean'], 3)} ± {_f(c['static_test_sd'], 3)})" if c.get("static_test_sd") else ""
        parts.append(f"{CORPUS_NAMES[corpus]} " + " → ".join(_f(rows[k]["test_ll"], 3) for k in _ROWS) + spread)
    return "test nats/frame, static → SGD → global RMS: " + "; ".join(parts) + _profile_note(results, "music")


def music_ours_short(results: Results) -> str:
    return "; ".join(f"{CORPUS_NAMES[corpus]} " + " → ".join(_f(c["rows"][k]["test_ll"]) for k in _ROWS)
                     for corpus, c in _music(results)["corpora"].items()) + _profile_note(results, "music")


def music_scale(results: Results) -> str:
    parts = []
    for corpus, c in _music(results)["corpora"].items():
        parts.append(f"{CORPUS_NAMES[corpus]}: {c['parameters'] / 1e6:.2f}M params, {len(c['seeds'])} seeds, "
                     f"{c['test_songs']} test songs ({c['test_frames']:,} frames)")
    corpora = _music(results)["corpora"]
    return "; ".join(parts) + ("; Nottingham: our split and eighth-note frames" if "nottingham" in corpora else "")


def music_verdict(results: Results) -> tuple[str, str]:
    """K-T4.6's verdict: the claim :func:`paperlib.experiments.music.claims.table_claim` judges (the notebook shows
    the same)."""
    return _claim_verdict(table_claim(_music(results)))
