"""The PTB MICMCO figures' and Table 5.1's claims (Melis §5.7.2, §5.B), judged once on ``results/micmco_ptb.json``
and the budget ladder (``results/micmco_ptb_ladder.json``): one :class:`~paperlib.experiments.common.claims.Claim` per
figure (:func:`figure_claim`) and one for Table 5.1 (:func:`table_claim`), read by the results index and the
notebook alike.

A figure's parts are (1) the claims the figure is read for (:data:`FIGURE_CLAIMS`): the stage's numeric claims, and
the thesis' sentences about the figure that the stage does not judge, judged here from the curves (their
comparisons in :data:`OWN_KEYS`: 16 samples gaining only with Rényi at high latent usage, no multi-sample gain with
continuous latents under naive dropout, a smaller one with discrete latents which trail continuous ones, discrete
latents degrading faster with L2, discrete and continuous latents on par with shared masks, the better best fit that
16x compute buys one sample and the advantage it loses at higher latent usage, the single-sample runs alike at their
lowest NLL), each on the figure's own comparisons when the claim spans several figures (its outcome over all of them,
as judged here, is counted beside); (2) for the rows of :data:`LADDER_ITEMS` the budget ladder's parts
(:func:`paperlib.experiments.micmco.ptb.ladder.ladder_claim_part`); a ladder that could not be read is named as not
run, which keeps the row from "reproduced"; and (3) named as not run: a claim of :data:`FIGURE_CLAIMS` whose curves
did not run at the profile, a comparison that cannot be tested at this scale (:data:`UNTESTABLE`: a tie reading whose
hypervolumes all lie below the tie, a validation gain without a training-fit gain beyond the tie to compare it
with, a Table 5.1 cell whose curve has no trial above the low-KL line, a latent usage the trials do not reach), and
what the thesis says about a part of a figure our trials do not reach (:data:`UNREACHED`: Fig. 5.12 up to a KL of
about 0.5). Table 5.1's parts are its two claims and its two ladders; cells the profile did not run are named as not
run.

The stage (:func:`paperlib.experiments.micmco.ptb.micmco_ptb.claim_verdicts`) stores per claim whether each comparison held
(``wins``, keyed by figure where a claim spans several); the numbers behind each comparison are recomputed here from
the results' curves and Table 5.1 rows as the stage computed them (:func:`~paperlib.experiments.micmco.ptb.micmco_ptb.
compare_hypervolumes` on the same curves, reference margin and KL cap), never read back from its evidence text, and
every comparison is judged again from them (:data:`HELD`). A hypervolume comparison (the claims in
:data:`DIRECTIONAL`) is read by :func:`~paperlib.experiments.micmco.synthetic.claims.comparison_word`: beyond the 0.02
tie -> reproduced; the thesis' way inside the tie -> within noise; no lead or the other way -> not reproduced. Where
the budget ladder measured the seed spread of the very same gap at the stage's own budget (:func:`seed_margins`),
twice its standard error replaces the fixed tie for that comparison; where every hypervolume compared lies below the
tie itself, the evidence says that no difference could clear it. A comparison of frontier NLLs at a given KL (the
claims in :data:`FRONTIER`) is read the same way against :func:`frontier_tie`, the stage's perplexity tolerance in
nats. Some claims are read here more strictly or more closely to the thesis' words than the stage recorded them
(their rules in :data:`RULES`, claim 11's in :data:`KEEPS_ORDER_RULE`): claim 11 (orders kept under batch size and
length), a pair keeping its order only when separated the same way at both settings; "dropout" against L2 as the
thesis' naive dropout of Fig. 5.10 (its comparisons in :data:`OWN_KEYS`), strictly on one seed's best trials (the
budget ladder reads the same sentence with shared-mask dropout, its own curves, as a part of its own); the
16-sample curves against a single-sample run with 16x compute at the highest latent usage both reach (their frontier
NLLs there), and the run's better best fit as a part of its own (strict) rather than a condition of the tradeoff;
Table 5.1's optima at low latent usage only in the cells whose curve has a trial above the line. The others
(perplexity thresholds, spreads) keep the stage's outcome. A claim's part verdict over its comparisons is
:func:`~paperlib.experiments.common.claims.part_word`.

Pure Python at import: the stage's functions and :mod:`paperlib.experiments.micmco.synthetic.claims` (both load
torch) are imported inside the functions that need them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

from paperlib.experiments.common.claims import Claim, Part, Unjudged, part_word

Results = Mapping[str, Any]
# The seed margins a budget ladder measured for hypervolume gaps at the stage's budget, keyed by the ladder's two
# curves (:func:`seed_margins`).
Margins = Mapping[tuple[str, str], float]

MASKS = "shared dropout masks restore the validation frontiers"
SAMPLES = "multiple samples improve latent usage"
PERPLEXITY = "latents barely change the best perplexity"
LOW_LATENTS = "Table 5.1's optima are at low latent usage"
DROPOUT = "dropout reaches a better best NLL than L2"
DISCRETE = "discrete latents fit the training data better"
POWER = "the power objective is better than KL but behind Rényi"
BOTH_TERMS = "gains need multiple samples in both terms"
GENERALISE = "16 samples generalise better than one sample given the same compute"
COMPUTE = "16x compute buys one sample a better best fit but not a better tradeoff"  # the stage's; two parts here
KEEPS_ORDER = "batch size and optimisation length shift the curves but keep their order"
SPREAD = "at 256 units the three DReG estimators differ very little"
# The thesis' sentences about a figure that the stage has no claim for, judged here from the curves.
RENYI_HIGH = "at high latent usage, 16 samples gain only with Rényi"
NO_GAIN = "with naive dropout, 16 samples bring continuous latents no gain"
DISCRETE_GAIN = "with naive dropout, 16 samples improve discrete latents"
SMALLER_GAIN = "with naive dropout, the discrete latents' gain is far below their training-fit gain"
DISCRETE_TRAILS = "with naive dropout, discrete latents trail continuous ones"
DEGRADES = "with L2, discrete latents lose validation NLL faster than continuous ones"
ON_PAR = "with shared masks, discrete and continuous latents are on par"
BEST_FIT = "16x compute buys one sample a better best fit"
TRADEOFF = "16x compute does not buy one sample a better tradeoff"
ALIKE = "the single-sample runs validate alike at their lowest latent usage"

# The claims each PTB figure is read for: the stage's, and the figure's sentences judged here (OWN_KEYS).
FIGURE_CLAIMS: dict[str, tuple[str, ...]] = {
    "5.8": (SAMPLES, RENYI_HIGH), "5.9": (SAMPLES, DISCRETE),
    "5.10": (NO_GAIN, DISCRETE_GAIN, SMALLER_GAIN, DISCRETE_TRAILS),
    "5.11": (DROPOUT, SAMPLES, DEGRADES), "5.12": (MASKS, SAMPLES, ON_PAR), "5.13": (BEST_FIT, TRADEOFF),
    "5.14": (GENERALISE, ALIKE), "5.16": (KEEPS_ORDER,), "5.17": (KEEPS_ORDER,), "5.18": (SPREAD,),
    "5.19": (KEEPS_ORDER,), "5.20": (KEEPS_ORDER,), "5.21": (KEEPS_ORDER,), "5.22": (BOTH_TERMS,),
    "5.23": (BOTH_TERMS,), "5.24": (BEST_FIT, TRADEOFF), "5.25": (GENERALISE, ALIKE), "5.28": (POWER,),
    "5.29": (POWER,),
}
TABLE = "Table 5.1"
TABLE_CLAIMS = (PERPLEXITY, LOW_LATENTS)
# The rows a budget ladder is a part of: paperlib.experiments.micmco.ptb.ladder.ITEMS (without importing torch), but
# for M-F5.10, whose sentences are about naive dropout alone: its ladder (shared against naive masks) judges Fig.
# 5.12's claim and is a part of M-F5.12 only.
LADDER_ITEMS: dict[str, tuple[str, ...]] = {"M-F5.8": ("5.8",), "M-F5.9": ("5.9",),
                                            "M-F5.11": ("5.11", "5.11-dropout"), "M-F5.12": ("5.10", "5.12"),
                                            "M-T5.1": ("T5.1-perplexity", "T5.1-latents")}
# The claims whose comparisons are hypervolume gaps in the thesis' direction.
DIRECTIONAL = frozenset({MASKS, SAMPLES, DISCRETE, POWER, BOTH_TERMS, GENERALISE, DISCRETE_GAIN, DISCRETE_TRAILS,
                         DEGRADES})
# The claims whose comparisons are gaps between two curves' frontier NLLs at one KL (the lowest NLL among a curve's
# trials at that KL or above), in the thesis' direction, against frontier_tie().
FRONTIER = frozenset({TRADEOFF, RENYI_HIGH})
# Claims that hold when a hypervolume difference stays inside the tie ("no gain", "on par"): a comparison whose
# hypervolumes all lie at or below the tie cannot fail, and is named as not run (UNTESTABLE).
TIE_THRESHOLDS = frozenset({NO_GAIN, ON_PAR})
# How each claim's comparisons are judged (paperlib.experiments.common.claims.RULE_KINDS).
READING_KINDS = {**{name: "hypervolume tie" for name in DIRECTIONAL}, **{name: "fixed margin" for name in FRONTIER},
                 PERPLEXITY: "threshold", LOW_LATENTS: "threshold", DROPOUT: "strict", KEEPS_ORDER: "hypervolume tie",
                 SPREAD: "threshold", NO_GAIN: "threshold", SMALLER_GAIN: "threshold", ON_PAR: "threshold",
                 BEST_FIT: "strict", ALIKE: "threshold"}
# Melis §5.7.2 on Fig. 5.12: discrete and continuous latents on par "up to an average KL of about 0.5"; the same level
# stands for Fig. 5.8's "high latent usage" (RENYI_HIGH), which the thesis gives no number for.
ON_PAR_KL = 0.5
SMALLER_SHARE = 0.5  # "not nearly to the extent observed on the training set": below half the training-fit gain


@dataclass(frozen=True)
class Comparison:
    """One comparison of a claim: its key, our numbers in words (``shown``, no verdict word), whether it held (as
    judged here, :data:`HELD`, or the stage's outcome), its gap in the thesis' direction (None where it is not one)
    and the numbers a reason may quote (``numbers``)."""

    key: str
    shown: str
    held: bool
    gap: float | None = None
    numbers: Mapping[str, float | None] = field(default_factory=dict)

    @property
    def word(self) -> str:
        """:func:`paperlib.experiments.micmco.synthetic.claims.comparison_word`: held -> reproduced; else the
        thesis' way inside the tie (or without a margin) -> within noise; else not reproduced."""
        from paperlib.experiments.micmco.synthetic.claims import comparison_word  # imports torch: imported late

        return comparison_word(self.held, self.gap)


@dataclass(frozen=True)
class Reading:
    """One claim read on one figure (or Table 5.1): its judged comparisons there, figure-wide numbers (``notes``),
    when the claim spans other figures too, (held, compared) over all of them as judged here (``pooled``), and the
    comparisons that cannot be tested at this scale (``untested``: (plain key, why), :data:`UNTESTABLE`), named as
    not run rather than judged."""

    name: str
    rule: str
    comparisons: tuple[Comparison, ...]
    notes: tuple[str, ...] = ()
    pooled: tuple[int, int] | None = None
    untested: tuple[tuple[str, str], ...] = ()

    @property
    def verdict(self) -> str:
        return part_word([c.word for c in self.comparisons])

    @property
    def compared(self) -> list[tuple[str, float | None]]:
        """(part verdict, gap) per comparison, as :func:`~paperlib.experiments.micmco.synthetic.claims.counts`
        takes them."""
        return [(c.word, c.gap) for c in self.comparisons]

    @property
    def below_tie(self) -> list[Comparison]:
        """The hypervolume comparisons judged against the fixed tie whose hypervolumes all lie at or below the tie
        itself: no difference between them can clear it, so they can show the thesis' way inside the tie at most."""
        return [c for c in self.comparisons if "seed margin" not in c.numbers
                and (top := c.numbers.get("larger HV")) is not None and top <= hv_tie()]

    @property
    def not_run(self) -> list[str]:
        """The untested comparisons as the claim's not-run entries, one per reason: "<claim> (<why>)" when none of
        its comparisons here could be tested, else "<claim> for <keys> (<why>)"."""
        whys = list(dict.fromkeys(why for _, why in self.untested))
        if not self.comparisons and len(whys) == 1:
            return [f"{self.name} ({whys[0]})"]
        return [f"{self.name} for {', '.join(k for k, w in self.untested if w == why)} ({why})" for why in whys]

    def part(self) -> Part:
        from paperlib.experiments.micmco.synthetic.claims import counts  # imports torch: imported late

        held = sum(c.held for c in self.comparisons)
        if self.name in DIRECTIONAL | {KEEPS_ORDER}:
            tally = counts(self.compared)
        elif self.name in FRONTIER:
            tally = _frontier_counts(self.compared)
        else:
            tally = f"{held} of {len(self.comparisons)} comparisons hold"
        seeded = [c.numbers["seed margin"] for c in self.comparisons if "seed margin" in c.numbers]
        if seeded:
            tally = tally.replace(f"beyond the {hv_tie()} tie margin", "beyond their margins")
            tally += (f"; {len(seeded)} of them against the seed margin the budget ladder measured at this budget "
                      f"({', '.join(f'{m:.4f}' for m in seeded)}: twice the standard error over its seeds), the "
                      f"others against the {hv_tie()} tie")
        pooled = [f"over all the claim's figures {self.pooled[0]} of {self.pooled[1]} comparisons hold"] \
            if self.pooled else []
        evidence = "; ".join([f"rule: {self.rule}", tally, *self.notes, *self._below_tie_note(),
                              *(c.shown for c in self.comparisons), *pooled])
        return Part(self.name, self.name, self.verdict, evidence, self.rule, kind=READING_KINDS[self.name])

    def _below_tie_note(self) -> list[str]:
        capped = self.below_tie
        if not capped:
            return []
        top = max(c.numbers["larger HV"] for c in capped)
        digits = 4 if round(top, 3) == round(hv_tie(), 3) else 3  # 0.0195 reads 0.0195, not 0.020, beside 0.02
        who = ("every hypervolume compared here is" if len(capped) == len(self.comparisons) else
               f"in {len(capped)} of these comparisons both hypervolumes are")
        return [f"{who} at most {top:.{digits}f}, below the {hv_tie()} tie itself: no difference between them can "
                "clear it, so the thesis' way inside the tie is the most they can show at this scale"]


def _frontier_counts(compared: list[tuple[str, float | None]]) -> str:
    """How frontier-NLL comparisons came out against :func:`frontier_tie`, without verdict words."""
    held = sum(w == "reproduced" for w, _ in compared)
    inside = sum(w == "within noise" for w, _ in compared)
    other = len(compared) - held - inside
    text = [f"{held} of {len(compared)} comparisons hold beyond the {frontier_tie():.4f}-nat tie"]
    text += [f"{inside} {'goes' if inside == 1 else 'go'} the thesis' way inside it"] if inside else []
    text += [f"{other} {'goes' if other == 1 else 'go'} the other way or {'shows' if other == 1 else 'show'} no "
             "lead"] if other else []
    return ", ".join(text)


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


def _present(results: Results, names: list[str]) -> list[str]:
    return [n for n in names if n in results["curves"]]


def _masks(results: Results, key: str, margins: Margins | None = None) -> Measured:
    # key: a 16-sample estimator, e.g. "dreg16_kl"
    shared, naive = f"{key}.shared", f"{key}.naive"
    hv, margin = _hv(results, [shared, naive]), (margins or {}).get((shared, naive))
    shown, gap, numbers = _led("shared", "naive", hv[shared], hv[naive], margin)
    return f"{plain_key(key, results['curves'])}: {shown}", gap, numbers


def _samples(results: Results, key: str, margins: Margins | None = None) -> Measured:
    # key: "<figure> <16-sample curve>"
    name = key.split(" ", 1)[1]
    base, regime = _base(name), name.split(".", 1)[1]
    one = f"{base}1.{regime}"
    hv = _hv(results, [one, *(f"{base}16_{o}.{regime}" for o in ("kl", "renyi"))])
    margin = (margins or {}).get((name, one))
    shown, gap, numbers = _led("16", "1", hv[name], hv[one], margin)
    return f"{plain_key(key, results['curves'])}: {shown}", gap, numbers


def _discrete(results: Results, key: str) -> Measured:  # key: the objective
    discrete, continuous = f"vimco16_{key}.train", f"dreg16_{key}.train"
    hv = _hv(results, [discrete, continuous], discrete_cap(results))
    shown, gap, numbers = _led("VIMCO 16", "DReG 16", hv[discrete], hv[continuous])
    return f"{_BASES[key]}: {shown}", gap, numbers


def _power(results: Results, key: str) -> Measured:  # key: "<figure> power > KL" or "<figure> Rényi > power"
    fig, better, _, worse = key.split()
    names = _configurations(fig)
    hv = {_objective(n): v for n, v in _hv(results, names).items()}
    shown, gap, numbers = _led(better, worse, hv[better], hv[worse])
    return f"Fig. {fig} {_BASES[_base(names[0])]} 16: {shown}", gap, numbers


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
    shown, gap, numbers = _led("16/16", other, hv[f"{base}16_{objective}.train"], hv[worse])
    return (f"Fig. {fig} {_BASES[base]} {_BASES[objective]}: {shown}{_trials_note(results, worse, other)}", gap,
            numbers)


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
    shown, gap, numbers = _led("best 16", label, max(hv[n] for n in many), hv[name])
    return f"Fig. {fig} {label}: {shown}", gap, numbers


def _generalise(results: Results, key: str) -> Measured:  # key: "<figure> 16 > 1 <T×16 or bs×16>"
    return _equal_compute_lead(results, key)


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
    return f"Fig. {fig} {label}: {where}, {shown}", gap, {"short": 0.0, "reach": k, "best fit KL": best[0]}


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
    return f"Fig. 5.8 DReG 16 at KL {ON_PAR_KL} or above (training fit): {shown}", gap, numbers


def _best_fit(results: Results, key: str) -> Measured:  # key: "<figure> 1 <T×16 or bs×16>"
    fig, name, many, label = _equal_compute(results, key)
    lowest = lowest_nll(results["curves"][name]["trials"])
    best_16 = min(lowest_nll(results["curves"][n]["trials"]) for n in many)
    gap = best_16 - lowest
    trials = len(results["curves"][name]["trials"])
    return (f"Fig. {fig} {label}: lowest training NLL {lowest:.4f} vs the 16-sample estimators' {best_16:.4f}, "
            + (f"lower by {gap:.4f}" if gap > 0 else f"not lower ({-gap:.4f} higher)")
            + f" (each the lowest of one seed's {trials} tuned trials per curve)", gap, {})


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
            {"holds": float(gain <= tie), "larger HV": max(hv[many], hv[one])})


def _vimco_gains(results: Results, objective: str) -> tuple[float, float, float]:
    """VIMCO 16's hypervolume gain over VIMCO 1 on validation with naive dropout (on the family's curves there),
    and the two hypervolumes: (gain, HV 16, HV 1)."""
    one, many = "vimco1.shared", f"vimco16_{objective}.naive"
    hv = _hv(results, [one, *_present(results, ["vimco16_kl.naive", "vimco16_renyi.naive"])])
    return hv[many] - hv[one], hv[many], hv[one]


def _discrete_gain(results: Results, key: str) -> Measured:  # key: the objective
    _, x, y = _vimco_gains(results, key)
    shown, gap, numbers = _led("16", "1", x, y)
    return f"VIMCO 16 {_BASES[key]}: {shown}", gap, numbers


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
            {"holds": float(holds), "share": share if math.isfinite(share) else None, "training gain": train})


def _discrete_against(results: Results, key: str, regime: str) -> Measured:
    continuous, discrete = f"dreg16_{key}.{regime}", f"vimco16_{key}.{regime}"
    hv = _hv(results, [continuous, discrete], discrete_cap(results))
    shown, gap, numbers = _led("DReG 16", "VIMCO 16", hv[continuous], hv[discrete])
    return f"{_BASES[key]}: {shown}", gap, numbers


def _discrete_trails(results: Results, key: str) -> Measured:  # key: the objective
    return _discrete_against(results, key, "naive")


def _degrades(results: Results, key: str) -> Measured:  # key: the objective
    return _discrete_against(results, key, "l2")


def _on_par(results: Results, key: str) -> Measured:  # key: the objective
    discrete, continuous = f"vimco16_{key}.shared", f"dreg16_{key}.shared"
    reach = min(_max_kl(results["curves"][n]) for n in (discrete, continuous))
    cap = min(ON_PAR_KL, reach)
    if cap <= 0:
        return f"{_BASES[key]}: no KL range both curves reach", None, {"holds": 0.0, "reach": reach}
    hv = _hv(results, [discrete, continuous], cap)
    x, y, tie = hv[discrete], hv[continuous], hv_tie()
    ahead = "VIMCO 16" if x > y else "DReG 16"
    return (f"{_BASES[key]}: on KL 0 to {cap:.3f} (as far as both curves' trials reach), HV VIMCO 16 {x:.3f} vs "
            f"DReG 16 {y:.3f}, {ahead} ahead by {abs(x - y):.3f}, {'within' if abs(x - y) <= tie else 'beyond'} the "
            f"{tie} tie",
            None, {"holds": float(abs(x - y) <= tie), "reach": reach, "larger HV": max(x, y)})


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
            {"holds": float(change <= PPL_TOLERANCE), "spread": spread})


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
    return f"{key}: test KL {kl:.3f}{reach}", None, {"kl": kl, "holds": float(kl <= LOW_KL), "curve max": top}


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
            f"({label[l2]}), {reading} (each the lowest of one seed's {trials} tuned trials per curve)", gap, {})


MEASURES: dict[str, Callable[..., Measured]] = {
    MASKS: _masks, SAMPLES: _samples, PERPLEXITY: _perplexity, LOW_LATENTS: _low_latents, DROPOUT: _dropout,
    DISCRETE: _discrete, POWER: _power, BOTH_TERMS: _both_terms, GENERALISE: _generalise, KEEPS_ORDER: _order,
    SPREAD: _spread, NO_GAIN: _no_gain, DISCRETE_GAIN: _discrete_gain, SMALLER_GAIN: _smaller_gain,
    DISCRETE_TRAILS: _discrete_trails, DEGRADES: _degrades, ON_PAR: _on_par, BEST_FIT: _best_fit,
    TRADEOFF: _tradeoff, ALIKE: _alike, RENYI_HIGH: _renyi_high,
}
SEEDED = frozenset({MASKS, SAMPLES})  # the claims whose comparisons a budget ladder may give a seed margin


def _beyond(gap: float | None, numbers: Mapping[str, float | None]) -> bool:
    """A gap beyond its margin: the seed margin where the budget ladder measured one, else the hypervolume tie."""
    return gap is not None and gap > numbers.get("seed margin", hv_tie())


def _beyond_frontier_tie(gap: float | None, numbers: Mapping[str, float | None]) -> bool:
    """A frontier-NLL gap beyond :func:`frontier_tie`."""
    return gap is not None and gap > frontier_tie()


def _strictly(gap: float | None, numbers: Mapping[str, float | None]) -> bool:
    return gap is not None and gap > 0


def _meets(gap: float | None, numbers: Mapping[str, float | None]) -> bool:
    return bool(numbers["holds"])


# How each comparison is judged here, from its numbers (a claim not named keeps the stage's outcome).
HELD: dict[str, Callable[[float | None, Mapping[str, float | None]], bool]] = {
    **{name: _beyond for name in DIRECTIONAL}, **{name: _beyond_frontier_tie for name in FRONTIER},
    KEEPS_ORDER: _beyond, DROPOUT: _strictly,
    BEST_FIT: _strictly, LOW_LATENTS: _meets, NO_GAIN: _meets, SMALLER_GAIN: _meets, ON_PAR: _meets, ALIKE: _meets,
}


def _every_hv_below_tie(c: Comparison) -> str | None:
    """A tie reading ("no gain", "on par") whose hypervolumes all lie at or below the tie cannot fail."""
    if c.numbers.get("reach", 1.0) <= 0:
        return "cannot be tested at this scale: no KL range both curves' trials reach"
    top = c.numbers.get("larger HV")
    return ("cannot be tested at this scale: every hypervolume below the tie" if top is not None and top <= hv_tie()
            else None)


def _no_training_gain(c: Comparison) -> str | None:
    """A validation gain "far below" the training fit's needs a training-fit gain beyond the tie to be below."""
    train = c.numbers["training gain"]
    return "no training-fit gain beyond the tie to compare with" if train <= hv_tie() else None


def _line_cannot_fail(c: Comparison) -> str | None:
    """A cell whose curve has no trial above the low-KL line (and whose test KL is not above it) cannot fail."""
    from paperlib.experiments.micmco.ptb.micmco_ptb import LOW_KL

    top = c.numbers["curve max"]
    return (f"cannot fail at this scale: every trial of the curve below {LOW_KL} nats"
            if top is not None and top <= LOW_KL and c.numbers["kl"] <= LOW_KL else None)


def _too_short(c: Comparison) -> str | None:
    """An equal-compute tradeoff whose shared KL range ends at or below the run's best fit."""
    if not c.numbers["short"]:
        return None
    return (f"cannot be tested at this scale: the KL range both curves' trials reach ends at {c.numbers['reach']:.3f}, "
            f"not above the run's best fit at KL {c.numbers.get('best fit KL', 0.0):.3f}, so no higher latent usage is "
            "left to compare")


def _high_kl_unreached(c: Comparison) -> str | None:
    """Fig. 5.8's high latent usage (KL :data:`ON_PAR_KL`) not reached by both DReG 16 training-fit curves."""
    if not c.numbers["short"]:
        return None
    reach = " and ".join(f"{v:.3f} with {k.split(' ', 1)[1]}" for k, v in c.numbers.items() if k.startswith("reach "))
    return (f"cannot be tested at this scale: high latent usage, read as a KL of {ON_PAR_KL} nats per token, lies "
            f"beyond the DReG 16 training-fit trials, which reach at most KL {reach}")


# The comparisons that cannot be tested at this scale, per claim: why (the claim's not-run entry), or None to judge.
UNTESTABLE: dict[str, Callable[[Comparison], str | None]] = {
    **dict.fromkeys(TIE_THRESHOLDS, _every_hv_below_tie), SMALLER_GAIN: _no_training_gain,
    LOW_LATENTS: _line_cannot_fail, TRADEOFF: _too_short, RENYI_HIGH: _high_kl_unreached,
}


def _objectives(results: Results, *patterns: str) -> list[str]:
    """The objectives (kl, renyi) for which every curve ``patterns`` names (with ``{o}``) ran."""
    return [o for o in ("kl", "renyi") if all(p.format(o=o) in results["curves"] for p in patterns)]


def _equal_compute_keys(results: Results, figures: tuple[str, ...]) -> list[str]:
    keys = []
    for fig in figures:
        names = _configurations(fig)
        if not all(n in results["curves"] for n in names):
            continue
        keys += [f"{fig} 1 {tag}" for tag in ("T×16", "bs×16")]
    return keys


def _dropout_keys(results: Results) -> list[str]:
    """The base estimators with a finite trial both among Fig. 5.10's curves (naive dropout) and Fig. 5.11's (L2)."""
    def finite(fig: str, base: str) -> bool:
        return any(lowest_nll(results["curves"][n]["trials"]) < math.inf
                   for n in _present(results, _configurations(fig)) if _base(n) == base)

    return [b for b in ("dreg", "vimco") if finite("5.10", b) and finite("5.11", b)]


# The comparisons of the claims judged here alone (not in the stage's record), and of the stage's claims judged here
# on other curves than its record's (dropout: naive masks), from the curves that ran.
OWN_KEYS: dict[str, Callable[[Results], list[str]]] = {
    DROPOUT: _dropout_keys,
    NO_GAIN: lambda r: _objectives(r, "dreg1.shared", "dreg16_{o}.naive"),
    DISCRETE_GAIN: lambda r: _objectives(r, "vimco1.shared", "vimco16_{o}.naive"),
    SMALLER_GAIN: lambda r: _objectives(r, "vimco1.shared", "vimco16_{o}.naive", "vimco1.train", "vimco16_{o}.train"),
    DISCRETE_TRAILS: lambda r: _objectives(r, "dreg16_{o}.naive", "vimco16_{o}.naive"),
    DEGRADES: lambda r: _objectives(r, "dreg16_{o}.l2", "vimco16_{o}.l2"),
    ON_PAR: lambda r: _objectives(r, "dreg16_{o}.shared", "vimco16_{o}.shared"),
    BEST_FIT: lambda r: _equal_compute_keys(r, ("5.13", "5.24")),
    TRADEOFF: lambda r: _equal_compute_keys(r, ("5.13", "5.24")),
    ALIKE: lambda r: [f for f in ("5.14", "5.25") if all(n in r["curves"] for n in _configurations(f)[:3])],
    RENYI_HIGH: lambda r: ["5.8 Rényi vs KL"] if _objectives(r, "dreg16_{o}.train") == ["kl", "renyi"] else [],
}


def _tie_text() -> str:
    return f"{hv_tie()}"


def _frontier_tie_text() -> str:
    from paperlib.experiments.micmco.ptb.micmco_ptb import PPL_TOLERANCE

    return (f"{frontier_tie():.4f} nats (ln(1 + {PPL_TOLERANCE:.0%}): the stage's perplexity tolerance as a gap in "
            "NLL)")


# The rules of the claims judged here, and of the stage's claims read here differently from its record.
RULES: dict[str, Callable[[Results], str]] = {
    NO_GAIN: lambda r: (f"HV(DReG 16) - HV(DReG 1) <= {_tie_text()} per objective on validation with naive dropout "
                        "(Fig. 5.10, whose single-sample curve is the shared-mask run: with one sample the masks are "
                        "the same), on the reference of the DReG curves there; an objective whose hypervolumes both "
                        "lie at or below the tie cannot fail and is named as not run"),
    DISCRETE_GAIN: lambda r: (f"HV(VIMCO 16) > HV(VIMCO 1) + {_tie_text()} per objective on validation with naive "
                              "dropout (Fig. 5.10), on the reference of the VIMCO curves there"),
    SMALLER_GAIN: lambda r: ("'not nearly to the extent observed on the training set' read as: VIMCO 16's validation "
                             "gain over VIMCO 1 with naive dropout (Fig. 5.10) is below "
                             f"{SMALLER_SHARE:.0%} of its training-fit gain (Fig. 5.9), per objective, each on the "
                             "reference of its own VIMCO curves; judged only where the training-fit gain exceeds the "
                             f"{_tie_text()} tie (else there is no gain to fall short of, and the objective is "
                             "named as not run)"),
    DISCRETE_TRAILS: lambda r: (f"HV(DReG 16) > HV(VIMCO 16) + {_tie_text()} per objective on validation with naive "
                                "dropout (Fig. 5.10), KL capped at the discrete latents' entropy per token "
                                f"({discrete_cap(r):.2f} nats)"),
    DEGRADES: lambda r: (f"HV(DReG 16) > HV(VIMCO 16) + {_tie_text()} per objective on validation with L2 (Fig. "
                         "5.11): the discrete latents' NLL rising faster with latent usage leaves them less area; KL "
                         f"capped at the discrete latents' entropy per token ({discrete_cap(r):.2f} nats)"),
    ON_PAR: lambda r: (f"|HV(VIMCO 16) - HV(DReG 16)| <= {_tie_text()} per objective with shared masks (Fig. 5.12), "
                       f"KL capped at the thesis' {ON_PAR_KL} or at the largest KL both curves' trials reach, "
                       "whichever is smaller; an objective whose hypervolumes both lie at or below the tie cannot fail "
                       "and is named as not run"),
    BEST_FIT: lambda r: ("per single-sample run with 16x compute (T×16, bs×16): its lowest training NLL below the "
                         "16-sample estimators' lowest, by any amount; each the lowest NLL over one seed's tuned "
                         "trials (Figs. 5.13, 5.24)"),
    TRADEOFF: lambda r: ("'they lose this advantage at higher latent usage' read as: per single-sample run with 16x "
                         "compute, at k, the highest KL both its trials and the 16-sample estimators' trials reach, "
                         "the better 16-sample frontier NLL (the lowest NLL among a curve's trials with KL >= k) below "
                         f"the run's by more than {_frontier_tie_text()}, on the training fit (Figs. 5.13, 5.24); "
                         "named as not run where k does not exceed the KL of the run's lowest-NLL trial (its "
                         "frontier at k is then its best fit)"),
    ALIKE: lambda r: ("the lowest validation NLLs of the single-sample runs (base, T×16, bs×16; each the left end "
                      "of its frontier) lie within the stage's perplexity tolerance of each other, exp(highest - "
                      "lowest) - 1 <= 3% (Figs. 5.14, 5.25)"),
    DROPOUT: lambda r: ("best validation NLL with naive dropout (Fig. 5.10's curves: the dropout the thesis had "
                        "before it shared masks across samples) below the best with L2 (Fig. 5.11's), per base "
                        "estimator, by any amount; each the lowest NLL over one seed's tuned trials"),
    GENERALISE: lambda r: (f"max(HV(16 KL), HV(16 Rényi)) > HV(1 T×16) + {_tie_text()} and > HV(1 bs×16) + "
                           f"{_tie_text()} on validation (Figs. 5.14, 5.25), each on the reference of the three "
                           "curves compared"),
    LOW_LATENTS: lambda r: _low_latents_rule(),
    RENYI_HIGH: lambda r: ("'only with the Rényi at high latent usage' read as: DReG 16 Rényi's frontier NLL at a "
                           f"KL of {ON_PAR_KL} nats per token (the lowest NLL among its trials with KL >= "
                           f"{ON_PAR_KL}; the thesis gives high latent usage no number, and this is the level of "
                           f"its 'on par up to' on Fig. 5.12) below DReG 16 KL's by more than {_frontier_tie_text()}, "
                           "on the training fit (Fig. 5.8); named as not run where either curve's trials stop short of "
                           "that KL"),
}


def _low_latents_rule() -> str:
    from paperlib.experiments.micmco.ptb.micmco_ptb import LOW_KL

    return (f"test KL <= {LOW_KL} nats per token, in every row whose curve has a trial above {LOW_KL} on validation "
            "(or whose test KL is above it): where the line can fail; the other rows are named as not run")


def _unreached_5_12(results: Results) -> list[str]:
    reach = {o: min(_max_kl(results["curves"][f"{b}16_{o}.shared"]) for b in ("dreg", "vimco"))
             for o in _objectives(results, "dreg16_{o}.shared", "vimco16_{o}.shared")}
    short = {o: v for o, v in reach.items() if v < ON_PAR_KL}
    if not short:
        return []
    return [f"discrete and continuous latents on par beyond the KL our trials reach, up to about {ON_PAR_KL} ("
            + ", ".join(f"{_BASES[o]} from {v:.3f}" for o, v in short.items()) + ")"]


# What the thesis says about a range of a figure that our trials do not reach: named as not run.
UNREACHED: dict[str, Callable[[Results], list[str]]] = {"5.12": _unreached_5_12}


def _notes(results: Results, name: str, figures: list[str]) -> list[str]:
    """Numbers of the claim's figures that no single comparison shows: the figure's hypervolumes on its own
    reference (16 samples against 16x compute on validation), dropout's best NLL with shared masks (dropout against
    L2)."""
    if name == GENERALISE:
        out = []
        for fig in figures:
            names = [n for n in _configurations(fig) if n in results["curves"]]
            hv = _hv(results, names)
            labels = " / ".join(results["curves"][n]["label"] for n in names)
            out.append(f"Fig. {fig} on the figure's common reference: HV {labels} = "
                       f"{' / '.join(f'{hv[n]:.3f}' for n in names)}")
        return out
    if name == DROPOUT:
        shared = {b: min(lowest_nll(results["curves"][n]["trials"]) for n in names)
                  for b in ("dreg", "vimco") if (names := [n for n in _present(results, _configurations("5.12"))
                                                          if _base(n) == b])}
        return [f"with the shared masks the thesis turned to next (Fig. 5.12), the best validation NLL is "
                + ", ".join(f"{_BASES[b]} {v:.4f}" for b, v in shared.items())] if shared else []
    return []


# -- claims -------------------------------------------------------------------------------------------------------


def _judge(results: Results, name: str, key: str, recorded: bool | None, margins: Margins | None) -> Comparison:
    """Comparison ``key`` of claim ``name``: measured, and held as judged here (:data:`HELD`) or as the stage
    recorded it (``recorded``)."""
    measure = MEASURES[name]
    shown, gap, numbers = measure(results, key, margins) if name in SEEDED else measure(results, key)
    held = HELD[name](gap, numbers) if name in HELD else bool(recorded)
    return Comparison(key, shown, bool(held), gap, numbers)


def reading(results: Results, record: Mapping[str, Any], where: str, margins: Margins | None = None
            ) -> Reading | None:
    """The claim ``record`` (from ``results["claims"]``, or one judged here with its keys, :func:`readings`) read on
    figure ``where`` (or Table 5.1): the comparisons keyed by that figure when the claim keys its comparisons by
    figure, else all of them (a claim over several figures' curves, e.g. shared against naive masks); None when it
    compared nothing there. Each comparison is judged again here (:data:`HELD`; a seed margin from ``margins``,
    :func:`seed_margins`, replaces the fixed tie where the budget ladder measured one), a comparison that cannot be
    tested at this scale (:data:`UNTESTABLE`) is set aside as untested rather than judged, and a claim spanning other
    figures counts its tested comparisons there as judged here."""
    name, wins = record["claim"], dict(record.get("wins", {}))
    if name == KEEPS_ORDER:  # every pair of every figure, re-judged by KEEPS_ORDER_RULE
        wins = dict.fromkeys(_order_keys(wins))
    figures = sorted({k.split(" ", 1)[0] for k in wins if re.fullmatch(r"\d+\.\d+", k.split(" ", 1)[0])})
    own = [k for k in wins if k.split(" ", 1)[0] == where] if figures else list(wins)
    if not own:  # nothing compared, or nothing on this figure of a claim keyed by figure
        return None
    judged = {key: _judge(results, name, key, wins[key], margins) for key in (wins if len(own) < len(wins) else own)}
    why = {key: UNTESTABLE.get(name, lambda c: None)(c) for key, c in judged.items()}
    tested = [key for key in judged if why[key] is None]
    pooled = (sum(judged[key].held for key in tested), len(tested)) if len(own) < len(wins) else None
    rule = KEEPS_ORDER_RULE.format(tie=hv_tie()) if name == KEEPS_ORDER else record.get("rule", "")
    return Reading(name, rule, tuple(judged[key] for key in own if why[key] is None),
                   tuple(_notes(results, name, [where] if figures else [])), pooled,
                   tuple((plain_key(key, results["curves"]), why[key]) for key in own if why[key] is not None))


def _records(results: Results) -> dict[str, Mapping[str, Any]]:
    """Every claim the index reads, as the stage records it (``claim``, ``rule``, ``wins``) with the rules read
    here instead (:data:`RULES`), the comparisons chosen here where the stage's do not fit the thesis' words
    (:data:`OWN_KEYS`: dropout on naive masks) and the claims judged here alone with theirs."""
    records = {c["claim"]: dict(c) for c in results["claims"]}
    for name, keys in OWN_KEYS.items():
        records[name] = {"claim": name, "wins": dict.fromkeys(keys(results))}
    for name, rule in RULES.items():
        if name in records:
            records[name]["rule"] = rule(results)
    return records


def _read(results: Results, where: str, ladder: Results | None) -> tuple[list[Reading], list[str]]:
    """The claims figure ``where`` (or Table 5.1) is read for that judged a comparison there, and the not-run entries
    of the rest: a claim that compared nothing at this profile ("<claim> (its curves did not run at this profile)")
    and the comparisons that could not be tested at this scale (:attr:`Reading.not_run`)."""
    records = _records(results)
    names = TABLE_CLAIMS if where == TABLE else FIGURE_CLAIMS.get(where, ())
    margins = seed_margins(results, ladder)
    judged, not_run = [], []
    for name in names:
        read = reading(results, records[name], where, margins) if name in records else None
        if read is None:
            not_run.append(f"{name} (its curves did not run at this profile)")
            continue
        not_run += read.not_run
        if read.comparisons:
            judged.append(read)
    return judged, not_run


def readings(results: Results, where: str, ladder: Results | None = None) -> list[Reading]:
    """The claims figure ``where`` (or Table 5.1) is read for, each on its comparisons there, with the seed margins
    the budget ladder (``ladder``; None: none) measured where it did; those that judged nothing at this profile (no
    curves, or no comparison that could be tested) are left out (:func:`figure_claim` names them as not run)."""
    return _read(results, where, ladder)[0]


# The budget ladders that read one of the row's sentences on other curves than the row's own part: how the row
# names them (the ladder's claim as the stage words it -> the reading's label, and the evidence's first words).
LADDER_READINGS: dict[str, tuple[str, str]] = {
    "5.11-dropout": ("shared-mask dropout reaches a lower best NLL than L2 (DReG 16 Rényi, validation)",
                     "the thesis' sentence on dropout against L2 read with shared-mask dropout, the ladder's curves "
                     "(the row's own dropout part reads it with Fig. 5.10's naive dropout)"),
}


def ladder_parts(results: Results, ladder: Results | None, item: str) -> tuple[list[Part], list[str]]:
    """The budget ladder's parts of row ``item`` (relabelled where a ladder reads one of the row's sentences on
    other curves than the row's own part, :data:`LADDER_READINGS`) and what of it went unjudged (a ladder of another
    profile, not run or not read); nothing for a row without a ladder."""
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
        if part is not None and key in LADDER_READINGS:
            claim, how = LADDER_READINGS[key]
            part = replace(part, label=f"ladder: {claim}", claim=f"{claim}, more clearly as the training budget grows",
                           evidence=f"{how}; {part.evidence}")
        if part is not None:
            parts.append(part)
        else:
            why = ("not run at this profile" if key not in ladder.get("ladders", {}) else
                   "no gap at the top rung, or a lone judged rung inside its margin")
            unjudged.append(f"the budget ladder {key} ({why})")
    return parts, unjudged


def figure_claim(results: Results, ladder: Results | None, fig: str) -> Claim:
    """The claim of PTB figure ``fig`` (seed item M-F<fig>) on the stage's results and, for the rows with one, the
    budget ladder's results (``ladder``; None when not at hand), named as not run: what of the ladder went unjudged,
    the claims of :data:`FIGURE_CLAIMS` whose curves did not run, the comparisons that cannot be tested at this scale
    (:data:`UNTESTABLE`) and what the thesis says about a range our trials do not reach (:data:`UNREACHED`). Raises
    :class:`~paperlib.experiments.common.claims.Unjudged` when none of the claims the figure is read for judged
    anything at this profile."""
    judged, unread = _read(results, fig, ladder)
    if not judged:
        raise Unjudged(f"Fig. {fig}: none of its claims ({', '.join(FIGURE_CLAIMS.get(fig, ())) or 'none'}) "
                       "judged curves at this profile" + (f" (not run: {', '.join(unread)})" if unread else ""))
    parts, not_run = ladder_parts(results, ladder, f"M-F{fig}")
    not_run += unread + UNREACHED.get(fig, lambda r: [])(results)
    return Claim(f"M-F{fig}", tuple(r.part() for r in judged) + tuple(parts), tuple(not_run))


def table_cells(results: Results) -> tuple[int, int, list[int]]:
    """Table 5.1's cells: (run, all, the hidden sizes of those not run)."""
    rows = results["table_5_1"]
    missing = sorted({r["hidden_size"] for r in rows if not r.get("curve")})
    return sum(bool(r.get("curve")) for r in rows), len(rows), missing


def table_claim(results: Results, ladder: Results | None) -> Claim:
    """Table 5.1's claim (seed item M-T5.1): its two claims on the test results, its two budget ladders, and named as
    not run the cells the profile did not run and those whose low-KL line cannot fail (:data:`UNTESTABLE`). Raises
    :class:`~paperlib.experiments.common.claims.Unjudged` when neither claim compared anything (no cell ran)."""
    judged, unread = _read(results, TABLE, ladder)
    if not judged:
        raise Unjudged("Table 5.1: no cell ran at this profile")
    parts, not_run = ladder_parts(results, ladder, "M-T5.1")
    run, cells, missing = table_cells(results)
    if missing:
        not_run.append(f"{cells - run} of {cells} cells (hidden size {', '.join(map(str, missing))}: its shared-mask "
                       "curves did not run at this profile)")
    return Claim("M-T5.1", tuple(r.part() for r in judged) + tuple(parts), tuple(not_run + unread))
