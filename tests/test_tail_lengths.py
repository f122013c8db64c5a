"""The optimal tail at every evaluation (paperlib.experiments.averaging.tail_lengths): every tail average of whole
evaluation periods, checked against closed forms, across a resume, and against 2TA's own long average in a run."""

from types import SimpleNamespace

import pytest
import torch
from torch import nn
from torch.nn.utils import parameters_to_vector

from paperlib.experiments.averaging.tail_lengths import TailLengths, best_lengths

PERIOD = 3


def _iterate(module: nn.Module, s: int) -> None:
    """Put iterate theta_s = s * (1, 2, ..., P) into ``module``."""
    with torch.no_grad():
        direction = torch.arange(1.0, 1 + sum(p.numel() for p in module.parameters()))
        offset = 0
        for p in module.parameters():
            p.copy_(s * direction[offset:offset + p.numel()].view_as(p))
            offset += p.numel()


def _distance_to(target: float):
    """f(theta) = |theta / (1, 2, ..., P) - target|^2 / P: the mean of iterates s * direction scores
    (mean s - target)^2, so an average's loss is known in closed form."""
    def f(module: nn.Module) -> float:
        flat = parameters_to_vector(module.parameters()).detach()
        return float(((flat / torch.arange(1.0, 1 + flat.numel()) - target) ** 2).mean())
    return f


def _run(monitor: TailLengths, module: nn.Module, steps: range, f) -> list:
    reports = []
    for s in steps:
        _iterate(module, s)
        monitor.update()
        if monitor.steps % monitor.evaluate_every == 0:
            reports.append(monitor.evaluate(f))
    return reports


def test_each_tail_scores_the_mean_of_its_iterates_and_the_best_is_reported(tmp_path):
    """Iterates s = 1..12, E = 3, target 7: at evaluation n the last k periods average to the mean of s over
    (n - 3k, n], so their loss is (n - (3k - 1) / 2 - 7)^2, and the reported length is the best k's 3k."""
    module = nn.Linear(2, 2)
    monitor = TailLengths(module, PERIOD, tmp_path / "store")
    reports = _run(monitor, module, range(1, 13), _distance_to(7.0))
    for t, (report, curve) in enumerate(zip(reports, monitor.curves), start=1):
        n = t * PERIOD
        expected = [(n - (PERIOD * k - 1) / 2 - 7.0) ** 2 for k in range(1, t + 1)]
        assert curve == pytest.approx(expected, abs=1e-5)  # float32 weights: the division by kE rounds at ~1e-7
        best = min(range(t), key=expected.__getitem__)
        assert report.length == (best + 1) * PERIOD and report.loss == pytest.approx(expected[best], abs=1e-5)
        assert report.step == n
    # at n = 6 one period (mean 5) beats two (3.5); at n = 9 two (6.5) beat one (8) and three (5); at n = 12 all
    # four (6.5) are best
    assert best_lengths(monitor.curves, PERIOD) == [3, 3, 6, 12]
    assert [r.length for r in reports] == [3, 3, 6, 12]
    # the module's own weights are left as they were (the last iterate), not an average
    assert parameters_to_vector(module.parameters())[0].item() == 12.0


def test_a_resumed_monitor_continues_as_an_uninterrupted_one(tmp_path):
    """The checkpoint holds the count of periods and the running sum; the period sums come back from the store."""
    f = _distance_to(5.0)
    whole_module, cut_module = nn.Linear(2, 2), nn.Linear(2, 2)
    whole = TailLengths(whole_module, PERIOD, tmp_path / "whole")
    _run(whole, whole_module, range(1, 14), f)
    first = TailLengths(cut_module, PERIOD, tmp_path / "cut")
    _run(first, cut_module, range(1, 8), f)  # stopped one step into the third period
    state = first.state_dict()
    assert state["periods"] == 2 and state["current"] is not None
    again = TailLengths(cut_module, PERIOD, tmp_path / "cut")
    again.load_state_dict(state)
    _run(again, cut_module, range(8, 14), f)
    assert again.curves == whole.curves and again.steps == whole.steps == 13
    assert torch.equal(again.current, whole.current)


def test_evaluating_before_a_period_has_ended_is_a_clear_error(tmp_path):
    with pytest.raises(RuntimeError, match="end of an evaluation period"):
        TailLengths(nn.Linear(2, 2), PERIOD, tmp_path).evaluate(lambda module: 0.0)


def test_in_the_stages_main_run_the_long_averages_loss_is_its_tails(tmp_path):
    """The smoke settings of averaging_ptb on a toy corpus, with a learning rate noisy enough (0.2) that 2TA averages
    after a few evaluations: the optimal tail is scored at every 2TA evaluation, over k = 1..t periods, and wherever
    2TA reported its long average (not the raw weights), that loss is the tail of L / E periods': the same
    iterates, summed in another order."""
    import dataclasses

    from paperlib.experiments.averaging.averaging_ptb import OPTIMAL_TAIL, run_main
    from paperlib.experiments.common.config import experiment_params
    from tests.test_device import VOCAB, markov_stream

    settings = experiment_params("averaging_ptb", "smoke")
    settings = dataclasses.replace(settings, train={**settings.train, "lr": 0.2, "max_steps": 48})
    corpus = SimpleNamespace(train=markov_stream(3000, 0), valid=markov_stream(600, 1), vocab=list(range(VOCAB)))
    main = run_main(settings, corpus, tmp_path, False)
    period, two, tails = main["period"], main["curves"]["2ta"], main[OPTIMAL_TAIL]
    assert tails["step"] == two["step"] and [len(c) for c in tails["losses"]] == list(range(1, len(two["step"]) + 1))
    assert tails["length"] == best_lengths(tails["losses"], period)
    assert tails["valid_nll"] == [min(c) for c in tails["losses"]]
    compared = 0
    for i, (length, averaged, loss) in enumerate(zip(two["long_len"], two["averaged_length"], two["valid_nll"])):
        if length and averaged == length:  # 2TA reported its long average, not the raw weights
            assert tails["losses"][i][length // period - 1] == pytest.approx(loss, abs=1e-5)
            compared += 1
    assert compared >= 3
