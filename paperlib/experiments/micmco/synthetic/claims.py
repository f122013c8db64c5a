"""The synthetic MICMCO figures' claims (Melis Figs. 5.2-5.7, 5.15, 5.26, 5.27), judged once on
``results/micmco_synthetic.json`` and the budget ladder (``results/micmco_synthetic_ladder.json``): one
:class:`~paperlib.experiments.common.claims.Claim` per figure, read by the results index and the notebook alike.

A figure's parts are (1) the chapter's numeric claims that the figure's curves bear on (computed by the stage,
:func:`paperlib.experiments.micmco.synthetic.micmco_synthetic.claim_verdicts`; each of their hypervolume comparisons is read here
against the tie), (2) the figure's own readings as hypervolume comparisons (:data:`FIGURE_RULES`, "A beats B", and
:data:`FIGURE_BOUNDS`, "A does not beat B"), and (3) for Figs. 5.2, 5.3 and 5.6 the budget ladder
(:func:`ladder_claim_part`). A comparison holds when one curve's normalised hypervolume exceeds the other's by more
than the tie (``HV_TIE``); inside the tie the thesis' way it is within noise; otherwise not reproduced
(:func:`comparison_word`). A bound holds when the first curve does not exceed the second by more than the tie.

With one sample in the divergence term the KL and Rényi objectives are one objective (the single-sample
divergence estimate is ln q(z|x) - ln p(z) under both), so a figure reading that pairs such a curve's KL run
with the same reference as its Rényi run counts one comparison ("DReG 1 K/R", as the PTB family names its
single curve), which holds only where both runs do (:func:`rule_part`). Where the budget ladder measured the seed
spread of a compared gap at the main stage's budget, twice the standard deviation of one seed's gap stands beside
the comparison (:mod:`paperlib.experiments.micmco.seed_spread`); it replaces the tie (never falling below it) where
the ladder's rung repeated the main stage's run: the same budget and settings, and a start design shared trial for
trial (the ladder's trials all come from the Halton start design, the main stage's last ones from the GP sampler).

Fig. 5.6's "VIMCO 16 near-optimal" is re-read at index time (:func:`high_mi_excess`): trials whose MI estimate
exceeded ln V (capped there for the frontiers) with an NLL above 2 ln V are left out before interpolating the
frontier at 0.75 ln V, since the capped MI of such a run is an artefact of a loose bound; the stage's own record
(interpolated through them) is shown beside.

A ladder's reading comes from :func:`paperlib.experiments.common.claims.ladder_word`; its evidence lists the gap at each
rung with its tie margin (twice the standard error over seeds), whether every curve had stopped improving over
the rung's last quarter, and for Fig. 5.6 how many seeds' frontiers reach the MI level at all.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from paperlib.experiments.common.claims import Claim, Part, direction_word, mean_se, part_word, strict_word
from paperlib.experiments.common.ladder import claim_part, reading
from paperlib.experiments.micmco import seed_spread
from paperlib.experiments.micmco.seed_spread import Spread


def hv_tie() -> float:
    from paperlib.experiments.micmco.synthetic.micmco_synthetic import HV_TIE  # torch only when a claim is judged

    return HV_TIE


def comparison_word(held: bool, gap: float | None) -> str:
    """One hypervolume comparison as a part verdict: held (beyond the tie) -> reproduced; else by the sign of
    ``gap`` (HV difference in the thesis' direction; None where the comparison is not a directional HV gap, e.g. a
    condition on the NLL failed): inside the tie the thesis' way -> within noise, else not reproduced."""
    return "reproduced" if held else direction_word(gap, float("inf"))


Compared = Sequence[tuple[str, "float | None"]]  # per comparison: (part verdict, HV gap in the thesis' direction)


def tally(compared: Compared) -> tuple[int, int, int, int, int]:
    """(held, within noise, the other way, no lead (a zero gap), failed without a direction) of a claim's
    comparisons."""
    held = sum(w == "reproduced" for w, _ in compared)
    noise = sum(w == "within noise" for w, _ in compared)
    other = sum(w == "not reproduced" and g is not None and g < 0 for w, g in compared)
    level = sum(w == "not reproduced" and g == 0 for w, g in compared)
    return held, noise, other, level, len(compared) - held - noise - other - level


def counts(compared: Compared) -> str:
    """How a claim's comparisons came out, without verdict words (they sit in a part's evidence)."""
    held, noise, other, level, failed = tally(compared)
    text = [f"{held} of {len(compared)} comparisons hold beyond the {hv_tie()} tie margin"]
    text += [f"{noise} {'goes' if noise == 1 else 'go'} the thesis' way inside it"] if noise else []
    text += [f"{other} {'goes' if other == 1 else 'go'} the other way"] if other else []
    text += [f"{level} {'shows' if level == 1 else 'show'} no lead (equal HV)"] if level else []
    text += [f"{failed} {'fails' if failed == 1 else 'fail'}"] if failed else []
    return ", ".join(text)


def counts_against(compared: Compared, replaced: bool) -> str:
    """:func:`counts`, naming the margins where the ladder's seed margin stood in for the tie in some comparison."""
    text = counts(compared)
    if not replaced:
        return text
    return (text.replace(f"beyond the {hv_tie()} tie margin", "beyond their margins")
            + f" (the ladder's seed margin where it stands, elsewhere the {hv_tie()} tie)")


def _per_objective(better: str, worse: str) -> tuple[tuple[str, str], ...]:
    """``("iwae16_{o}", "iwae1_{o}")`` for o in KL and Rényi (a name without ``{o}`` stays as it is)."""
    return tuple((better.format(o=o), worse.format(o=o)) for o in ("kl", "renyi"))


Rules = dict[str, tuple[tuple[str, tuple[tuple[str, str], ...]], ...]]

# The figures' own readings (the thesis' words in micmco_synthetic.FIGURES and §5.7.1) as hypervolume comparisons:
# every (better, worse) pair should satisfy HV(better) > HV(worse) + the tie.
FIGURE_RULES: Rules = {
    # §5.7.1 on Fig. 5.2: IWAE 1 far below the ELBO, the order reversed with more samples, some degradation at 64
    "5.2": (("IWAE 1 worse than the ELBO", _per_objective("elbo", "iwae1_{o}")),
            ("IWAE 16 better than the ELBO", _per_objective("iwae16_{o}", "elbo")),
            ("IWAE 64 worse than IWAE 16", _per_objective("iwae16_{o}", "iwae64_{o}"))),
    # §5.7.1 on Fig. 5.3: DReG ahead of the IWAE (whose curves are Fig. 5.2's) and of the ELBO even with one
    # sample; both multi-sample objectives ahead of DReG 1
    "5.3": (("DReG 1 beats the ELBO", _per_objective("dreg1_{o}", "elbo")),
            ("DReG beats IWAE with as many samples",
             _per_objective("dreg1_{o}", "iwae1_{o}") + _per_objective("dreg16_{o}", "iwae16_{o}")),
            ("DReG 16 improves on DReG 1", _per_objective("dreg16_{o}", "dreg1_{o}"))),
    # §5.7.1 on Fig. 5.4: of the two asymmetric estimators, 1/16 the better
    "5.4": (("1/16 better than 16/1", _per_objective("dreg1-16_{o}", "dreg16-1_{o}")),),
    "5.5": (("REINFORCE 16 gains on REINFORCE 1", _per_objective("reinforce16_{o}", "reinforce1_{o}")),
            ("REINFORCE 64 worse than REINFORCE 16", _per_objective("reinforce16_{o}", "reinforce64_{o}"))),
    # §5.7.1 on Fig. 5.6: VIMCO 64 much worse; and the discrete latents' results "even better than with continuous
    # latents", read against the best continuous estimator's (DReG 16, Fig. 5.3) on the same data and box
    "5.6": (("VIMCO 64 much worse than VIMCO 16", _per_objective("vimco16_{o}", "vimco64_{o}")),
            ("VIMCO 16 better than continuous latents (DReG 16)", _per_objective("vimco16_{o}", "dreg16_{o}"))),
    # §5.7.1 on Fig. 5.7: 16/1 and 1/16 well ahead of REINFORCE 1, with the Rényi objective only; with one sample in
    # the divergence term VIMCO 16/1 and REINFORCE 1 each have one objective, so 16/1 is read once, KL and Rényi
    # together (:func:`rule_part` merges its two runs), and its "only with Rényi" is not run (FIGURE_UNTESTABLE)
    "5.7": (("16/1 and 1/16 (Rényi) beat REINFORCE 1",
             (("vimco16-1_kl", "reinforce1_kl"), ("vimco16-1_renyi", "reinforce1_renyi"),
              ("vimco1-16_renyi", "reinforce1_renyi"))),),
    "5.15": (("VQ-VAE better than REINFORCE 1", _per_objective("vqvae", "reinforce1_{o}")),
             ("VQ-VAE worse than VIMCO 16", _per_objective("vimco16_{o}", "vqvae"))),
}

# The figures' readings that a curve does not beat another: every (first, second) pair should satisfy
# HV(first) <= HV(second) + the tie.
FIGURE_BOUNDS: Rules = {
    # §5.7.1 on Fig. 5.7, the "only with Rényi": with KL, 1/16 does not get ahead of REINFORCE 1 beyond the tie
    "5.7": (("but not with KL", (("vimco1-16_kl", "reinforce1_kl"),)),),
}

# A bound that is one half of a contrast ("only with Rényi"): read only where the other half, the (better, worse)
# pair given here, holds beyond the tie; otherwise a curve below its reference with both objectives shows no
# difference between them, and the bound is named as not run.
FIGURE_CONTRASTS: dict[str, dict[str, tuple[str, str]]] = {
    "5.7": {"but not with KL": ("vimco1-16_renyi", "reinforce1_renyi")},
}


def contrast_missing(figure: str, text: str, hv: Mapping[str, float], labels: Mapping[str, str]) -> str | None:
    """Why bound ``text`` of ``figure`` is not read (:data:`FIGURE_CONTRASTS`): its contrasting pair does not hold
    beyond the tie; None when it holds, or the bound is no contrast's half, or a curve of the pair did not run."""
    better, worse = FIGURE_CONTRASTS.get(figure, {}).get(text, (None, None))
    if better is None or hv.get(better) is None or hv.get(worse) is None or hv[better] > hv[worse] + hv_tie():
        return None
    return (f"{text} (the other half of the contrast fails: {labels.get(better, better)} {hv[better]:.3f} does not "
            f"beat {labels.get(worse, worse)} {hv[worse]:.3f} beyond the {hv_tie()} tie, so the curve lies below its "
            "reference with both objectives and shows no difference between them)")


# What a figure's sentences say that the objectives cannot test: named as not run.
FIGURE_UNTESTABLE: dict[str, tuple[str, ...]] = {
    "5.3": ("all estimators \"degenerating quickly nearing the maximal average KL possible\" (no rule reads the shape "
            "of a frontier near ln V)",),
    "5.7": ("VIMCO 16/1 improving on REINFORCE 1 \"only with the Rényi objective\" (with one sample in the divergence "
            "term KL and Rényi are one objective for VIMCO 16/1 and for REINFORCE 1: their two runs differ by tuning "
            "alone)",),
}

# Which of the chapter's numeric claims (``micmco_synthetic.json`` "claims") each figure is read for. "Rényi
# slightly better than KL" is a finding the chapter states for the continuous latents of Figs. 5.2 and 5.3.
FIGURE_CLAIMS: dict[str, tuple[str, ...]] = {
    "5.2": ("Rényi slightly better than KL",),
    "5.3": ("Rényi slightly better than KL",),
    "5.4": ("multi-sample in both terms beats 16/1 and 1/16",),
    "5.6": ("VIMCO 16 reaches near-optimal NLL at high MI",),
    "5.7": ("multi-sample in both terms beats 16/1 and 1/16",),
    "5.26": ("power objective between KL and Rényi",),
    "5.27": ("power objective between KL and Rényi",),
}

OBJECTIVE_SUFFIXES = ("_kl", "_renyi")
BOTH_TERMS = "multi-sample in both terms beats 16/1 and 1/16"  # a chapter claim, as the stage words it


def _stem(name: str) -> str:
    """A curve's name without its objective (``dreg1_kl`` -> ``dreg1``; ``elbo`` stays)."""
    return name.rsplit("_", 1)[0] if name.endswith(OBJECTIVE_SUFFIXES) else name


def one_objective(results: Mapping[str, Any]) -> frozenset[str]:
    """The stems whose KL and Rényi curves both ran with one sample in the divergence term, where the two objectives
    are one (the single-sample divergence estimate is ln q(z|x) - ln p(z) under both, whatever alpha)."""
    configs = results["configurations"]
    return frozenset(stem for stem in {_stem(n) for n in configs}
                     if all(configs.get(f"{stem}{o}", {}).get("kl_samples") == 1 for o in OBJECTIVE_SUFFIXES))


def _blew_up(trial: Mapping[str, Any], results: Mapping[str, Any]) -> bool:
    """A trial without an NLL, or with one above 2 ln V."""
    return trial.get("nll") is None or not trial["nll"] < 2 * results["optimum_nll"]


def blown_up(results: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    """Curves most of whose tuned trials blew up (no NLL, or an NLL above 2 ln V): name -> (blown, trials)."""
    out = {}
    for name, conf in results["configurations"].items():
        trials = conf.get("trials", [])
        bad = sum(_blew_up(t, results) for t in trials)
        if 2 * bad > len(trials):
            out[name] = (bad, len(trials))
    return out


def blown_text(names: Sequence[str], blown: Mapping[str, tuple[int, int]], labels: Mapping[str, str]) -> list[str]:
    """"DReG 16/1 (KL, Rényi): 7 of 8 trials blew up" for the curves of ``names`` in ``blown``, one entry per stem
    where both objectives blew up alike."""
    out, done = [], set()
    for name in names:
        if name not in blown or name in done:
            continue
        twins = [f"{_stem(name)}{o}" for o in OBJECTIVE_SUFFIXES]
        if name.endswith(OBJECTIVE_SUFFIXES) and all(t in names and blown.get(t) == blown[name] for t in twins):
            done.update(twins)
            out.append(f"{labels.get(twins[0], name).removesuffix(' KL')} (KL, Rényi): {blown[name][0]} of "
                       f"{blown[name][1]} trials blew up")
        else:
            done.add(name)
            out.append(f"{labels.get(name, name)}: {blown[name][0]} of {blown[name][1]} trials blew up")
    return out


def ladder_spreads(results: Mapping[str, Any], ladder: Mapping[str, Any] | None) -> dict[tuple[str, str], Spread]:
    """(better curve, worse curve) -> the seed spread the budget ladder (same profile) measured for that very gap at
    the main stage's budget (:func:`paperlib.experiments.micmco.seed_spread.ladder_spreads` with the hypervolume
    tie): the margin only where the rung repeated the stage's run, else shown beside the tie."""
    return seed_spread.ladder_spreads(results, ladder, hv_tie())


def _grouped(pairs: Sequence[tuple[str, str]], same: frozenset[str]) -> list[list[tuple[str, str]]]:
    """``pairs`` as comparisons: pairs that differ only in the objective of curves whose objectives are one
    (``same``) are one comparison."""
    groups: dict[tuple[str, ...], list[tuple[str, str]]] = {}
    for a, b in pairs:
        groups.setdefault(tuple(_stem(n) if _stem(n) in same else n for n in (a, b)), []).append((a, b))
    return list(groups.values())


def rule_part(text: str, pairs: Sequence[tuple[str, str]], hv: Mapping[str, float], labels: Mapping[str, str],
              same: frozenset[str] = frozenset(), spreads: Mapping[tuple[str, str], Spread] | None = None,
              notes: Sequence[str] = (), bound: bool = False) -> Part | None:
    """One figure reading: every (better, worse) pair should satisfy HV(better) > HV(worse) + the tie (``bound``:
    every (first, second) pair HV(first) <= HV(second) + the tie); each pair is a comparison, except that the KL and
    Rényi pairs of a curve whose two objectives are one (``same``, :func:`one_objective`) against the same
    reference are one comparison, holding only where both runs do (its gap the smaller). A gap whose seed spread the
    budget ladder measured (``spreads``, :func:`ladder_spreads`) shows it; it is the margin only where the ladder ran
    the main stage's trials exactly. ``notes`` are appended to the evidence. None when none of its pairs was run."""
    tie, spreads = hv_tie(), spreads or {}
    run = [(a, b) for a, b in pairs if hv.get(a) is not None and hv.get(b) is not None]
    if not run:
        return None
    compared: list[tuple[str, float | None]] = []
    shown, merged, replaced = [], [], False

    def name(names: list[str]) -> str:
        label = labels.get(names[0], names[0])
        return label if len(names) == 1 else f"{label.removesuffix(' KL').removesuffix(' Rényi')} K/R"

    def side(names: list[str]) -> str:
        values = [f"{hv[n]:.3f}" for n in names]
        return (f"{name(names)} {values[0]}" if len(set(values)) == 1 else
                f"{name(names)} {' / '.join(values)} (KL / Rényi runs)")

    for group in _grouped(run, same):
        gap = min((hv[b] - hv[a]) if bound else (hv[a] - hv[b]) for a, b in group)
        spread = spreads.get(group[0]) if len(group) == 1 else None
        margin = seed_spread.standing_in(spread) or tie
        replaced |= margin != tie
        compared.append((comparison_word(gap >= -margin if bound else gap > margin, gap), gap))
        firsts, seconds = (list(dict.fromkeys(p[i] for p in group)) for i in (0, 1))
        text_ = f"{side(firsts)} vs {side(seconds)}"
        if len(group) > 1:
            merged.append(name(firsts if len(firsts) > 1 else seconds))
        if spread is not None:
            text_ += f" ({spread.shown(tie)})"
        shown.append(text_)
    if bound:
        held, _, other, _, _ = tally(compared)
        tally_text = (f"in {held} of {len(compared)} comparisons the first lies below the second or above it by no "
                      f"more than the {tie} tie margin" + (f", in {other} above it by more" if other else ""))
    else:
        tally_text = counts_against(compared, replaced)
    extra = []
    if merged:
        extra.append(f"one comparison for {', '.join(merged)}: with one sample in the divergence term KL and Rényi "
                     "are one objective (both estimate ln(q(z|x)/p(z)), Props. 11-12), so its two runs count once and "
                     "must both pass")
    single = [n for n in dict.fromkeys(n for p in run for n in p)
              if _stem(n) in same and n.endswith(OBJECTIVE_SUFFIXES)
              and not any(_stem(m) == _stem(n) and m != n for p in run for m in p)]
    if single:
        stems = [labels.get(n, n).removesuffix(" KL").removesuffix(" Rényi") for n in single]
        extra.append("with one sample in the divergence term KL and Rényi are one objective (both estimate "
                     "ln(q(z|x)/p(z)), Props. 11-12) for "
                     + " and ".join(stems) + (": its" if len(stems) == 1 else ": the") + " KL and Rényi curves"
                     + ("" if len(stems) == 1 else " of each") + " differ by tuning alone")
    rule = (f"HV(first) <= HV(second) + {tie} per pair" if bound else
            f"HV(better) > HV(worse) + {tie} per objective (normalised hypervolumes)")
    evidence = "; ".join([", ".join(shown), tally_text, *extra, *notes])
    return Part(text, text, part_word([w for w, _ in compared]), evidence, rule, kind="hypervolume tie")


LOOSE_RULE = ("trials whose MI estimate exceeded ln V (capped there) with an NLL above 2 ln V are left out of "
              "the frontier before interpolating")


def loose(trial: Mapping[str, Any], ln_v: float) -> bool:
    """A trial whose MI estimate exceeded ln V (capped at ln V for the frontiers) while its NLL is above 2 ln V: a
    blown-up run whose capped MI is an artefact of a loose bound, not a latent usage it reached."""
    nll, raw = trial.get("nll"), trial.get("mi_estimate", trial.get("mi"))
    return nll is not None and raw is not None and raw > ln_v and nll > 2 * ln_v


def high_mi_excess(results: Mapping[str, Any]) -> tuple[dict[str, float], dict[str, list[int]]]:
    """Fig. 5.6's numbers re-read from the trials: for VIMCO 16 KL and Rényi (those run), the NLL of the frontier of
    the trials that are not :func:`loose`, interpolated at MI = ``HIGH_MI_FRACTION`` ln V, minus ln V (nats;
    infinite where that frontier never reaches the MI level); and per curve the trial numbers left out. The stage's
    record (:func:`paperlib.experiments.micmco.synthetic.verdicts.high_mi_excess`) interpolates the frontier of
    every trial."""
    from paperlib.experiments.micmco.synthetic.micmco_synthetic import HIGH_MI_FRACTION
    from paperlib.frontiers import nll_at_mi, pareto_front

    configs, ln_v = results["configurations"], float(results["optimum_nll"])
    excess, left_out = {}, {}
    for name in ("vimco16_kl", "vimco16_renyi"):
        if name in configs:
            trials = configs[name]["trials"]
            kept = [t for t in trials if not loose(t, ln_v)]
            left_out[name] = [t["number"] for t in trials if loose(t, ln_v)]
            nll = [math.nan if t.get("nll") is None else t["nll"] for t in kept]
            mi = [math.nan if t.get("mi") is None else t["mi"] for t in kept]
            front = pareto_front(nll, mi)
            value = nll_at_mi([mi[i] for i in front], [nll[i] for i in front], [HIGH_MI_FRACTION * ln_v])[0]
            excess[name] = float(value - ln_v) if math.isfinite(value) else math.inf
    return excess, left_out


def chapter_parts(claim: Mapping[str, Any], have: set[str], labels: Mapping[str, str],
                  hv: Mapping[str, float], results: Mapping[str, Any]) -> list[Part]:
    """A chapter claim of :func:`paperlib.experiments.micmco.synthetic.micmco_synthetic.claim_verdicts` as parts, read on the curves
    ``have`` of one figure: its comparisons whose curves the figure draws, each judged by :func:`comparison_word`
    ("power between KL and Rényi": its two bounds, each a part; "Rényi slightly better than KL" leaves out the curves
    with one sample in the divergence term, where the two objectives coincide (the PTB family runs them as one K/R
    curve), so that tuning noise between two runs of one objective is not read as a gap); "VIMCO 16 near-optimal", a
    threshold rather than a comparison, is judged by the stage's threshold rule, strictly (one seed), on the
    frontiers re-read from the trials by :func:`high_mi_excess` (loose-bound trials left out; the stage's record
    shown beside). Empty when the figure has none of its comparisons or it was not run. The evidence's keys name the comparisons; ``hv``
    (every curve's normalised hypervolume) gives their values. The stage's own tally word is never read."""
    tie, name, evidence = hv_tie(), claim["claim"], claim["evidence"]
    compared: list[tuple[str, float | None]] = []
    shown = []

    def stem_label(stem: str) -> str:
        return labels.get(f"{stem}_kl", stem).removesuffix(" KL")

    if name == "power objective between KL and Rényi":
        # §5.B.3: "often better than the KL objective but lags the Rényi objective": two directions, each a
        # hypervolume comparison read against the tie as every "A beats B" is (the stage records weaker bounds)
        ordered: dict[str, list[str]] = {"power better than KL": [], "Rényi better than power": []}
        for stem in evidence:
            if all(f"{stem}_{o}" in have for o in ("kl", "power", "renyi")):
                kl, power, renyi = (hv[f"{stem}_{o}"] for o in ("kl", "power", "renyi"))
                ordered["power better than KL"].append(comparison_word(power > kl + tie, power - kl))
                ordered["Rényi better than power"].append(comparison_word(renyi > power + tie, renyi - power))
                shown.append(f"{stem_label(stem)}: KL / power / Rényi = {kl:.3f} / {power:.3f} / {renyi:.3f}")
        rule = (f"HV(power) > HV(KL) + {tie} and HV(Rényi) > HV(power) + {tie}, per base estimator (the thesis: "
                "power often better than KL, but behind Rényi)")
        return [Part(label, name, part_word(words), f"rule: {rule}; " + "; ".join(shown), rule,
                     kind="hypervolume tie")
                for label, words in ordered.items() if words]
    coincide = []
    if name == "Rényi slightly better than KL":
        for stem in evidence:
            if f"{stem}_kl" in have and f"{stem}_renyi" in have:
                if results["configurations"][f"{stem}_kl"].get("kl_samples") == 1:
                    coincide.append(stem_label(stem))  # one sample in the divergence term: the same objective
                    continue
                renyi, kl = hv[f"{stem}_renyi"], hv[f"{stem}_kl"]
                compared.append((comparison_word(renyi > kl + tie, renyi - kl), renyi - kl))
                shown.append(f"{stem_label(stem)}: Rényi {renyi:.3f} vs KL {kl:.3f}")
    elif name == BOTH_TERMS:
        blown = blown_up(results)  # a curve most of whose trials blew up is left out (figure_claim names it)
        against: set[str] = set()
        for key in evidence:
            base, objective = key.split()
            names = (f"{base}16_{objective}", f"{base}16-1_{objective}", f"{base}1-16_{objective}")
            if all(n in have for n in names) and names[0] not in blown:
                both = hv[names[0]]
                kept = [(tag, hv[n]) for tag, n in zip(("16/1", "1/16"), names[1:]) if n not in blown]
                compared += [(comparison_word(both > v + tie, both - v), both - v) for _, v in kept]
                against.update(tag for tag, _ in kept)
                if kept:
                    shown.append(f"{labels.get(names[0], key)} {both:.3f} vs "
                                 + " and ".join(f"{tag} {v:.3f}" for tag, v in kept))
        if against and against != {"16/1", "1/16"}:  # one of the two left out everywhere: the part is the other
            name = f"multi-sample in both terms beats {' and '.join(sorted(against))}"
    elif name == "VIMCO 16 reaches near-optimal NLL at high MI":
        from paperlib.experiments.micmco.synthetic.micmco_synthetic import NEAR_OPTIMAL_NATS

        excess, left_out = high_mi_excess(results)
        if not excess:
            return []
        shown = [f"{labels.get(k, k)} " + (f"{v:+.3f} nats" if math.isfinite(v) else "MI level not reached")
                 for k, v in excess.items()]
        rule = f"{claim['rule']}; {LOOSE_RULE}"
        text = f"rule: {rule}; " + ", ".join(shown)
        if any(left_out.values()):
            text += ("; left out: " + ", ".join(f"{labels.get(k, k)} trial{'s' if len(v) > 1 else ''} "
                                                + " and ".join(str(t) for t in v) for k, v in left_out.items() if v)
                     + "; the stage's record, interpolated through them: "
                     + ", ".join(f"{labels.get(k, k)} {v}" for k, v in evidence.items()))
        verdict = strict_word(NEAR_OPTIMAL_NATS - min(excess.values()))  # one seed, the stage's threshold rule
        return [Part(name, name, verdict, text, rule, kind="threshold")]
    skipped = (f"; not compared, with one sample in the divergence term KL and Rényi are the same objective: "
               f"{', '.join(coincide)}") if coincide else ""
    if not compared:
        return []
    rule = claim["rule"] + ("; only where the divergence term has more than one sample" if name == "Rényi slightly better "
                            "than KL" else "")
    if claim["claim"] == BOTH_TERMS and name != BOTH_TERMS:
        rule += f"; here {name.removeprefix('multi-sample in both terms beats ')} alone: the other's curves blew up"
    return [Part(name, name, part_word([w for w, _ in compared]),
                 f"rule: {rule}; " + "; ".join(shown) + f"; {counts(compared)}{skipped}", rule,
                 kind="hypervolume tie")]


def figure_claim(figure: str, item: str, results: Mapping[str, Any],
                 ladder: Mapping[str, Any] | None = None) -> Claim:
    """The claim of thesis figure ``figure`` (seed item ``item``) on the stage's results and, where given, the budget
    ladder's results (of the same profile): its ladder part where the figure has one, and the seed spreads it
    measured beside the figure's comparisons (:func:`ladder_spreads`). Named as not run: curves of the figure the
    profile did not run, comparisons with a curve most of whose trials blew up (:func:`blown_up`: it has no frontier
    to compare) and what the objectives cannot test (:data:`FIGURE_UNTESTABLE`); raises :class:`~paperlib.experiments.common.claims.Unjudged` when nothing of the figure
    can be judged."""
    configs = results["configurations"]
    names = results["figures"][figure]["configurations"]
    have = [n for n in names if n in configs]
    labels = {name: conf["label"] for name, conf in configs.items()}
    hv = {n: configs[n]["normalised_hypervolume"] for n in have}
    claims = {c["claim"]: c for c in results["claims"]}
    blown = blown_up(results)
    parts = [part for name in FIGURE_CLAIMS.get(figure, ()) if name in claims
             for part in chapter_parts(claims[name], set(have), labels, hv, results)]
    # the figure's readings; a curve of another figure (DReG against IWAE) is read where it was run
    every = {n: c["normalised_hypervolume"] for n, c in configs.items()}
    same, spreads = one_objective(results), ladder_spreads(results, ladder)
    not_run = [labels.get(n, n) for n in names if n not in configs]
    lost = [n for n in have if n in blown and _stem(n).endswith(("16-1", "1-16", "16"))]  # BOTH_TERMS' curves
    if lost and BOTH_TERMS in FIGURE_CLAIMS.get(figure, ()) and BOTH_TERMS in claims:
        tags = sorted({{"16-1": "16/1", "1-16": "1/16"}.get(_stem(n)[-4:], "16") for n in lost})
        not_run.append(f"{BOTH_TERMS}, against {' and '.join(tags)} "
                       f"({_blown_why(lost, blown, labels, results)})")
    for rules, bound in ((FIGURE_RULES, False), (FIGURE_BOUNDS, True)):
        for text, pairs in rules.get(figure, ()):
            lost = [p for p in pairs if all(n in every for n in p) and any(n in blown for n in p)]
            if lost:  # a curve most of whose trials blew up has no frontier to compare
                not_run.append(f"{text} ({_blown_why([n for p in lost for n in p], blown, labels, results)})")
            pairs = tuple(p for p in pairs if p not in lost)
            curves = list(dict.fromkeys(n for pair in pairs for n in pair if n in every))
            elsewhere = [n for n in curves if n not in names]
            drawn = [f"Fig. {f}" for f, fig in results["figures"].items()
                     if any(n in fig["configurations"] for n in elsewhere)]
            notes = blown_text(curves, blown, labels) + (
                [f"{', '.join(labels[n] for n in elsewhere)} as drawn in {', '.join(drawn)}"] if drawn else [])
            if bound and (why := contrast_missing(figure, text, every, labels)) is not None:
                not_run.append(why)
                continue
            if (part := rule_part(text, pairs, every, labels, same, spreads, notes, bound)) is not None:
                parts.append(part)
    not_run += list(FIGURE_UNTESTABLE.get(figure, ()))
    if ladder is not None and figure in ladder.get("ladders", {}):
        part = ladder_claim_part(ladder, figure) if ladder["profile"] == results["profile"] else None
        if part is not None:
            parts.append(part)
        elif ladder["profile"] != results["profile"]:
            not_run.append(f"the budget ladder (its results are of profile {ladder['profile']})")
        else:
            not_run.append("the budget ladder (a rung without a gap: some seed's frontier misses the MI level)")
    if ladder is not None and ladder["profile"] == results["profile"]:
        for claim, better, worse in PAIR_LADDERS.get(figure, ()):
            entry = pair_ladder(ladder, claim, better, worse)
            part = entry_part(entry, ladder.get("near_optimal_nats")) if entry is not None else None
            if part is not None:
                parts.append(part)
            else:
                not_run.append(f"ladder: {claim} (the budget ladder " + ("did not train both curves)" if entry is None
                                                                         else "has no gap at its top rung)"))
    return Claim(item, tuple(parts), tuple(not_run))


def _blown_why(names: Sequence[str], blown: Mapping[str, tuple[int, int]], labels: Mapping[str, str],
               results: Mapping[str, Any]) -> str:
    """Why comparisons with curves ``names`` are not judged: those most of whose trials blew up have no frontier to
    compare (that they blew up under the search space every estimator shares is shown, not scored), and where the
    divergence weight λ of their trials separates those that blew up from the rest, where it does
    (:func:`lambda_split`)."""
    curves = [n for n in dict.fromkeys(names) if n in blown]
    split = lambda_split(results, curves)
    return (f"not judged: {', '.join(blown_text(curves, blown, labels))}, leaving no frontier to compare (its "
            "instability under the search space every estimator shares is shown, not scored"
            + (f"; {split}" if split else "") + ")")


def lambda_split(results: Mapping[str, Any], curves: Sequence[str]) -> str:
    """"every trial that blew up has λ 0.12–1, every other at most 0.0066" when the divergence weight λ of the
    ``curves``' trials separates those that blew up (no NLL, or above 2 ln V) from the rest; "" otherwise. With one
    sample in the divergence term, its λ-weighted estimate ln q(z|x) − ln p(z) grows as q widens while the
    multi-sample term pays only through its best sample, so a large enough λ leaves the objective unbounded above:
    an instability of the objective at that λ, not of one run."""
    blown, rest = [], []
    for name in curves:
        for t in results["configurations"].get(name, {}).get("trials", ()):
            lam = (t.get("params") or {}).get("lam")
            if lam is None:
                return ""
            (blown if _blew_up(t, results) else rest).append(lam)
    if not blown or not rest or min(blown) <= max(rest):
        return ""
    return f"every trial that blew up has λ {min(blown):.2g}–{max(blown):.2g}, every other at most {max(rest):.2g}"


def ladder_claim_part(ladder: Mapping[str, Any], figure: str) -> Part | None:
    """The ladder of ``figure`` as one part; None when the ladder did not run that figure or could not be read."""
    entry = ladder.get("ladders", {}).get(figure)
    return None if entry is None else entry_part(entry, ladder.get("near_optimal_nats"))


def entry_part(entry: Mapping[str, Any], near: float | None) -> Part | None:
    """One ladder reading (an entry of the ladder's ``ladders``, or :func:`pair_ladder`'s) as a part; None when it
    could not be read."""
    if entry.get("reading") is None:
        return None
    rungs = entry["rungs"]
    if entry["kind"] == "better":
        values = " → ".join(f"{r['gap']:+.3f} ± {r['margin']:.3f}" for r in rungs)
        shown = f"HV({entry['labels'][0]}) − HV({entry['labels'][1]}) {values}"
        rule = ("paired by seed; margin the larger of 2 SE and the hypervolume tie; top rung beyond its margin, else "
                "the change from the first to the last rung beyond the two margins combined "
                "(paperlib.experiments.common.claims.ladder_word)")
    else:
        values = " → ".join(f"{near - r['gap']:.2f} ± {r['margin']:.2f}" if "gap" in r else
                            f"MI not reached by every seed ({r['reached']}/{len(r['excess'])})" for r in rungs)
        shown = f"excess NLL over ln V at MI = 0.75 ln V {values} nats (near-optimal below {near})"
        rule = (f"gap = {near} − excess (best of the curves, per seed); a rung where some seed's frontier misses "
                "the MI level has no gap; top rung beyond 2 SE, else the change from the first rung with a gap to "
                "the top beyond twice its standard error (paperlib.experiments.common.ladder.reading)")
    return claim_part(entry, shown, rule)


# Readings of a figure on the budget ladder beyond the ladder's own (figure -> (claim, better, worse)): two curves
# the ladder trains for other figures' ladders, at every rung and seed. §5.7.1 on Fig. 5.3: DReG "performing more
# efficiently than the ELBO even with a single sample" (the ELBO is Fig. 5.2's ladder curve, DReG 1 KL Fig. 5.3's).
PAIR_LADDERS: dict[str, tuple[tuple[str, str, str], ...]] = {"5.3": (("DReG 1 beats the ELBO", "dreg1_kl", "elbo"),)}


def pair_ladder(ladder: Mapping[str, Any], claim: str, better: str, worse: str) -> dict[str, Any] | None:
    """The budget ladder's reading of HV(``better``) − HV(``worse``), read as the ladder stage reads its own pairs
    (:func:`paperlib.experiments.micmco.synthetic.ladder.summarise`): per rung the per-seed gap, its mean, standard
    error and margin (the larger of 2 SE and the hypervolume tie), the two curves' convergence as their own ladders
    found it, then the reading; None when the ladder lacks either curve."""
    fronts = ladder.get("frontiers", {})
    if better not in fronts or worse not in fronts:
        return None
    converged: dict[tuple[str, int], bool | None] = {}
    labels: dict[str, str] = {}
    for entry in ladder["ladders"].values():
        labels.update(zip(entry.get("curves", ()), entry["labels"]))
        for rung in entry["rungs"]:
            converged.update({(n, rung["steps"]): c["converged"] for n, c in rung.get("curves", {}).items()})
    seeds, rungs = [str(s) for s in ladder["settings"]["seeds"]], []
    for steps in ladder["settings"]["rungs"]:
        per_seed = [fronts[better][s][str(steps)]["normalised_hypervolume"]
                    - fronts[worse][s][str(steps)]["normalised_hypervolume"] for s in seeds]
        flags = [converged.get((n, steps)) for n in (better, worse)]
        rung: dict[str, Any] = {"steps": steps, "per_seed": per_seed,
                                "converged": None if None in flags else all(flags)}
        if len(per_seed) >= 2:
            gap, se = mean_se(per_seed)
            rung.update(gap=gap, se=se, margin=max(2 * se, hv_tie()))
        rungs.append(rung)
    return {"claim": claim, "kind": "better", "labels": [labels.get(n, n) for n in (better, worse)], "rungs": rungs,
            "reading": reading(rungs)}
