"""The seeds of one word-generation spec trained as one stacked model (train_stacked): equal to separate runs up to
float rounding, resumable, a diverging run stopping where its separate run stops, the stage's stacked runs; and the
pieces it rests on (the transformable GRU, the TRIL flow's gather)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from torch import nn
from torch.func import functional_call, vmap

from paperlib.data.wordlist import WordList
from paperlib.experiments.word_generation.training import checkpoint_step, stackable, train_model, train_stacked
from paperlib.experiments.word_generation.word_generation import build_model, complete_spec, make_splits
from paperlib.flows import TriangularFlow
from paperlib.models.transformable import functorch_compatible, gru_forward
from tests.test_word_generation import _settings, _word_list

SEEDS = (0, 1, 2)
# one spec per path through the stacked loss: the single-sample ELBO with two TRIL flows, the importance-weighted
# bound with proposals and a bidirectional inference network, the identity flows, and the GRU baseline
SPECS = {
    "TRIL/TRIL": {"kind": "dssm", "generative_flow": "TRIL", "inference_flow": "TRIL", "flow_hidden": [8],
                  "q_hidden": [8]},
    "2xTRIL, K=3, BIDI": {"kind": "dssm", "generative_flow": "2xTRIL", "samples": 3, "bidirectional": True,
                          "flow_hidden": [8], "q_hidden": [8]},
    "ID/ID": {"kind": "dssm", "generative_flow": "ID", "inference_flow": "ID", "q_hidden": [8]},
    "BASELINE-8D": {"kind": "gru", "state_size": 8},
}


@pytest.fixture(scope="module")
def split():
    """Words of 2-5 letters with flat counts, drawn 2 at a time (``BATCH``): a step's longest word differs between the
    runs, so the stack pads most steps' words and noise."""
    words = _word_list()
    return make_splits(WordList(words.words, np.full(len(words), 1000, dtype=np.int64)))["standard"]


BATCH = 2


def _models(spec: dict, split, seeds=SEEDS) -> list[nn.Module]:
    models = []
    for seed in seeds:
        torch.manual_seed(seed)  # as run_experiment: each run's initialisation from its seed
        models.append(build_model(spec, split.vocab, 5))
    return models


@pytest.mark.parametrize("name,device", [*((name, "cpu") for name in SPECS),
                                         pytest.param("2xTRIL, K=3, BIDI", "cuda", marks=pytest.mark.cuda)])
def test_a_stack_of_seeds_equals_separate_runs(name, device, split, tmp_path, float64):
    """Every run of the stack ends with the weights, history and random-generator states (the same draws) of its
    separate run. In float64 the two differ only by rounding in differently shaped (batched, padded) matmuls, about
    1e-16 per operation; Adam's normalised steps carry it through 8 steps to ~1e-15 (measured 1.6e-15), so 1e-10
    leaves room yet fails on any real difference (a wrong batch, noise draw or padding moves the weights by ~1e-3)."""
    spec = SPECS[name]
    samples = complete_spec(spec)["samples"] if spec["kind"] == "dssm" else 1
    settings = _settings(steps=8, history_every=4, batch_size=BATCH)
    widths = [[split.batch(BATCH, g)[0].shape[1] for _ in range(8)] for g in
              (torch.Generator().manual_seed(s) for s in SEEDS)]
    assert sum(len(set(step)) > 1 for step in zip(*widths)) == 6  # 6 of the 8 steps pad some run's words
    stacked = [model.to(device) for model in _models(spec, split)]
    before = [p.detach().clone() for p in stacked[0].parameters()]
    results = train_stacked(stacked, split, settings, samples, SEEDS, [tmp_path / f"stack{s}.pt" for s in SEEDS])
    for seed, model, result in zip(SEEDS, stacked, results):
        ref = _models(spec, split, [seed])[0].to(device)
        expected = train_model(ref, split, settings, samples, seed, tmp_path / f"alone{seed}.pt")
        assert (result.steps, result.diverged) == (expected.steps, expected.diverged) == (8, False)
        assert [p["step"] for p in result.history] == [p["step"] for p in expected.history] == [0, 4, 8]
        for got, want in zip(result.history, expected.history):
            assert got.keys() == want.keys()
            assert all(got[k] == pytest.approx(want[k], rel=1e-10, abs=1e-10) for k in got)
        for got, want in zip(model.parameters(), ref.parameters()):
            assert torch.allclose(got, want, rtol=0, atol=1e-10)
        states = [torch.load(tmp_path / f"{kind}{seed}.pt", weights_only=False) for kind in ("stack", "alone")]
        for key in ("batch_gen", "noise_gen"):
            assert torch.equal(states[0][key], states[1][key]), key
    assert not all(torch.equal(a, b) for a, b in zip(stacked[0].parameters(), before))  # it trained


def test_a_stack_interrupted_and_resumed_ends_bit_for_bit_where_it_would_have(split, tmp_path):
    """Stopped after 3 of 6 steps (each run's checkpoint), continued in fresh models: bitwise the uninterrupted stack
    (the same kernels on the same inputs); each run's checkpoint, in train_model's format, continues as a separate
    run would; runs at different steps refuse to continue as one stack."""
    spec = SPECS["2xTRIL, K=3, BIDI"]
    settings = _settings(steps=6, history_every=2, checkpoint_every=2, batch_size=BATCH)
    straight = _models(spec, split)
    full = train_stacked(straight, split, settings, 3, SEEDS)
    paths = [tmp_path / f"run{s}.pt" for s in SEEDS]
    first = train_stacked(_models(spec, split), split, settings, 3, SEEDS, paths, stop_at=3)
    assert [r.steps for r in first] == [3, 3, 3] and [checkpoint_step(p, settings) for p in paths] == [3, 3, 3]
    resumed = _models(spec, split)
    results = train_stacked(resumed, split, settings, 3, SEEDS, paths)
    assert [r.history for r in results] == [r.history for r in full]
    for a, b in zip(straight, resumed):
        for p, q in zip(a.state_dict().values(), b.state_dict().values()):
            assert torch.equal(p, q)
    assert [checkpoint_step(p, settings) for p in paths] == [None] * 3  # finished
    again = _models(spec, split)  # finished runs read back from their own checkpoints: nothing more to train
    assert [r.history for r in train_stacked(again, split, settings, 3, SEEDS, paths)] == [r.history for r in full]
    model = _models(spec, split, [SEEDS[1]])[0]
    assert train_model(model, split, settings, 3, SEEDS[1], paths[1]).history == full[1].history
    assert all(torch.equal(p, q) for p, q in zip(model.state_dict().values(), straight[1].state_dict().values()))
    mixed = [tmp_path / "a.pt", tmp_path / "b.pt"]
    train_model(_models(spec, split, [0])[0], split, settings, 3, 0, mixed[0], stop_at=1)
    with pytest.raises(ValueError, match="different steps"):
        train_stacked(_models(spec, split, [0, 1]), split, settings, 3, [0, 1], mixed)


def test_a_run_diverging_mid_training_stops_where_its_separate_run_stops_and_the_others_train_on(split, tmp_path,
                                                                                            float64):
    """Runs stopped after 3 steps (Adam under way), one of them given a NaN weight, and continued: that run stops at
    step 3 with its state of then, as its separate run does, and the other two train to the end, as their separate
    runs do and as run 0 does continued alone from its stack checkpoint (float64 rounding, as above)."""
    spec, settings = SPECS["TRIL/TRIL"], _settings(steps=6, history_every=3, batch_size=BATCH)
    stacked_paths = [tmp_path / f"stack{s}.pt" for s in SEEDS]
    alone_path = tmp_path / "alone.pt"
    train_stacked(_models(spec, split), split, settings, 1, SEEDS, stacked_paths, stop_at=3)
    train_model(_models(spec, split, [SEEDS[1]])[0], split, settings, 1, SEEDS[1], alone_path, stop_at=3)
    # a stack's run checkpoint continues as a separate run: run 0 from its step-3 checkpoint, alone, to the end
    handed_over = tmp_path / "handed_over.pt"
    handed_over.write_bytes(stacked_paths[0].read_bytes())
    continued = _models(spec, split, [SEEDS[0]])[0]
    assert train_model(continued, split, settings, 1, SEEDS[0], handed_over).steps == 6
    for path in (stacked_paths[1], alone_path):  # the same corruption of one run's saved weights
        state = torch.load(path, weights_only=False)
        state["model"]["emission.bias"][0] = float("nan")
        torch.save(state, path)
    stacked = _models(spec, split)
    results = train_stacked(stacked, split, settings, 1, SEEDS, stacked_paths)
    alone = _models(spec, split, [SEEDS[1]])[0]
    expected = train_model(alone, split, settings, 1, SEEDS[1], alone_path)
    assert (results[1].diverged, results[1].steps) == (expected.diverged, expected.steps) == (True, 3)
    assert results[1].history[-1] == expected.history[-1] == {"step": 3, "diverged": True}
    assert [(r.diverged, r.steps) for r in (results[0], results[2])] == [(False, 6), (False, 6)]
    for a, b in zip(stacked[1].state_dict().values(), alone.state_dict().values()):  # (float64 rounding, as above)
        assert torch.allclose(a, b, rtol=0, atol=1e-10, equal_nan=True)
    assert checkpoint_step(stacked_paths[1], settings) is None  # over: the stage evaluates it as unstable
    for index in (0, 2):
        ref = _models(spec, split, [SEEDS[index]])[0]
        train_model(ref, split, settings, 1, SEEDS[index])
        assert all(torch.allclose(a, b, rtol=0, atol=1e-10) for a, b in zip(stacked[index].parameters(),
                                                                           ref.parameters()))
    assert all(torch.allclose(a, b, rtol=0, atol=1e-10) for a, b in zip(continued.parameters(),
                                                                       stacked[0].parameters()))


def test_real_nvp_is_not_stackable_and_bad_stacks_are_clear_errors(split):
    nvp = _models({"kind": "dssm", "generative_flow": "REAL-NVP-[2,3]", "state_size": 4, "q_hidden": [8]}, split, [0])
    assert not stackable(nvp[0]) and all(stackable(_models(s, split, [0])[0]) for s in SPECS.values())
    settings = _settings(steps=2)
    with pytest.raises(ValueError, match="not Real NVP"):
        train_stacked(nvp * 2, split, settings, 1, [0, 1])
    with pytest.raises(ValueError, match="one stackable spec"):
        train_stacked(_models(SPECS["TRIL/TRIL"], split, [0]) + _models(SPECS["ID/ID"], split, [1]), split,
                      settings, 1, [0, 1])
    with pytest.raises(ValueError, match="one seed"):
        train_stacked(_models(SPECS["ID/ID"], split, [0, 1]), split, settings, 1, [0])


@pytest.mark.parametrize("batch_first", [True, False])
def test_the_transformable_gru_is_torchs_gru_and_vmaps(batch_first, float64):
    torch.manual_seed(0)
    gru = nn.GRU(4, 5, batch_first=batch_first)
    x, h0 = torch.randn(3, 7, 4), torch.randn(1, 3 if batch_first else 7, 5)
    for got, want in zip(gru_forward(gru, x, h0), gru(x, h0)):
        assert torch.allclose(got, want, rtol=0, atol=1e-12)
    stacked = {name: torch.stack([p, 2 * p]) for name, p in gru.named_parameters()}
    with functorch_compatible(gru):
        out = vmap(lambda params, inputs: functional_call(gru, params, (inputs,))[0])(stacked, torch.stack([x, x]))
    for m in range(2):
        want = functional_call(gru, {name: p[m] for name, p in stacked.items()}, (x,))[0]
        assert torch.allclose(out[m], want, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="one layer"):
        gru_forward(nn.GRU(4, 5, num_layers=2), x)


def test_the_tril_flow_places_its_entries_in_the_lower_triangle_diagonal_first():
    """G's entries come from the network's outputs: the first d on the diagonal (which the unit bias starts at 1),
    the rest below it in row order, zeros above: the layout of the indexed write the gather replaced."""
    flow = TriangularFlow(3)
    last = flow.factor[-1]
    with torch.no_grad():  # the factor network outputs 1..6 whatever the context
        last.weight.zero_()
        last.bias.copy_(torch.arange(1.0, 7.0))
    _, lower, logdet = flow._params(torch.randn(2, 3))
    assert torch.equal(lower, torch.tensor([[1.0, 0, 0], [4.0, 2.0, 0], [5.0, 6.0, 3.0]]).expand(2, 3, 3))
    assert torch.allclose(logdet, torch.full((2,), math.log(6.0)))


def test_the_stage_with_stacks_gives_the_separate_runs_numbers_and_reads_them_back(tmp_path, float64, capsys):
    """run_experiment with ``stack_size`` 2: seeds 0-1 of every spec as one stack, seed 2 of the weighted specs alone,
    Real NVP's runs one at a time; every record (histories, metrics, samples) as with separate runs, up to float
    rounding; a second call reads the runs back. A job whose runs were left at different steps (one run's checkpoint
    ahead of the other's) lets the one behind catch up alone, goes on as one stack and gives the same numbers."""
    from paperlib.experiments.word_generation.word_generation import (plan_runs, run_experiment, settings_fingerprint,
                                                                      training_jobs)

    nvp = {"NVP": {"kind": "dssm", "generative_flow": "REAL-NVP-[2,3]", "q_hidden": [8], "coupling_hidden": [4]}}
    table1 = {**_settings().table1, **nvp}
    settings = _settings(seeds=[0, 1], seeds_weighted=[0, 1, 2], stack_size=2, table1=table1)
    jobs = training_jobs(plan_runs(settings), settings)
    assert sorted(len(job) for job in jobs) == [1, 1] + [2] * 7 and all(len({r.key for r in job}) == 1 for job in jobs)
    stacked = run_experiment(settings, _word_list(), tmp_path / "stacked", progress=True)
    said = capsys.readouterr().out
    assert said.count("as one stack") == 6  # every job of two seeds but Real NVP's
    assert "table1:NVP, seeds 0, 1\n" in said
    separate = run_experiment(_settings(seeds=[0, 1], seeds_weighted=[0, 1, 2], table1=table1), _word_list(),
                              tmp_path / "separate")
    assert len(stacked["runs"]) == len(separate["runs"]) == 16

    def close(a, b):
        if isinstance(a, dict):
            return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
        if isinstance(a, list):
            return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
        if isinstance(a, float):
            return a == pytest.approx(b, rel=1e-8, abs=1e-8)
        return a == b

    def same_numbers(results):
        return all((a["key"], a["seed"]) == (b["key"], b["seed"]) and close(a["history"], b["history"])
                   and close(a["metrics"], b["metrics"]) for a, b in zip(results["runs"], separate["runs"]))

    assert same_numbers(stacked)
    assert json.dumps(run_experiment(settings, _word_list(), tmp_path / "stacked"), sort_keys=True) == \
        json.dumps(stacked, sort_keys=True)
    # seed 1 of TRIL trained 3 steps ahead on its own (as if a stack's checkpoints were written one run at a time)
    run = next(r for r in plan_runs(settings) if r.labels[0] == "table1:TRIL" and r.seed == 1)
    folder = tmp_path / "uneven" / settings_fingerprint(settings, _word_list()) / run.folder()
    split, spec = make_splits(_word_list())["standard"], complete_spec(run.spec)  # (completing a spec draws)
    torch.manual_seed(1)  # the run's initialisation, as the stage builds it
    train_model(build_model(spec, split.vocab, settings.max_len), split, settings, 1, 1, folder / "checkpoint.pt",
                stop_at=3)
    capsys.readouterr()
    assert same_numbers(run_experiment(settings, _word_list(), tmp_path / "uneven", progress=True))
    said = capsys.readouterr().out.splitlines()
    start = next(i for i, line in enumerate(said) if "standard split, table1:TRIL, table3:TRIL/DIAG" in line)
    # seed 0 catches up alone (history every 2 steps: its step 2), then the two go on stacked from step 3 to 4
    assert said[start].endswith("seeds 0, 1 as one stack")
    assert [line.split(",")[0].strip() for line in said[start + 1:start + 4]] == ["step 2", "seed 0: step 4",
                                                                               "seed 1: step 4"]
    with pytest.raises(ValueError, match="stack_size"):
        _settings(stack_size=0)
