"""The PTB MICMCO figures' and Table 5.1's claims (Melis §5.7.2, §5.B), judged once on ``results/micmco_ptb.json``
and the budget ladder (``results/micmco_ptb_ladder.json``): one :class:`~paperlib.experiments.common.claims.Claim` per
figure (:func:`figure_claim`) and one for Table 5.1 (:func:`table_claim`), read by the results index and the notebook.

A figure's parts are (1) the claims it is read for (:data:`FIGURE_CLAIMS`): the stage's numeric claims and the
thesis' sentences about the figure that the stage does not judge (their comparisons in :data:`OWN_KEYS`), each on the
figure's own comparisons when a claim spans several figures (its outcome over all of them counted beside); (2) for
the rows of :data:`LADDER_ITEMS`, the budget ladder's parts; and (3) named as not run: a claim whose curves did not
run at the profile, a comparison that cannot be tested at this scale (one of whose compared curves or frontier points
is no better than a unigram model of the same sentences, given its levels; :data:`UNTESTABLE`: a tie reading whose
hypervolumes all lie below the tie, a validation gain without a training-fit gain beyond the tie, a Table 5.1 cell
whose curve has no trial above the low-KL line, a latent usage the trials do not reach, a sentence about
regularisation, overfitting or validation set against the training fit where no compared run completed one pass over
the training data), the parts of a figure our trials do
not reach (:data:`UNREACHED`), a ladder that could not be read, a low-latent-usage ladder whose curves have no trial
above the line, and a ladder about regularisation that stays under one pass (:func:`ladder_cannot_fail`).

The numbers behind each comparison are recomputed from the results' curves and Table 5.1 rows as the stage computed
them (:mod:`paperlib.experiments.micmco.ptb.comparisons`), never read back from the stage's evidence text, and every
comparison is judged again here (:data:`HELD`): a hypervolume gap (:data:`DIRECTIONAL`) beyond the 0.02 tie holds,
the thesis' way inside it is within noise, no lead or the other way is not reproduced; where the budget ladder
measured the seed spread of a gap between the same two curves at the stage's budget (:func:`seed_margins`), twice
the standard deviation of one seed's gap is shown beside the comparison, and replaces the tie (never falling below
it) where the ladder's rung repeated the stage's run on the same reference: the same settings, and a start design
shared trial for trial (:mod:`paperlib.experiments.micmco.seed_spread`; at ``cpu`` the stage adds two trials from the
GP sampler). The budget ladder's own "better" readings take the larger of twice their standard error and the tie
at each rung (:func:`~paperlib.experiments.micmco.seed_spread.tie_floored`). Frontier NLLs at one KL (:data:`FRONTIER`) are read against
:func:`frontier_tie`, the stage's perplexity tolerance in nats. Some claims are read more strictly or closer to the
thesis' words than the stage recorded them (their rules in :data:`RULES`, claim 11's in :data:`KEEPS_ORDER_RULE`):
orders kept under batch size
and length only when a pair is separated the same way at both settings; "dropout" against L2 as Fig. 5.10's naive
dropout, strictly (the ladder reads the sentence with shared masks); 16x compute's tradeoff at the highest latent
usage both curves reach, its better best fit a part of its own; Table 5.1's low latent usage only where the line can
fail. A part's verdict over its comparisons is :func:`~paperlib.experiments.common.claims.part_word`.

Pure Python at import: the stage's functions and :mod:`paperlib.experiments.micmco.synthetic.claims` (both load
torch) are imported inside the functions that need them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

from paperlib.experiments.common.claims import Claim, Part, Unjudged, part_word
from paperlib.experiments.micmco.ptb.comparisons import (  # noqa: F401 (diverged_trials, lead: exported for the index)
    ON_PAR_KL, SMALLER_SHARE, Measured, Results, Spreads, _alike, _best_fit, _both_terms, _configurations, _degrades,
    _discrete, _discrete_gain, _discrete_trails, _dropout, _dropout_keys, _equal_compute_keys, _generalise, _hv,
    _low_latents, _masks, _max_kl, _no_gain, _objectives, _on_par, _perplexity, _power, _present, _ran, _renyi_high,
    _samples, _smaller_gain, _tradeoff, discrete_cap, diverged_trials, frontier_tie, hv_tie, lead, lowest_nll,
    seed_margins,
)
from paperlib.experiments.micmco.ptb.curve_names import _BASES, _base, plain_key
from paperlib.experiments.micmco.ptb.robustness import KEEPS_ORDER_RULE, _order, _order_keys, _spread
from paperlib.experiments.micmco.ptb.unigram import matching_levels
from paperlib.experiments.micmco.seed_spread import perplexity_spread, tie_floored
from paperlib.experiments.micmco.ptb.untestable import (  # noqa: F401 (ladder_cannot_fail: exported for the index)
    _cannot_overfit, _every_hv_below_tie, _high_kl_unreached, _line_cannot_fail, _no_training_gain,
    _overfitting_unseen, _too_short, _undertrained, _unregularised, _validation_as_training, at_unigram_level,
    ladder_cannot_fail, UNJUDGED_CLAUSES)

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
# The rows a budget ladder is a part of: paperlib.experiments.micmco.ptb.ladder.ITEMS (without torch), but for
# M-F5.10, on naive dropout alone: its ladder (shared against naive masks) judges Fig. 5.12's claim, in M-F5.12 only.
LADDER_ITEMS: dict[str, tuple[str, ...]] = {"M-F5.8": ("5.8",), "M-F5.9": ("5.9",),
                                            "M-F5.11": ("5.11", "5.11-dropout"), "M-F5.12": ("5.10", "5.12"),
                                            "M-T5.1": ("T5.1-perplexity", "T5.1-latents")}
# The claims whose comparisons are hypervolume gaps in the thesis' direction.
DIRECTIONAL = frozenset({MASKS, SAMPLES, DISCRETE, POWER, BOTH_TERMS, GENERALISE, DISCRETE_GAIN, DISCRETE_TRAILS,
                         DEGRADES})
# The claims whose comparisons are gaps between two curves' frontier NLLs at one KL (the lowest NLL among a curve's
# trials at that KL or above), in the thesis' direction, against frontier_tie().
FRONTIER = frozenset({TRADEOFF, RENYI_HIGH})
# Claims holding when a hypervolume difference stays inside the tie ("no gain", "on par", "differ very little"): one
# whose hypervolumes all lie at or below the tie cannot fail, and is named as not run (UNTESTABLE).
TIE_THRESHOLDS = frozenset({NO_GAIN, ON_PAR, SPREAD})
# How each claim's comparisons are judged (paperlib.experiments.common.claims.RULE_KINDS).
READING_KINDS = {**{name: "hypervolume tie" for name in DIRECTIONAL}, **{name: "fixed margin" for name in FRONTIER},
                 PERPLEXITY: "threshold", LOW_LATENTS: "threshold", DROPOUT: "fixed margin", KEEPS_ORDER: "hypervolume tie",
                 SPREAD: "threshold", NO_GAIN: "threshold", SMALLER_GAIN: "threshold", ON_PAR: "threshold",
                 BEST_FIT: "fixed margin", ALIKE: "threshold"}


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
                      f"({', '.join(f'{m:.4f}' for m in seeded)}: twice the spread of one seed's gap over its seeds, "
                      f"at least the tie), the "
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


def _meets(gap: float | None, numbers: Mapping[str, float | None]) -> bool:
    return bool(numbers["holds"])


# How each comparison is judged here, from its numbers (a claim not named keeps the stage's outcome).
HELD: dict[str, Callable[[float | None, Mapping[str, float | None]], bool]] = {
    **{name: _beyond for name in DIRECTIONAL}, **{name: _beyond_frontier_tie for name in FRONTIER},
    KEEPS_ORDER: _beyond, DROPOUT: _beyond_frontier_tie,
    BEST_FIT: _beyond_frontier_tie, LOW_LATENTS: _meets, NO_GAIN: _meets, SMALLER_GAIN: _meets, ON_PAR: _meets, ALIKE: _meets,
}


# The comparisons that cannot be tested at this scale, per claim: why (the claim's not-run entry), or None to judge.
UNTESTABLE: dict[str, Callable[[Comparison], str | None]] = {
    **dict.fromkeys(TIE_THRESHOLDS, _every_hv_below_tie), SMALLER_GAIN: _no_training_gain,
    LOW_LATENTS: _line_cannot_fail, TRADEOFF: _too_short, RENYI_HIGH: _high_kl_unreached,
    DROPOUT: _cannot_overfit, ALIKE: _undertrained, GENERALISE: _overfitting_unseen, DEGRADES: _validation_as_training,
    PERPLEXITY: _unregularised}


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
    ALIKE: lambda r: [f for f in ("5.14", "5.25") if all(_ran(r, n) for n in _configurations(f)[:3])],
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
                         f"capped at the discrete latents' entropy per token ({discrete_cap(r):.2f} nats); tested "
                         "only where a run compared completed one pass over the training sentences (before, "
                         "validation cannot part from the training fit)"),
    ON_PAR: lambda r: (f"|HV(VIMCO 16) - HV(DReG 16)| <= {_tie_text()} per objective with shared masks (Fig. 5.12), "
                       f"KL capped at the thesis' {ON_PAR_KL} or at the largest KL both curves' trials reach, "
                       "whichever is smaller, as shares of the box's whole KL width (as the tie is); an objective "
                       "whose hypervolumes both lie at or below the tie there cannot fail and is named as not run"),
    BEST_FIT: lambda r: ("per single-sample run with 16x compute (T×16, bs×16): its lowest training NLL below the "
                         f"16-sample estimators' lowest by more than {_frontier_tie_text()} (a fixed margin: each is "
                         "the lowest NLL over one seed's tuned trials; Figs. 5.13, 5.24)"),
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
                        f"estimator, by more than {_frontier_tie_text()} (a fixed margin: each is the lowest NLL over "
                        "one seed's tuned trials, whose spread one seed cannot measure)"),
    GENERALISE: lambda r: (f"max(HV(16 KL), HV(16 Rényi)) > HV(1 T×16) + {_tie_text()} and > HV(1 bs×16) + "
                           f"{_tie_text()} on validation (Figs. 5.14, 5.25), each on the reference of the three "
                           "curves compared; tested only where a run compared completed one pass over the training "
                           "sentences (before, none can overfit)"),
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
        return ["with the shared masks the thesis turned to next (Fig. 5.12), the best validation NLL is "
                + ", ".join(f"{_BASES[b]} {v:.4f}" for b, v in shared.items())] if shared else []
    return []


# -- claims -------------------------------------------------------------------------------------------------------


def _judge(results: Results, name: str, key: str, recorded: bool | None, spreads: Spreads | None) -> Comparison:
    """Comparison ``key`` of claim ``name``: measured, and held as judged here (:data:`HELD`) or as the stage
    recorded it (``recorded``)."""
    measure = MEASURES[name]
    shown, gap, numbers = measure(results, key, spreads) if name in SEEDED else measure(results, key)
    held = HELD[name](gap, numbers) if name in HELD else bool(recorded)
    return Comparison(key, shown, bool(held), gap, numbers)


def _why_untested(name: str, c: Comparison, results: Results, levels: Mapping[str, Any] | None) -> str | None:
    """Why comparison ``c`` of claim ``name`` cannot be tested at this scale, or None: a compared curve no better than
    the unigram ``levels`` (:func:`~paperlib.experiments.micmco.ptb.untestable.at_unigram_level`), the claim's own
    reason (:data:`UNTESTABLE`), or both, the first then the second."""
    whys = [w for w in (at_unigram_level(c, results, levels), UNTESTABLE.get(name, lambda c: None)(c)) if w]
    if len(whys) < 2:
        return whys[0] if whys else None
    return f"{whys[0]}, and {whys[1].removeprefix('cannot be tested at this scale: ')}"


def reading(results: Results, record: Mapping[str, Any], where: str, spreads: Spreads | None = None,
            levels: Mapping[str, Any] | None = None) -> Reading | None:
    """The claim ``record`` (from ``results["claims"]``, or one judged here with its keys, :func:`readings`) read on
    figure ``where`` (or Table 5.1): the comparisons keyed by that figure when the claim keys its comparisons by
    figure, else all of them (a claim over several figures' curves, e.g. shared against naive masks); None when it
    compared nothing there. Each comparison is judged again here (:data:`HELD`; a seed spread from ``spreads``,
    :func:`seed_margins`, replaces the fixed tie only where the budget ladder repeated the stage's run), a comparison
    that cannot be tested at this scale is set aside as untested rather than judged (one of whose curves is no better
    than the unigram ``levels`` of the same sentences, :func:`~paperlib.experiments.micmco.ptb.untestable.
    at_unigram_level`, or for its claim's reason, :data:`UNTESTABLE`; both are named where both hold), and a claim
    spanning other figures counts its tested comparisons there as judged here."""
    name, wins = record["claim"], dict(record.get("wins", {}))
    if name == KEEPS_ORDER:  # every pair of every figure, re-judged by KEEPS_ORDER_RULE
        wins = dict.fromkeys(_order_keys(wins))
    figures = sorted({k.split(" ", 1)[0] for k in wins if re.fullmatch(r"\d+\.\d+", k.split(" ", 1)[0])})
    own = [k for k in wins if k.split(" ", 1)[0] == where] if figures else list(wins)
    if not own:  # nothing compared, or nothing on this figure of a claim keyed by figure
        return None
    judged = {key: _judge(results, name, key, wins[key], spreads) for key in (wins if len(own) < len(wins) else own)}
    why = {key: _why_untested(name, c, results, levels) for key, c in judged.items()}
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


def _read(results: Results, where: str, ladder: Results | None, levels: Mapping[str, Any] | None
          ) -> tuple[list[Reading], list[str], list[Reading]]:
    """The claims figure ``where`` (or Table 5.1) is read for that judged a comparison there, the not-run entries
    of the rest (a claim that compared nothing at this profile, "<claim> (its curves did not run at this profile)",
    and the comparisons that could not be tested at this scale, :attr:`Reading.not_run`, among them those whose
    curves lie at the unigram ``levels``, used only where made on the same sentences,
    :func:`~paperlib.experiments.micmco.ptb.unigram.matching_levels`), and the claims none of whose comparisons there
    could be tested."""
    records = _records(results)
    names = TABLE_CLAIMS if where == TABLE else FIGURE_CLAIMS.get(where, ())
    spreads, levels = seed_margins(results, ladder), matching_levels(results, levels)
    judged, not_run, aside = [], [], []
    for name in names:
        read = reading(results, records[name], where, spreads, levels) if name in records else None
        if read is None:
            not_run.append(f"{name} (its curves did not run at this profile)")
            continue
        not_run += read.not_run
        (judged if read.comparisons else aside).append(read)
    return judged, not_run, aside


def readings(results: Results, where: str, ladder: Results | None = None,
             levels: Mapping[str, Any] | None = None) -> list[Reading]:
    """The claims figure ``where`` (or Table 5.1) is read for, each on its comparisons there, with the seed spreads
    the budget ladder (``ladder``; None: none) measured where it did and the unigram ``levels`` (None: none); those
    that judged nothing at this profile (no curves, or no comparison that could be tested) are left out
    (:func:`figure_claim` names them as not run)."""
    return _read(results, where, ladder, levels)[0]


def readings_and_set_aside(results: Results, where: str, ladder: Results | None = None,
                           levels: Mapping[str, Any] | None = None) -> tuple[list[Reading], list[Reading]]:
    """:func:`readings`, and the claims figure ``where`` (or Table 5.1) is read for whose every comparison there
    cannot be tested at this scale (:attr:`Reading.untested` says why), from one reading of the figure."""
    judged, _, aside = _read(results, where, ladder, levels)
    return judged, aside


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
    profile, not run or not read, or one that cannot fail at this scale, :func:`ladder_cannot_fail`); nothing for a
    row without a ladder."""
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
        untestable = ladder_cannot_fail(ladder, key)
        if untestable is not None:
            name = LADDER_READINGS[key][0] if key in LADDER_READINGS else ladder["ladders"][key]["claim"]
            unjudged.append(f"ladder: {name} — {untestable}")
            continue
        entry = ladder["ladders"].get(key, {})
        if entry.get("kind") == "better" and entry.get("reading") is not None:  # the tie floors a rung's 2 SE
            floored = {**ladder, "ladders": {**ladder["ladders"], key: tie_floored(entry, hv_tie())}}
            part = ladder_claim_part(floored, key)
            part = part and replace(part, rule=f"paired by seed; margin the larger of 2 SE and the {hv_tie()} "
                                    "hypervolume tie; top rung beyond its margin, else the change from the first to "
                                    "the last rung beyond the two margins combined "
                                    "(paperlib.experiments.common.claims.ladder_word)")
        else:
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


class Untestable(Unjudged):
    """Nothing of a figure's (or Table 5.1's) claims can be judged at this profile, and ``not_run`` says why: its
    curves did not run, or every comparison cannot be tested at this scale."""

    def __init__(self, message: str, not_run: list[str]):
        super().__init__(message)
        self.not_run = tuple(not_run)


def figure_claim(results: Results, ladder: Results | None, fig: str, levels: Mapping[str, Any] | None = None
                 ) -> Claim:
    """The claim of PTB figure ``fig`` (seed item M-F<fig>) on the stage's results and, for the rows with one, the
    budget ladder's results (``ladder``; None when not at hand), named as not run: what of the ladder went unjudged,
    the claims of :data:`FIGURE_CLAIMS` whose curves did not run, the comparisons that cannot be tested at this scale
    (a curve compared no better than the unigram ``levels`` of ``results/micmco_ptb_unigram.json``, None when not at
    hand; :data:`UNTESTABLE`) and what the thesis says about a range our trials do not reach (:data:`UNREACHED`). Raises
    :class:`~paperlib.experiments.common.claims.Unjudged` when none of the claims the figure is read for judged
    anything at this profile (:class:`Untestable`, with the reasons, when some could have)."""
    judged, unread, _ = _read(results, fig, ladder, levels)
    if not judged:
        message = (f"Fig. {fig}: none of its claims ({', '.join(FIGURE_CLAIMS.get(fig, ())) or 'none'}) judged "
                   "curves at this profile" + (f" (not run: {', '.join(unread)})" if unread else ""))
        raise Untestable(message, unread) if unread else Unjudged(message)
    parts, not_run = ladder_parts(results, ladder, f"M-F{fig}")
    not_run += unread + UNREACHED.get(fig, lambda r: [])(results) + list(UNJUDGED_CLAUSES.get(fig, ()))
    return Claim(f"M-F{fig}", tuple(r.part() for r in judged) + tuple(parts), tuple(not_run))


def table_cells(results: Results) -> tuple[int, int, list[int]]:
    """Table 5.1's cells: (run, all, the hidden sizes of those not run)."""
    rows = results["table_5_1"]
    missing = sorted({r["hidden_size"] for r in rows if not r.get("curve")})
    return sum(bool(r.get("curve")) for r in rows), len(rows), missing


def table_claim(results: Results, ladder: Results | None, levels: Mapping[str, Any] | None = None) -> Claim:
    """Table 5.1's claim (seed item M-T5.1): its two claims on the test results (the perplexity one beside the ladder's
    seed spread), its two budget ladders, and named as not run the cells the profile did not run and those whose
    low-KL line cannot fail (:data:`UNTESTABLE`). Raises :class:`Unjudged` when no cell ran."""
    judged, unread, _ = _read(results, TABLE, ladder, levels)
    if not judged:
        message = "Table 5.1: no claim could be judged at this profile"
        raise Untestable(f"{message} (not run: {', '.join(unread)})", unread) if unread else Unjudged(message)
    parts, not_run = ladder_parts(results, ladder, "M-T5.1")
    spread = perplexity_spread(results, ladder)  # the ladder's seed spread beside a one-seed cell's change
    judged = [replace(r, notes=(*r.notes, spread)) if r.name == PERPLEXITY and spread else r for r in judged]
    run, cells, missing = table_cells(results)
    if missing:
        not_run.append(f"{cells - run} of {cells} cells (hidden size {', '.join(map(str, missing))}: its shared-mask "
                       "curves did not run at this profile)")
    return Claim("M-T5.1", tuple(r.part() for r in judged) + tuple(parts), tuple(not_run + unread))
