"""The numbers behind each comparison of the PTB MICMCO claims (:mod:`paperlib.experiments.micmco.ptb.claims`):
the hypervolumes, frontier NLLs and best NLLs of the compared curves as the stage computes them
(:func:`~paperlib.experiments.micmco.ptb.micmco_ptb.compare_hypervolumes` on the same curves, reference margin and
KL cap), what says whether the compared curves had learned anything (:func:`_compared`, :func:`_points`), and one
measuring function per claim that turns a comparison key into what the index shows, the gap in the thesis'
direction and the numbers a rule reads. Which claim a function measures, and how its gap is judged, is
:mod:`~paperlib.experiments.micmco.ptb.claims`'s business.

Pure Python at import: the stage's functions and :mod:`paperlib.experiments.micmco.synthetic.claims` (both load
torch) are imported inside the functions that need them.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Mapping, Sequence

from paperlib.experiments.micmco.ptb.curve_names import _BASES, _base, _objective, plain_key
from paperlib.experiments.micmco.seed_spread import Spread, ladder_spreads, standing_in

Results = Mapping[str, Any]
# The seed spreads a budget ladder measured for hypervolume gaps at the stage's budget, keyed by the ladder's two
# curves (:func:`seed_margins`).
Spreads = Mapping[tuple[str, str], Spread]
# Melis §5.7.2 on Fig. 5.12: discrete and continuous latents on par "up to an average KL of about 0.5"; the same level
# stands for Fig. 5.8's "high latent usage", which the thesis gives no number for.
ON_PAR_KL = 0.5
SMALLER_SHARE = 0.5  # "not nearly to the extent observed on the training set": below half the training-fit gain


# -- the numbers behind each comparison ---------------------------------------------------------------------------

Measured = tuple[str, "float | None", dict]  # (shown, gap in the thesis' direction or None, numbers)


def hv_tie() -> float:
    """The hypervolume tie (:data:`paperlib.experiments.micmco.synthetic.micmco_synthetic.HV_TIE`; torch only when a claim is
    judged)."""
    from paperlib.experiments.micmco.synthetic.micmco_synthetic import HV_TIE

    return HV_TIE


def frontier_tie() -> float:
    """The tie of a frontier-NLL comparison (:data:`FRONTIER`), in nats per token: the stage's perplexity tolerance
    (:data:`paperlib.experiments.micmco.ptb.micmco_ptb.PPL_TOLERANCE`, 3%) as a gap in NLL, ln(1 + tolerance); one
    seed's trials measure no spread to tie within. Torch only when a claim is judged."""
    from paperlib.experiments.micmco.ptb.micmco_ptb import PPL_TOLERANCE

    return math.log1p(PPL_TOLERANCE)


def _hv(results: Results, names: list[str], cap: float | None = None) -> dict[str, float | None]:
    """Normalised hypervolumes of ``names`` on their common reference, as the stage compares them."""
    from paperlib.experiments.micmco.ptb.micmco_ptb import compare_hypervolumes  # torch only when a claim is judged

    st = results["settings"]
    return compare_hypervolumes(results["curves"], names, st["hv_margin"], st["kl_cap"] if cap is None else cap
                                )["hypervolume"]


def _configurations(fig: str) -> list[str]:
    from paperlib.experiments.micmco.ptb.micmco_ptb import FIGURES

    return list(FIGURES[fig].configurations)


def pass_share(steps: int, batch_size: int, sentences: int) -> float:
    """How many passes over ``sentences`` training sentences ``steps`` steps of ``batch_size`` sentences make."""
    return steps * batch_size / sentences


def passes(steps: int, batch_size: int, sentences: int | None, names: Sequence[str]) -> list[float]:
    """How many passes over the ``sentences`` training sentences each of curves ``names`` trained for, at a budget
    of ``steps`` steps of ``batch_size`` sentences times each curve's compute factors; empty where the training split
    is not recorded."""
    from paperlib.experiments.micmco.ptb.micmco_ptb import CURVES

    if not sentences:
        return []
    return [pass_share(steps * CURVES[n].steps_factor, batch_size * CURVES[n].batch_factor, sentences) for n in names]


def _passes(results: Results, names: Sequence[str]) -> list[float]:
    """:func:`passes` at the stage's own budget."""
    st = results["settings"]
    return passes(st.get("steps", 0), st.get("batch_size", 0), results.get("data", {}).get("train_sentences"), names)


def lead(better: str, worse: str, x: float, y: float, seed_margin: float | None = None) -> tuple[str, float]:
    """ "HV <better> x vs <worse> y, <reading>" and the gap x - y (the thesis: positive, beyond the margin): the
    fixed hypervolume tie, or ``seed_margin`` where a budget ladder's seed spread stands in for it
    (:func:`seed_margins`)."""
    tie, gap = (hv_tie(), x - y) if seed_margin is None else (seed_margin, x - y)
    margin = f"the {tie} tie margin" if seed_margin is None else f"the {tie:.4f} seed margin"
    by = f"{abs(gap):.3f}"
    by = f"{abs(gap):.4f}" if float(by) == round(tie, 3) else by  # 0.0196 reads 0.0196, not 0.020, beside 0.02
    if gap > tie:
        reading = f"{better} ahead of {worse} by {by}, more than {margin}"
    elif gap > 0:
        reading = f"{better} ahead of {worse} by only {by}, inside {margin}: no difference detected"
    elif gap == 0:
        reading = "no lead (equal HV)"
    elif gap >= -tie:
        reading = f"{better} behind {worse} by {by}, inside {margin}: no difference detected"
    else:
        reading = f"{better} behind {worse} by {by}: the opposite of the thesis"
    return f"HV {better} {x:.3f} vs {worse} {y:.3f}, {reading}", gap


def _led(better: str, worse: str, x: float, y: float, seed_margin: float | None = None) -> Measured:
    """:func:`lead` with its numbers: the seed margin where one was measured, and the larger of the two
    hypervolumes (:attr:`Reading.below_tie`)."""
    shown, gap = lead(better, worse, x, y, seed_margin)
    return shown, gap, {**_seeded(seed_margin), "larger HV": max(x, y)}


def _finite(trial: Mapping[str, Any]) -> bool:
    return isinstance(trial.get("nll"), (int, float)) and math.isfinite(trial["nll"])


def lowest_nll(trials: list[Mapping[str, Any]]) -> float:
    """The lowest finite NLL among ``trials`` (inf without one)."""
    return min((t["nll"] for t in trials if _finite(t)), default=math.inf)


def _lowest_trial(trials: list[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    return min((t for t in trials if _finite(t)), key=lambda t: t["nll"], default=None)


def _kls(trials: list[Mapping[str, Any]]) -> list[tuple[float, float]]:
    """(KL, NLL) of ``trials``' finite ones."""
    return [(t["kl"], t["nll"]) for t in trials if _finite(t) and isinstance(t.get("kl"), (int, float))]


def frontier_nll(trials: list[Mapping[str, Any]], kl: float) -> float:
    """The Pareto frontier of ``trials`` (minimise NLL, maximise KL) at latent usage ``kl``: the lowest finite NLL
    among the trials with KL >= ``kl`` (inf without one)."""
    return min((nll for k, nll in _kls(trials) if k >= kl), default=math.inf)


def _compared(results: Results, names: Sequence[str]) -> dict:
    """What says whether the curves a comparison sets against each other had learned anything: ``{"compared NLL":
    {curve: its lowest NLL}}``, read against a model without context
    (:func:`paperlib.experiments.micmco.ptb.untestable.at_unigram_level`); :func:`_points` for frontier points."""
    return {"compared NLL": {n: lowest_nll(results["curves"][n]["trials"]) for n in names}}


def _points(frontier: Mapping[str, float], kl: float) -> dict:
    """:func:`_compared` for a comparison of frontier points at latent usage ``kl``: each curve's frontier NLL there
    (``frontier``), with ``"compared at KL": kl``."""
    return {"compared NLL": dict(frontier), "compared at KL": kl}


def diverged_trials(curve: Mapping[str, Any]) -> list[int]:
    """The numbers of ``curve``'s trials without a finite NLL (diverged or failed)."""
    return [t.get("number", i) for i, t in enumerate(curve["trials"]) if not _finite(t)]


def _max_kl(curve: Mapping[str, Any]) -> float:
    """The largest KL among ``curve``'s finite trials (0 without one)."""
    return max((t["kl"] for t in curve["trials"] if _finite(t) and isinstance(t.get("kl"), (int, float))),
               default=0.0)


def discrete_cap(results: Results) -> float:
    """The KL cap of the discrete-vs-continuous comparison: the most the categorical latents carry per token
    (``num_categorical * ln(categories)`` per sentence over the training-fit sentences' mean length), at most the
    profile's cap."""
    st, data = results["settings"], results.get("data", {})
    sentences, tokens, latents = data.get("train_eval_sentences"), data.get("train_eval_tokens"), \
        st.get("num_categorical")
    if not (sentences and tokens and latents):
        return st["kl_cap"]
    return min(st["kl_cap"], latents * math.log(st["categories"]) * sentences / tokens)


def seed_margins(results: Results, ladder: Results | None) -> Spreads:
    """The hypervolume gaps whose seed spread was measured: (better curve, worse curve) -> the spread of one seed's
    gap that the budget ladder (same profile) measured at the stage's budget, where one of its "better" ladders
    compares exactly these two curves (:func:`paperlib.experiments.micmco.seed_spread.ladder_spreads`). It replaces
    the fixed tie (never falling below it) only where the ladder's rung repeated the stage's run; elsewhere the tie
    decides and the spread is shown beside it."""
    return ladder_spreads(results, ladder, hv_tie())


def _beside(spread: Spread | None) -> str:
    return "" if spread is None else f" ({spread.shown(hv_tie())})"


def _seeded(margin: float | None) -> dict:
    return {} if margin is None else {"seed margin": margin}


def _present(results: Results, names: list[str]) -> list[str]:
    return [n for n in names if n in results["curves"]]


def _masks(results: Results, key: str, spreads: Spreads | None = None) -> Measured:
    # key: a 16-sample estimator, e.g. "dreg16_kl"
    shared, naive = f"{key}.shared", f"{key}.naive"
    hv, spread = _hv(results, [shared, naive]), (spreads or {}).get((shared, naive))
    shown, gap, numbers = _led("shared", "naive", hv[shared], hv[naive], standing_in(spread))
    return (f"{plain_key(key, results['curves'])}: {shown}{_beside(spread)}", gap,
            {**numbers, **_compared(results, [shared, naive])})


def _samples(results: Results, key: str, spreads: Spreads | None = None) -> Measured:
    # key: "<figure> <16-sample curve>"
    name = key.split(" ", 1)[1]
    base, regime = _base(name), name.split(".", 1)[1]
    one = f"{base}1.{regime}"
    hv = _hv(results, [one, *(f"{base}16_{o}.{regime}" for o in ("kl", "renyi"))])
    spread = (spreads or {}).get((name, one))
    if spread is not None:  # the ladder's gap is on the two curves' reference, this one on the three curves'
        spread = replace(spread, differs="; ".join(x for x in (
            spread.differs, "the ladder's gap is on the reference of its two curves, the stage's on that of the 1-, "
            "16 KL- and 16 Rényi-sample curves") if x))
    shown, gap, numbers = _led("16", "1", hv[name], hv[one], standing_in(spread))
    return (f"{plain_key(key, results['curves'])}: {shown}{_beside(spread)}", gap,
            {**numbers, **_compared(results, [name, one])})


def _discrete(results: Results, key: str) -> Measured:  # key: the objective
    discrete, continuous = f"vimco16_{key}.train", f"dreg16_{key}.train"
    hv = _hv(results, [discrete, continuous], discrete_cap(results))
    shown, gap, numbers = _led("VIMCO 16", "DReG 16", hv[discrete], hv[continuous])
    return f"{_BASES[key]}: {shown}", gap, {**numbers, **_compared(results, [discrete, continuous])}


def _power(results: Results, key: str) -> Measured:  # key: "<figure> power > KL" or "<figure> Rényi > power"
    fig, better, _, worse = key.split()
    names = _configurations(fig)
    by_objective = {_objective(n): n for n in names}
    hv = {_objective(n): v for n, v in _hv(results, names).items()}
    shown, gap, numbers = _led(better, worse, hv[better], hv[worse])
    return (f"Fig. {fig} {_BASES[_base(names[0])]} 16: {shown}", gap,
            {**numbers, **_compared(results, [by_objective[better], by_objective[worse]])})


def _trials_note(results: Results, name: str, tag: str) -> str:
    """ " (<tag>: k of its n trials finite, trials ... diverged)" for a curve some of whose trials diverged, else
    empty: its hypervolume rests on the finite ones alone."""
    curve = results["curves"][name]
    lost = diverged_trials(curve)
    if not lost:
        return ""
    n = len(curve["trials"])
    return (f" ({tag}: {n - len(lost)} of its {n} trials finite, trial{'s' if len(lost) > 1 else ''} "
            f"{', '.join(map(str, lost))} diverged)")


def _both_terms(results: Results, key: str) -> Measured:  # key: "<figure> <objective> 16/16 > <16/1 or 1/16>"
    fig, objective, _, _, other = key.split()
    names = [n for n in _configurations(fig) if n in results["curves"]]
    base = _base(names[0])
    worse = f"{base}16-1.train" if other == "16/1" else f"{base}1-16_{objective}.train"
    hv = _hv(results, names)
    both = f"{base}16_{objective}.train"
    shown, gap, numbers = _led("16/16", other, hv[both], hv[worse])
    return (f"Fig. {fig} {_BASES[base]} {_BASES[objective]}: {shown}{_trials_note(results, worse, other)}", gap,
            {**numbers, **_compared(results, [both, worse])})


def _equal_compute(results: Results, key: str) -> tuple[str, str, list[str], str]:
    """Equal-compute comparison ``key`` ("<figure> ... <T×16 or bs×16>"): the figure, its single-sample run with 16x
    compute, the figure's 16-sample curves and the run's label."""
    fig, tag = key.split()[0], key.split()[-1]
    names = _configurations(fig)
    return fig, f"{names[0]}.{'T16' if tag == 'T×16' else 'bs16'}", [n for n in names if "16_" in n], f"1 {tag}"


def _equal_compute_lead(results: Results, key: str) -> Measured:
    """The better 16-sample curve's hypervolume against the run with 16x compute, on the reference of these three
    curves alone (the figure's reference is set by its lowest NLL, which one run alone may reach)."""
    fig, name, many, label = _equal_compute(results, key)
    hv = _hv(results, [name, *many])
    best = max(many, key=lambda n: hv[n])
    shown, gap, numbers = _led("best 16", label, hv[best], hv[name])
    return f"Fig. {fig} {label}: {shown}", gap, {**numbers, **_compared(results, [best, name])}


def _generalise(results: Results, key: str) -> Measured:  # key: "<figure> 16 > 1 <T×16 or bs×16>"
    """:func:`_equal_compute_lead`, with the passes over the training sentences of the longest-trained curve compared
    (``numbers["most passes"]``: a sentence about overfitting is tested only where a run could overfit)."""
    _, name, many, _ = _equal_compute(results, key)
    shown, gap, numbers = _equal_compute_lead(results, key)
    return shown, gap, {**numbers, "most passes": max(_passes(results, [name, *many]), default=None)}


def _passes_note(results: Results, name: str, many: Sequence[str]) -> str:
    """ "the run saw x% of one pass over the training sentences, the 16-sample curves y%" (empty where the training
    split is not recorded): at equal compute the run sees 16 times the sentences, which decides its lead while
    neither has completed a pass."""
    shares = _passes(results, [name, *many])
    if not shares:
        return ""
    return (f"the run saw {shares[0]:.0%} of one pass over the training sentences, the 16-sample curves "
            f"{max(shares[1:], default=0.0):.0%}")


def _point_note(curve: Mapping[str, Any], kl: float) -> str:
    """How a curve's frontier point at ``kl`` stands in its own trials: how far above the curve's best NLL, and how
    many of its trials reach that KL (with a handful of trials per curve, a point far above the best that one trial
    alone reaches is a single draw of the search, not a tuned point of the tradeoff)."""
    trials = curve["trials"]
    above = frontier_nll(trials, kl) - lowest_nll(trials)
    reach = sum(k >= kl for k, _ in _kls(trials))
    return (f"{curve['label']}'s point lies {above:.3f} nats above its best NLL, and {reach} of its "
            f"{len(trials)} trials reach{'es' if reach == 1 else ''} that KL")


def _frontier_lead(better: str, worse: str, x: float, y: float, who: str) -> tuple[str, float]:
    """ "frontier NLL <better> x vs <worse> y, <who> lower by ..." and the gap y - x (the thesis: ``better``, which
    ``who`` names in the reading, lower; positive beyond :func:`frontier_tie`)."""
    tie, gap = frontier_tie(), y - x
    if gap > tie:
        reading = f"{who} lower by {gap:.4f}, more than the {tie:.4f}-nat tie"
    elif gap > 0:
        reading = f"{who} lower by only {gap:.4f}, inside the {tie:.4f}-nat tie: no difference detected"
    elif gap == 0:
        reading = "no lead (equal NLL)"
    elif gap >= -tie:
        reading = f"{who} higher by only {-gap:.4f}, inside the {tie:.4f}-nat tie, against the thesis' way"
    else:
        reading = f"{who} higher by {-gap:.4f}: the opposite of the thesis"
    return f"frontier NLL {better} {x:.4f} vs {worse} {y:.4f}, {reading}", gap


def _tradeoff(results: Results, key: str) -> Measured:  # key: "<figure> 1 <T×16 or bs×16>"
    """The 16-sample curves against the run with 16x compute at the highest KL both reach (``k``: the smaller of the
    run's largest trial KL and the 16-sample curves' largest): the better 16-sample frontier NLL there against the
    run's, the gap positive when the 16-sample one is lower. Untested (``numbers["short"]``) when ``k`` does not
    exceed the KL of the run's lowest-NLL trial: the run's frontier there is its best fit, which the best-fit part
    compares, and no higher latent usage is left to judge."""
    fig, name, many, label = _equal_compute(results, key)
    curves = results["curves"]
    run, sixteen = _kls(curves[name]["trials"]), [p for n in many for p in _kls(curves[n]["trials"])]
    best = min(((kl, nll) for kl, nll in run), key=lambda p: (p[1], p[0]), default=None)  # the lowest KL of a tie
    if not run or not sixteen or best is None:
        return f"Fig. {fig} {label}: no finite trial to compare", None, {"short": 1.0, "reach": 0.0}
    k = min(max(kl for kl, _ in run), max(kl for kl, _ in sixteen))
    at = {n: frontier_nll(curves[n]["trials"], k) for n in many}
    better = min(many, key=lambda n: at[n])
    x, y = at[better], frontier_nll(curves[name]["trials"], k)
    short = k <= best[0]
    where = (f"at KL {k:.3f} (the highest KL both the run's and the 16-sample curves' trials reach; the run's best fit "
             f"lies at KL {best[0]:.3f})")
    if short or not math.isfinite(x) or not math.isfinite(y):
        return (f"Fig. {fig} {label}: {where}", None, {"short": 1.0, "reach": k, "best fit KL": best[0]})
    shown, gap = _frontier_lead(f"best 16 ({curves[better]['label']})", label, x, y, "16 samples")
    passes = _passes_note(results, name, many)
    return (f"Fig. {fig} {label}: {where}, {shown} ({_point_note(curves[better], k)}; "
            f"{_point_note(curves[name], k)}){'; ' + passes if passes else ''}", gap,
            {"short": 0.0, "reach": k, "best fit KL": best[0], **_points({better: x, name: y}, k)})


def _renyi_high(results: Results, key: str) -> Measured:  # key: "5.8 Rényi vs KL"
    """Fig. 5.8 at high latent usage (KL :data:`ON_PAR_KL`): DReG 16 Rényi's frontier NLL there against DReG 16
    KL's on the training fit, the gap positive when Rényi's is lower; untested (``numbers["short"]``) unless both
    curves have a trial at that KL or above."""
    names = ("dreg16_renyi.train", "dreg16_kl.train")
    curves = results["curves"]
    reach = {n: _max_kl(curves[n]) for n in names}
    numbers = {"short": float(min(reach.values()) < ON_PAR_KL), **{f"reach {_objective(n)}": reach[n] for n in names}}
    if numbers["short"]:
        return ("Fig. 5.8: the DReG 16 training-fit trials reach at most KL "
                + ", ".join(f"{reach[n]:.3f} ({_objective(n)})" for n in names), None, numbers)
    x, y = (frontier_nll(curves[n]["trials"], ON_PAR_KL) for n in names)
    shown, gap = _frontier_lead("Rényi 16", "KL 16", x, y, "Rényi")
    return (f"Fig. 5.8 DReG 16 at KL {ON_PAR_KL} or above (training fit): {shown}", gap,
            {**numbers, **_points(dict(zip(names, (x, y))), ON_PAR_KL)})


def _best_fit(results: Results, key: str) -> Measured:  # key: "<figure> 1 <T×16 or bs×16>"
    fig, name, many, label = _equal_compute(results, key)
    lowest = lowest_nll(results["curves"][name]["trials"])
    best = min(many, key=lambda n: lowest_nll(results["curves"][n]["trials"]))
    best_16 = lowest_nll(results["curves"][best]["trials"])
    gap = best_16 - lowest
    trials = len(results["curves"][name]["trials"])
    passes = _passes_note(results, name, many)
    return (f"Fig. {fig} {label}: lowest training NLL {lowest:.4f} vs the 16-sample estimators' {best_16:.4f}, "
            + (f"lower by {gap:.4f}" if gap > 0 else f"not lower ({-gap:.4f} higher)")
            + f" (each the lowest of one seed's {trials} tuned trials per curve{'; ' + passes if passes else ''})",
            gap, _compared(results, [best, name]))


def _no_gain(results: Results, key: str) -> Measured:  # key: the objective
    one, many = "dreg1.shared", f"dreg16_{key}.naive"
    hv = _hv(results, [one, *_present(results, ["dreg16_kl.naive", "dreg16_renyi.naive"])])
    gain, tie = hv[many] - hv[one], hv_tie()
    train = ""
    fit = ["dreg1.train", f"dreg16_{key}.train"]
    if all(n in results["curves"] for n in fit):
        fit_hv = _hv(results, [fit[0], *_present(results, ["dreg16_kl.train", "dreg16_renyi.train"])])
        train = f" (on the training fit, Fig. 5.8: {fit_hv[fit[1]] - fit_hv[fit[0]]:+.3f})"
    return (f"DReG 16 {_BASES[key]}: HV 16 {hv[many]:.3f} vs 1 {hv[one]:.3f}, a gain of {gain:+.3f}, "
            f"{'within' if gain <= tie else 'beyond'} the {tie} tie{train}", None,
            {"holds": float(gain <= tie), "larger HV": max(hv[many], hv[one]), **_compared(results, [many, one])})


def _vimco_gains(results: Results, objective: str) -> tuple[float, float, float]:
    """VIMCO 16's hypervolume gain over VIMCO 1 on validation with naive dropout (on the family's curves there),
    and the two hypervolumes: (gain, HV 16, HV 1)."""
    one, many = "vimco1.shared", f"vimco16_{objective}.naive"
    hv = _hv(results, [one, *_present(results, ["vimco16_kl.naive", "vimco16_renyi.naive"])])
    return hv[many] - hv[one], hv[many], hv[one]


def _discrete_gain(results: Results, key: str) -> Measured:  # key: the objective
    _, x, y = _vimco_gains(results, key)
    shown, gap, numbers = _led("16", "1", x, y)
    return (f"VIMCO 16 {_BASES[key]}: {shown}", gap,
            {**numbers, **_compared(results, [f"vimco16_{key}.naive", "vimco1.shared"])})


def _smaller_gain(results: Results, key: str) -> Measured:  # key: the objective
    gain, x, y = _vimco_gains(results, key)
    one, many = "vimco1.train", f"vimco16_{key}.train"
    fit = _hv(results, [one, *_present(results, ["vimco16_kl.train", "vimco16_renyi.train"])])
    train = fit[many] - fit[one]
    share = gain / train if train > 0 else math.inf
    holds = train > 0 and gain < SMALLER_SHARE * train
    of = f"{share:.0%} of it" if math.isfinite(share) else "no training-fit gain to compare with"
    return (f"VIMCO 16 {_BASES[key]}: validation gain {gain:+.3f} (HV {x:.3f} vs {y:.3f}) against the training-fit "
            f"gain {train:+.3f} (Fig. 5.9, HV {fit[many]:.3f} vs {fit[one]:.3f}): {of}", None,
            {"holds": float(holds), "share": share if math.isfinite(share) else None, "training gain": train,
             **_compared(results, [f"vimco16_{key}.naive", "vimco1.shared", many, one])})


def _discrete_against(results: Results, key: str, regime: str) -> Measured:
    continuous, discrete = f"dreg16_{key}.{regime}", f"vimco16_{key}.{regime}"
    hv = _hv(results, [continuous, discrete], discrete_cap(results))
    shown, gap, numbers = _led("DReG 16", "VIMCO 16", hv[continuous], hv[discrete])
    return f"{_BASES[key]}: {shown}", gap, {**numbers, **_compared(results, [continuous, discrete])}


def _discrete_trails(results: Results, key: str) -> Measured:  # key: the objective
    return _discrete_against(results, key, "naive")


def _degrades(results: Results, key: str) -> Measured:  # key: the objective
    """:func:`_discrete_against` with L2, with the passes over the training sentences of the longest-trained curve
    (``numbers["most passes"]``): the sentence sets validation against the training fit, which only overfitting can
    part."""
    shown, gap, numbers = _discrete_against(results, key, "l2")
    shares = _passes(results, [f"dreg16_{key}.l2", f"vimco16_{key}.l2"])
    return shown, gap, {**numbers, "most passes": max(shares, default=None), "least passes": min(shares, default=None)}


def _on_par(results: Results, key: str) -> Measured:  # key: the objective
    """Fig. 5.12's "on par up to an average KL of about 0.5": the two frontiers' hypervolumes over KL 0 to the smaller
    of 0.5 and the largest KL both curves' trials reach, shown normalised over that range, judged on the areas as
    shares of the box of the whole KL width (0 to the stage's KL cap, the box of the figures' hypervolumes, on the two
    curves' reference NLL): the tie is a share of that box, the size of gap at which the budget ladder measured one
    seed's noise, and a range a few hundredths of the box wide would otherwise read gaps many times finer than that
    noise. The evidence says how little a narrow range can hold (the zoomed gap the tie then allows). ``larger HV``
    is on the whole width too, for the gate that names a comparison whose hypervolumes all lie below the tie as not
    run."""
    discrete, continuous = f"vimco16_{key}.shared", f"dreg16_{key}.shared"
    reach = min(_max_kl(results["curves"][n]) for n in (discrete, continuous))
    cap = min(ON_PAR_KL, reach)
    if cap <= 0:
        return f"{_BASES[key]}: no KL range both curves reach", None, {"holds": 0.0, "reach": reach}
    hv = _hv(results, [discrete, continuous], cap)
    x, y, tie, whole = hv[discrete], hv[continuous], hv_tie(), results["settings"]["kl_cap"]
    share = min(cap / whole, 1.0)  # the range's share of the box's KL width
    gap = abs(x - y) * share
    ahead = "VIMCO 16" if x > y else "DReG 16"
    zoom = (f" (normalised over this KL range, {share:.0%} of the box's KL width to {whole}; as shares of the whole "
            f"box: VIMCO 16 {x * share:.4f} vs DReG 16 {y * share:.4f}: a range this narrow holds at most {share:.3f}, "
            f"so the tie allows a zoomed gap up to {min(tie / share, 1.0):.2f})" if share < 1.0 else "")
    return (f"{_BASES[key]}: on KL 0 to {cap:.3f} (as far as both curves' trials reach), HV VIMCO 16 {x:.3f} vs "
            f"DReG 16 {y:.3f}{zoom}, {ahead} ahead by {gap:.4f} as a share of the whole box, "
            f"{'within' if gap <= tie else 'beyond'} the {tie} tie",
            None, {"holds": float(gap <= tie), "reach": reach, "larger HV": max(x, y) * share,
                   **_compared(results, [discrete, continuous])})


def _alike(results: Results, key: str) -> Measured:  # key: the figure
    from paperlib.experiments.micmco.ptb.micmco_ptb import PPL_TOLERANCE

    runs = [n for n in _configurations(key) if "16_" not in n]
    lowest = {n: _lowest_trial(results["curves"][n]["trials"]) for n in runs}
    if any(t is None for t in lowest.values()):
        return f"Fig. {key}: a single-sample run has no finite trial", None, {"holds": 0.0}
    nlls = [lowest[n]["nll"] for n in runs]
    spread = max(nlls) - min(nlls)
    change = math.exp(spread) - 1.0
    labels = " / ".join(results["curves"][n]["label"] for n in runs)
    values = " / ".join(f"{v:.3f}" for v in nlls)
    kls = " / ".join(f"{lowest[n]['kl']:.3f}" for n in runs)
    return (f"Fig. {key}: lowest validation NLL {labels} = {values} (at KL {kls}), {spread:.3f} nats apart, "
            f"{100 * change:.0f}% in perplexity (at most {PPL_TOLERANCE:.0%})", None,
            {"holds": float(change <= PPL_TOLERANCE), "spread": spread,
             "least passes": min(_passes(results, runs), default=None), **_compared(results, runs)})


def _table_rows(results: Results, hidden: int) -> dict[str, Mapping[str, Any]]:
    return {r["column"]: r for r in results["table_5_1"] if r.get("curve") and r["hidden_size"] == hidden}


def _perplexity(results: Results, key: str) -> Measured:  # key: "<DReG or VIMCO> hs <hidden size>"
    label, hidden = key.split(" hs ")
    rows = _table_rows(results, int(hidden))
    single = rows[f"{label} 1 K/R"]
    many = min((r for c, r in rows.items() if c.startswith(f"{label} 16")), key=lambda r: r["test_perplexity"])
    one, best = single["test_perplexity"], many["test_perplexity"]
    change = best / one - 1.0
    shares = _passes(results, [r["curve"] for r in (single, many) if r.get("curve")])
    return f"{key}: test perplexity 1 / best 16 = {one:.1f} / {best:.1f} ({100 * change:+.1f}%)", None, \
        {"change": change, "most passes": max(shares, default=None), **_tested(single, many)}


def _tested(*rows: Mapping[str, Any]) -> dict:
    """:func:`_compared` for Table 5.1's cells: each cell's test NLL (from its perplexity where the row has no NLL),
    keyed by its column and hidden size."""
    return {"compared NLL": {f"{r['column']} hs {r['hidden_size']}": r.get("test_nll", math.log(r["test_perplexity"]))
                             for r in rows}, "compared split": "test"}


def _low_latents(results: Results, key: str) -> Measured:  # key: "<column> hs <hidden size>"
    """The cell's test KL against the stage's low-KL line, with the largest KL its curve's trials reach on validation
    (``numbers["curve max"]``; None without the curve): where none of them lies above the line, it cannot fail
    (:data:`UNTESTABLE`)."""
    from paperlib.experiments.micmco.ptb.micmco_ptb import LOW_KL

    column, hidden = key.rsplit(" hs ", 1)
    row = _table_rows(results, int(hidden))[column]
    kl = row["test_kl"]
    curve = results["curves"].get(row["curve"])
    top = None if curve is None else _max_kl(curve)
    reach = "" if top is None else f"; its curve's trials reach KL {top:.3f} on validation"
    return f"{key}: test KL {kl:.3f}{reach}", None, {"kl": kl, "holds": float(kl <= LOW_KL), "curve max": top,
                                                     **_tested(row)}


def _dropout(results: Results, key: str) -> Measured:  # key: the estimator family
    """The best validation NLL with naive dropout (Fig. 5.10's curves of family ``key``; its single-sample curve is
    the shared-mask run, the same masks with one sample) against the best with L2 (Fig. 5.11's), each the lowest NLL
    over one seed's tuned trials; the gap positive when dropout's is lower."""
    best = {}
    for fig in ("5.10", "5.11"):
        names = [n for n in _present(results, _configurations(fig)) if _base(n) == key
                 and lowest_nll(results["curves"][n]["trials"]) < math.inf]
        name = min(names, key=lambda n: lowest_nll(results["curves"][n]["trials"]))
        best[fig] = (name, lowest_nll(results["curves"][name]["trials"]))
    (dropout, x), (l2, y) = best["5.10"], best["5.11"]
    gap = y - x
    label = {n: results["curves"][n]["label"] for n in (dropout, l2)}
    by = f"{abs(gap):.4f}"
    reading = (f"dropout lower by {by}" if gap > 0 else "no lead" if gap == 0 else
               f"dropout higher by {by}: the opposite of the thesis")
    trials = len(results["curves"][dropout]["trials"])
    return (f"{_BASES[key]}: best validation NLL naive dropout {x:.4f} ({label[dropout]}) vs L2 {y:.4f} "
            f"({label[l2]}), {reading} (each the lowest of one seed's {trials} tuned trials per curve)", gap,
            {"most passes": max(_passes(results, [dropout, l2]), default=None), **_compared(results, [dropout, l2])})


# -- which comparisons the curves that ran allow ---------------------------------------------------------------


def _ran(results: Results, name: str) -> bool:
    """Curve ``name`` ran and has a finite trial (a curve whose every trial diverged has nothing to compare)."""
    return name in results["curves"] and lowest_nll(results["curves"][name]["trials"]) < math.inf


def _objectives(results: Results, *patterns: str) -> list[str]:
    """The objectives (kl, renyi) for which every curve ``patterns`` names (with ``{o}``) ran with a finite trial."""
    return [o for o in ("kl", "renyi") if all(_ran(results, p.format(o=o)) for p in patterns)]


def _equal_compute_keys(results: Results, figures: tuple[str, ...]) -> list[str]:
    keys = []
    for fig in figures:
        names = _configurations(fig)  # the single-sample run, its two 16x variants, then the 16-sample curves
        if not (all(_ran(results, n) for n in names[:3]) and any(_ran(results, n) for n in names[3:])):
            continue
        keys += [f"{fig} 1 {tag}" for tag in ("T×16", "bs×16")]
    return keys


def _dropout_keys(results: Results) -> list[str]:
    """The base estimators with a finite trial both among Fig. 5.10's curves (naive dropout) and Fig. 5.11's (L2)."""
    def finite(fig: str, base: str) -> bool:
        return any(lowest_nll(results["curves"][n]["trials"]) < math.inf
                   for n in _present(results, _configurations(fig)) if _base(n) == base)

    return [b for b in ("dreg", "vimco") if finite("5.10", b) and finite("5.11", b)]
