"""Index rows of polyphonic music (Krause §4.8, Table 4.6): the LSTM-NADE with static and dynamic evaluation."""

from __future__ import annotations

from typing import Any

from paperlib.experiments.common.grid_ends import not_bracketed
from paperlib.experiments.music.claims import CORPUS_NAMES, MIRROR_CORPORA, RULE_NAMES, adapted_seed, table_claim
from paperlib.reference.music import TABLE_4_6, TABLE_4_6_CORPORA, THESIS_LSTM_NADE

from paperlib.compendium.results_index.text import Results, _claim_verdict, _f, _profile_note

_ROWS = ("static", "sgd", "global_rms")


def _music(results: Results) -> dict[str, Any]:
    return results["music"]


def music_paper() -> str:
    """K-T4.6: Table 4.6's LSTM-NADE rows per corpus, the corpora outside the data mirror named."""
    values = {key: dict(zip(TABLE_4_6_CORPORA, row)) for key, _, row in TABLE_4_6}
    chains = "; ".join(f"{CORPUS_NAMES[c]} " + " → ".join(_f(values[k][c]) for k in _ROWS) for c in TABLE_4_6_CORPORA)
    outside = ", ".join(CORPUS_NAMES[c] for c in TABLE_4_6_CORPORA if c not in MIRROR_CORPORA)
    return (f"test log-likelihood per frame (nats), static → SGD → global RMS: {chains} "
            f"({THESIS_LSTM_NADE['parameters'] / 1e6:.1f}M-parameter LSTM-NADE; {outside} not in the data mirror)")


def music_paper_short(results: Results) -> str:
    """The thesis' chains for the corpora our results hold, joined by corpus key."""
    values = {key: dict(zip(TABLE_4_6_CORPORA, row)) for key, _, row in TABLE_4_6}
    return "; ".join(f"{CORPUS_NAMES[c]} " + " → ".join(_f(values[k][c]) for k in _ROWS)
                     for c in _music(results)["corpora"]) + " nats/frame"


def music_ours(results: Results) -> str:
    parts = []
    for corpus, c in _music(results)["corpora"].items():
        rows = c["rows"]
        spread = (f" (static over seeds: mean {_f(c['static_test_mean'], 3)}, s.d. {_f(c['static_test_sd'], 3)})"
                  if c.get("static_test_sd") else "")
        parts.append(f"{CORPUS_NAMES[corpus]} " + " → ".join(_f(rows[k]["test_ll"], 3) for k in _ROWS) + spread)
    return "test nats/frame, static → SGD → global RMS: " + "; ".join(parts) + _profile_note(results, "music")


def music_ours_short(results: Results) -> str:
    return "; ".join(f"{CORPUS_NAMES[corpus]} " + " → ".join(_f(c["rows"][k]["test_ll"]) for k in _ROWS)
                     for corpus, c in _music(results)["corpora"].items()) + _profile_note(results, "music")


def _seeds_note(corpus: str, c: dict[str, Any], params: dict[str, Any]) -> str:
    """Training seeds that stopped at the epoch cap while still improving (their best epoch the last one)."""
    cap = params.get("train", {}).get(corpus, {}).get("max_epochs")
    capped = [s["seed"] for s in c["seeds"] if cap is not None and s.get("best_epoch") == cap]
    if not capped:
        return ""
    which = "all seeds" if len(capped) == len(c["seeds"]) else "seed" + ("s " if len(capped) > 1 else " ") + ", ".join(
        map(str, capped))
    return f", {which} stopped at the {cap}-epoch cap still improving (best epoch {cap})"


def _grid_note(c: dict[str, Any]) -> str:
    """Dynamic-evaluation rules whose learning rate is an end of its validation grid (optimum not bracketed)."""
    notes = []
    for rule, name in RULE_NAMES.items():
        row = c["rows"].get(rule, {})
        note = not_bracketed(row["lr"], [t["lr"] for t in row["trials"]]) if row.get("trials") and \
            row.get("lr") is not None else ""
        if note:
            notes.append(f"{name} learning rate {note}")
    return "".join(f", {n}" for n in notes)


def _dyneval_seed_note(c: dict[str, Any]) -> str:
    """Which seed's model dynamic evaluation adapted (the static row's), and where it stands among the seeds by
    validation and on test."""
    seeds = c["seeds"]
    static = c["rows"]["static"]["test_ll"]
    seed, by_valid = adapted_seed(c)
    if len(seeds) < 2:
        return f", dynamic evaluation of seed {seed}'s model"
    ranks = [("the worst of the seeds on test" if static == min(s["test_ll"] for s in seeds) else
              "the best of the seeds on test" if static == max(s["test_ll"] for s in seeds) else ""),
             f"{by_valid} by validation" if by_valid else ""]
    rank = f" ({', '.join(r for r in ranks if r)})" if any(ranks) else ""
    return (f", dynamic evaluation of seed {seed}'s model only: static {_f(static, 3)}{rank}, seeds' mean "
            f"{_f(c['static_test_mean'], 3)}"
            + (f", its learning rates picked on {c['valid_songs']} validation songs" if c.get("valid_songs") else ""))


def _model_note(corpus: str, c: dict[str, Any], params: dict[str, Any]) -> str:
    """The corpus' network and training beside the thesis' (2 x 650 LSTM, NADE of 400, SGD with gradient-norm
    clipping), each seed's best epoch against the epoch cap, and the frame NADE its static model is set against."""
    model = params.get("model", {}).get(corpus, {})
    train = params.get("train", {}).get(corpus, {})
    shape = (f"{model['num_layers']} × {model['hidden_size']} LSTM, NADE of {model['nade_size']}"
             if {"num_layers", "hidden_size", "nade_size"} <= model.keys() else "")
    net = f"{c['parameters'] / 1e6:.2f}M params" + (f" ({shape})" if shape else "")
    optimiser = (f", trained with {'Adam' if train['optimizer'] == 'adam' else train['optimizer']} (thesis: SGD with "
                 "gradient-norm clipping)" if train.get("optimizer") and train["optimizer"] != "sgd" else "")
    epochs = " / ".join(str(s["best_epoch"]) for s in c["seeds"] if s.get("best_epoch") is not None)
    cap = f" of at most {train['max_epochs']}" if train.get("max_epochs") else ""
    best = f", best epochs {epochs}{cap}" if epochs else ""
    nade = c["rows"].get("nade", {}).get("test_ll")
    learned = (f", static {_f(c['rows']['static']['test_ll'], 3)} against the frame NADE's {_f(nade, 3)}"
               if nade is not None else "")
    return f"{net}{optimiser}{best}{learned}"


def music_scale(results: Results) -> str:
    """K-T4.6: per corpus the network and its training beside the thesis', seeds and test songs; training seeds
    stopped at the epoch cap while still improving, learning rates at an end of their grid, and the one seed whose
    model dynamic evaluation adapts."""
    params = results.get("music.params", {})
    parts = []
    for corpus, c in _music(results)["corpora"].items():
        parts.append(f"{CORPUS_NAMES[corpus]}: {_model_note(corpus, c, params)}, {len(c['seeds'])} seeds"
                     f"{_seeds_note(corpus, c, params)}, {c['test_songs']} test songs ({c['test_frames']:,} frames)"
                     f"{_dyneval_seed_note(c)}{_grid_note(c)}")
    corpora = _music(results)["corpora"]
    return "; ".join(parts) + ("; Nottingham: our split and eighth-note frames" if "nottingham" in corpora else "")


def music_verdict(results: Results) -> tuple[str, str]:
    """K-T4.6's verdict: the claim :func:`paperlib.experiments.music.claims.table_claim` judges (the notebook shows
    the same)."""
    return _claim_verdict(table_claim(_music(results)))
