"""Index rows of MICMCO on the synthetic data (Melis §5.7.1): hypervolume comparisons per figure."""

from __future__ import annotations

import math
from typing import Any, Callable

from paperlib.compendium.results_index.text import MissingResult, Results, _f, grouped_reason, index_text
from paperlib.experiments.micmco.synthetic.claims import (Compared, blown_text, blown_up, hv_tie, ladder_spreads,
                                                          tally)
from paperlib.reference.micmco import SYNTHETIC_VOCAB_SIZE


# -- hypervolume comparisons (Melis ch. 5) ------------------------------------------------------


def _counts_short(compared: Compared, tie: str | None = None) -> str:
    """:func:`~paperlib.experiments.micmco.synthetic.claims.counts` for a reason: "both hold", "all 4 the thesis'
    way, inside the tie", "both the other way by 0.001–0.010, inside the 0.02 tie", "1 of 2 holds, 1 the other
    way"."""
    n = len(compared)
    held, noise, other, level, failed = tally(compared)
    every = "it" if n == 1 else "both" if n == 2 else f"all {n}"
    if held == n:
        return f"{every} hold" + ("s" if n == 1 else "")
    if noise == n:
        gaps = sorted(g for _, g in compared if g is not None)
        by = "" if len(gaps) < n else f" by {gaps[0]:.3f}" + (f"–{gaps[-1]:.3f}" if gaps[-1] > gaps[0] else "")
        return f"{every} the thesis' way{by}, inside the {tie or f'{hv_tie()} tie'}"
    if other == n:  # how far, and, against the fixed tie, whether inside it (not counted in the thesis' favour)
        gaps = sorted(-g for _, g in compared if g is not None)
        by = f" by {gaps[0]:.3f}" + (f"–{gaps[-1]:.3f}" if gaps[-1] > gaps[0] else "")
        inside = tie in (None, f"{hv_tie()} tie") and gaps[-1] <= hv_tie()
        return f"{every} the other way{by}" + (f", inside the {hv_tie()} tie" if inside else "")
    if failed == n:
        return f"{every} fail" + ("s" if n == 1 else "")
    text = [f"{held} of {n} hold" + ("s" if held == 1 else "")]
    text += [f"{noise} the thesis' way inside the tie"] if noise else []
    text += [f"{other} the other way"] if other else []
    text += [f"{level} with no lead"] if level else []
    text += [f"{failed} fail" + ("s" if failed == 1 else "")] if failed else []
    return ", ".join(text)


# -- MICMCO synthetic (Melis ch. 5) ------------------------------------------------------------


def _micmco_figure(fig: str, item: str) -> tuple[Callable[[Results], str], Callable[[Results], tuple[str, str]],
                                      Callable[[Results], str]]:
    def curves(results: Results) -> tuple[dict[str, Any], list[str], list[str]]:
        r = results["micmco_synthetic"]
        names = r["figures"][fig]["configurations"]
        have = [n for n in names if n in r["configurations"]]
        if not have:
            raise MissingResult(f"curves of Fig. {fig} (not in this profile's configurations)")
        return r, names, have

    def ours(results: Results) -> str:
        r, names, have = curves(results)
        hv = ", ".join(f"{r['configurations'][n]['label']} {_f(r['configurations'][n]['normalised_hypervolume'], 3)}"
                       for n in have)
        missing = len(names) - len(have)
        # curves most of whose tuned trials ended far above the optimum (Halton corners included)
        blown = [f"{r['configurations'][n]['label']} {bad}/{total}" for n, (bad, total) in blown_up(r).items()
                 if n in have]
        return (f"normalised hypervolume: {hv}" + (f"; {missing} curve(s) not run at this profile" if missing else "")
                + (f"; trials that blew up (NLL > 2 ln V): {', '.join(blown)}" if blown else ""))

    def ours_short(results: Results) -> str:
        r, _, have = curves(results)
        conf = r["configurations"]
        return "HV " + ", ".join(f"{conf[n]['label']} {_f(conf[n]['normalised_hypervolume'], 3)}" for n in have)

    def verdict(results: Results) -> tuple[str, str]:
        """The figure's claim as :func:`paperlib.experiments.micmco.synthetic.claims.figure_claim` judges it (the
        notebook shows the same claims), with how many of its curves were drawn; the reason names the curves most of
        whose trials blew up."""
        from paperlib.experiments.common.claims import Unjudged
        from paperlib.experiments.micmco.synthetic.claims import figure_claim

        r, names, have = curves(results)
        try:
            claim = figure_claim(fig, item, r, results["micmco_synthetic_ladder"] if fig in _MICMCO_LADDERS else None)
        except Unjudged:
            coverage = f"{len(have)}/{len(names)} curves drawn"
            return (f"partly: {coverage}; no numeric rule for this figure's claim "
                    f"('{r['figures'][fig]['thesis_says']}'), compare the frontiers in the figure",
                    "no numeric rule for this figure's claim; compare the frontiers in the figure")
        labels = {n: conf["label"] for n, conf in r["configurations"].items()}
        note = "; ".join([claim.note] * bool(claim.note) + blown_text(have, blown_up(r), labels))
        reason = grouped_reason([(p.label, p.verdict) for p in claim.parts], note)
        return f"{index_text(claim)}; {len(have)}/{len(names)} curves drawn", reason
    return ours, verdict, ours_short


# The figures with a budget ladder (paperlib.experiments.micmco.synthetic.ladder.LADDERS, without importing torch).
_MICMCO_LADDERS = ("5.2", "5.3", "5.6")


def _micmco_scale(results: Results) -> str:
    """The stage's scale, and how far from converged its one-seed curves are: the budget ladder's mean hypervolumes
    over its seeds (same settings) from the stage's budget to the ladder's top rung, and the laddered gaps whose
    sign changes on the way (:func:`_micmco_budget`)."""
    r = results["micmco_synthetic"]
    st, configs = r["settings"], r["configurations"]
    return (f"vocabulary {math.exp(r['optimum_nll']):,.0f} (thesis {SYNTHETIC_VOCAB_SIZE:,}), {st['steps']} steps, "
            f"{len(next(iter(configs.values()))['trials'])} tuned trials per curve, one seed (seed {st['seed']}), "
            f"{len(configs)} curves; hypervolume box: NLL from ln V to ln V + {st['hypervolume_margin']} nats, MI "
            "from 0 to ln V" + search_dimensions({c.get("objective"): c.get("search_space") for c in configs.values()})
            + _micmco_budget(results) + _seed_noise(results))


_OBJECTIVES = {"kl": "KL", "renyi": "Rényi", "power": "power"}
_HYPERPARAMETERS = {"learning_rate": "learning rate", "lam": "λ", "alpha": "α"}


def search_dimensions(spaces: dict[Any, Any]) -> str:
    """"; each curve's trials search its objective's Table 5.2 hyperparameters: KL learning rate, λ; ..." from the
    search space each objective's curves record (one per objective; those of the KL, Rényi and power objectives),
    and, where the counts differ, that the same number of trials leaves the larger search the less tuned; empty
    without them."""
    order = list(_HYPERPARAMETERS)
    shown = {o: sorted(space, key=lambda h: order.index(h) if h in order else len(order))
             for o, space in spaces.items() if o in _OBJECTIVES and space}
    if len(shown) < 2:
        return ""
    text = "; ".join(f"{_OBJECTIVES[o]} {', '.join(_HYPERPARAMETERS.get(h, h.replace('_', ' ')) for h in space)}"
                     for o, space in sorted(shown.items(), key=lambda x: list(_OBJECTIVES).index(x[0])))
    sizes = {len(space) for space in shown.values()}
    return (f"; each curve's trials search its objective's hyperparameters (Table 5.2): {text}"
            + ("; the same number of trials over more of them leaves that objective the less tuned"
               if len(sizes) > 1 else ""))


def _seed_noise(results: Results) -> str:
    """"; one seed's gap ... spreads by ...": the seed spreads the budget ladder measured for one-seed hypervolume
    gaps at the stage's budget, beside the tie that judges the gaps no ladder measured; empty without them."""
    r, ladder = results["micmco_synthetic"], results.get("micmco_synthetic_ladder")
    spreads = ladder_spreads(r, ladder)
    if not spreads:
        return ""
    label = {name: c["label"] for name, c in r["configurations"].items()}
    each = ", ".join(f"{spread.two_sd:.3f} for {label.get(a, a)} − {label.get(b, b)}"
                     for (a, b), spread in sorted(spreads.items(), key=lambda x: x[1].two_sd))
    use = ("the margin of those gaps (the ladder repeated the stage's run)" if all(x.applies for x in spreads.values())
           else "shown beside those gaps, not their margin (the ladder did not repeat the stage's run)")
    return (f"; one seed's hypervolume gap between two curves spreads by {each} at this budget (twice its sd over the "
            f"budget ladder's {next(iter(spreads.values())).seeds} seeds), {use}; the other gaps, whose spread no "
            f"ladder measured, are judged against the {hv_tie()} tie, and one of theirs below about these spreads may "
            "be seed noise")


def _micmco_budget(results: Results) -> str:
    """"; far from converged: ..." from the budget ladder of the same profile (its rung at the stage's budget and
    its top rung); empty without one."""
    r, ladder = results["micmco_synthetic"], results.get("micmco_synthetic_ladder")
    steps = r["settings"]["steps"]
    if not ladder or ladder.get("profile") != r.get("profile"):
        return ""
    top = max(ladder["settings"]["rungs"])
    grown, flips = {}, []
    for entry in ladder["ladders"].values():
        at = {rung["steps"]: rung for rung in entry["rungs"]}
        if steps not in at or top <= steps:
            continue
        for name, label in zip(entry["curves"], entry["labels"]):
            grown[label] = (at[steps]["curves"][name]["hv"], at[top]["curves"][name]["hv"])
        low, high = at[steps].get("gap"), at[top].get("gap")
        if entry["kind"] == "better" and low is not None and high is not None and (low > 0) != (high > 0):
            flips.append(f"HV({entry['labels'][0]}) − HV({entry['labels'][1]}) changes sign, {low:+.3f} → "
                         f"{high:+.3f}")
    if not grown:
        return ""
    seeds = len(ladder["settings"]["seeds"])
    return (f"; far from converged: in the budget ladder ({seeds} seeds, these settings) the mean normalised "
            f"hypervolume from {steps:,} to {top:,} steps goes "
            + ", ".join(f"{label} {a:.3f} → {b:.3f}" for label, (a, b) in grown.items())
            + (f", and {' and '.join(flips)}" if flips else "")
            + f"; the ladder trains the curves of Figs. {', '.join(ladder['ladders'])} only")
