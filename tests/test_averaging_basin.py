"""The synthetic new-basin experiment (stage averaging_basin, Melis Fig. 3.6): the landscape against its closed forms,
the runs' records, and the claim's rules on hand-made records."""

import dataclasses

import pytest
import torch

from paperlib.experiments.averaging.averaging_basin import (BasinParams, Landscape, entry_step, run_seed,
                                                             stationary_points)
from paperlib.experiments.averaging.claims import ENTRY_MARGIN, basin_claim, basin_events, judged_entries
from paperlib.experiments.common.config import experiment_params

SMALL = BasinParams(dims=50, curvature=1.0, well=1.5, tilt=0.6, lr=0.01, noise=1.0, basin_noise=7.0, init_scale=1.0,
                    steps=2000, eval_every=100, seeds=[1])


def test_the_stationary_points_are_where_the_double_well_is_flat_and_curved_as_a_basin_or_a_ridge():
    a, b = 1.5, 0.6
    points = stationary_points(a, b)
    for key, sign in (("basin_a", 1), ("ridge", -1), ("basin_b", 1)):
        u = points[key]
        assert 4 * a * u * (u * u - 1) - b == pytest.approx(0.0, abs=1e-12)  # V'(u) = 0
        assert sign * a * (12 * u * u - 4) > 0  # V''(u): a minimum at the basins, a maximum at the ridge
    assert points["basin_a"] < points["ridge"] < points["basin_b"]
    assert points["barrier_b"] - points["barrier_a"] == pytest.approx(points["depth_gap"], abs=1e-12)


def test_a_slight_tilt_deepens_the_right_basin_by_twice_the_tilt_and_moves_the_barriers_by_it():
    """To first order in b: the wells sit at -1 and +1 with V(-1) - V(1) = 2b, and the ridge at u = 0, V(0) = a."""
    a, b = 2.0, 1e-4
    points = stationary_points(a, b)
    assert points["depth_gap"] == pytest.approx(2 * b, rel=1e-3)
    assert points["barrier_a"] == pytest.approx(a - b, rel=1e-6)
    assert points["barrier_b"] == pytest.approx(a + b, rel=1e-6)


def test_the_loss_is_zero_at_the_deeper_basin_and_its_gradient_is_the_closed_form():
    land = Landscape(SMALL)
    bottom = torch.zeros(SMALL.dims + 1, dtype=torch.float64)
    bottom[0] = land.points["basin_b"]
    assert float(land.loss(bottom)) == pytest.approx(0.0, abs=1e-12)
    theta = torch.randn(SMALL.dims + 1, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    theta.requires_grad_(True)
    land.loss(theta).backward()
    u, v = theta.detach()[0], theta.detach()[1:]
    assert float(theta.grad[0]) == pytest.approx(float(4 * SMALL.well * u * (u * u - 1) - SMALL.tilt), rel=1e-12)
    torch.testing.assert_close(theta.grad[1:], SMALL.curvature * v, rtol=0, atol=0)
    bottom[0] = land.points["basin_a"]
    assert float(land.loss(bottom)) == pytest.approx(land.points["depth_gap"], rel=1e-12)


@pytest.mark.parametrize("positions, entry", [
    ([-1.0, 0.5, -0.2, 0.7, 0.8], 400),  # in B from the fourth evaluation on
    ([-1.0, 0.5, 0.6, 0.7, -0.8], None),  # left B again at the end
    ([-1.0, -0.9, -1.1, -1.0, -0.7], None),  # never entered
    ([0.3, 0.5, 0.6, 0.7, 0.8], 100),
])
def test_the_entry_is_the_first_evaluation_from_which_the_iterate_stays_beyond_the_ridge(positions, entry):
    assert entry_step([100, 200, 300, 400, 500], positions, ridge=0.0) == entry


@pytest.mark.parametrize("change, message", [
    (dict(well=0.5, tilt=1.0), "tilt must lie in"),  # beyond the critical tilt 8a / (3 sqrt 3) = 0.77: one basin
    (dict(tilt=0.0), "tilt must lie in"),
    (dict(lr=0.1), "too large for the landscape's curvature"),  # lr x 8a = 1.2: SGD overshoots the wells
    (dict(seeds=[1, 1]), "distinct seeds"),
    (dict(steps=150), "at least two evaluation periods"),
    (dict(noise=0.0), "noise must be positive"),
])
def test_bad_settings_are_clear_errors(change, message):
    settings = dataclasses.asdict(SMALL) | change
    with pytest.raises(ValueError, match=message):
        BasinParams(**settings)


def test_every_profile_of_the_stage_reads_and_the_smoke_profile_is_the_cpu_one_with_fewer_seeds():
    profiles = {p: experiment_params("averaging_basin", p) for p in ("smoke", "cpu", "gpu", "paper")}
    cpu = dataclasses.asdict(profiles["cpu"])
    for name in ("smoke", "gpu", "paper"):
        assert {k: v for k, v in dataclasses.asdict(profiles[name]).items() if k != "seeds"} == \
            {k: v for k, v in cpu.items() if k != "seeds"}
    assert set(profiles["smoke"].seeds) < set(profiles["cpu"].seeds)


def test_a_run_is_deterministic_per_seed_and_keeps_2ta_lengths_ordered():
    first, again, other = run_seed(SMALL, 1), run_seed(SMALL, 1), run_seed(SMALL, 2)
    assert first == again
    assert first["evaluations"]["loss"] != other["evaluations"]["loss"]
    ev = first["evaluations"]
    assert ev["step"] == list(range(100, 2001, 100))
    assert all(s <= l for s, l in zip(ev["short_len"], ev["long_len"]))
    assert all(v >= 0 for v in ev["loss"] + ev["raw"])  # the landscape's minimum is 0
    # iterates join the averages E at a time between evaluations, so every length is a multiple of E (Prop. 1 (i))
    assert all(l % SMALL.eval_every == 0 for l in ev["long_len"])


def test_without_noise_along_u_a_run_stays_in_its_start_basin_and_2ta_removes_the_noise_as_an_average_should():
    """sigma_u -> 0: the barrier (0.95) is never crossed. Along v each coordinate is an AR(1) process with
    rho = 1 - lr lambda, so the raw weights' loss settles at d lr sigma_v^2 / (4 - 2 lr lambda) above V(u_A) - V(u_B),
    and an average of L late iterates keeps about (1 + rho) / ((1 - rho) L) of that (the variance of the mean of an
    AR(1) process, L much longer than its correlation time 1 / (1 - rho) = 100 steps)."""
    quiet = dataclasses.replace(SMALL, basin_noise=0.01, dims=400)
    run = run_seed(quiet, 3)
    assert run["entry"] is None
    ev = run["evaluations"]
    assert all(u < 0 for u in ev["u"])
    gap = stationary_points(quiet.well, quiet.tilt)["depth_gap"]
    stationary = quiet.dims * quiet.lr * quiet.noise ** 2 / (4 - 2 * quiet.lr * quiet.curvature)
    # 400 directions: one evaluation's loss spreads by about sqrt(2 / 400) = 7%; the mean of ten by less
    assert sum(ev["raw"][-10:]) / 10 - gap == pytest.approx(stationary, rel=0.1)
    rho, length = 1 - quiet.lr * quiet.curvature, ev["long_len"][-1]
    assert length >= 1000 and not ev["using_raw"][-1]
    # one draw of 400 directions (7%) and the finite-L correction of the AR(1) formula (about 100 / L): 25%
    assert ev["loss"][-1] - gap == pytest.approx(stationary * (1 + rho) / ((1 - rho) * length), rel=0.25)


# -- the claim's rules on hand-made records -------------------------------------------------------------------


def record(losses, actions, long_lens, u, period=100):
    n = len(losses)
    steps = [period * (k + 1) for k in range(n)]
    return {"step": steps, "raw": [9.0] * n, "loss": losses, "long_len": long_lens, "short_len": [0] * n,
            "action": actions, "using_raw": [False] * n, "u": u, "u_reported": [-1.0] * n}


def fig_3_6_run(seed=1, entry=12, action="reset_long", second=True, spike=3.0, decay=0.6, recovered=0.2,
                rising=True, n=30):
    """A run of ``n`` evaluations (E = 100 steps) that enters basin B at evaluation ``entry``, as the stage's runs do:
    the loss bottoms out just before it and rises for three evaluations; then 2TA changes its averages with ``action``
    (at the bottom + 3), its long average still long (Alg. 2 handed it the short one's stale contents); one evaluation
    later (``second``) a second reset empties it, the loss jumps to ``spike`` and falls by ``decay`` per evaluation
    to ``recovered`` at the end."""
    losses = [2.0 - 0.05 * k for k in range(entry)]
    bottom = losses[-1]
    losses += [bottom + 0.01, bottom + 0.02] if rising else [bottom + 0.02, bottom + 0.01]
    reset = len(losses)
    losses += [bottom + 0.03, spike] + [spike * decay ** j for j in range(1, n - reset - 1)]
    assert len(losses) == n
    losses[-1] = recovered
    actions = ["keep"] * n
    actions[reset] = action
    long_lens = [100 * (k + 1) for k in range(n)]
    if second:
        actions[reset + 1] = "reset_long"
        long_lens[reset + 1:] = [100 * (k - reset) for k in range(reset + 1, n)]
    u = [-1.0] * entry + [1.0] * (n - entry)
    return {"seed": seed, "entry": 100 * (entry + 1), "evaluations": record(losses, actions, long_lens, u)}


def verdicts(*runs):
    return {p.label: p.verdict for p in basin_claim({"runs": list(runs)}).parts}


def test_a_run_with_fig_3_6_s_sequence_is_read_as_every_part_holding():
    run = fig_3_6_run()
    events = basin_events(run)
    assert (events["entry"], events["bottom"], events["reset"], events["emptied"]) == (12, 11, 14, 15)
    assert events["rising"] and events["second_reset"]
    assert events["back"] == 2  # 3.0, 1.8, 1.08: below the bottom (2.0 - 0.05 x 11 = 1.45) two evaluations on
    claim = basin_claim({"runs": [run]})
    # every sentence holds, but both averages are emptied one evaluation after the detection, not at it
    assert claim.verdict == "partly" and len(claim.parts) == 5
    assert [p.verdict for p in claim.parts] == ["reproduced"] * 2 + ["partly reproduced"] + ["reproduced"] * 2
    assert "reset 3 evaluations after the bottom" in claim.parts[1].evidence
    assert "one evaluation later by a second reset in 1" in claim.parts[2].evidence


def test_both_averages_emptied_at_the_detection_read_as_the_thesis_says():
    """Fig. 3.6: "This is detected at t = 43E, and both averages are reset": a long average holding only iterates
    from after the entry at the reset itself."""
    run = fig_3_6_run(second=False)
    lengths, actions = run["evaluations"]["long_len"], run["evaluations"]["action"]
    reset = actions.index("reset_long")
    lengths[reset:] = [100 * (k - reset + 1) for k in range(reset, len(lengths))]
    part = next(p for p in basin_claim({"runs": [run]}).parts if p.label == "both averages reset")
    assert part.verdict == "reproduced" and "at the reset in 1," in part.evidence


@pytest.mark.parametrize("change, failing", [
    (dict(action="switch"), {"a reset detects it", "both averages reset", "the loss spikes", "then recovers"}),
    (dict(action="reset_short"), {"a reset detects it", "both averages reset", "the loss spikes", "then recovers"}),
    (dict(second=False), {"both averages reset", "the loss spikes", "then recovers"}),  # the long average stays long
    # (Alg. 2's second reset, one evaluation after the detection, leaves "both averages reset" partly in the rest)
    (dict(spike=1.47), {"the loss spikes", "both averages reset"}),  # below the loss at the first reset (1.48)
    (dict(decay=1.0, recovered=1.6), {"then recovers", "both averages reset"}),  # never below the bottom (1.45)
    (dict(rising=False), {"loss bottoms out, then worsens", "both averages reset"}),
])
def test_each_sentence_fails_on_its_own_counterexample(change, failing):
    words = verdicts(fig_3_6_run(**change))
    assert {label for label, word in words.items() if word != "reproduced"} == failing


def test_a_claim_over_several_runs_is_partly_reproduced_where_some_runs_miss_a_sentence():
    words = verdicts(fig_3_6_run(seed=1), fig_3_6_run(seed=2, second=False))
    assert words["both averages reset"] == "partly reproduced" and words["a reset detects it"] == "reproduced"


def test_entries_near_a_run_s_start_or_end_are_not_judged_and_no_judged_run_is_a_clear_part():
    n = 40
    runs = [fig_3_6_run(seed=1, entry=ENTRY_MARGIN - 1, n=n), fig_3_6_run(seed=2, entry=ENTRY_MARGIN, n=n),
            fig_3_6_run(seed=3, entry=n - ENTRY_MARGIN - 1, n=n), fig_3_6_run(seed=4, entry=n - ENTRY_MARGIN, n=n)]
    never = {"seed": 5, "entry": None, "evaluations": record([1.0] * n, ["keep"] * n, [100] * n, [-1.0] * n)}
    assert [seed for seed, _ in judged_entries({"runs": [*runs, never]})] == [2, 3]
    claim = basin_claim({"runs": [runs[0], never]})
    assert claim.verdict == "not reproduced" and claim.parts[0].label == "a run enters the new basin"
    assert "none of 2 runs" in claim.parts[0].evidence
