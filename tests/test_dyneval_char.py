"""Character-level dynamic evaluation (Krause chs. 3-6 on PTB characters): text mapping, eq. (4.8) inside the
mLSTM recurrence, settings validation and the experiment end to end on a tiny configuration."""

from __future__ import annotations

import json
import math

import pytest
import torch
import yaml

from paperlib.experiments.common.config import PROFILES
from paperlib.experiments.common.config import ParamsError
from paperlib.data import load_corpus
from paperlib.data.text import Vocabulary, read_split_lines
from paperlib.dyneval import RecurrentSparseAdaptation, dynamic_evaluate, static_evaluate, with_recurrent_adaptation
from paperlib.experiments.common.claims import direction_word
from paperlib.experiments.dynamic_evaluation.dyneval_char import (
    DynEvalCharParams, chars_to_lines, map_words_to_chars, run_dyneval_char,
)
from paperlib.experiments.dynamic_evaluation.char_claims import CLAIMS, claims, recovery_claim
from paperlib.models import build_lm
from paperlib.models.mlstm import mlstm_step
from tests.conftest import REPO
from tests.numerics import assert_bitwise, assert_close_after_reduction

PTB_CHARS = ["<eos>", "_", *"etaonisrhludcmfpkgybw<>vN.'xj$-qz&0193#285\\764/*"]


@pytest.fixture(scope="module")
def vocab() -> Vocabulary:
    return Vocabulary(PTB_CHARS)


# ------------------------------------------------------------------ out-of-domain text mapping


def test_ptb_word_text_maps_exactly_onto_the_ptb_character_files(data_root):
    chars = load_corpus("ptb_char", data_root)
    mapped = map_words_to_chars(read_split_lines("ptb", data_root, "test"), chars.vocab)
    assert torch.equal(mapped.ids, chars.test)
    assert mapped.stats["dropped_chars"] == 0 and mapped.stats["changed_fraction"] == 0.0


def test_mapping_lowercases_numbers_to_n_joins_wikitext_splits_and_drops_the_rest(vocab):
    lines = [["=", "The", "Café", "=", "<eos>"],
             ["<eos>"],
             ["In", "1,990", "@-@", "91", ",", "a", "well", "@-@", "known", "(", "<unk>", ")", "cost", "2", "@.@", "5", "N", "<eos>"]]
    mapped = map_words_to_chars(lines, vocab)
    assert chars_to_lines(mapped.ids, vocab) == ["the caf", "in N a well-known <unk> cost N N"]
    stats = mapped.stats
    assert stats["lines"] == 2  # the blank line is dropped
    assert stats["lowercased_chars"] == 3  # T, C, I
    assert stats["number_chars_to_N"] == len("1,990-91") + len("2.5")
    assert stats["dropped_chars"] == 6 and stats["dropped_tokens"] == 5  # the tokens = = , ( ) vanish, café loses é
    assert dict(stats["most_dropped"]) == {"=": 2, "é": 1, ",": 1, "(": 1, ")": 1}
    raw = sum(len(t) for t in ["=", "The", "Café", "=", "In", "1,990-91", ",", "a", "well-known", "(", "<unk>", ")",
                               "cost", "2.5", "N"])
    assert stats["input_chars"] == raw
    assert stats["dropped_fraction"] == pytest.approx(stats["dropped_chars"] / raw)


def test_in_vocabulary_text_round_trips(vocab):
    lines = ["no it was n't black monday", "the dow fell N points to $ N", "a <unk> & co. unit"]
    mapped = map_words_to_chars([line.split() + ["<eos>"] for line in lines], vocab)
    assert chars_to_lines(mapped.ids, vocab) == lines
    assert mapped.stats["changed_fraction"] == 0.0
    assert int((mapped.ids == vocab.stoi["<eos>"]).sum()) == len(lines)


# ------------------------------------------------------------------ sparse adaptation inside the recurrence


def tiny_mlstm(seed: int = 0):
    torch.manual_seed(seed)
    return build_lm("mlstm", 11, 6, 1, tie_embeddings=False, embedding_size=5).double().eval()


def frozen_input_terms(steps: int, embedding: int, hidden: int) -> int:
    """Rounded terms by which a one-layer mLSTM run through ``dynamic_evaluate(adapt=[M])`` can differ from static
    evaluation, for :func:`tests.numerics.reduction_tolerance`.

    Adapting only M, the other weights enter ``functional_call`` detached. ``F.linear`` of a strided 3-d input
    (the time-major embeddings, the batch-major decoder input) goes through ``matmul``, which folds the input
    into one GEMM only when the weight requires grad: static evaluation (Parameters) takes that path, the
    detached weights a batched GEMM. So W_mx x (E terms) and W_x x + b (E + 1) differ at each of the ``steps``
    steps, the differences ride along the recurrence, and the decoder (H + 1) differs once more.
    """
    return steps * (2 * embedding + 1) + hidden + 1


@pytest.mark.numerics
def test_recurrent_sparse_adaptation_with_zero_m_is_the_mlstm():
    model = tiny_mlstm()
    adapted, name = with_recurrent_adaptation(model, 3)
    assert name == "layers.0.adaptation" and isinstance(adapted.layers[0], RecurrentSparseAdaptation)
    tokens = torch.randint(0, 11, (2, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert_bitwise(adapted(tokens)[0], model(tokens)[0],
                       why="M = 0 makes eq. (4.8) add exact zeros (h + h·0); every other op is the same kernel on the "
                           "same inputs (the copied layer's Parameters, no autograd)")


def test_m_transforms_the_chosen_units_and_feeds_the_next_step_eq_4_8():
    model = tiny_mlstm()
    adapted, _ = with_recurrent_adaptation(model, [1, 4])
    with torch.no_grad():
        adapted.layers[0].adaptation.copy_(torch.tensor([[0.5, -1.0], [2.0, 0.25]], dtype=torch.float64))
    x = torch.randn(4, 1, 5, generator=torch.Generator().manual_seed(2), dtype=torch.float64)  # [T, B, n_in]
    mlstm = model.layers[0]
    mlstm_copy = adapted.layers[0].layer
    for a, b in zip(mlstm.parameters(), mlstm_copy.parameters()):
        assert_bitwise(a, b, why="the wrapped layer is a deep copy")
    # reference: the plain recurrence with h <- h + M h on units (1, 4) after every step
    h = torch.zeros(1, 6, dtype=torch.float64)
    c = torch.zeros_like(h)
    m = adapted.layers[0].adaptation.detach()
    expected = []
    for x_t in x:
        mx = torch.nn.functional.linear(x_t, mlstm.weight_mx)
        gx = torch.nn.functional.linear(x_t, mlstm.weight_x, mlstm.bias)
        h, c = mlstm_step(mx, gx, h, c, mlstm.weight_mh, mlstm.weight_m, False)
        h = h.clone()
        h[:, [1, 4]] = h[:, [1, 4]] + h[:, [1, 4]] @ m.T
        expected.append(h)
    with torch.no_grad():
        out, (h_last, _) = adapted.layers[0](x, mlstm.init_state(1))
        plain, _ = mlstm(x, mlstm.init_state(1))
    torch.testing.assert_close(out, torch.stack(expected))
    torch.testing.assert_close(h_last, expected[-1])
    # units outside the subset also change from step 2 on: M acts inside the recurrence, not only on the output
    assert_bitwise(out[0][:, [0, 2, 3, 5]], plain[0][:, [0, 2, 3, 5]],
                   why="step 1 runs the same kernels on the same inputs, and index_add writes units 1 and 4 only")
    assert not torch.allclose(out[1][:, [0, 2, 3, 5]], plain[1][:, [0, 2, 3, 5]])


@pytest.mark.numerics
def test_dynamic_evaluation_of_m_adapts_only_m_and_leaves_the_model_alone():
    model = tiny_mlstm()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    adapted, name = with_recurrent_adaptation(model, 3)
    tokens = torch.randint(0, 11, (41,), generator=torch.Generator().manual_seed(3))
    result = dynamic_evaluate(adapted, tokens, rule="sgd", lr=0.5, segment_len=10, adapt=[name])
    assert list(result.params) == [name] and result.params[name].abs().sum() > 0
    assert adapted.layers[0].adaptation.abs().sum() == 0  # θ_g (M = 0) is not modified in place
    for k, v in model.state_dict().items():
        assert_bitwise(v, before[k], why="the wrapper adapts a copy; the model's tensors are compared with clones")
    zero = dynamic_evaluate(adapted, tokens, rule="sgd", lr=0.0, segment_len=10, adapt=[name])
    assert_close_after_reduction(zero.losses, static_evaluate(model, tokens, segment_len=10).losses,
                                 n_terms=frozen_input_terms(40, embedding=5, hidden=6),
                                 why="M alone adapted: the frozen (detached) weights take other GEMMs than static "
                                     "evaluation's Parameters (see frozen_input_terms)")


def test_recurrent_adaptation_rejects_other_layers_and_bad_units():
    with pytest.raises(ValueError, match="LSTM, RLSTM and mLSTM layers"):
        with_recurrent_adaptation(build_lm("gru", 11, 6, 1), 2)
    with pytest.raises(ValueError, match="distinct hidden units"):
        with_recurrent_adaptation(tiny_mlstm(), [0, 0])
    with pytest.raises(ValueError, match="units"):
        with_recurrent_adaptation(tiny_mlstm(), 7)


# ------------------------------------------------------------------ settings and the experiment end to end


def tiny_settings(lr: float = 0.0) -> dict:
    rnn = {"tie_embeddings": False, "embedding_size": 6}
    return {
        "corpus": "ptb_char",
        "ood_corpus": "wikitext2",
        "models": {
            "lstm": {"cell": "lstm", "hidden_size": 8, "num_layers": 2,
                     "options": {**rnn, "connections": "stacked", "capped_input_gate": False}},
            "mlstm": {"cell": "mlstm", "hidden_size": 8, "num_layers": 1, "options": rnn},
            "transformer": {"cell": "transformer", "hidden_size": 8, "num_layers": 1,
                            "options": {"num_heads": 2, "positions": "relative", "memory_length": 10},
                            "train": {"lr": 0.01}},
        },
        "train": {"batch_size": 4, "bptt": 10, "optimizer": "adam", "beta1": 0.9, "lr": 0.003, "clip_norm": 1.0,
                  "max_steps": 4, "eval_every": 2, "eval_batch_size": 4, "eval_max_windows": 2},
        "rows": {"mlstm": ["static", "sgd", "global_rms", "sparse_recurrent", "sparse_output"],
                 "transformer": ["static", "global_rms"]},
        "ood_rows": ["static", "global_rms"],
        "segment_len": 10,
        "valid_chars": 60,
        "test_chars": 80,
        "ood_chars": 80,
        "gradient_stats": {"batch_size": 4, "bptt": 10, "max_batches": 2},
        "grids": {"sgd": {"lr": [lr]}, "global_rms": {"lr": [lr], "decay": [0.0]}, "sparse": {"lr": [lr], "decay": [0.0]}},
        "sparse_units": 3,
        "timescale": {"model": "mlstm", "sequences": 2, "length": 40, "bin": 20, "stream_batch": 2},
        "recovery": {"models": ["lstm", "mlstm"], "chars": 300, "fraction": 0.1, "horizon": 3},
        "scaling": {"hidden_sizes": {"mlstm": [4, 8]}, "valid_chars": 100, "seeds": 2},
        "threads": 1,
    }


def write_params(root, block: dict, data_root) -> None:
    real = yaml.safe_load((REPO / "params.yaml").read_text())
    params = {"profile": "smoke", "data": {**real["data"], "root": str(data_root)},
              "experiments": {"dyneval_char": {p: block for p in PROFILES}}}
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    (root / "dvc.yaml").write_text("stages: {}\n")


def test_bad_settings_name_the_valid_choices():
    good = tiny_settings()
    DynEvalCharParams(**good)
    DynEvalCharParams(**{**good, "rows": {**good["rows"], "lstm": ["static", "sparse_recurrent"]}})  # any LSTM layer
    with pytest.raises(ValueError, match="sparse_recurrent' needs a model among cells lstm, "):
        DynEvalCharParams(**{**good, "rows": {"transformer": ["static", "sparse_recurrent"]}})
    with pytest.raises(ValueError, match="start with 'static'"):
        DynEvalCharParams(**{**good, "rows": {"mlstm": ["global_rms"]}})
    with pytest.raises(ValueError, match="valid: "):
        DynEvalCharParams(**{**good, "models": {"mlstm": {"cell": "mlstm", "hidden_size": 8, "num_layers": 1,
                                                          "options": {"mogrifier_rounds": 3}}}})
    with pytest.raises(ValueError, match="recurrent models"):
        DynEvalCharParams(**{**good, "recovery": {**good["recovery"], "models": ["transformer"]}})
    with pytest.raises(ValueError, match="line-based character corpus"):
        DynEvalCharParams(**{**good, "corpus": "ptb"})
    for seeds in (0, 1.5, True):
        with pytest.raises(ValueError, match="scaling.seeds must be a positive integer"):
            DynEvalCharParams(**{**good, "scaling": {**good["scaling"], "seeds": seeds}})


# With lr = 0 and no decay every dynamically evaluated row scores the static model of its table. Whether it does so
# with the same kernels depends on the row (paperlib/dyneval/, paperlib/experiments/dynamic_evaluation/dyneval_char.py); the float32 models of
# tiny_settings have hidden size 8, embeddings of 6 and V = 50 characters, and test_chars = ood_chars = 80.
_H, _E, _V, _CHARS, _DIM, _KEYS = 8, 6, len(PTB_CHARS), 80, 8, 20  # _KEYS: memory 10 + segment 10
SAME_KERNELS = ("all weights are adapted (leaves that require grad, like static evaluation's Parameters) and lr = 0 "
                "keeps them bit-identical: the same kernels on the same inputs")
ZERO_LR_ROWS = {
    "sgd": (None, SAME_KERNELS),
    "global_rms": (None, SAME_KERNELS),
    # DecoderInputAdaptation calls the model itself; only the decoder differs: addmm on index_add's contiguous copy
    # vs matmul + bias on the strided features
    "sparse_output": (_H + 1, "the decoder's fused addmm vs matmul + bias"),
    "sparse_recurrent": (None, "M = 0 adds exact zeros (h + h·0) after every step, and M is the only tensor swapped "
                               "in: the model copy's Parameters run the mLSTM's own per-step kernels on the same "
                               "inputs as static evaluation"),
    # under autograd the attention may run another kernel: any reduction of a token's forward pass may differ:
    # three layer norms (2d each), five projections (d + 1), scores and mixing over the keys (twice), the
    # positional scores (d), the feed-forward output (4d + 1) and the log-softmax (V)
    "transformer": (3 * 2 * _DIM + 5 * (_DIM + 1) + 2 * _KEYS + _DIM + 4 * _DIM + 1 + _V,
                    "the transformer's attention and projections with gradients enabled"),
}


def assert_scores_the_static_model(bpc: float, static_bpc: float, model: str, key: str) -> None:
    """A zero-learning-rate row of ``model`` against its static row (bits per character of float32 losses)."""
    n_terms, why = ZERO_LR_ROWS["transformer" if model == "transformer" else key]
    if n_terms is None:
        assert_bitwise(bpc, static_bpc, why=f"{model} {key}: {why}")
    else:
        assert_close_after_reduction(bpc, static_bpc, n_terms=n_terms, dtype=torch.float32, why=f"{model} {key}: {why}")


@pytest.mark.numerics
def test_tiny_run_end_to_end_with_zero_learning_rate_reproduces_static_and_reuses_its_models(tmp_path, data_root):
    write_params(tmp_path, tiny_settings(lr=0.0), data_root)
    out = run_dyneval_char("smoke", progress=False, root=tmp_path)
    results = json.loads(out.read_text())
    for model, table in results["tables"].items():
        rows = {r["key"]: r for r in table["rows"]}
        for key, row in rows.items():
            assert math.isfinite(row["test_bpc"]) and 0 < row["test_bpc"] < 2 * math.log2(50)
            if key != "static":  # lr = 0 and no decay: dynamic evaluation scores the static model
                assert_scores_the_static_model(row["test_bpc"], rows["static"]["test_bpc"], model, key)
        ood = results["ood"]["models"][model]
        assert_scores_the_static_model(ood["global_rms"]["bpc"], ood["static"]["bpc"], model, "global_rms")
    assert rows["global_rms"]["adapted_parameters"] == results["models"]["transformer"]["parameters"]
    mlstm = {r["key"]: r for r in results["tables"]["mlstm"]["rows"]}
    assert mlstm["sparse_recurrent"]["adapted_parameters"] == mlstm["sparse_output"]["adapted_parameters"] == 9
    assert results["ood"]["mapping"]["output_chars"] > 80 and 0 < results["ood"]["mapping"]["dropped_fraction"] < 0.2
    curves = results["timescale"]["curves"]
    assert set(curves) == {"in_domain", "out_of_domain"} and len(curves["in_domain"]["static"]) == 1
    # two sequences of 40 characters evaluated together: vmapped per-stream mLSTM steps vs static evaluation's batch,
    # so every reduction of the recurrence may round differently: per step W_mx x, W_mh h, W_x x + b and W_m m
    assert_close_after_reduction(curves["in_domain"]["dynamic"], curves["in_domain"]["static"], dtype=torch.float32,
                                 n_terms=40 * (2 * _E + 2 * _H + 1) + _H + 1 + _V,
                                 why="the timescale's batched (vmapped) dynamic evaluation vs static evaluation")
    rec = results["recovery"]
    assert rec["surprising"] == math.ceil(0.1 * (300 - 3))
    assert all(rec["after_bits"][m][0] > rec["overall_bits"][m] for m in rec["models"])
    assert [p["hidden_size"] for p in results["scaling"]["mlstm"]] == [4, 8]
    for point in results["scaling"]["mlstm"]:  # two training seeds per size, their mean the point's value
        first, second = point["valid_bpc_seeds"]
        assert first != second and point["valid_bpc"] == pytest.approx((first + second) / 2)
    runs = tmp_path / "runs" / "dyneval_char"  # at the main model's own size its first seed is the main model
    assert {"mlstm_h4", "mlstm_h4_seed1", "mlstm_h8_seed1"} <= {p.name for p in runs.iterdir()}
    assert not (runs / "mlstm_h8").exists()
    after, overall, found = rec["after_bits"], rec["overall_bits"], rec["gap_one_step"]["mlstm"]
    # the gap is Krause's criterion (advantage one step after a surprise minus the overall advantage), with twice
    # its standard error over the positions as the margin the claims tie within
    assert found["gap"] == pytest.approx((after["lstm"][1] - after["mlstm"][1]) - (overall["lstm"] - overall["mlstm"]))
    assert found["against"] == "lstm" and found["se"] > 0 and found["margin"] == 2 * found["se"]
    # the stage stores numbers, not verdicts; the claims are judged from them (paperlib.experiments.dynamic_evaluation.char_claims)
    assert "claims" not in results
    (recovery,) = recovery_claim(results).parts
    assert recovery.label == "the mLSTM recovers faster than the LSTM"
    assert recovery.verdict == direction_word(found["gap"], found["margin"])
    assert set(claims(results)) == set(CLAIMS) - {"K-F3.2"}  # the tiny run sweeps the mLSTM's sizes only
    assert results["paper"]["table_4_4"]["global_rms"] == 1.08
    provenance = json.loads(out.with_name("dyneval_char.provenance.json").read_text())
    assert provenance["profile"] == "smoke" and {"train_mlstm", "table_mlstm", "recovery"} <= set(provenance["seconds"])
    # a second run loads the trained models instead of training again
    again = json.loads(run_dyneval_char("smoke", progress=False, root=tmp_path).read_text())
    assert again["models"] == results["models"] and again["tables"] == results["tables"]
    with pytest.raises(ParamsError):
        write_params(tmp_path, {**tiny_settings(), "segment_len": 0}, data_root)
        run_dyneval_char("smoke", progress=False, root=tmp_path)
