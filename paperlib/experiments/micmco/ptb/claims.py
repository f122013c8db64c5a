"""The PTB MICMCO figures' and Table 5.1's claims (Melis §5.7.2, §5.B), judged once on ``results/micmco_ptb.json``
and the budget ladder (``results/micmco_ptb_ladder.json``): one :class:`~paperlib.experiments.common.claims.Claim` per
figure (:func:`figure_claim`) and one for Table 5.1 (:func:`table_claim`), read by the results index and the
notebook alike.

A figure's parts are (1) the stage's numeric claims the figure is read for (:data:`FIGURE_CLAIMS`), each on the
figure's own comparisons when the claim spans several figures (its outcome over all of them is counted beside),
and (2) for the rows of :data:`LADDER_ITEMS` the budget ladder's parts
(:func:`paperlib.experiments.micmco.ptb.ladder.ladder_claim_part`); a ladder that could not be read is named as not
run, which keeps the row from "reproduced". Table 5.1's parts are its two claims and its two ladders; cells the
profile did not run are named as not run.

The stage (:func:`paperlib.experiments.micmco.ptb.micmco_ptb.claim_verdicts`) stores per claim whether each comparison held
(``wins``, keyed by figure where a claim spans several); the numbers behind each comparison are recomputed here from
the results' curves and Table 5.1 rows as the stage computed them (:func:`~paperlib.experiments.micmco.ptb.micmco_ptb.
compare_hypervolumes` on the same curves, reference margin and KL cap), never read back from its evidence text. A
hypervolume comparison (the claims in :data:`DIRECTIONAL`) is read by
:func:`~paperlib.experiments.micmco.synthetic.claims.comparison_word`: held (beyond the 0.02 tie) -> reproduced;
the thesis' way inside the tie -> within noise; no lead or the other way -> not reproduced. Where the budget ladder
measured the seed spread of the very same gap at the stage's own budget (:func:`seed_margins`), twice its standard
error replaces the fixed tie for that comparison. Claim 11 (orders kept under batch size and length) is
re-judged here by :data:`KEEPS_ORDER_RULE`, stricter than the stage's record: a pair keeps its order when it is
separated the same way at both settings. The others (perplexity and KL thresholds, best NLLs, spreads) hold or
not. A claim's part verdict over its comparisons is :func:`~paperlib.experiments.common.claims.part_word`.

Pure Python at import: the stage's helpers and :mod:`paperlib.experiments.micmco.synthetic.claims` (both load torch)
are imported inside the functions that need them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from paperlib.experiments.common.claims import Claim, Part, Unjudged, part_word

Results = Mapping[str, Any]

MASKS = "shared dropout masks restore the validation frontiers"
SAMPLES = "multiple samples improve latent usage"
PERPLEXITY = "latents barely change the best perplexity"
LOW_LATENTS = "Table 5.1's optima are at low latent usage"
DROPOUT = "dropout reaches a better best NLL than L2"
DISCRETE = "discrete latents fit the training data better"
POWER = "the power objective is better than KL but behind Rényi"
BOTH_TERMS = "gains need multiple samples in both terms"
GENERALISE = "16 samples generalise better than one sample given the same compute"
COMPUTE = "16x compute buys one sample a better best fit but not a better tradeoff"
KEEPS_ORDER = "batch size and optimisation length shift the curves but keep their order"
SPREAD = "at 256 units the three DReG estimators differ very little"

# The stage's claims each PTB figure is read for.
FIGURE_CLAIMS: dict[str, tuple[str, ...]] = {
    "5.8": (SAMPLES,), "5.9": (SAMPLES, DISCRETE), "5.10": (MASKS,), "5.11": (DROPOUT, SAMPLES),
    "5.12": (MASKS, SAMPLES), "5.13": (COMPUTE,), "5.14": (GENERALISE,), "5.16": (KEEPS_ORDER,),
    "5.17": (KEEPS_ORDER,), "5.18": (SPREAD,), "5.19": (KEEPS_ORDER,), "5.20": (KEEPS_ORDER,), "5.21": (KEEPS_ORDER,),
    "5.22": (BOTH_TERMS,), "5.23": (BOTH_TERMS,), "5.24": (COMPUTE,), "5.25": (GENERALISE,), "5.28": (POWER,),
    "5.29": (POWER,),
}
TABLE = "Table 5.1"
TABLE_CLAIMS = (PERPLEXITY, LOW_LATENTS)
# The rows a budget ladder is a part of (paperlib.experiments.micmco.ptb.ladder.ITEMS, without importing torch).
LADDER_ITEMS: dict[str, tuple[str, ...]] = {"M-F5.8": ("5.8",), "M-F5.9": ("5.9",), "M-F5.10": ("5.10",),
                                            "M-F5.11": ("5.11", "5.11-dropout"), "M-F5.12": ("5.10", "5.12"),
                                            "M-T5.1": ("T5.1-perplexity", "T5.1-latents")}
# The claims whose comparisons are hypervolume gaps in the thesis' direction.
DIRECTIONAL = frozenset({MASKS, SAMPLES, DISCRETE, POWER, BOTH_TERMS, GENERALISE, COMPUTE})
# How each claim's comparisons are judged (paperlib.experiments.common.claims.RULE_KINDS).
READING_KINDS = {**{name: "hypervolume tie" for name in DIRECTIONAL}, COMPUTE: "strict + hypervolume tie",
                 PERPLEXITY: "threshold", LOW_LATENTS: "threshold", DROPOUT: "strict", KEEPS_ORDER: "hypervolume tie",
                 SPREAD: "threshold"}


@dataclass(frozen=True)
class Comparison:
    """One comparison of a stage claim: its ``wins`` key, our numbers in words (``shown``, no verdict word), whether
    it held (the stage's outcome), its HV gap in the thesis' direction (None where it is not one) and the numbers a
    reason may quote (``numbers``)."""

    key: str
    shown: str
    held: bool
    gap: float | None = None
    numbers: Mapping[str, float | None] = field(default_factory=dict)

    @property
    def word(self) -> str:
        """:func:`paperlib.experiments.micmco.synthetic.claims.comparison_word`: held -> reproduced; else the
        thesis' way inside the tie -> within noise; else not reproduced."""
        from paperlib.experiments.micmco.synthetic.claims import comparison_word  # imports torch: imported late

        return comparison_word(self.held, self.gap)


@dataclass(frozen=True)
class Reading:
    """One of the stage's claims read on one figure (or Table 5.1): its comparisons there, figure-wide numbers
    (``notes``) and, when the claim spans other figures too, (held, compared) over all of them (``pooled``)."""

    name: str
    rule: str
    comparisons: tuple[Comparison, ...]
    notes: tuple[str, ...] = ()
    pooled: tuple[int, int] | None = None

    @property
    def verdict(self) -> str:
        return part_word([c.word for c in self.comparisons])

    @property
    def compared(self) -> list[tuple[str, float | None]]:
        """(part verdict, HV gap) per comparison, as :func:`~paperlib.experiments.micmco.synthetic.claims.counts`
        takes them."""
        return [(c.word, c.gap) for c in self.comparisons]

    def part(self) -> Part:
        from paperlib.experiments.micmco.synthetic.claims import counts  # imports torch: imported late

        held = sum(c.held for c in self.comparisons)
        tally = counts(self.compared) if self.name in DIRECTIONAL | {KEEPS_ORDER} else \
            f"{held} of {len(self.comparisons)} comparisons hold"
        seeded = [c.numbers["seed margin"] for c in self.comparisons if "seed margin" in c.numbers]
        if seeded:
            tally = tally.replace(f"beyond the {hv_tie()} tie margin", "beyond their margins")
            tally += (f"; {len(seeded)} of them against the seed margin the budget ladder measured at this budget "
                      f"({', '.join(f'{m:.4f}' for m in seeded)}: twice the standard error over its seeds), the "
                      f"others against the {hv_tie()} tie")
        pooled = [f"over all the claim's figures {self.pooled[0]} of {self.pooled[1]} comparisons hold"] \
            if self.pooled else []
        evidence = "; ".join([f"rule: {self.rule}", tally, *self.notes, *(c.shown for c in self.comparisons),
                              *pooled])
        return Part(self.name, self.name, self.verdict, evidence, self.rule, kind=READING_KINDS[self.name])


# -- plain names ------------------------------------------------------------------------------------------------

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


# -- the numbers behind each comparison ---------------------------------------------------------------------------

Measured = tuple[str, "float | None", dict]  # (shown, HV gap in the thesis' direction or None, numbers)


def hv_tie() -> float:
    """The hypervolume tie (:data:`paperlib.experiments.micmco.synthetic.micmco_synthetic.HV_TIE`; torch only when a claim is
    judged)."""
    from paperlib.experiments.micmco.synthetic.micmco_synthetic import HV_TIE

    return HV_TIE


def _hv(results: Results, names: list[str], cap: float | None = None) -> dict[str, float | None]:
    """Normalised hypervolumes of ``names`` on their common reference, as the stage compares them."""
    from paperlib.experiments.micmco.ptb.micmco_ptb import compare_hypervolumes  # torch only when a claim is judged

    st = results["settings"]
    return compare_hypervolumes(results["curves"], names, st["hv_margin"], st["kl_cap"] if cap is None else cap
                                )["hypervolume"]


def _configurations(fig: str) -> list[str]:
    from paperlib.experiments.micmco.ptb.micmco_ptb import FIGURES

    return list(FIGURES[fig].configurations)


def lead(better: str, worse: str, x: float, y: float, seed_margin: float | None = None) -> tuple[str, float]:
    """ "HV <better> x vs <worse> y, <reading>" and the gap x - y (the thesis: positive, beyond the margin): the
    fixed hypervolume tie, or ``seed_margin`` where the seeds measured one (:func:`seed_margins`)."""
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


def lowest_nll(trials: list[Mapping[str, Any]]) -> float:
    """The lowest finite NLL among ``trials`` (inf without one)."""
    return min((t["nll"] for t in trials if isinstance(t.get("nll"), (int, float)) and math.isfinite(t["nll"])),
               default=math.inf)


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


def seed_margins(results: Results, ladder: Results | None) -> dict[tuple[str, str], float]:
    """The hypervolume gaps whose seed spread was measured: (better curve, worse curve) -> twice the standard error
    over seeds that the budget ladder (same profile) measured for that gap at the stage's own budget, where one of
    its "better" ladders compares exactly these two curves. A comparison found here is judged against this margin
    instead of the fixed tie; every other one keeps the tie."""
    if not ladder or ladder.get("profile") != results.get("profile"):
        return {}
    steps, out = results["settings"].get("steps"), {}
    for entry in ladder.get("ladders", {}).values():
        rung = next((r for r in entry.get("rungs", []) if r.get("steps") == steps and "margin" in r), None)
        if entry.get("kind") == "better" and rung is not None:
            out[tuple(entry["curves"])] = rung["margin"]
    return out


def _seeded(margin: float | None) -> dict:
    return {} if margin is None else {"seed margin": margin}


def _masks(results: Results, key: str, margins: Mapping[tuple[str, str], float] | None = None) -> Measured:
    # key: a 16-sample estimator, e.g. "dreg16_kl"
    shared, naive = f"{key}.shared", f"{key}.naive"
    hv, margin = _hv(results, [shared, naive]), (margins or {}).get((shared, naive))
    shown, gap = lead("shared", "naive", hv[shared], hv[naive], margin)
    return f"{plain_key(key, results['curves'])}: {shown}", gap, _seeded(margin)


def _samples(results: Results, key: str, margins: Mapping[tuple[str, str], float] | None = None) -> Measured:
    # key: "<figure> <16-sample curve>"
    name = key.split(" ", 1)[1]
    base, regime = _base(name), name.split(".", 1)[1]
    one = f"{base}1.{regime}"
    hv = _hv(results, [one, *(f"{base}16_{o}.{regime}" for o in ("kl", "renyi"))])
    margin = (margins or {}).get((name, one))
    shown, gap = lead("16", "1", hv[name], hv[one], margin)
    return f"{plain_key(key, results['curves'])}: {shown}", gap, _seeded(margin)


def _discrete(results: Results, key: str) -> Measured:  # key: the objective
    discrete, continuous = f"vimco16_{key}.train", f"dreg16_{key}.train"
    hv = _hv(results, [discrete, continuous], discrete_cap(results))
    shown, gap = lead("VIMCO 16", "DReG 16", hv[discrete], hv[continuous])
    return f"{_BASES[key]}: {shown}", gap, {}


def _power(results: Results, key: str) -> Measured:  # key: "<figure> power > KL" or "<figure> Rényi > power"
    fig, better, _, worse = key.split()
    names = _configurations(fig)
    hv = {_objective(n): v for n, v in _hv(results, names).items()}
    shown, gap = lead(better, worse, hv[better], hv[worse])
    return f"Fig. {fig} {_BASES[_base(names[0])]} 16: {shown}", gap, {}


def _both_terms(results: Results, key: str) -> Measured:  # key: "<figure> <objective> 16/16 > <16/1 or 1/16>"
    fig, objective, _, _, other = key.split()
    names = [n for n in _configurations(fig) if n in results["curves"]]
    base = _base(names[0])
    worse = f"{base}16-1.train" if other == "16/1" else f"{base}1-16_{objective}.train"
    hv = _hv(results, names)
    shown, gap = lead("16/16", other, hv[f"{base}16_{objective}.train"], hv[worse])
    return f"Fig. {fig} {_BASES[base]} {_BASES[objective]}: {shown}", gap, {}


def _equal_compute(results: Results, fig: str, tag: str) -> tuple[str, list[str], dict[str, float | None], str]:
    """Equal-compute figure ``fig``: its single-sample run with 16x compute ``tag`` (T×16 or bs×16), its 16-sample
    curves, the figure's HVs (the curves' common reference, as the stage compares them) and the run's label."""
    names = _configurations(fig)
    return (f"{names[0]}.{'T16' if tag == 'T×16' else 'bs16'}", [n for n in names if "16_" in n],
            _hv(results, names), f"1 {tag}")


def _generalise(results: Results, key: str) -> Measured:  # key: "<figure> 16 > 1 <T×16 or bs×16>"
    fig, tag = key.split()[0], key.split()[-1]
    name, many, hv, label = _equal_compute(results, fig, tag)
    shown, gap = lead("best 16", label, max(hv[n] for n in many), hv[name])
    return f"Fig. {fig} {label}: {shown}", gap, {}


def _compute(results: Results, key: str) -> Measured:  # key: "<figure> 1 <T×16 or bs×16>"
    fig, tag = key.split()[0], key.split()[-1]
    name, many, hv, label = _equal_compute(results, fig, tag)
    lowest = lowest_nll(results["curves"][name]["trials"])
    best_16 = min(lowest_nll(results["curves"][n]["trials"]) for n in many)
    shown, gap = lead("best 16", label, max(hv[n] for n in many), hv[name])
    fit = f"lowest NLL {lowest:.4f} vs the 16-sample estimators' {best_16:.4f}, " + (
        "lower (the thesis' better best fit)" if lowest < best_16 else "not lower (the thesis: lower)")
    # only a run that does reach the lower NLL makes the claim a matter of the HV gap
    return f"Fig. {fig} {label}: {fit}, {shown}", gap if lowest < best_16 else None, {}


def _trio(results: Results, base: str, variant: str) -> list[float] | None:
    """HVs of the three estimators (1, 16 KL, 16 Rényi) of ``base`` at one robustness setting, on that setting's
    own reference; None unless all three ran with an area."""
    names = [f"{base}{s}.shared{variant}" for s in ("1", "16_kl", "16_renyi")]
    if not all(n in results["curves"] for n in names):
        return None
    hv = _hv(results, names)
    return None if any(hv[n] is None for n in names) else [hv[n] for n in names]


def _settings(results: Results, fig: str) -> list[tuple[str, list[float] | None]]:
    """Per setting of robustness figure ``fig``: its tag (base, bs×2, T×2, ...) and its estimators' HVs."""
    from paperlib.experiments.micmco.ptb.design import _VARIANT_TAG, ROBUSTNESS

    base, variants = ROBUSTNESS[fig]
    return [(_VARIANT_TAG[v], _trio(results, base, v)) for v in variants]


_TRIO_TAGS = ("1", "16 K", "16 R")


def _side(a: float, b: float) -> int:
    """+1 if ``a`` leads ``b`` by more than the tie, -1 if ``b`` leads ``a``, 0 within the tie."""
    return 0 if abs(a - b) <= hv_tie() else (1 if a > b else -1)


def _trio_text(settings: list[tuple[str, list[float] | None]]) -> str:
    return ", ".join(f"{' / '.join(f'{x:.3f}' for x in hv)} ({tag})" for tag, hv in settings)


def _kept_gap(differences: list[float]) -> float:
    """A pair's HV differences at the two settings of a factor as one signed gap: the smaller of the two in the
    direction of the larger, so it is positive when the pair keeps its order at both settings (by its smaller lead)
    and negative when the order changes sign, reversed or inside the tie."""
    lead = max(differences, key=abs)
    sign = 1.0 if lead >= 0 else -1.0
    return min(sign * d for d in differences)


# Claim 11 as read here: the stage's record keeps a pair that is separated at one setting and tied at the other
# (the order "not reversed"); that shows the order at one setting only, so here a pair holds only when it is
# separated the same way at both settings, and a pair that keeps its sign inside the tie goes the thesis' way
# within noise.
KEEPS_ORDER_RULE = (
    "per figure and pair of its three estimators (1, 16 KL, 16 Rényi), each setting's HVs on the reference of its own "
    "curves: a pair keeps its order when it is separated (HV difference > {tie}) the same way at both settings of the "
    "factor, it goes the thesis' way inside the tie when its sign holds at both settings without being separated at "
    "both, and it does not keep its order when its sign changes between the settings (separated or not); a figure "
    "whose pairs all tie at both settings is read by their signs. Read here from the curves, more strictly than the "
    "record the stage wrote with its results, which counts a pair separated at one setting and tied at the other "
    "as kept and leaves out pairs tied at both. The factors double our steps or batch (see the scale), where the "
    "thesis ran 40 against 80 thousand steps, and the budget ladder (M-F5.8 to M-F5.12) finds our curves still "
    "learning")


def _lead_text(gap: float, ahead: str) -> str:
    """How far ``ahead`` leads at its weaker setting (``gap`` > 0) or falls behind (< 0), with four decimals where
    three would show 0.000 or the tie."""
    size = abs(gap)
    digits = 4 if round(size, 3) in (0.0, hv_tie()) else 3
    if gap > 0:
        return f"{ahead} ahead at both by at least {size:.{digits}f}"
    return "no lead at one setting" if gap == 0 else \
        f"{ahead} ahead at one setting, behind by {size:.{digits}f} at the other"


def _order_keys(wins: Mapping[str, Any]) -> list[str]:
    """The comparisons of claim 11 read here: the stage's "<figure> order" (its three pairs tied at both settings)
    as it is, else all three pairs of each figure the stage compared, tied ones included (the stage leaves out
    pairs tied at both settings; here they count, within noise or against the claim by their signs)."""
    figures = sorted({key.split(" ", 1)[0] for key in wins}, key=lambda f: tuple(map(int, f.split("."))))
    keys = []
    for fig in figures:
        keys += [f"{fig} order"] if f"{fig} order" in wins else \
            [f"{fig} {_TRIO_TAGS[i]} vs {_TRIO_TAGS[j]}" for i, j in ((0, 1), (0, 2), (1, 2))]
    return keys


def _order(results: Results, key: str) -> Measured:  # key: "<figure> <tag> vs <tag>" or "<figure> order"
    fig, pair = key.split(" ", 1)
    settings = _settings(results, fig)
    if pair == "order":
        gaps = [_kept_gap([hv[i] - hv[j] for _, hv in settings]) for i, j in ((0, 1), (0, 2), (1, 2))]
        gap = min(gaps)
        digits = 4 if round(abs(gap), 3) == 0.0 else 3
        how = (f"every pair keeps its sign at both (the smallest lead {gap:.{digits}f})" if gap > 0
               else "a pair shows no lead at one setting" if gap == 0
               else f"a pair's sign changes inside the tie (by {-gap:.{digits}f})")
        return (f"Fig. {fig}: HV 1 / 16 K / 16 R = {_trio_text(settings)}: the three estimators tie at both "
                f"settings, {how}", gap, {"kept gap": gap})
    i, j = (_TRIO_TAGS.index(t) for t in pair.split(" vs "))
    sides = [_side(hv[i], hv[j]) for _, hv in settings]
    reversed_, one_sided = sides[0] * sides[1] < 0, (sides[0] == 0) != (sides[1] == 0)
    differences = [hv[i] - hv[j] for _, hv in settings]
    gap = _kept_gap(differences)
    how = ("reversed" if reversed_ else "separated at one setting only" if one_sided
           else "separated the same way at both" if sides[0] != 0 else "tied at both")
    ahead = _TRIO_TAGS[i] if max(differences, key=abs) >= 0 else _TRIO_TAGS[j]
    values = ", ".join(f"{hv[i]:.3f} / {hv[j]:.3f} ({tag})" for tag, hv in settings)
    return (f"Fig. {fig} {pair}: HV {_TRIO_TAGS[i]} / {_TRIO_TAGS[j]} = {values}: {how}, {_lead_text(gap, ahead)}",
            gap, {"reversed": int(reversed_), "one sided": int(one_sided), "kept gap": gap})


def _spread(results: Results, key: str) -> Measured:  # key: "5.18 <tag>"
    fig, tag = key.split(" ", 1)
    settings, narrow = _settings(results, fig), _settings(results, "5.17")
    k = [t for t, _ in settings].index(tag)
    hv, base_hv = settings[k][1], narrow[k][1]
    spread = max(hv) - min(hv)
    base = None if base_hv is None else max(base_hv) - min(base_hv)
    return (f"Fig. {fig} {tag}: HV 1 / 16 K / 16 R = {' / '.join(f'{x:.3f}' for x in hv)}, spread {spread:.3f} "
            f"(tie {hv_tie()}" + ("" if base is None else f", base hidden size at the same length: {base:.3f}") + ")",
            None, {"spread": spread, "base spread": base})


def _table_rows(results: Results, hidden: int) -> dict[str, Mapping[str, Any]]:
    return {r["column"]: r for r in results["table_5_1"] if r.get("curve") and r["hidden_size"] == hidden}


def _perplexity(results: Results, key: str) -> Measured:  # key: "<DReG or VIMCO> hs <hidden size>"
    label, hidden = key.split(" hs ")
    rows = _table_rows(results, int(hidden))
    one = rows[f"{label} 1 K/R"]["test_perplexity"]
    best = min(r["test_perplexity"] for c, r in rows.items() if c.startswith(f"{label} 16"))
    change = best / one - 1.0
    return f"{key}: test perplexity 1 / best 16 = {one:.1f} / {best:.1f} ({100 * change:+.1f}%)", None, \
        {"change": change}


def _low_latents(results: Results, key: str) -> Measured:  # key: "<column> hs <hidden size>"
    column, hidden = key.rsplit(" hs ", 1)
    kl = _table_rows(results, int(hidden))[column]["test_kl"]
    return f"{key}: test KL {kl:.3f}", None, {"kl": kl}


def _dropout(results: Results, key: str) -> Measured:  # key: the estimator family
    best = {regime: min(lowest_nll(results["curves"][n]["trials"]) for s in ("1", "16_kl", "16_renyi")
                        if (n := f"{key}{s}.{regime}") in results["curves"]) for regime in ("shared", "l2")}
    return (f"{_BASES[key]}: best validation NLL dropout (shared masks) {best['shared']:.4f} vs L2 {best['l2']:.4f}",
            None, {})


MEASURES: dict[str, Callable[[Results, str], Measured]] = {
    MASKS: _masks, SAMPLES: _samples, PERPLEXITY: _perplexity, LOW_LATENTS: _low_latents, DROPOUT: _dropout,
    DISCRETE: _discrete, POWER: _power, BOTH_TERMS: _both_terms, GENERALISE: _generalise, COMPUTE: _compute,
    KEEPS_ORDER: _order, SPREAD: _spread,
}


def _notes(results: Results, name: str, figures: list[str]) -> list[str]:
    """Numbers of the claim's figures that no single comparison shows: the single-sample run at the base budget
    (equal compute)."""
    if name in (GENERALISE, COMPUTE):
        out = []
        for fig in figures:
            names = [n for n in _configurations(fig) if n in results["curves"]]
            hv = _hv(results, names)
            labels = " / ".join(results["curves"][n]["label"] for n in names)
            out.append(f"Fig. {fig}: HV {labels} = {' / '.join(f'{hv[n]:.3f}' for n in names)}")
        return out
    return []


# -- claims -------------------------------------------------------------------------------------------------------


SEEDED = frozenset({MASKS, SAMPLES})  # the claims whose comparisons a budget ladder may give a seed margin


def reading(results: Results, record: Mapping[str, Any], where: str,
            margins: Mapping[tuple[str, str], float] | None = None) -> Reading | None:
    """The stage's claim ``record`` (from ``results["claims"]``) read on figure ``where`` (or Table 5.1): the
    comparisons keyed by that figure when the claim keys its comparisons by figure, else all of them (a claim over
    several figures' curves, e.g. shared against naive masks); None when it compared nothing there. A comparison
    with a seed margin (``margins``, :func:`seed_margins`) holds beyond it, not beyond the stage's fixed tie."""
    wins = record.get("wins", {})
    if record["claim"] == KEEPS_ORDER:  # every pair of every figure, re-judged by KEEPS_ORDER_RULE
        wins = {key: _order(results, key)[1] > hv_tie() for key in _order_keys(wins)}
    figures = sorted({k.split(" ", 1)[0] for k in wins if re.fullmatch(r"\d+\.\d+", k.split(" ", 1)[0])})
    own = {k: held for k, held in wins.items() if k.split(" ", 1)[0] == where} if figures else wins
    if not own:  # nothing compared, or nothing on this figure of a claim keyed by figure
        return None
    measure = MEASURES[record["claim"]]
    comparisons = []
    for key, held in own.items():
        shown, gap, numbers = (measure(results, key, margins) if margins and record["claim"] in SEEDED
                               else measure(results, key))
        if "seed margin" in numbers:
            held = gap is not None and gap > numbers["seed margin"]
        comparisons.append(Comparison(key, shown, bool(held), gap, numbers))
    pooled = (sum(wins.values()), len(wins)) if len(own) < len(wins) else None
    rule = KEEPS_ORDER_RULE.format(tie=hv_tie()) if record["claim"] == KEEPS_ORDER else record.get("rule", "")
    return Reading(record["claim"], rule, tuple(comparisons),
                   tuple(_notes(results, record["claim"], [where] if figures else [])), pooled)


def readings(results: Results, where: str, ladder: Results | None = None) -> list[Reading]:
    """The stage's claims figure ``where`` (or Table 5.1) is read for, each on its comparisons there, with the
    seed margins the budget ladder (``ladder``; None: none) measured where it did; those that compared nothing at
    this profile are left out."""
    records = {c["claim"]: c for c in results["claims"]}
    names = TABLE_CLAIMS if where == TABLE else FIGURE_CLAIMS.get(where, ())
    margins = seed_margins(results, ladder)
    return [r for name in names if name in records and (r := reading(results, records[name], where, margins))]


def ladder_parts(results: Results, ladder: Results | None, item: str) -> tuple[list[Part], list[str]]:
    """The budget ladder's parts of row ``item`` and what of it went unjudged (a ladder of another profile, not run
    or not read); nothing for a row without a ladder."""
    keys = LADDER_ITEMS.get(item, ())
    if not keys:
        return [], []
    if ladder is None:
        return [], ["the budget ladder (no results)"]
    if ladder["profile"] != results["profile"]:
        return [], [f"the budget ladder (its results are of profile {ladder['profile']})"]
    from paperlib.experiments.micmco.ptb.ladder import ladder_claim_part  # torch only when a claim is judged

    parts, unjudged = [], []
    for key in keys:
        part = ladder_claim_part(ladder, key)
        if part is not None:
            parts.append(part)
        else:
            why = ("not run at this profile" if key not in ladder.get("ladders", {}) else
                   "no gap at the top rung, or a lone judged rung inside its margin")
            unjudged.append(f"the budget ladder {key} ({why})")
    return parts, unjudged


def figure_claim(results: Results, ladder: Results | None, fig: str) -> Claim:
    """The claim of PTB figure ``fig`` (seed item M-F<fig>) on the stage's results and, for the rows with one, the
    budget ladder's results (``ladder``; None when not at hand). Raises
    :class:`~paperlib.experiments.common.claims.Unjudged` when none of the stage's claims the figure is read for compared
    anything at this profile."""
    judged = readings(results, fig, ladder)
    if not judged:
        raise Unjudged(f"Fig. {fig}: none of its claims ({', '.join(FIGURE_CLAIMS.get(fig, ())) or 'none'}) "
                       "compared curves at this profile")
    parts, not_run = ladder_parts(results, ladder, f"M-F{fig}")
    return Claim(f"M-F{fig}", tuple(r.part() for r in judged) + tuple(parts), tuple(not_run))


def table_cells(results: Results) -> tuple[int, int, list[int]]:
    """Table 5.1's cells: (run, all, the hidden sizes of those not run)."""
    rows = results["table_5_1"]
    missing = sorted({r["hidden_size"] for r in rows if not r.get("curve")})
    return sum(bool(r.get("curve")) for r in rows), len(rows), missing


def table_claim(results: Results, ladder: Results | None) -> Claim:
    """Table 5.1's claim (seed item M-T5.1): its two claims on the test results, its two budget ladders, and the
    cells the profile did not run named as not run. Raises :class:`~paperlib.experiments.common.claims.Unjudged` when
    neither claim compared anything (no cell ran)."""
    judged = readings(results, TABLE, ladder)
    if not judged:
        raise Unjudged("Table 5.1: no cell ran at this profile")
    parts, not_run = ladder_parts(results, ladder, "M-T5.1")
    run, cells, missing = table_cells(results)
    if missing:
        not_run.append(f"{cells - run} of {cells} cells (hidden size {', '.join(map(str, missing))}: its shared-mask "
                       "curves did not run at this profile)")
    return Claim("M-T5.1", tuple(r.part() for r in judged) + tuple(parts), tuple(not_run))
