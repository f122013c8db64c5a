"""The synthetic MICMCO figures' claims (paperlib.experiments.micmco.synthetic.claims): each rule flips on
constructed hypervolumes, curves not run make a figure "partly", the ladder joins its figure as one part, and the
index shows exactly the claims the module judges."""

import math

import pytest

from paperlib.experiments.common.claims import Unjudged
from paperlib.experiments.micmco.synthetic.micmco_synthetic import HV_TIE
from paperlib.experiments.micmco.synthetic.claims import FIGURE_RULES, figure_claim, rule_part


def test_a_figure_rule_reads_its_pairs_against_the_tie():
    labels = {"dreg1_kl": "DReG 1 KL", "elbo": "ELBO"}
    pairs = (("dreg1_kl", "elbo"),)
    part = rule_part("DReG 1 beats the ELBO", pairs, {"dreg1_kl": 0.128, "elbo": 0.122}, labels)
    assert part.verdict == "within noise" and "DReG 1 KL 0.128 vs ELBO 0.122" in part.evidence
    assert rule_part("x", pairs, {"dreg1_kl": 0.122 + 2 * HV_TIE, "elbo": 0.122}, labels).verdict == "reproduced"
    assert rule_part("x", pairs, {"dreg1_kl": 0.120, "elbo": 0.122}, labels).verdict == "not reproduced"
    assert rule_part("x", pairs, {"elbo": 0.122}, labels) is None  # not run


def _results(hv):
    configs = {name: {"label": name.upper(), "normalised_hypervolume": value} for name, value in hv.items()}
    figures = {"5.3": {"configurations": ["elbo", "dreg1_kl", "dreg1_renyi", "dreg16_kl", "dreg16_renyi"]},
               "5.5": {"configurations": ["reinforce1_kl"]}}
    claims = [{"claim": "Rényi slightly better than KL", "rule": "HV(Rényi) > HV(KL) + tie",
               "evidence": {"dreg1": "", "dreg16": ""}, "verdict": "reproduced"}]
    return {"profile": "cpu", "configurations": configs, "figures": figures, "claims": claims}


def test_a_figure_claim_judges_its_rules_names_unrun_curves_and_takes_the_ladder():
    hv = {"elbo": 0.10, "dreg1_kl": 0.20, "dreg1_renyi": 0.30, "dreg16_kl": 0.40, "dreg16_renyi": 0.50}
    claim = figure_claim("5.3", "M-F5.3", _results(hv))
    labels = [p.label for p in claim.parts]
    assert labels == ["Rényi slightly better than KL", *(text for text, _ in FIGURE_RULES["5.3"])]
    assert claim.verdict == "reproduced" and not claim.not_run
    # one rule fails alone: DReG 1 Rényi no longer beats the ELBO
    claim = figure_claim("5.3", "M-F5.3", _results({**hv, "dreg1_renyi": 0.05, "dreg1_kl": 0.05}))
    assert {p.label: p.verdict for p in claim.parts}["DReG 1 beats the ELBO"] == "not reproduced"
    assert claim.verdict == "partly"
    # a curve not run: named, and the figure is at most partly reproduced
    fewer = _results(hv)
    del fewer["configurations"]["dreg16_renyi"]
    claim = figure_claim("5.3", "M-F5.3", fewer)
    assert claim.not_run == ("dreg16_renyi",) and claim.verdict == "partly"
    # the ladder is one more part; a ladder that judged fewer than two rungs is named as not run
    rungs = [{"steps": s, "gap": g, "se": 0.01, "margin": 0.02, "converged": True} for s, g in ((4, 0.0), (16, 0.1))]
    ladder = {"profile": "cpu", "ladders": {"5.3": {"claim": "DReG 16 improves on DReG 1", "kind": "better",
                                  "labels": ["DReG 16 KL", "DReG 1 KL"], "rungs": rungs, "reading": "reproduced"}}}
    claim = figure_claim("5.3", "M-F5.3", _results(hv), ladder)
    assert claim.parts[-1].label == "ladder: DReG 16 improves on DReG 1" and claim.verdict == "reproduced"
    assert "profile smoke" in figure_claim("5.3", "M-F5.3", _results(hv), {**ladder, "profile": "smoke"}).note
    ladder["ladders"]["5.3"]["reading"] = None
    assert "the budget ladder" in figure_claim("5.3", "M-F5.3", _results(hv), ladder).note
    with pytest.raises(Unjudged, match="no part can be judged"):
        figure_claim("5.5", "M-F5.5", _results(hv))  # none of its curves ran


def test_near_optimal_vimco_is_judged_on_the_frontiers_not_on_the_stored_word():
    """Fig. 5.6's chapter claim is a threshold on the frontier's NLL at 0.75 ln V; the part reads the frontiers,
    whatever verdict word the stage stored (here the wrong one on purpose)."""
    ln_v = math.log(10)
    near = [{"mi": 0.25 * ln_v, "nll": ln_v + 0.05}, {"mi": ln_v, "nll": ln_v + 0.2}]  # at 0.75 ln V: +0.15 nats
    far = [{"mi": 0.25 * ln_v, "nll": ln_v + 0.5}, {"mi": ln_v, "nll": ln_v + 1.1}]  # +0.9 nats
    short = [{"mi": 0.25 * ln_v, "nll": ln_v + 0.05}]  # never reaches 0.75 ln V

    def results(front, stored):
        configs = {"vimco16_kl": {"label": "VIMCO 16 KL", "normalised_hypervolume": 0.3, "frontier": front}}
        claims = [{"claim": "VIMCO 16 reaches near-optimal NLL at high MI", "rule": "excess <= 0.25 nats",
                   "evidence": {}, "verdict": stored}]
        return {"profile": "cpu", "optimum_nll": ln_v, "configurations": configs, "claims": claims,
                "figures": {"5.6": {"configurations": ["vimco16_kl"]}}}

    part = figure_claim("5.6", "M-F5.6", results(near, "not reproduced")).parts[0]
    assert part.verdict == "reproduced" and "VIMCO 16 KL +0.150 nats" in part.evidence
    assert figure_claim("5.6", "M-F5.6", results(far, "reproduced")).parts[0].verdict == "not reproduced"
    part = figure_claim("5.6", "M-F5.6", results(short, "reproduced")).parts[0]
    assert part.verdict == "not reproduced" and "MI level not reached" in part.evidence


def test_the_index_shows_the_figure_claims_of_the_committed_results():
    from paperlib.compendium import results_index as ri
    from tests.test_results_index import _items

    from tests.conftest import REPO

    results = ri.load_results(REPO)
    table = {row["id"]: row for row in ri.build_index(_items(), results)}
    main = results["micmco_synthetic"]
    for fig in ("5.4", "5.7", "5.15", "5.26", "5.27"):
        claim = figure_claim(fig, f"M-F{fig}", main)
        assert table[f"M-F{fig}"]["verdict"].startswith(claim.text()), fig
        assert table[f"M-F{fig}"]["status"] == claim.verdict


def test_renyi_against_kl_leaves_out_curves_with_one_sample_in_the_divergence_term():
    """With one divergence sample KL and Rényi are the same objective: a gap between their two tuned runs (4.3e-10
    for DReG 1 at cpu) is tuning noise, counted neither way."""
    hv = {"elbo": 0.10, "dreg1_kl": 0.128 + 4.3e-10, "dreg1_renyi": 0.128, "dreg16_kl": 0.213, "dreg16_renyi": 0.279}
    results = _results(hv)
    for name, config in results["configurations"].items():
        config["kl_samples"] = 16 if name.startswith("dreg16") else 1
    part = figure_claim("5.3", "M-F5.3", results).parts[0]
    assert part.label == "Rényi slightly better than KL" and part.verdict == "reproduced"
    assert "1 of 1 comparisons" in part.evidence and "same objective: DREG1" in part.evidence
    results["configurations"]["dreg16_renyi"]["normalised_hypervolume"] = 0.20  # the multi-sample pair the other way
    assert figure_claim("5.3", "M-F5.3", results).parts[0].verdict == "not reproduced"
