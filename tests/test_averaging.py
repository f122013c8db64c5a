"""Tests for paperlib.averaging: Two-Tailed Averaging (Melis thesis ch. 3) and the averaging baselines."""

import io
import math

import pytest
import torch
from torch import nn

from paperlib.averaging import (
    AVERAGER_KINDS,
    IterateAveragedModel,
    PlateauTriggeredAveragedModel,
    RawWeights,
    TwoTailedAverage,
    TwoTailedAveragedModel,
    build_averager,
)
from tests.numerics import assert_bitwise, assert_close_after_reduction

# ---------------------------------------------------------------------------------------------------------
# Noisy quadratic: SGD with a constant step on streaming least squares, and the brute-force optimal tail.
# ---------------------------------------------------------------------------------------------------------

# Curvatures of the population loss. The few slow directions make the iterates drift towards the optimum for
# the whole run, so averaging trades staleness against noise and Delta(n) grows more slowly than n
# (Assumption 3). The many fast directions carry nearly independent SGD noise: their squared norm
# concentrates, so f(avg(n, delta)) is a smooth function of delta and Assumptions 1, 2 and 4 hold at most
# evaluations. With only a few noisy directions the loss-vs-length curve is so jagged that the assumptions
# hold almost nowhere and Propositions 2 and 4 could not be checked at all.
SLOW_CURVATURES = [10.0**-1, 10.0**-1.5, 10.0**-2, 10.0**-2.5]
FAST_DIMS = 100
PERIOD = 100  # E
NUM_STEPS = 10_000


def _sgd_on_least_squares(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Iterates theta_0..theta_T of single-sample SGD, lr 0.002, on y = x.w + noise with x ~ N(0, diag(lam))."""
    lam = torch.tensor([1.0] * FAST_DIMS + SLOW_CURVATURES, dtype=torch.float64)
    g = torch.Generator().manual_seed(seed)
    xs = torch.randn(NUM_STEPS, lam.numel(), generator=g, dtype=torch.float64) * lam.sqrt()  # [T, d]
    noise = torch.randn(NUM_STEPS, generator=g, dtype=torch.float64)  # [T]
    theta = torch.full_like(lam, 3.0)  # the optimum w is 0, so theta is the error
    iterates = [theta]
    for x, eps in zip(xs, noise):
        theta = theta - 0.002 * x * (x @ theta - eps)
        iterates.append(theta)
    return torch.stack(iterates), lam  # [T + 1, d], [d]


def _population_loss(theta: torch.Tensor, lam: torch.Tensor) -> torch.Tensor:
    return 0.5 * (theta.square() * lam).sum(-1)  # [...]


def _run_algorithm_1_with_brute_force(seed: int) -> list[dict]:
    """Run Algorithm 1 (no extensions, as analysed in §3.5) and compute Delta(n) at every evaluation."""
    iterates, lam = _sgd_on_least_squares(seed)
    prefix = torch.cat([iterates[1:].cumsum(0).new_zeros(1, lam.numel()), iterates[1:].cumsum(0)])  # [T + 1, d]
    tta = TwoTailedAverage(extensions=False)
    rows = []
    for t in range(1, NUM_STEPS + 1):
        tta.add(iterates[t])
        if t % PERIOD:
            continue
        _, theta_long, long_len = tta.evaluate(lambda v: _population_loss(v, lam))
        deltas = torch.arange(1, t + 1)
        curve = _population_loss((prefix[t] - prefix[t - deltas]) / deltas[:, None], lam)  # f(avg(t, delta))
        rows.append(
            dict(
                n=t,
                S=tta.short_len,
                L=long_len,
                Delta=int(deltas[curve.argmin()]),
                curve=curve,
                f_short=math.inf if tta.short_len == 0 else float(_population_loss(tta.short_avg, lam)),
                f_long=float(_population_loss(theta_long, lam)),
            )
        )
    return rows


def _assumptions(rows: list[dict]) -> tuple[list[bool], list[bool], list[bool]]:
    """Assumptions 1, 2 and 4 of §3.5 checked by brute force at every evaluation."""
    a1, a2 = [], []
    for r in rows:
        n, delta, curve = r["n"], r["Delta"], r["curve"]
        floor_e, ceil_e = delta // PERIOD * PERIOD, -(-delta // PERIOD) * PERIOD
        # Assumption 1: f(avg(n, delta)) decreases over delta = E, 2E, .., Delta_E(n).
        grid = curve[[k - 1 for k in range(PERIOD, floor_e + 1, PERIOD)]]
        a1.append(bool((grid[1:] < grid[:-1]).all()))
        # Assumption 2: f(avg(n, Delta^E(n))) <= f(avg(n, n_+)) for every n_+ >= Delta^E(n).
        a2.append(ceil_e > n or bool((curve[ceil_e - 1] <= curve[ceil_e - 1 :]).all()))
    # Assumption 4: Delta(n) <= Delta(n + E); a4[i] is about evaluations i and i + 1.
    a4 = [r["Delta"] <= r_next["Delta"] for r, r_next in zip(rows, rows[1:])] + [True]
    return a1, a2, a4


@pytest.fixture(scope="module", params=[0, 1])
def quadratic_run(request):
    rows = _run_algorithm_1_with_brute_force(request.param)
    switches = [i for i, r in enumerate(rows) if r["S"] == 0]
    return rows, switches, _assumptions(rows)


def test_two_tailed_average_has_basic_properties_of_proposition_1(quadratic_run):
    """Proposition 1 (i)-(iii): E | S, E | L, S <= L <= n, and f^S(n) > f^L(n) (f^S = inf when S = 0)."""
    rows, switches, _ = quadratic_run
    for r in rows:
        assert r["S"] % PERIOD == 0 and r["L"] % PERIOD == 0
        assert 0 <= r["S"] <= r["L"] <= r["n"]
        assert r["f_short"] > r["f_long"]
    assert len(switches) > 10  # the run exercises the switching logic


def test_lengths_obey_bounds_of_proposition_2_where_its_assumptions_hold(quadratic_run):
    """Proposition 2: S(n) < Delta(n) and L(n) < 2 Delta(n) + E.

    The proof uses Assumption 2 at the evaluations since the last switch point (where S catches up with
    Delta^E) and Assumption 4 (Delta non-decreasing) over the same stretch; the bound on L also needs both
    over the previous short average's lifetime. On the noisy quadratic they do not hold everywhere, so this
    test checks them by brute force and asserts the bounds at every evaluation n for which Assumptions 2
    and 4 hold from the second-to-last switch point up to n. It also requires enough such evaluations for
    the check to be meaningful. (Where the assumptions fail, the bounds fail too at some evaluations.)
    """
    rows, switches, (_, a2, a4) = quadratic_run
    checked = 0
    for i, r in enumerate(rows):
        last = max(p for p in switches if p <= i)
        before = [p for p in switches if p < last]
        first = before[-1] if before else 0
        if all(a4[first:i]) and all(a2[first + 1 : i + 1]):
            checked += 1
            assert r["S"] < r["Delta"], r["n"]
            assert r["L"] < 2 * r["Delta"] + PERIOD, r["n"]
    assert checked >= 20


def test_long_average_is_nearly_optimal_between_switches_as_in_proposition_4(quadratic_run):
    """Proposition 4: between subsequent switch points n1 < n2, |L(n) - Delta(n)| < E for some n in [n1, n2 - E].

    (For multiples of E this is L(n) = Delta^E(n) or L(n) = Delta_E(n).) The proof needs S(n1 - E) <
    Delta(n1 - E) (Proposition 2, checked directly here), Assumption 4 over [n1 - E, n2] and Assumption 1
    at n2 (a switch can only happen once the long average is longer than optimal). The test asserts the
    conclusion for every pair of subsequent switch points where these hold, and requires enough such pairs.
    """
    rows, switches, (a1, _, a4) = quadratic_run
    checked = 0
    for first, second in zip(switches, switches[1:]):
        premise = first == 0 or rows[first - 1]["S"] < rows[first - 1]["Delta"]
        if premise and all(a4[max(first - 1, 0) : second]) and a1[second]:
            checked += 1
            near = [abs(rows[j]["L"] - rows[j]["Delta"]) < PERIOD for j in range(first, second)]
            assert any(near), rows[first]["n"]
    assert checked >= 8


# ---------------------------------------------------------------------------------------------------------
# The core algorithm on hand-made sequences.
# ---------------------------------------------------------------------------------------------------------


def _drift_past_optimum(steps: int = 900) -> torch.Tensor:
    """Noisy iterates converging to 10 while the validation optimum is at 9: fast progress, then overfitting."""
    g = torch.Generator().manual_seed(0)
    t = torch.arange(1, steps + 1, dtype=torch.float64)
    path = 10 * (1 - torch.exp(-t / 100)) + 0.3 * torch.randn(steps, generator=g, dtype=torch.float64)
    return path[:, None]  # [T, 1]


def _validation_loss(theta: torch.Tensor) -> float:
    return float((theta - 9.0).square().sum())


def _run_core(tta: TwoTailedAverage, iterates: torch.Tensor, period: int, start: int = 0) -> list[tuple]:
    out = []
    for t in range(start, len(iterates)):
        tta.add(iterates[t])
        if (t + 1) % period == 0:
            loss, theta, length = tta.evaluate(_validation_loss)
            out.append((t + 1, loss, theta.clone(), length, tta.short_len, tta.last_action))
    return out


@pytest.mark.numerics
@pytest.mark.parametrize("extensions", [False, True])
def test_running_averages_are_means_of_the_most_recent_iterates(extensions):
    """theta^L (theta^S) is exactly the mean of the last long_len (short_len) iterates, at every step."""
    iterates = _drift_past_optimum()
    tta = TwoTailedAverage(extensions=extensions)
    actions = set()
    for t in range(len(iterates)):
        tta.add(iterates[t])
        if (t + 1) % 10 == 0:
            tta.evaluate(_validation_loss)
            actions.add("reinit" if tta.long_len == 0 else tta.last_action)
        for length, average in ((tta.long_len, tta.long_avg), (tta.short_len, tta.short_avg)):
            if length:
                assert_close_after_reduction(average, iterates[t + 1 - length : t + 1].mean(0), n_terms=length,
                                             why="incremental means θ += (x - θ) / n vs a mean over the window")
    # the sequence exercises switches (and with extensions the resets; reset_short: see the scripted test)
    assert actions >= ({"switch", "reset_long", "reinit"} if extensions else {"switch"})


def test_extensions_fall_back_to_raw_weights_early_in_training():
    """Alg. 2 lines 8-11: while the iterates improve fast, the raw weights win and the averages restart."""
    iterates = _drift_past_optimum()
    tta = TwoTailedAverage(extensions=True)
    for t in range(10):
        tta.add(iterates[t])
    loss, theta, length = tta.evaluate(_validation_loss)
    assert length == 1
    assert_bitwise(theta, iterates[9], why="the raw weights are handed back unchanged")
    assert_bitwise(loss, _validation_loss(iterates[9]), why="the same loss function of the same weights")
    assert _validation_loss(iterates[:10].mean(0)) > loss  # the average of E iterates was worse
    assert (tta.short_len, tta.long_len, tta.using_raw) == (0, 0, True)  # reinitialised
    # Algorithm 1 alone reports the (worse) average instead.
    core = TwoTailedAverage(extensions=False)
    for t in range(10):
        core.add(iterates[t])
    assert core.evaluate(_validation_loss)[2] == 10
    # Once progress slows down the averages take over.
    reports = _run_core(tta, iterates, period=10, start=10)
    late = [r for r in reports if r[0] >= 220]
    assert any(length > 1 and loss < _validation_loss(iterates[n - 1]) for n, loss, _, length, _, _ in late)


def test_extensions_reset_a_stagnating_long_average_when_overfitting():
    """Alg. 2 line 3: once the long average stops improving for `patience` evaluations, it is reset.

    On iterates that move past the validation optimum (Fig. 3.5), the long average's loss bottoms out.
    Algorithm 1 keeps growing it forever; with the extension it is reset at the first evaluation where its
    loss (tracked by brute force over its lineage: a long average continues the short one it was switched
    from) has not improved on its best for `patience` evaluations, and not before.
    """
    iterates, period, patience = _drift_past_optimum(), 10, 3
    plain = _run_core(TwoTailedAverage(extensions=False), iterates, period)
    best = min(range(len(plain)), key=lambda i: plain[i][1])
    assert plain[best][0] < 400  # the loss bottoms out early ...
    assert all(r[5] == "keep" for r in plain[best + 1 :])  # ... and Algorithm 1 never switches again

    def stagnating(history: list[float]) -> bool:
        return len(history) > patience and min(history[-patience:]) >= min(history[:-patience])

    tta = TwoTailedAverage(extensions=True, patience=patience)
    short_history, long_history, resets = [], [], 0
    for t in range(len(iterates)):
        tta.add(iterates[t])
        if (t + 1) % period:
            continue
        loss_short = _validation_loss(iterates[t + 1 - tta.short_len : t + 1].mean(0))
        loss_long = _validation_loss(iterates[t + 1 - tta.long_len : t + 1].mean(0))
        short_history.append(loss_short)
        long_history.append(loss_long)
        tta.evaluate(_validation_loss)
        if loss_short > loss_long:
            # no ordinary switch: a reset happens exactly when the long average stagnates
            assert (tta.last_action == "reset_long") == stagnating(long_history), t + 1
            resets += tta.last_action == "reset_long"
        if tta.long_len == 0:  # reinitialised (Alg. 2 line 10)
            long_history, short_history = [], []
        elif tta.last_action in ("switch", "reset_long"):
            long_history, short_history = short_history, []
        elif tta.last_action == "reset_short":
            short_history = []
    assert resets >= 3


def test_algorithm_2_decisions_follow_the_pseudocode_on_scripted_losses():
    """Alg. 2 branch by branch, with f returning scripted losses for theta^S, theta^L and the raw weights.

    Covers the switch (F^S <= F^L, ties included), the reset of a stagnating short average (line 7) and of a
    stagnating long one (line 3), the fallback to the raw weights (line 11) and the reinitialisation when
    the raw weights beat an average of only the last E iterates (line 10). patience = 3.
    """
    tta = TwoTailedAverage(extensions=True, patience=3)
    # (F^S, F^L or None when S = L so that f is called once, F^1) -> (action, returned loss, length, S, L after)
    script = [
        ((5.0, None, 6.0), ("switch", 5.0, 2, 0, 2)),  # first evaluation: S = L, always a switch
        ((4.0, 3.0, 9.0), ("keep", 3.0, 4, 2, 4)),
        ((4.5, 2.9, 9.0), ("keep", 2.9, 6, 4, 6)),  # short: 1 evaluation without improvement
        ((4.2, 2.8, 9.0), ("keep", 2.8, 8, 6, 8)),  # 2
        ((4.1, 2.7, 9.0), ("reset_short", 2.7, 10, 0, 10)),  # 3: the short average restarts
        ((3.0, 2.7, 9.0), ("keep", 2.7, 12, 2, 12)),  # long: 1 without improvement (ties do not count)
        ((2.95, 2.75, 9.0), ("keep", 2.75, 14, 4, 14)),  # 2
        ((2.9, 2.71, 9.0), ("reset_long", 2.9, 6, 0, 6)),  # 3: the short average becomes the long one
        ((3.5, 2.5, 2.0), ("keep", 2.0, 1, 2, 8)),  # raw weights better: reported, averages kept
        ((2.4, 2.45, 1.0), ("switch", 1.0, 1, 0, 4)),  # switch, and the raw weights are still better
        ((1.0, 1.5, 0.5), ("switch", 0.5, 1, 0, 0)),  # L = E after the switch and raw better: reinit
        ((0.4, None, 0.45), ("switch", 0.4, 2, 0, 2)),
    ]
    for step, ((f_short, f_long, f_raw), (action, loss, length, short_len, long_len)) in enumerate(script):
        for _ in range(2):  # E = 2
            tta.add(torch.full((3,), float(step)))
        assert (f_long is None) == (tta.short_len == tta.long_len)
        calls = []

        def f(theta):
            which = "short" if theta is tta.short_avg else "long" if theta is tta.long_avg else "raw"
            calls.append(which)
            return {"short": f_short, "long": f_long, "raw": f_raw}[which]

        got_loss, theta, got_length = tta.evaluate(f)
        assert sorted(calls) == sorted(["short", "raw"] + ([] if f_long is None else ["long"]))
        assert (tta.last_action, got_loss, got_length, tta.short_len, tta.long_len) == (
            action, loss, length, short_len, long_len
        ), step
        assert tta.using_raw == (length == 1)
        assert theta is (tta.last if length == 1 else tta.long_avg)


@pytest.mark.parametrize("extensions", [False, True])
def test_checkpoint_resume_gives_identical_averages(extensions):
    """state_dict -> torch.save -> torch.load -> fresh object, at many (mostly mid-period) steps, continues
    bit-identically: same losses, lengths, actions and averaged vectors."""
    iterates, period = _drift_past_optimum(), 10
    reference = _run_core(TwoTailedAverage(extensions=extensions), iterates, period)
    for cut in range(7, len(iterates), 30):
        first = TwoTailedAverage(extensions=extensions)
        _run_core(first, iterates[:cut], period)
        buffer = io.BytesIO()
        torch.save(first.state_dict(), buffer)
        buffer.seek(0)
        resumed = TwoTailedAverage(extensions=extensions)
        resumed.load_state_dict(torch.load(buffer))
        continued = _run_core(resumed, iterates, period, start=cut)
        expected = [r for r in reference if r[0] > cut]
        assert len(continued) == len(expected)
        for got, want in zip(continued, expected):
            assert got[0:2] == want[0:2] and got[3:] == want[3:], (cut, got[0])  # bitwise: as below
            assert_bitwise(got[2], want[2], why="a resumed run performs the uninterrupted run's operations")


def test_core_rejects_bad_arguments():
    with pytest.raises(ValueError, match="patience"):
        TwoTailedAverage(patience=0)
    tta = TwoTailedAverage()
    tta.add(torch.ones(2))
    tta.evaluate(_validation_loss)
    with pytest.raises(ValueError, match="at least one add"):
        tta.evaluate(_validation_loss)
    with pytest.raises(ValueError, match="extensions"):
        TwoTailedAverage(extensions=False).load_state_dict(tta.state_dict())


# ---------------------------------------------------------------------------------------------------------
# Module wrappers.
# ---------------------------------------------------------------------------------------------------------


class _TinyNet(nn.Module):
    """Linear regression with a batch-norm in front, so that there are buffers to worry about."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.BatchNorm1d(3)
        self.linear = nn.Linear(3, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(self.norm(x)).squeeze(-1)


def _regression_data(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(64, 3, generator=g)
    y = x @ torch.tensor([1.0, -2.0, 0.5]) + 0.5 * torch.randn(64, generator=g)
    return x, y


def _val_loss(module: nn.Module) -> float:
    x, y = _regression_data(1)
    was_training = module.training
    module.eval()
    with torch.no_grad():
        loss = nn.functional.mse_loss(module(x), y).item()
    module.train(was_training)
    return loss


def _train(model, optimizer, averager, steps, start=0):
    x, y = _regression_data(0)
    reports = []
    for step in range(start, steps):
        batch = torch.arange(step * 8, step * 8 + 8) % 64
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x[batch]), y[batch]).backward()
        optimizer.step()
        report = averager.step(_val_loss)
        if report is not None:
            reports.append(report)
    return reports


def _fresh(kind: str, **options):
    torch.manual_seed(0)
    model = _TinyNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    return model, optimizer, build_averager(kind, model, evaluate_every=5, **options)


def test_two_tailed_wrapper_swaps_long_average_in_and_restores_raw_weights():
    model, optimizer, averager = _fresh("2ta", extensions=False)
    x, y = _regression_data(0)
    flats = []
    for step in range(40):
        batch = torch.arange(step * 8, step * 8 + 8) % 64
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x[batch]), y[batch]).backward()
        optimizer.step()
        flats.append(torch.nn.utils.parameters_to_vector(model.parameters()).detach().clone())
        averager.step(_val_loss)
    raw = torch.nn.utils.parameters_to_vector(model.parameters()).detach().clone()
    buffers = [b.clone() for b in model.buffers()]
    long_len = averager.average.long_len
    assert 0 < long_len < 40
    with averager.averaged_weights() as swapped:
        assert swapped is model
        inside = torch.nn.utils.parameters_to_vector(model.parameters()).detach()
        torch.testing.assert_close(inside, torch.stack(flats[-long_len:]).mean(0))
        for b, c in zip(model.buffers(), buffers):
            assert_bitwise(b, c, why="buffers stay the raw ones (compared with clones)")
    restored = "the raw weights are copied back, not recomputed"
    assert_bitwise(torch.nn.utils.parameters_to_vector(model.parameters()), raw, why=restored)
    with pytest.raises(RuntimeError), averager.averaged_weights():
        raise RuntimeError("restored even on errors")
    assert_bitwise(torch.nn.utils.parameters_to_vector(model.parameters()), raw, why=restored)
    # the parameters are not aliased with the averager's state
    with averager.averaged_weights():
        with torch.no_grad():
            for p in model.parameters():
                p.add_(1.0)
    torch.testing.assert_close(averager.average.long_avg, torch.stack(flats[-long_len:]).mean(0))


def test_two_tailed_wrapper_reports_loss_of_recommended_weights():
    model, optimizer, averager = _fresh("2ta")
    reports = _train(model, optimizer, averager, 60)
    assert [r.step for r in reports] == list(range(5, 61, 5))
    last = reports[-1]
    with averager.averaged_weights():
        assert _val_loss(model) == pytest.approx(last.loss, rel=1e-6)  # the same evaluation; rel=1e-6 is a margin
    assert last.length == averager.recommended_length()
    assert any(r.length > 1 for r in reports)


@pytest.mark.parametrize(
    "kind, options",
    [
        ("2ta", {}),
        ("ta", {"nonmono": 1}),
        ("ema", {"decay": 0.9}),
        ("swa", {"start": 10, "every": 3}),
        ("polyak", {}),
    ],
)
def test_wrappers_resume_exactly_from_a_checkpoint(kind, options):
    steps, cut = 80, 33
    reference = _fresh(kind, **options)
    want = _train(*reference, steps)

    model, optimizer, averager = _fresh(kind, **options)
    got = _train(model, optimizer, averager, cut)
    buffer = io.BytesIO()
    torch.save({"model": model.state_dict(), "opt": optimizer.state_dict(), "avg": averager.state_dict()}, buffer)
    buffer.seek(0)
    state = torch.load(buffer)
    model, optimizer, averager = _fresh(kind, **options)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["opt"])
    averager.load_state_dict(state["avg"])
    got += _train(model, optimizer, averager, steps, start=cut)

    assert got == want  # bitwise: a resumed run performs the uninterrupted run's operations
    with averager.averaged_weights():
        resumed = torch.nn.utils.parameters_to_vector(model.parameters()).detach().clone()
    with reference[2].averaged_weights():
        assert_bitwise(resumed, torch.nn.utils.parameters_to_vector(reference[0].parameters()),
                       why="a resumed run performs the uninterrupted run's operations")
    if kind == "ta":
        assert averager.start is not None  # the plateau trigger fired in this run


# ---------------------------------------------------------------------------------------------------------
# Baselines against their closed forms.
# ---------------------------------------------------------------------------------------------------------

_SEQUENCE = torch.tensor(
    [[0.0, 1.0], [2.0, -1.0], [4.0, 3.0], [1.0, 5.0], [-3.0, 2.0], [6.0, 0.0], [2.5, -4.0]], dtype=torch.float64
)  # theta_0 .. theta_6


class _Vector(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.theta = nn.Parameter(_SEQUENCE[0].clone())


def _feed(averager, module: _Vector) -> list[torch.Tensor]:
    """Set theta_1.. in turn, calling update() after each; return the recommended weights after each step."""
    seen = []
    for theta in _SEQUENCE[1:]:
        with torch.no_grad():
            module.theta.copy_(theta)
        averager.update()
        with averager.averaged_weights():
            seen.append(module.theta.detach().clone())
    return seen


def test_polyak_average_is_uniform_mean_of_all_iterates():
    module = _Vector()
    seen = _feed(IterateAveragedModel(module, evaluate_every=1, start=0), module)
    for t, avg in enumerate(seen, start=1):
        torch.testing.assert_close(avg, _SEQUENCE[: t + 1].mean(0))


def test_tail_average_matches_eq_3_2():
    module = _Vector()
    seen = _feed(build_averager("ta", module, evaluate_every=1, start=3), module)
    for t, avg in enumerate(seen, start=1):
        torch.testing.assert_close(avg, _SEQUENCE[t] if t < 3 else _SEQUENCE[3 : t + 1].mean(0))


def test_swa_averages_every_cth_iterate_from_start():
    module = _Vector()
    seen = _feed(build_averager("swa", module, evaluate_every=1, start=2, every=2), module)
    torch.testing.assert_close(seen[-1], _SEQUENCE[[2, 4, 6]].mean(0))
    torch.testing.assert_close(seen[2], _SEQUENCE[[2]].mean(0))  # t = 3 does not enter
    torch.testing.assert_close(seen[0], _SEQUENCE[1])  # raw weights before the start


def test_ema_matches_eq_3_1():
    beta = 0.7
    module = _Vector()
    seen = _feed(build_averager("ema", module, evaluate_every=1, decay=beta), module)
    for t, avg in enumerate(seen, start=1):
        # unrolled eq. (3.1): beta^t theta_0 + sum_i (1 - beta) beta^(t - i) theta_i
        closed = beta**t * _SEQUENCE[0]
        closed = closed + sum((1 - beta) * beta ** (t - i) * _SEQUENCE[i] for i in range(1, t + 1))
        torch.testing.assert_close(avg, closed)


def test_plateau_trigger_starts_averaging_after_nonmono_evaluations_without_improvement():
    """NT-ASGD: trigger when the loss is worse than the best one from more than `nonmono` evaluations ago."""
    module = _Vector()
    averager = PlateauTriggeredAveragedModel(module, evaluate_every=1, nonmono=2)
    scripted = iter([5.0, 4.0, 3.0, 3.5, 3.2, 3.1])  # 3.1 > min(5, 4, 3): fires at the 6th evaluation
    starts = []
    for theta in _SEQUENCE[1:]:
        with torch.no_grad():
            module.theta.copy_(theta)
        averager.update()
        averager.evaluate(lambda m: next(scripted))
        starts.append(averager.start)
    assert starts == [None] * 5 + [7]
    for _ in range(2):  # theta_7 = theta_8 = (10, 10)
        with torch.no_grad():
            module.theta.fill_(10.0)
        averager.update()
    assert averager.n_averaged == 2
    # latest_start forces the start even without a plateau
    module = _Vector()
    forced = PlateauTriggeredAveragedModel(module, evaluate_every=1, nonmono=2, latest_start=4)
    seen = _feed(forced, module)
    assert forced.start == 4
    torch.testing.assert_close(seen[-1], _SEQUENCE[4:].mean(0))


def test_raw_weights_evaluate_the_module_as_is():
    module = _Vector()
    averager = build_averager("none", module, evaluate_every=2)
    assert isinstance(averager, RawWeights)
    assert averager.step(lambda m: m.theta.detach().sum()) is None
    report = averager.step(lambda m: m.theta.detach().sum())
    assert (report.step, report.loss, report.length) == (2, 1.0, 1)


def test_factory_builds_each_kind_and_rejects_bad_arguments():
    module = _Vector()
    assert isinstance(build_averager("2ta", module, 5), TwoTailedAveragedModel)
    assert isinstance(build_averager("ta", module, 5, nonmono=3), PlateauTriggeredAveragedModel)
    assert build_averager("polyak", module, 5).start == 0
    assert set(AVERAGER_KINDS) == {"none", "2ta", "ta", "ema", "swa", "polyak"}
    with pytest.raises(ValueError, match="none, 2ta, ta, ema, swa, polyak"):
        build_averager("asgd", module, 5)
    with pytest.raises(ValueError, match="valid options: decay, start"):
        build_averager("ema", module, 5, beta=0.9)
    with pytest.raises(ValueError, match="exactly one"):
        build_averager("ta", module, 5)
    with pytest.raises(ValueError, match="needs start"):
        build_averager("swa", module, 5)
    with pytest.raises(ValueError, match="evaluate_every"):
        build_averager("none", module, 0)
