"""The synthetic MICMCO figures' claims (Melis Figs. 5.2-5.7, 5.15, 5.26, 5.27), judged once on
``results/micmco_synthetic.json`` and the budget ladder (``results/micmco_synthetic_ladder.json``): one
:class:`~paperlib.experiments.common.claims.Claim` per figure, read by the results index and the notebook alike.

A figure's parts are (1) the chapter's numeric claims that the figure's curves bear on (computed by the stage,
:func:`paperlib.experiments.micmco.synthetic.micmco_synthetic.claim_verdicts`; each of their hypervolume comparisons is read here
against the tie), (2) the figure's own readings as hypervolume comparisons (:data:`FIGURE_RULES`), and (3) for
Figs. 5.2, 5.3 and 5.6 the budget ladder (:func:`ladder_claim_part`). A comparison holds when one curve's
normalised hypervolume exceeds the other's by more than the tie (``HV_TIE``); inside the tie the thesis' way it
is within noise; otherwise not reproduced (:func:`comparison_word`).

A ladder's reading comes from :func:`paperlib.experiments.common.claims.ladder_word`; its evidence lists the gap at each
rung with its tie margin (twice the standard error over seeds), whether every curve had stopped improving over
the rung's last quarter, and for Fig. 5.6 how many seeds' frontiers reach the MI level at all.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from paperlib.experiments.common.claims import Claim, Part, direction_word, part_word, strict_word
from paperlib.experiments.common.ladder import claim_part


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


def _per_objective(better: str, worse: str) -> tuple[tuple[str, str], ...]:
    """``("iwae16_{o}", "iwae1_{o}")`` for o in KL and Rényi (a name without ``{o}`` stays as it is)."""
    return tuple((better.format(o=o), worse.format(o=o)) for o in ("kl", "renyi"))


# The figures' own readings (the thesis' words in micmco_synthetic.FIGURES) as hypervolume comparisons, per objective.
FIGURE_RULES: dict[str, tuple[tuple[str, tuple[tuple[str, str], ...]], ...]] = {
    "5.2": (("IWAE 1 worse than the ELBO", _per_objective("elbo", "iwae1_{o}")),
            ("IWAE 16 better than IWAE 1", _per_objective("iwae16_{o}", "iwae1_{o}")),
            ("IWAE 64 worse than IWAE 16", _per_objective("iwae16_{o}", "iwae64_{o}"))),
    "5.3": (("DReG 1 beats the ELBO", _per_objective("dreg1_{o}", "elbo")),
            ("DReG 16 improves on DReG 1", _per_objective("dreg16_{o}", "dreg1_{o}"))),
    "5.5": (("REINFORCE 16 gains on REINFORCE 1", _per_objective("reinforce16_{o}", "reinforce1_{o}")),
            ("REINFORCE 64 worse than REINFORCE 16", _per_objective("reinforce16_{o}", "reinforce64_{o}"))),
    "5.6": (("VIMCO 64 much worse than VIMCO 16", _per_objective("vimco16_{o}", "vimco64_{o}")),),
    "5.15": (("VQ-VAE better than REINFORCE 1", _per_objective("vqvae", "reinforce1_{o}")),
             ("VQ-VAE worse than VIMCO 16", _per_objective("vimco16_{o}", "vqvae"))),
}

# Which of the chapter's numeric claims (``micmco_synthetic.json`` "claims") each figure is read for.
FIGURE_CLAIMS: dict[str, tuple[str, ...]] = {
    "5.2": ("Rényi slightly better than KL",),
    "5.3": ("Rényi slightly better than KL",),
    "5.4": ("multi-sample in both terms beats 16/1 and 1/16",),
    "5.6": ("VIMCO 16 reaches near-optimal NLL at high MI",),
    "5.7": ("multi-sample in both terms beats 16/1 and 1/16", "Rényi slightly better than KL"),
    "5.26": ("power objective between KL and Rényi",),
    "5.27": ("power objective between KL and Rényi",),
}


def rule_part(text: str, pairs: Sequence[tuple[str, str]], hv: Mapping[str, float],
              labels: Mapping[str, str]) -> Part | None:
    """One figure reading: every (better, worse) pair should satisfy HV(better) > HV(worse) + the tie; each pair
    is a comparison. None when none of its pairs was run."""
    tie = hv_tie()
    run = [(a, b) for a, b in pairs if hv.get(a) is not None and hv.get(b) is not None]
    if not run:
        return None
    compared = [(comparison_word(hv[a] > hv[b] + tie, hv[a] - hv[b]), hv[a] - hv[b]) for a, b in run]
    evidence = ", ".join(f"{labels.get(a, a)} {hv[a]:.3f} vs {labels.get(b, b)} {hv[b]:.3f}" for a, b in run)
    return Part(text, text, part_word([w for w, _ in compared]), f"{evidence}; {counts(compared)}",
                f"HV(better) > HV(worse) + {tie} per objective (normalised hypervolumes)", kind="hypervolume tie")


def chapter_parts(claim: Mapping[str, Any], have: set[str], labels: Mapping[str, str],
                  hv: Mapping[str, float], results: Mapping[str, Any]) -> list[Part]:
    """A chapter claim of :func:`paperlib.experiments.micmco.synthetic.micmco_synthetic.claim_verdicts` as parts, read on the curves
    ``have`` of one figure: its comparisons whose curves the figure draws, each judged by :func:`comparison_word`
    ("power between KL and Rényi": its two bounds, each a part; "Rényi slightly better than KL" leaves out the curves
    with one sample in the divergence term, where the two objectives coincide (the PTB family runs them as one K/R
    curve), so that tuning noise between two runs of one objective is not read as a gap); "VIMCO 16 near-optimal", a
    threshold rather than
    a comparison, is judged on the stage's frontiers (``results``) by the stage's rule, strictly (one seed). Empty
    when the figure has none of its comparisons or it was not run. The evidence's keys name the comparisons; ``hv``
    (every curve's normalised hypervolume) gives their values. The stage's own tally word is never read."""
    tie, name, evidence = hv_tie(), claim["claim"], claim["evidence"]
    compared: list[tuple[str, float | None]] = []
    shown = []

    def stem_label(stem: str) -> str:
        return labels.get(f"{stem}_kl", stem).removesuffix(" KL")

    if name == "power objective between KL and Rényi":
        bounds: dict[str, list[bool]] = {"power not below KL": [], "power not above Rényi": []}
        for stem in evidence:
            if all(f"{stem}_{o}" in have for o in ("kl", "power", "renyi")):
                kl, power, renyi = (hv[f"{stem}_{o}"] for o in ("kl", "power", "renyi"))
                bounds["power not below KL"].append(power >= kl - tie)
                bounds["power not above Rényi"].append(power <= renyi + tie)
                shown.append(f"{stem_label(stem)}: KL / power / Rényi = {kl:.3f} / {power:.3f} / {renyi:.3f}")
        rule = f"{claim['rule']} (the thesis: power often better than KL, but behind Rényi)"
        return [Part(bound, name, part_word(held), f"rule: {rule}; " + "; ".join(shown), claim["rule"],
                     kind="hypervolume tie")
                for bound, held in bounds.items() if held]
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
    elif name == "multi-sample in both terms beats 16/1 and 1/16":
        for key in evidence:
            base, objective = key.split()
            names = (f"{base}16_{objective}", f"{base}16-1_{objective}", f"{base}1-16_{objective}")
            if all(n in have for n in names):
                both, lik, div = (hv[n] for n in names)
                compared += [(comparison_word(both > lik + tie, both - lik), both - lik),
                             (comparison_word(both > div + tie, both - div), both - div)]
                shown.append(f"{labels.get(f'{base}16_{objective}', key)} {both:.3f} vs 16/1 {lik:.3f} and 1/16 "
                             f"{div:.3f}")
    elif name == "VIMCO 16 reaches near-optimal NLL at high MI":
        from paperlib.experiments.micmco.synthetic.micmco_synthetic import NEAR_OPTIMAL_NATS, high_mi_excess

        excess = high_mi_excess(results)
        if not excess:
            return []
        shown = [f"{labels.get(k, k)} " + (f"{v:+.3f} nats" if math.isfinite(v) else "MI level not reached")
                 for k, v in excess.items()]
        verdict = strict_word(NEAR_OPTIMAL_NATS - min(excess.values()))  # one seed, the stage's threshold rule
        return [Part(name, name, verdict, f"rule: {claim['rule']}; " + ", ".join(shown), claim["rule"],
                     kind="threshold")]
    skipped = (f"; not compared, with one sample in the divergence term KL and Rényi are the same objective: "
               f"{', '.join(coincide)}") if coincide else ""
    if not compared:
        return []
    rule = claim["rule"] + ("; only where the divergence term has more than one sample" if name == "Rényi slightly better "
                            "than KL" else "")
    return [Part(name, name, part_word([w for w, _ in compared]),
                 f"rule: {rule}; " + "; ".join(shown) + f"; {counts(compared)}{skipped}", rule,
                 kind="hypervolume tie")]


def figure_claim(figure: str, item: str, results: Mapping[str, Any],
                 ladder: Mapping[str, Any] | None = None) -> Claim:
    """The claim of thesis figure ``figure`` (seed item ``item``) on the stage's results and, where the figure has
    one, the budget ladder's results (of the same profile). Curves of the figure the profile did not run are named
    as not run; raises :class:`~paperlib.experiments.common.claims.Unjudged` when nothing of the figure can be judged."""
    configs = results["configurations"]
    names = results["figures"][figure]["configurations"]
    have = [n for n in names if n in configs]
    labels = {name: conf["label"] for name, conf in configs.items()}
    hv = {n: configs[n]["normalised_hypervolume"] for n in have}
    claims = {c["claim"]: c for c in results["claims"]}
    parts = [part for name in FIGURE_CLAIMS.get(figure, ()) if name in claims
             for part in chapter_parts(claims[name], set(have), labels, hv, results)]
    parts += [p for text, pairs in FIGURE_RULES.get(figure, ()) if (p := rule_part(text, pairs, hv, labels))]
    not_run = [labels.get(n, n) for n in names if n not in configs]
    if ladder is not None and figure in ladder.get("ladders", {}):
        part = ladder_claim_part(ladder, figure) if ladder["profile"] == results["profile"] else None
        if part is not None:
            parts.append(part)
        elif ladder["profile"] != results["profile"]:
            not_run.append(f"the budget ladder (its results are of profile {ladder['profile']})")
        else:
            not_run.append("the budget ladder (a rung without a gap: some seed's frontier misses the MI level)")
    return Claim(item, tuple(parts), tuple(not_run))


def ladder_claim_part(ladder: Mapping[str, Any], figure: str) -> Part | None:
    """The ladder of ``figure`` as one part; None when the ladder did not run that figure or could not be read."""
    entry = ladder.get("ladders", {}).get(figure)
    if entry is None or entry.get("reading") is None:
        return None
    rungs = entry["rungs"]
    if entry["kind"] == "better":
        values = " → ".join(f"{r['gap']:+.3f} ± {r['margin']:.3f}" for r in rungs)
        shown = f"HV({entry['labels'][0]}) − HV({entry['labels'][1]}) {values}"
        rule = ("paired by seed; margin the larger of 2 SE and the hypervolume tie; top rung beyond its margin, else "
                "the change from the first to the last rung beyond the two margins combined "
                "(paperlib.experiments.common.claims.ladder_word)")
    else:
        near = ladder["near_optimal_nats"]
        values = " → ".join(f"{near - r['gap']:.2f} ± {r['margin']:.2f}" if "gap" in r else
                            f"MI not reached by every seed ({r['reached']}/{len(r['excess'])})" for r in rungs)
        shown = f"excess NLL over ln V at MI = 0.75 ln V {values} nats (near-optimal below {near})"
        rule = (f"gap = {near} − excess (best of the curves, per seed); a rung where some seed's frontier misses "
                "the MI level has no gap; top rung beyond 2 SE, else the change from the first rung with a gap to "
                "the top beyond twice its standard error (paperlib.experiments.common.ladder.reading)")
    return claim_part(entry, shown, rule)
