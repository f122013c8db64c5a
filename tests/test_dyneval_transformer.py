"""The word-level Transformer's dynamic evaluation (stage dyneval_transformer, Krause Table 6.3's analogue): settings
checks, a row's tuning and scoring on a tiny model, and the claim's rules on hand-made results."""

import dataclasses
import math

import pytest
import torch

from paperlib.experiments.common.config import experiment_params
from paperlib.experiments.dynamic_evaluation.dyneval_transformer import (DynEvalTransformerParams, ROWS,
                                                                          evaluate_row, perplexity)
from paperlib.experiments.dynamic_evaluation.transformer_claims import improvement, transformer_claim
from paperlib.models import build_lm


def smoke() -> DynEvalTransformerParams:
    return experiment_params("dyneval_transformer", "smoke")


@pytest.mark.parametrize("change, message", [
    (dict(corpus="ptb_char"), "word-level corpus"),
    (dict(model={"cell": "lstm", "hidden_size": 8, "num_layers": 1}), "must be 'transformer'"),
    (dict(model={"cell": "transformer", "hidden_size": 8, "num_layers": 1, "options": {"zigzag": True}}), "unknown"),
    (dict(grids={"sgd": {"lr": [0.1]}, "global_rms": {"lr": [0.1]},
                 "global_rms_decay": {"lr": [0.1], "decay": [0.01], "eps": [1e-5]}}), "exactly"),
    (dict(grids={"sgd": {"lr": [0.1]}, "global_rms": {"lr": [0.1], "eps": [1e-5]},
                 "global_rms_decay": {"lr": [0.1], "decay": [0.0, 0.01], "eps": [1e-5]}}), "leave out 0"),
    (dict(valid_tokens=40, test_block=5), "at least 10 blocks"),
    (dict(test_tokens=10), "test_tokens must hold at least 10 blocks"),
    (dict(search="random"), "search must be"),
])
def test_bad_settings_are_clear_errors(change, message):
    with pytest.raises(ValueError, match=message):
        DynEvalTransformerParams(**(dataclasses.asdict(smoke()) | change))


def test_every_profile_reads_with_at_least_ten_validation_blocks_and_global_rms_runs_without_decay():
    for profile in ("smoke", "cpu", "gpu", "paper"):
        settings = experiment_params("dyneval_transformer", profile)
        assert settings.model["cell"] == "transformer" and settings.corpus == "wikitext2"
        assert settings.valid_tokens is None or settings.valid_tokens >= 10 * settings.test_block
    assert ROWS["global_rms"][1]["decay"] == 0.0  # Table 6.3's global RMS runs without a decay rate


def test_perplexity_of_a_diverged_evaluation_is_infinite_not_an_overflow():
    assert perplexity(math.log(20.0)) == pytest.approx(20.0)
    assert perplexity(1e4) == math.inf and perplexity(math.nan) == math.inf


def test_a_row_is_tuned_on_validation_and_keeps_its_best_trial_and_per_block_losses(monkeypatch):
    """A tiny Transformer on random tokens: static has no trials; every dynamic row's settings are its best
    validation trial (its own evaluation, kept by the tuning: the same number), global RMS keeps decay 0, and blocks
    cover the prefixes."""
    torch.manual_seed(0)
    vocab = 11
    model = build_lm("transformer", vocab, 16, 1, num_heads=2, positions="relative", memory_length=8).eval()
    valid, test = torch.randint(vocab, (41,)), torch.randint(vocab, (61,))
    settings = smoke()
    train = torch.randint(vocab, (400,))
    from paperlib.dyneval import mean_squared_gradients
    ms_g = mean_squared_gradients(model, train, batch_size=4, bptt=10, max_batches=2)
    import paperlib.dyneval.tune as tune
    import paperlib.experiments.dynamic_evaluation.dyneval_transformer as stage

    passes = {"valid": 0, "test": 0}

    def counted(evaluate):
        def call(model, tokens, **kwargs):
            passes["valid" if tokens is valid else "test"] += 1
            return evaluate(model, tokens, **kwargs)
        return call

    monkeypatch.setattr(tune, "dynamic_evaluate", counted(tune.dynamic_evaluate))
    monkeypatch.setattr(stage, "dynamic_evaluate", counted(stage.dynamic_evaluate))
    rows = {key: evaluate_row(key, model, valid, test, settings, lambda: ms_g) for key in ROWS}
    # one validation pass per tuning trial (the best one's losses are kept, not recomputed), one test pass per row
    assert passes == {"valid": sum(len(rows[k]["trials"]) for k in ROWS), "test": 3}
    assert rows["static"]["trials"] == [] and rows["static"]["settings"] == {}
    for key in ("sgd", "global_rms", "global_rms_decay"):
        row = rows[key]
        best = min(t["ppl"] for t in row["trials"])
        assert row["valid_ppl"] == best
        assert row["settings"]["rule"] == ("sgd" if key == "sgd" else "global_rms")
    assert rows["global_rms"]["settings"]["decay"] == 0.0
    assert rows["global_rms_decay"]["settings"]["decay"] in settings.grids["global_rms_decay"]["decay"]
    static = rows["static"]
    assert sum(static["block_tokens"]["valid"]) == 40 and sum(static["block_tokens"]["test"]) == 60
    weights = static["block_tokens"]["test"]
    mean = sum(b * w for b, w in zip(static["test_blocks"], weights)) / sum(weights)
    assert mean == pytest.approx(static["test_nll"], rel=1e-6)


# -- the claim's rules on hand-made results ----------------------------------------------------------------------


def results(static=200.0, sgd=185.0, rms=180.0, decay_gain=-0.002, blocks=20, noise=0.0, seed=0):
    """Results whose per-block losses sit at log(ppl) plus a fixed alternating spread (the same for every row, so it
    cancels in a paired gap) and, with ``noise``, independent Gaussian noise per row and block (which does not); the
    decay row's validation blocks are the plain global RMS row's lowered by ``decay_gain`` nats (plus their own noise)."""
    rng = __import__("random").Random(seed)

    def blocks_at(nll):
        return [nll + (0.002 if i % 2 else -0.002) + rng.gauss(0.0, noise) for i in range(blocks)]

    def row(key, ppl, valid=None):
        valid = blocks_at(math.log(ppl)) if valid is None else valid
        return {"key": key, "label": key, "settings": {"decay": 0.001} if key == "global_rms_decay" else {},
                "test_ppl": ppl, "valid_ppl": math.exp(sum(valid) / blocks), "test_blocks": blocks_at(math.log(ppl)),
                "valid_blocks": valid}

    plain = row("global_rms", rms)
    decayed = row("global_rms_decay", rms, [b - decay_gain + rng.gauss(0.0, noise) for b in plain["valid_blocks"]])
    return {"rows": [row("static", static), row("sgd", sgd), plain, decayed],
            "test_block_tokens": [500] * blocks, "valid_block_tokens": [500] * blocks}


def words(r):
    return {p.label: p.verdict for p in transformer_claim(r).parts}


def test_the_thesis_improvement_is_nine_percent():
    assert improvement(18.1, 16.4) == pytest.approx(0.094, abs=5e-4)
    assert improvement(None, 16.4) is None and improvement(math.inf, 16.4) is None


def test_table_6_3_s_pattern_is_read_as_every_part_holding():
    claim = transformer_claim(results())
    assert claim.item == "K-T6.3" and claim.verdict == "reproduced"
    assert "10.0% lower" in claim.parts[0].evidence


def test_the_decay_remark_holds_only_when_the_margin_rules_out_a_noticeable_advantage():
    label = "no advantage from a decay rate"
    assert words(results(decay_gain=0.05))[label] == "not reproduced"  # a clear advantage, beyond 0.01 nats
    assert words(results(decay_gain=0.004))[label] == "reproduced"  # a real but unnoticeable gain
    assert words(results(decay_gain=0.004, noise=0.05))[label] == "within noise"  # a margin too wide to tell
    assert words(results(decay_gain=-0.02))[label] == "reproduced"  # the decay hurts


def test_test_set_comparisons_use_the_bootstrap_margin():
    assert words(results(sgd=170.0))["global RMS beats SGD"] == "not reproduced"
    assert words(results(sgd=181.0, noise=0.05))["global RMS beats SGD"] == "within noise"  # 0.6% inside the noise


def test_a_diverged_rule_stored_as_none_is_judged_as_infinitely_bad_not_a_crash():
    import json

    from paperlib.experiments.common.runs import json_safe

    r = results()
    decayed = r["rows"][3]
    decayed.update(valid_ppl=math.inf, test_ppl=math.inf, valid_blocks=[math.inf] * 20)
    r["rows"][2].update(test_ppl=math.inf, test_blocks=[math.inf] * 20)
    stored = json.loads(json.dumps(json_safe(r)))
    assert stored["rows"][2]["test_ppl"] is None
    judged = words(stored)
    assert judged["dynamic evaluation improves the Transformer"] == "not reproduced"
    assert judged["SGD improves it too"] == "reproduced"
    assert judged["no advantage from a decay rate"] == "reproduced"  # the decay diverged: no advantage
    assert "diverged" in transformer_claim(stored).parts[0].evidence


def test_the_dry_run_counts_each_rows_tuning_trials_and_its_test_pass():
    from paperlib.experiments.dryrun.evaluation_plans import EVALUATIONS, search_trials

    settings = experiment_params("dyneval_transformer", "cpu")
    plan = {e.name: e for e in EVALUATIONS["dyneval_transformer"]("dyneval_transformer", settings, "fp32",
                                                                 lambda n: n, "cpu")}
    for row in ("sgd", "global_rms", "global_rms_decay"):
        assert plan[f"{row}, validation"].passes == search_trials(settings.grids[row], "coordinate")
        assert plan[f"{row}, test"].passes == 1
        assert plan[f"{row}, validation"].units == math.ceil(settings.valid_tokens / settings.segment_len)
    # coordinate search: the 5 learning rates, then the 2 other decays, then the other epsilon (its per-block
    # validation losses are the best trial's, not another pass)
    assert plan["global_rms_decay, validation"].passes == 5 + 2 + 1
