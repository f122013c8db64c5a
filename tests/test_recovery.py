"""Krause's recovery test (thesis §3.5.2, Fig. 3.3): surprising characters and the losses after them."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from paperlib.dyneval import static_evaluate
from paperlib.recovery import recovery_profile, surprising_positions

LN2 = math.log(2.0)


def test_surprising_positions_are_the_top_fraction_of_the_average_loss_with_ties_to_the_earlier():
    losses = torch.tensor([[1.0, 9.0, 1.0, 5.0, 5.0, 1.0, 1.0, 1.0, 7.0, 3.0],
                           [1.0, 1.0, 1.0, 5.0, 5.0, 1.0, 1.0, 1.0, 7.0, 3.0]])
    # averages: 1 5 1 5 5 1 1 1 7 3; with horizon 2 only positions 0..7 count (t + 2 must exist)
    assert surprising_positions(losses, 0.3, horizon=2).tolist() == [1, 3, 4]
    assert surprising_positions(losses, 0.25, horizon=2).tolist() == [1, 3]  # ceil(0.25 * 8) = 2: ties -> earlier
    assert surprising_positions(losses, 0.1, horizon=0).tolist() == [8]


def test_recovery_profile_matches_hand_computed_means_and_krauses_criterion():
    # Two "models" with a spike of 6 bits at positions 2 and 7; A is back to 1 bit one step later,
    # B needs three steps (4, 2, 1). Elsewhere A costs 1.0 and B 0.9 bits.
    a = torch.full((100,), 1.0)
    b = torch.full((100,), 0.9)
    for p in (2, 7):
        a[p] = b[p] = 6.0
        b[p + 1], b[p + 2] = 4.0, 2.0
    profile = recovery_profile({"a": a, "b": b}, fraction=0.02, horizon=3, unit="bits")
    assert profile.positions.tolist() == [2, 7]  # ceil(0.02 * 97) = 2 largest averages
    assert profile.after["a"] == pytest.approx([6.0, 1.0, 1.0, 1.0])
    assert profile.after["b"] == pytest.approx([6.0, 4.0, 2.0, 0.9])
    assert profile.overall["a"] == pytest.approx((2 * 6.0 + 98 * 1.0) / 100)
    assert profile.overall["b"] == pytest.approx((2 * 6.0 + 2 * 4.0 + 2 * 2.0 + 94 * 0.9) / 100)
    assert profile.advantage("a", "b") == pytest.approx([0.0, 3.0, 1.0, -0.1])
    assert profile.excess("a") == pytest.approx([6.0 - profile.overall["a"]] + [1.0 - profile.overall["a"]] * 3)
    # overall, B is better (more low-loss steps) but A's advantage right after a surprise is larger
    assert profile.overall_advantage("a", "b") < 0
    assert profile.recovers_faster("a", "b", step=1) and not profile.recovers_faster("b", "a", step=1)
    # the criterion as a number with its standard error, by hand: one step after the two surprises B - A is 3 at
    # both (variance 0); over all positions B - A is 0 (2x), 3 (2x), 1 (2x) and -0.1 (94x)
    paired = torch.tensor([0.0] * 2 + [3.0] * 2 + [1.0] * 2 + [-0.1] * 94, dtype=torch.float64)
    gap, se = profile.recovery_gap("a", "b", step=1)
    assert gap == pytest.approx(3.0 - float(paired.mean()))
    assert se == pytest.approx(math.sqrt(0.0 / 2 + float(paired.var()) / 100))
    assert profile.recovery_gap("b", "a", step=1)[0] == pytest.approx(-gap)
    with pytest.raises(ValueError, match="step must lie"):
        profile.recovery_gap("a", "b", step=4)
    # nats are converted to bits
    in_nats = recovery_profile({"a": a * LN2, "b": b * LN2}, fraction=0.02, horizon=3)
    assert in_nats.after["b"] == pytest.approx(profile.after["b"])


class CopyLM(nn.Module):
    """Predicts that the next character repeats the one ``lag`` steps back (confidence ``margin`` nats)."""

    def __init__(self, vocab: int, lag: int, margin: float = 5.0):
        super().__init__()
        self.vocab, self.lag, self.margin = vocab, lag, margin

    def forward(self, tokens, state=None):
        keep = self.lag - 1
        past = tokens[:, :0] if state is None else state  # the last `keep` inputs of earlier segments
        history = torch.cat([past, tokens], 1)  # [B, P + T]
        idx = (torch.arange(tokens.shape[1]) + past.shape[1] - keep).clamp(min=0)
        logits = self.margin * nn.functional.one_hot(history[:, idx], self.vocab).double()  # [B, T, V]
        return logits, history[:, history.shape[1] - keep :]


def test_a_copy_model_recovers_one_step_after_a_run_change_and_a_lagged_copy_two_steps_after():
    """Hand-built models with known behaviour on text made of runs (length >= 3) of one character."""
    gen = torch.Generator().manual_seed(0)
    vocab, pieces, prev = 5, [], -1
    for _ in range(300):
        char = int(torch.randint(0, vocab - 1, (1,), generator=gen))
        char = char if char < prev or prev < 0 else char + 1  # never the previous run's character
        pieces.append(torch.full((int(torch.randint(3, 7, (1,), generator=gen)),), char))
        prev = char
    text = torch.cat(pieces)
    losses = {name: static_evaluate(CopyLM(vocab, lag), text, segment_len=13).losses
              for name, lag in (("copy", 1), ("lagged", 2))}
    right = math.log(math.exp(5.0) + vocab - 1) - 5.0  # -log p of the guessed character
    wrong = math.log(math.exp(5.0) + vocab - 1)
    changes = (text[1:] != text[:-1]).double().mean().item()
    profile = recovery_profile(losses, fraction=changes / 2, horizon=2)
    # the surprising characters are run changes: both models guessed wrong there
    assert profile.after["copy"] == pytest.approx([wrong / LN2, right / LN2, right / LN2])
    assert profile.after["lagged"] == pytest.approx([wrong / LN2, wrong / LN2, right / LN2])
    assert profile.recovers_faster("copy", "lagged", step=1)
    assert profile.advantage("copy", "lagged")[2] == pytest.approx(0.0)


def test_bad_arguments_name_the_valid_choices():
    with pytest.raises(ValueError, match="fraction"):
        recovery_profile({"a": torch.ones(10)}, fraction=0.0)
    with pytest.raises(ValueError, match="nats' or 'bits"):
        recovery_profile({"a": torch.ones(10)}, unit="bytes")
    with pytest.raises(ValueError, match="same length"):
        recovery_profile({"a": torch.ones(10), "b": torch.ones(9)})
    with pytest.raises(ValueError, match="horizon"):
        recovery_profile({"a": torch.ones(4)}, horizon=4)
    profile = recovery_profile({"a": torch.ones(10), "b": torch.ones(10)}, horizon=2)
    with pytest.raises(ValueError, match="step"):
        profile.recovers_faster("a", "b", step=3)
