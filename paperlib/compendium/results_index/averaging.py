"""Index rows of weight averaging (Melis ch. 3): 2TA against the raw weights, TA and EMA."""

from __future__ import annotations

import math
from typing import Any, Callable

from paperlib.experiments.averaging.claims import (BASIN_CLAIMS, CLAIMS, ENTRY_MARGIN, NEAR_OPTIMAL, almost_rising,
                                                  judged_entries, lengths_claim, schematic_claim, switch_heights)
from paperlib.experiments.common.grid_ends import not_bracketed
from paperlib.reference.averaging import AVERAGING_BEST_LOSS

from paperlib.compendium.results_index.text import (NotAttempted, Results, _claim_verdict, _f, _profile_note,
                                                    grouped_reason, index_text, three_quarters)


# -- averaging (Melis ch. 3) -------------------------------------------------------------------


def _avg(results: Results) -> dict[str, Any]:
    return results["averaging_ptb"]["summary"]


def _avg_scale(results: Results) -> str:
    st = results["averaging_ptb"]["settings"]
    m, t = st["model"], st["train"]
    tokens = t["max_steps"] * t["batch_size"] * t["bptt"]
    return (f"{m['num_layers']}-layer {m['cell'].upper()} H={m['hidden_size']}, {t['max_steps']:,} {t['optimizer']} "
            f"steps × {t['batch_size']}×{t['bptt']} tokens ({tokens / 1e6:.1f}M) at a constant lr {t['lr']:g}, one "
            f"trajectory; E = {t['eval_every']} steps, {st['valid_tokens']:,} validation tokens per evaluation"
            + _tuned_grids(results) + _raw_still_falling(results) + "; the thesis evaluated every 1,000 steps and "
            "tuned the network's hyperparameters separately for 2TA, TA and EMA, where ours share one trajectory")


def _raw_still_falling(results: Results) -> str:
    """"; not converged: the raw weights' validation loss ...": where the raw loss is lowest at the run's last
    evaluation, how far it fell over the last quarter of the evaluations (the final losses the methods are compared
    on are then those of a run still improving)."""
    raw = (results["averaging_ptb"]["main"]["curves"].get("raw") or {}).get("valid_nll") or []
    if len(raw) < 4 or min(raw) < raw[-1]:  # a run without the raw weights' losses says nothing
        return ""
    return (f"; not converged: the raw weights' validation loss is lowest at the last of its {len(raw)} evaluations "
            f"({three_quarters(raw):.3f} → {raw[-1]:.3f} nats over the last quarter)")


def _tuned_grids(results: Results) -> str:
    """"; tuned TA over starts 0.25 / 0.5 / 0.75, picked 0.75 (the largest of 0.25–0.75 tried: optimum not
    bracketed), EMA over decays ...": the grids the tuned baselines were picked from, and whether the pick sits at an
    end of its grid."""
    st, summary = results["averaging_ptb"]["settings"], _avg(results)
    shown = []
    for name, grid_key, tuned_key in (("TA", "ta_starts", "tuned_ta"), ("EMA", "ema_decays", "tuned_ema")):
        grid, tuned = st.get(grid_key), summary.get(tuned_key)
        if not grid or not tuned:
            continue
        value = float(tuned.rsplit("_", 1)[1])
        what = "starts" if name == "TA" else "decays"
        shown.append(f"{name} over {what} {' / '.join(f'{g:g}' for g in grid)}, picked "
                     f"{not_bracketed(value, grid) or f'{value:g}'}")
    return "; tuned " + ", ".join(shown) + " on this run's validation loss" if shown else ""


def _avg_overfit_scale(results: Results) -> str:
    """M-F3.5's scale: the overfitting run's own settings (the stage trains it without dropout on a slice of the
    training data)."""
    st = results["averaging_ptb"]["settings"]
    m, t, slice_ = st["model"], st["overfit_train"], st["overfit_train_tokens"]
    tokens = t["max_steps"] * t["batch_size"] * t["bptt"]
    evaluations = len(results["averaging_ptb"]["overfit"]["curves"]["raw"]["valid_nll"])
    schedule = t.get("schedule", "constant")
    return (f"{m['num_layers']}-layer {m['cell'].upper()} H={m['hidden_size']} without dropout, {t['max_steps']:,} "
            f"{t['optimizer']} steps × {t['batch_size']}×{t['bptt']} tokens ({tokens / 1e6:.2f}M: "
            f"{tokens / slice_:.1f} passes over a {slice_:,}-token slice of the training data) at "
            + (f"a constant lr {t['lr']:g}" if schedule == "constant" else f"lr {t['lr']:g} ({schedule})")
            + f", one trajectory; E = {t['eval_every']} steps ({evaluations} evaluations), {st['valid_tokens']:,} "
            "validation tokens per evaluation")


def _avg_main_paper() -> str:
    """M-F3.3: Fig. 3.3's best validation losses and what the thesis says of the others."""
    two, raw = AVERAGING_BEST_LOSS["2ta"], AVERAGING_BEST_LOSS["raw"]
    return (f"2TA {two:.2f} nats (ppl {math.exp(two):.1f}) vs raw {raw:.2f} (ppl {math.exp(raw):.1f}); 2TA, TA and EMA final "
            "losses 'very close'; 2TA 'much better' early")


def _avg_main_ours(results: Results) -> str:
    m = _avg(results)["methods"]
    return (f"best valid loss: 2TA {_f(m['2ta']['best'], 3)} (ppl {_f(math.exp(m['2ta']['best']), 1)}), raw "
            f"{_f(m['raw']['best'], 3)} (ppl {_f(math.exp(m['raw']['best']), 1)}), tuned TA "
            f"{_f(m['ta (tuned)']['best'], 3)}, tuned EMA {_f(m['ema (tuned)']['best'], 3)} nats; early mean 2TA "
            f"{_f(m['2ta']['early_mean'], 3)}, TA {_f(m['ta (tuned)']['early_mean'], 3)}, EMA "
            f"{_f(m['ema (tuned)']['early_mean'], 3)}" + _profile_note(
                results, "averaging_ptb"))


def _avg_claim(item: str) -> Callable[[Results], tuple[str, str]]:
    """Row ``item``'s claim (:data:`paperlib.experiments.averaging.claims.CLAIMS`)."""
    def verdict(results: Results) -> tuple[str, str]:
        return _claim_verdict(CLAIMS[item](results["averaging_ptb"]))
    return verdict


def _schematic_verdict(results: Results) -> tuple[str, str]:
    """M-F3.1 as :func:`~paperlib.experiments.averaging.claims.schematic_claim` judges it: the caption's statement
    about the run (a near-optimal L in every L interval) where the run recorded the optimal tail, the failing checks
    of Alg. 2 where one fails (a defect of the implementation); else "not attempted" with the checks beside the
    trace (they hold on any run)."""
    claim = schematic_claim(results["averaging_ptb"])
    if not claim.not_run or any(p.verdict != "reproduced" for p in claim.parts):
        return _claim_verdict(claim)
    checks = "; ".join(p.evidence for p in claim.parts)
    raise NotAttempted(f"the caption's one statement about a run, {NEAR_OPTIMAL}; the trace drawn follows Alg. 2 at "
                       f"every evaluation ({checks}: checks of our implementation, not findings)",
                       "trace drawn; its near-optimal L per interval not recorded")


def _avg_lengths_ours(results: Results) -> str:
    curve = results["averaging_ptb"]["main"]["curves"]["2ta"]
    period = results["averaging_ptb"]["main"]["period"]
    optimal = results["averaging_ptb"]["main"].get("optimal_tail")
    best = (f"; the optimal tail (the best average of the last k whole periods) {min(optimal['length']) // period}"
            f"–{max(optimal['length']) // period} E, at the last evaluation {optimal['length'][-1] // period} E"
            if optimal and optimal.get("length") else "")
    return (f"over {len(curve['long_len'])} evaluations (E = {period} steps) L grows to "
            f"{max(curve['long_len']) // period} E, S to {max(curve['short_len']) // period} E{best}")


def _rising_label(name: str, heights: list[int], evaluations: list[int]) -> str:
    """A few words on one sequence of Fig. 3.4 for a reason: its ends, or its fall when it fails."""
    holds, text = almost_rising(heights, evaluations)
    first_last, _, fall = text.partition(", largest fall ")
    return f"{name} rise ({first_last})" if holds or not fall else f"{name} rise (fall {fall})"


def _avg_lengths_fig34_ours(results: Results) -> str:
    h = switch_heights(results["averaging_ptb"])
    curve = results["averaging_ptb"]["main"]["curves"]["2ta"]
    raw = sum(1 for length in curve["long_len"] if length == 0)
    switches = sum(a in ("switch", "reset_long") for a in curve["action"])
    return (f"L in evaluation periods (E = {results['averaging_ptb']['main']['period']} steps) at the "
            f"{len(h['peaks'])} switches from a non-empty long average ({switches} in all) of "
            f"{len(curve['long_len'])} evaluations: peaks "
            f"{' '.join(map(str, h['peaks']))}; valleys {' '.join(map(str, h['valleys']))}; L = 0 after {raw} "
            "evaluations (the raw weights beat every average and Alg. 2 reinitialised)")


def _avg_lengths_fig34_verdict(results: Results) -> tuple[str, str]:
    """M-F3.4's claim; the reason names each sequence's ends, or its largest fall where it fails."""
    r = results["averaging_ptb"]
    claim = lengths_claim(r)
    h = switch_heights(r)
    if len(h["peaks"]) < 2:
        return _claim_verdict(claim)
    words = {p.label: p.verdict for p in claim.parts}
    return index_text(claim), grouped_reason([(_rising_label("peaks of L", h["peaks"], h["evaluation"]),
                                          words["peaks of L rise"]),
                                         (_rising_label("valleys", h["valleys"], h["evaluation"]),
                                          words["valleys rise"])])


def _avg_overfit_ours(results: Results) -> str:
    resets = _avg(results)["overfit_resets"]
    curves = results["averaging_ptb"]["overfit"]["curves"]
    best = min(curves["raw"]["valid_nll"])
    return (f"{len(resets)} resets (first at step {resets[0] if resets else '—'}); best valid loss raw "
            f"{_f(best, 3)} (ppl {_f(math.exp(best), 0)}), 2TA {_f(min(curves['2ta']['valid_nll']), 3)}")


def _basin_scale(results: Results) -> str:
    b = results["averaging_basin"]["settings"]
    land = results["averaging_basin"]["landscape"]
    return (f"synthetic: a tilted double well (barriers {land['barrier_a']:.2f} out of the start basin, "
            f"{land['barrier_b']:.2f} back; the new basin {land['depth_gap']:.2f} deeper) beside {b['dims']:,} noisy "
            f"quadratic directions; {len(b['seeds'])} seeds × {b['steps']:,} SGD steps at lr {b['lr']:g}; E = "
            f"{b['eval_every']} steps; the exact loss as validation loss{_ptb_resets(results)}")


def _ptb_resets(results: Results) -> str:
    """Why Fig. 3.6 runs on a synthetic landscape: how often the PTB main run's 2TA reset its averages."""
    actions = results.get("averaging_ptb", {}).get("main", {}).get("curves", {}).get("2ta", {}).get("action")
    if not actions:
        return ""
    resets = sum(a in ("reset_long", "reset_short") for a in actions)
    switches = sum(a == "switch" for a in actions)
    if resets:
        return f"; the PTB main run's 2TA reset {resets} time{'s' * (resets > 1)} and switched {switches} times"
    return (f"; the PTB main run's 2TA never reset ({switches} switches), so the event is shown on a landscape built "
            "to produce it")


def _basin_ours(results: Results) -> str:
    r = results["averaging_basin"]
    judged = judged_entries(r)
    seeds = {seed for seed, _ in judged}
    entered = [run for run in r["runs"] if run["entry"] is not None]
    near = [str(run["seed"]) for run in entered if run["seed"] not in seeds]
    where = ", ".join(str(events["entry"] + 1) for _, events in judged)
    return (f"synthetic landscape: {len(entered)} of {len(r['runs'])} runs settled in the new basin; the "
            f"{len(judged)} that entered at least "
            f"{ENTRY_MARGIN} evaluations from their start and end are judged (entered at evaluations {where})"
            + (f"; not judged, too near the start or end: seed{'s' if len(near) > 1 else ''} {', '.join(near)}"
               if near else ""))


def _basin_verdict(results: Results) -> tuple[str, str]:
    """M-F3.6's claim (:data:`paperlib.experiments.averaging.claims.BASIN_CLAIMS`), on the synthetic runs."""
    return _claim_verdict(BASIN_CLAIMS["M-F3.6"](results["averaging_basin"]))
