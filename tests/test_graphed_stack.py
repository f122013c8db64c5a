"""Stacked PTB sentence-VAE trials with the step in a form one CUDA graph holds (micmco/ptb/graphed_stack): on a CPU,
where a replay calls the captured step, the stacked step's numbers up to rounding; on CUDA (marked tests, run by
benchmarks/gpu.sh) the captured graph itself."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from paperlib.device import configure, current
from paperlib.experiments.micmco.ptb.data import SentenceData
from paperlib.experiments.micmco.ptb.design import curve_of
from paperlib.experiments.micmco.ptb.graphed_stack import GraphedStackedTrials, padded_encode
from paperlib.experiments.micmco.ptb.stacked_trials import StackedTrials, TrialSpec
from paperlib.models.sentence_vae import BiLSTMEncoder
from tests.test_stacked_trials import CURVES, EOS, SETTINGS, V, _sentences, _specs


def _full_length(n: int, seed: int) -> list[torch.Tensor]:
    """Sentences of one length: every batch reaches the padded length, so the masks are drawn alike."""
    g = torch.Generator().manual_seed(seed)
    return [torch.cat([torch.randint(1, V, (7,), generator=g), torch.tensor([EOS])]) for _ in range(n)]


@pytest.fixture(scope="module")
def full() -> SentenceData:
    train = _full_length(60, 0)
    return SentenceData(train, train[:10], _full_length(10, 1), _full_length(10, 2), V, EOS)


@pytest.fixture(scope="module")
def ragged() -> SentenceData:
    train = _sentences(60, 0)  # 2 to 9 tokens
    return SentenceData(train, train[:10], _sentences(10, 1), _sentences(10, 2), V, EOS)


def assert_same_weights(a: list, b: list) -> None:
    """float64: the two steps differ by rounding in differently shaped operations (padded encoder, dense decoders,
    the tokens as a tensor), about 1e-16 each, which Adam's normalised steps carry through a few steps to ~1e-13
    (as in tests/test_stacked_trials.py); a wrong batch, draw or learning rate moves the weights by ~1e-3."""
    for x, y in zip(a, b):
        for p, q in zip(x.parameters(), y.parameters()):
            torch.testing.assert_close(p, q, rtol=0, atol=1e-10)


def test_the_padded_encoder_is_the_packed_one(float64):
    """Each direction's state at the sentence's own end, without packing: the forward direction read at the last
    token, the backward one over the sentence reversed within its length (sentences of 1 to 8 words and the end
    token, padded two columns past the longest)."""
    torch.manual_seed(0)
    encoder = BiLSTMEncoder(V, 6, 5)
    sentences = _sentences(7, 3)
    lengths = torch.tensor([len(s) for s in sentences])
    tokens = torch.zeros(7, int(lengths.max()) + 2, dtype=torch.long)  # two more columns of padding
    for row, sentence in enumerate(sentences):
        tokens[row, : len(sentence)] = sentence
    torch.testing.assert_close(padded_encode(encoder, tokens, lengths), encoder(tokens, lengths), rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", CURVES)
def test_with_full_length_batches_the_graphed_stack_is_the_stacked_step(name, full, float64):
    curve, specs = curve_of(name), _specs(name)
    stacked = StackedTrials(curve, specs, SETTINGS, full, "cpu")
    graphed = GraphedStackedTrials(curve, specs, SETTINGS, full, "cpu")
    assert stacked.run() and graphed.run()
    assert_same_weights(graphed.models, stacked.models)
    for a, b in zip(graphed.results(), stacked.results()):
        assert a.final_objective == pytest.approx(b.final_objective, abs=1e-10) and a.steps == b.steps
    assert graphed.step_counts == {"eager": 2, "replayed": SETTINGS.steps - 2, "captures": 1}


def test_without_dropout_shorter_sentences_change_nothing_but_rounding(ragged, float64):
    """Padding to the longest sentence only changes the draws of dropout masks (drawn at the padded length); a curve
    without dropout draws only its latent samples, whose shape padding leaves alone."""
    curve, specs = curve_of("dreg1.train"), _specs("dreg1.train")
    stacked = StackedTrials(curve, specs, SETTINGS, ragged, "cpu")
    graphed = GraphedStackedTrials(curve, specs, SETTINGS, ragged, "cpu")
    stacked.run(), graphed.run()
    assert_same_weights(graphed.models, stacked.models)


def test_a_trial_that_diverges_stops_and_the_others_train_on_as_in_the_stacked_step(full, float64):
    """A learning rate of 1e12 makes trial 1's objective non-finite at its second step: in both steps it stops
    there and the others end where they do in the stacked step; the graph is captured again without it."""
    curve, specs = curve_of("dreg16_kl.shared"), _specs("dreg16_kl.shared")
    specs[1] = TrialSpec({**specs[1].params, "learning_rate": 1e12}, specs[1].seed)
    settings = dataclasses.replace(SETTINGS, steps=9)
    stacked = StackedTrials(curve, specs, settings, full, "cpu")
    graphed = GraphedStackedTrials(curve, specs, settings, full, "cpu", eager_steps=1)
    stacked.run(), graphed.run()
    assert graphed.stopped == stacked.stopped == [None, 2, None]
    assert_same_weights([graphed.models[0], graphed.models[2]], [stacked.models[0], stacked.models[2]])
    # step 1 eager, step 2 captured (trial 1 diverges there), step 3 eager without it, steps 4-9 a second capture
    assert graphed.step_counts == {"eager": 2, "replayed": 7, "captures": 2}


def test_each_class_continues_the_others_checkpoints(full, tmp_path, float64):
    curve, specs = curve_of("vimco16_renyi.naive"), _specs("vimco16_renyi.naive")
    settings = dataclasses.replace(SETTINGS, steps=10)
    straight = GraphedStackedTrials(curve, specs, settings, full, "cpu")
    straight.run()
    first = GraphedStackedTrials(curve, specs, settings, full, "cpu")
    assert not first.run(until=4)
    first.save(tmp_path / "run.pt")
    middle = StackedTrials.load(tmp_path / "run.pt", curve, specs, settings, full, "cpu")
    assert middle.step_count == 4 and not middle.run(until=7)
    middle.save(tmp_path / "run.pt")
    last = GraphedStackedTrials.load(tmp_path / "run.pt", curve, specs, settings, full, "cpu")
    assert isinstance(last, GraphedStackedTrials) and last.step_count == 7 and last.run()
    assert_same_weights(last.models, straight.models)
    assert [(c["from_step"], c["to_step"]) for c in last.chunks] == [(0, 4), (4, 7), (7, 10)]


def test_a_training_set_smaller_than_a_batch_is_the_batch(float64):
    """3 training sentences and batches of 5: every batch is the whole set (as the stacked step reads it), and the
    captured step's buffers have its 3 rows."""
    train = _full_length(3, 4)
    data = SentenceData(train, train, _full_length(4, 1), _full_length(4, 2), V, EOS)
    curve, specs = curve_of("dreg16_kl.shared"), _specs("dreg16_kl.shared")
    stacked = StackedTrials(curve, specs, SETTINGS, data, "cpu")
    graphed = GraphedStackedTrials(curve, specs, SETTINGS, data, "cpu")
    assert stacked.run() and graphed.run()
    assert_same_weights(graphed.models, stacked.models)
    assert graphed.step_counts == {"eager": 2, "replayed": SETTINGS.steps - 2, "captures": 1}


def test_another_precision_since_the_capture_is_captured_again(full):
    """A graph keeps the precision settings of its capture: after configure() sets another precision the stack
    warms up (2 eager steps) and captures again."""
    curve, specs = curve_of("dreg1.train"), _specs("dreg1.train")
    graphed = GraphedStackedTrials(curve, specs, dataclasses.replace(SETTINGS, steps=10), full, "cpu")
    assert not graphed.run(until=4)
    assert graphed.step_counts == {"eager": 2, "replayed": 2, "captures": 1}
    before = current()
    try:
        configure("tf32", before.sync_every, before.compile)
        assert graphed.run()
    finally:
        configure(before.precision, before.sync_every, before.compile)
    assert graphed.step_counts == {"eager": 4, "replayed": 6, "captures": 2}


def test_bad_settings_are_value_errors(full):
    with pytest.raises(ValueError, match="eager_steps"):
        GraphedStackedTrials(curve_of("dreg1.train"), _specs("dreg1.train"), SETTINGS, full, "cpu", eager_steps=0)


@pytest.mark.cuda
@pytest.mark.parametrize("name", ["dreg16_kl.shared", "vimco16_renyi.naive", "dreg1.train"])
def test_on_cuda_the_replayed_stack_trains_as_the_stacked_step(name, full, float64):
    """float64 on the GPU, as the stacked step's own CUDA test: the captured step differs from the stacked one by
    rounding (capturable Adam, the unpacked encoder, dense decoders), ~1e-16 per operation and ~1e-13 after the
    steps (see :func:`assert_same_weights`). Every trial draws from its own generator, registered with the graph, so
    the replays draw what eager steps draw: a frozen or repeated draw moves the weights by ~1e-3."""
    curve, specs = curve_of(name), _specs(name)
    stacked = StackedTrials(curve, specs, SETTINGS, full, "cuda")
    graphed = GraphedStackedTrials(curve, specs, SETTINGS, full, "cuda")
    stacked.run(), graphed.run()
    assert graphed.step_counts == {"eager": 2, "replayed": SETTINGS.steps - 2, "captures": 1}
    assert_same_weights(graphed.models, stacked.models)


@pytest.mark.cuda
def test_on_cuda_in_float32_replays_train_as_the_same_steps_run_eagerly(full):
    """float32 at a hidden size cuDNN runs with its persistent small-hidden algorithm (the one the paper shapes
    capture), which the float64 test does not reach: the same class with and without the capture runs the same
    kernels on the same inputs, so the weights agree to float32 rounding of kernels that may accumulate in another
    order (atol 1e-5 on weights of order 0.1 after 6 steps; a frozen draw or a stale batch moves them by ~1e-3)."""
    curve, specs = curve_of("dreg16_kl.shared"), _specs("dreg16_kl.shared")
    replayed = GraphedStackedTrials(curve, specs, SETTINGS, full, "cuda")
    eager = GraphedStackedTrials(curve, specs, SETTINGS, full, "cuda", eager_steps=SETTINGS.steps)
    replayed.run(), eager.run()
    assert replayed.step_counts["replayed"] == SETTINGS.steps - 2 and eager.step_counts["replayed"] == 0
    for x, y in zip(replayed.models, eager.models):
        for p, q in zip(x.parameters(), y.parameters()):
            torch.testing.assert_close(p, q, rtol=0, atol=1e-5)
