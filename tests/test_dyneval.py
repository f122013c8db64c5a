"""Dynamic evaluation (Krause thesis ch. 4-5) and the neural cache (§2.2.1): properties and equations."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F

from paperlib.dyneval.cache import (
    cache_distribution,
    collect_cache_inputs,
    neural_cache_losses,
    tune_neural_cache,
)
from paperlib.dyneval import (
    DecoderInputAdaptation,
    DynamicEvalResult,
    RecurrentSparseAdaptation,
    dynamic_evaluate,
    functorch_compatible,
    learning_rate_sweep,
    make_update_rule,
    mean_squared_gradients,
    rms_norm,
    static_evaluate,
    tune_dynamic_evaluation,
    with_recurrent_adaptation,
)
from paperlib.models import build_lm
from paperlib.models.layers import LSTMLayer
from paperlib.models.lstm import lstm_step
from tests.numerics import assert_bitwise, assert_close_after_reduction

VOCAB = 12
# Why dynamic evaluation with unchanged weights scores exactly like static evaluation: with all weights adapted
# they are autograd leaves requiring grad, like the Parameters static evaluation runs, so the requires-grad
# dependent dispatch (matmul's folding of a strided 3-d input) picks the same kernels for the same inputs.
SAME_KERNELS = ("all weights are adapted, so they require grad like static evaluation's Parameters: "
                "the same kernels on the same inputs")


def lm_terms(steps: int, *, hidden: int = 8, layers: int = 2, vocab: int = VOCAB, passes: int = 1) -> int:
    """Rounded terms that can reach one per-token loss of :func:`tiny_lm` after ``steps`` recurrent steps.

    Per step and layer a gate pre-activation sums x W^x, h W^h and b (2H + 1 terms); then the decoder (H + 1)
    and the log-softmax over V. ``passes`` = 2 also counts the backward passes behind the updates a dynamically
    evaluated loss depends on. For :func:`tests.numerics.reduction_tolerance`.
    """
    return passes * steps * layers * (2 * hidden + 1) + hidden + 1 + vocab


def tiny_lm(cell: str = "lstm", seed: int = 0, vocab: int = VOCAB, hidden: int = 8, layers: int = 1, **options):
    torch.manual_seed(seed)
    return build_lm(cell, vocab, hidden, layers, **options).double().eval()


def random_tokens(shape, seed: int = 1, vocab: int = VOCAB) -> torch.Tensor:
    return torch.randint(0, vocab, shape, generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module")
def lm():
    return tiny_lm(layers=2)


@pytest.fixture(scope="module")
def ms_g(lm):
    return mean_squared_gradients(lm, random_tokens((400,), seed=7), batch_size=4, bptt=10)


# ------------------------------------------------------------------ static equivalence and no leakage


@pytest.mark.numerics
def test_zero_learning_rate_reproduces_static_evaluation_exactly(lm, ms_g):
    tokens = random_tokens((23,))
    static = static_evaluate(lm, tokens, segment_len=5).losses
    for rule, extra in (("sgd", {}), ("global_rms", {"ms_g": ms_g}), ("adam", {})):
        dynamic = dynamic_evaluate(lm, tokens, rule=rule, lr=0.0, segment_len=5, **extra).losses
        assert_bitwise(dynamic, static,
                       why=f"{rule}: lr = 0 keeps every weight bit-identical (θ - 0·g); {SAME_KERNELS}")
    with torch.no_grad():
        logits, _ = lm(tokens[:-1].unsqueeze(0))
    whole = F.cross_entropy(logits[0], tokens[1:], reduction="none")
    assert_close_after_reduction(static, whole, n_terms=lm_terms(22),
                                 why="five-token segments vs one forward pass: GEMMs of other shapes")


@pytest.mark.numerics
def test_tokens_are_scored_before_the_update_on_their_segment(lm):
    """Per-token losses equal a hand-written Algorithm 1 loop with SGD on a copy of the model."""
    tokens, n, lr = random_tokens((20,)), 4, 0.5
    reference = copy.deepcopy(lm)
    state, expected = None, []
    for start in range(0, len(tokens) - 1, n):
        inputs = tokens[start : start + n].unsqueeze(0)
        targets = tokens[start + 1 : start + n + 1]
        inputs = inputs[:, : len(targets)]
        logits, state = reference(inputs, state)
        losses = F.cross_entropy(logits[0], targets, reduction="none")
        expected.append(losses.detach())
        grads = torch.autograd.grad(losses.mean(), list(reference.parameters()))
        with torch.no_grad():
            for p, g in zip(reference.parameters(), grads):
                p.sub_(lr * g)
        state = [tuple(t.detach() for t in layer) for layer in state]
    expected = torch.cat(expected)
    result = dynamic_evaluate(lm, tokens, rule="sgd", lr=lr, segment_len=n)
    assert_close_after_reduction(result.losses, expected, n_terms=lm_terms(19, passes=2),
                                 why="functional_call and in-place SGD vs module calls and p.sub_(lr * g)")
    static = static_evaluate(lm, tokens, segment_len=n).losses
    assert_bitwise(result.losses[:n], static[:n],
                   why=f"the first segment is scored with θ_g, before any update; {SAME_KERNELS}")
    assert (result.losses[n:] - static[n:]).abs().max() > 1e-3  # later ones see updated weights


def _sum_of_probabilities_over_the_vocabulary(score, tokens: torch.Tensor, position: int) -> float:
    """Σ_v p(x_position = v | x_<position) from a scorer of whole sequences (per-token losses [T-1])."""
    total = 0.0
    for v in range(VOCAB):
        variant = tokens.clone()
        variant[position] = v
        total += math.exp(-float(score(variant)[position - 1]))
    return total


@pytest.mark.parametrize("rule", ["sgd", "global_rms", "sparse"])
def test_probabilities_stay_normalised_at_every_step(lm, ms_g, rule):
    """For every position, the dynamic model's probabilities of all possible tokens sum to one."""
    tokens = random_tokens((9,))
    extra = {"ms_g": ms_g, "decay": 0.1} if rule == "global_rms" else {}
    if rule == "sparse":
        rule, extra = "sgd", {"sparse_units": 4}

    def score(seq):
        return dynamic_evaluate(lm, seq, rule=rule, lr=2.0 if rule == "sgd" else 0.05, segment_len=3, **extra).losses

    for position in range(1, len(tokens)):
        assert_close_after_reduction(_sum_of_probabilities_over_the_vocabulary(score, tokens, position), 1.0,
                                     n_terms=2 * VOCAB, why="V probabilities, each the exp of a log-softmax over V "
                                                             "logits, summed in Python (a leak moves it by > 1e-3)")


def test_updating_before_scoring_would_break_normalisation(lm):
    """Negative control for the test above: a leaky evaluator that updates on a segment and then scores it."""
    tokens = random_tokens((9,))

    def leaky(seq):
        model = copy.deepcopy(lm)
        out = []
        for start in range(0, len(seq) - 1, 3):
            inputs, targets = seq[start : start + 3], seq[start + 1 : start + 4]
            inputs = inputs[: len(targets)].unsqueeze(0)
            loss = F.cross_entropy(model(inputs)[0][0], targets)
            grads = torch.autograd.grad(loss, list(model.parameters()))
            with torch.no_grad():
                for p, g in zip(model.parameters(), grads):
                    p.sub_(2.0 * g)
                out.append(F.cross_entropy(model(inputs)[0][0], targets, reduction="none"))
        return torch.cat(out)

    assert abs(_sum_of_probabilities_over_the_vocabulary(leaky, tokens, 2) - 1.0) > 1e-3


# ------------------------------------------------------------------ adaptation to repetition


def test_dynamic_evaluation_exploits_a_repeated_random_block():
    """Krause §4.2/§6.3.3: even an untrained model adapts to re-occurring patterns; static evaluation cannot."""
    model = tiny_lm(vocab=50, hidden=32)
    block = random_tokens((25,), seed=3, vocab=50)
    tokens = block.repeat(6)
    static = static_evaluate(model, tokens, segment_len=5).losses
    dynamic = dynamic_evaluate(model, tokens, rule="sgd", lr=0.3, segment_len=5).losses
    first, repeats = slice(0, 24), slice(-50, None)  # the first block vs the last two repetitions
    assert abs(float(static[repeats].mean() - static[first].mean())) < 0.3
    assert float(dynamic[repeats].mean()) < float(static[repeats].mean()) - 2.5


# ------------------------------------------------------------------ batched evaluation


# 13 predictions through two layers with forward and backward passes (lm_terms); the Mogrifier's three rounds
# and the RLSTM's extra cell products lengthen each step's chain by about as much as the second pass, hence 2x.
BATCHED_TERMS = 2 * lm_terms(13, passes=2)


@pytest.mark.numerics
@pytest.mark.parametrize(
    "cell, options",
    [
        ("lstm", {}),
        ("lstm", {"capped_input_gate": False}),
        ("rlstm", {}),
        ("mlstm", {}),
        ("mogrifier_lstm", {"mogrifier_rounds": 3, "mogrifier_rank": 2}),
        ("transformer", {"memory_length": 6, "positions": "relative"}),
    ],
)
def test_batched_and_sequential_dynamic_evaluation_agree(cell, options):
    model = tiny_lm(cell, layers=1 if cell == "transformer" else 2, **options)
    ms = mean_squared_gradients(model, random_tokens((300,), seed=5), batch_size=3, bptt=10)
    streams = random_tokens((3, 14), seed=2)
    for kwargs in ({"rule": "global_rms", "lr": 0.01, "decay": 0.05, "ms_g": ms}, {"rule": "adam", "lr": 0.01}):
        batched = dynamic_evaluate(model, streams, segment_len=4, batched=True, **kwargs)
        alone = dynamic_evaluate(model, streams, segment_len=4, batched=False, **kwargs)
        why = "vmapped functorch-compatible recurrences vs the fused ones, stream by stream"
        assert_close_after_reduction(batched.losses, alone.losses, n_terms=BATCHED_TERMS, why=why)
        # Both rules divide the gradient by a root mean square + ε (Adam: of the gradients seen, ε = 1e-8; global
        # RMS: of the training gradients, ε = 1e-5). A gradient that is zero in exact arithmetic (the transformer's
        # key bias: softmax ignores a shift shared by all keys) is rounding noise, and where that mean square is
        # tiny too a step magnifies the noise by up to η / ε. The weights are judged on that scale, the losses not.
        amplification = kwargs["lr"] / (1e-8 if kwargs["rule"] == "adam" else 1e-5)
        for name, value in batched.params.items():
            assert_close_after_reduction(value, alone.params[name], n_terms=BATCHED_TERMS, scale=amplification,
                                         why=f"{name}: {why}, a step magnifying gradient noise by η / ε")
        single = dynamic_evaluate(model, streams[1], segment_len=4, **kwargs).losses
        assert_close_after_reduction(batched.losses[1], single, n_terms=BATCHED_TERMS, why=why)


@pytest.mark.numerics
@pytest.mark.parametrize("capped", [False, True])
def test_vmappable_lstm_scan_matches_the_step_reference_and_passes_gradcheck(capped):
    from paperlib.models.transformable import LSTMScan
    from paperlib.models.lstm import lstm_step

    g = torch.Generator().manual_seed(0)
    gx, w = torch.randn(4, 2, 12, generator=g, dtype=torch.float64), torch.randn(12, 3, generator=g, dtype=torch.float64)
    h0, c0 = torch.randn(2, 3, generator=g, dtype=torch.float64), torch.randn(2, 3, generator=g, dtype=torch.float64)
    hs, cs, _ = LSTMScan.apply(gx, w, h0, c0, capped)
    h, c = h0, c0
    for t in range(4):  # lstm_step with identity input weights: x W^x + b = gx
        h, c = lstm_step(gx[t], h, c, torch.eye(12, dtype=torch.float64), w, torch.zeros(12, dtype=torch.float64), capped)
        torch.testing.assert_close(hs[t + 1], h)
        torch.testing.assert_close(cs[t + 1], c)
    inputs = tuple(t.requires_grad_() for t in (gx, w, h0, c0))
    assert torch.autograd.gradcheck(lambda *a: LSTMScan.apply(*a, capped)[:2], inputs)


def test_batched_evaluation_leaves_the_fused_layers_in_place():
    model = tiny_lm(layers=2)
    with functorch_compatible(model):
        assert all("forward" in vars(m) for m in model.modules() if isinstance(m, LSTMLayer))
    assert not any("forward" in vars(m) for m in model.modules())


# ------------------------------------------------------------------ decay prior and update rules


def test_decay_of_one_returns_the_weights_to_theta_g_after_each_update(lm):
    """With λ = 1 eq. (4.3) forgets all earlier adaptation: θ^i = θ_g - η ∇L(s_i)."""
    theta_g = {n: p.detach().clone() for n, p in lm.named_parameters()}
    lr, checked = 0.3, []

    def check(index, params, grads):
        for name, value in params.items():
            assert_close_after_reduction(value + lr * grads[name], theta_g[name], n_terms=2,
                                         why="θ_g - η g is rounded by the update and again when η g is added back")
        checked.append(index)

    result = dynamic_evaluate(lm, random_tokens((16,)), rule="sgd", lr=lr, decay=1.0, segment_len=5, callback=check)
    assert checked == [0, 1, 2]
    assert not torch.equal(result.params["embedding.weight"], theta_g["embedding.weight"])


THETA = [1.0, -2.0, 0.5]
# The update-rule tests below compare the rules with the equations written out in Python floats, in another
# order of operations; the longest (Adam, two steps) has about 30 rounded operations per element.
EQUATION_TERMS = 32
THETA_G = [0.0, 1.0, 0.5]
GRADS = ([0.5, -1.0, 2.0], [-0.25, 0.5, 1.0])
MS_G = [0.25, 4.0, 1.0]


def _assert_matches_equation(got: list[float], expected: list[float]) -> None:
    assert_close_after_reduction(got, expected, n_terms=EQUATION_TERMS, why="the equation written out in Python floats")


def _apply(rule: str, steps: int, **kwargs) -> list[float]:
    params = {"w": torch.tensor(THETA, dtype=torch.float64)}
    theta_g = {"w": torch.tensor(THETA_G, dtype=torch.float64)}
    update = make_update_rule(rule, params, theta_g, **kwargs)
    for g in GRADS[:steps]:
        update.step(params, {"w": torch.tensor(g, dtype=torch.float64)})
    return params["w"].tolist()


@pytest.mark.numerics
def test_sgd_with_decay_matches_eq_4_3():
    lr, lam = 0.1, 0.25
    expected = [t - lr * g + lam * (tg - t) for t, g, tg in zip(THETA, GRADS[0], THETA_G)]
    _assert_matches_equation(_apply("sgd", 1, lr=lr, decay=lam), expected)


@pytest.mark.numerics
def test_global_rms_with_decay_matches_eq_4_5():
    lr, lam, eps = 0.1, 0.25, 0.01
    expected = [t - lr * g / (math.sqrt(ms) + eps) + lam * (tg - t) for t, g, tg, ms in zip(THETA, GRADS[0], THETA_G, MS_G)]
    got = _apply("global_rms", 1, lr=lr, decay=lam, eps=eps, ms_g={"w": torch.tensor(MS_G)}, rms_decay=False)
    _assert_matches_equation(got, expected)


@pytest.mark.numerics
@pytest.mark.parametrize("lam", [0.25, 0.8])
def test_global_rms_with_rms_decay_matches_eqs_4_6_and_4_7(lam):
    lr, eps = 0.1, 0.01
    roots = [math.sqrt(ms) for ms in MS_G]  # 0.5, 2, 1: mean 7/6
    norm = [min(r / (sum(roots) / 3), 1 / lam) for r in roots]  # λ = 0.8 clips 12/7 to 1.25
    expected = [t - lr * g / (r + eps) + lam * (tg - t) * n for t, g, tg, r, n in zip(THETA, GRADS[0], THETA_G, roots, norm)]
    got = _apply("global_rms", 1, lr=lr, decay=lam, eps=eps, ms_g={"w": torch.tensor(MS_G)})
    _assert_matches_equation(got, expected)


def test_rms_norm_has_mean_one_and_is_clipped_at_one_over_lambda():
    ms = {"a": torch.tensor([1.0, 4.0]), "b": torch.tensor([[9.0, 0.0]]), "c": torch.tensor([0.25, 0.25, 0.25])}
    for average, mean_of in (("tensors", lambda r: sum(float(v.mean()) for v in r.values()) / 3),
                             ("elements", lambda r: sum(float(v.sum()) for v in r.values()) / 7)):
        assert mean_of(rms_norm(ms, 0.01, average)) == pytest.approx(1.0)
    # tensor means of the roots 1.5, 1.5, 0.5: avg 7/6, so b's 3 becomes 18/7, above 2 = 1/λ for λ = 0.5
    assert float(rms_norm(ms, 0.5)["b"][0, 0]) == pytest.approx(2.0)
    assert float(rms_norm(ms, 0.3)["b"][0, 0]) == pytest.approx(18 / 7)


# Eq. (4.6) with tensors of different sizes: a holds one element, b four. √MS: a = [3], b = [1, 1, 1, 3].
# Mean over tensors of each tensor's mean: (3 + 1.5) / 2 = 2.25 (the author's code); over elements: 9 / 5 = 1.8.
RMS_MS = {"a": [9.0], "b": [1.0, 1.0, 1.0, 9.0]}


@pytest.mark.parametrize("lam", [0.5, 0.8])
def test_rms_norm_averages_over_tensors_like_the_authors_code_eq_4_6(lam):
    ms = {k: torch.tensor(v, dtype=torch.float64) for k, v in RMS_MS.items()}
    clip = 1 / lam  # 2 or 1.25: λ = 0.8 clips 3 / 2.25 = 4/3 and 3 / 1.8 = 5/3, λ = 0.5 clips neither
    expected = {"tensors": {"a": [min(4 / 3, clip)], "b": [4 / 9, 4 / 9, 4 / 9, min(4 / 3, clip)]},
                "elements": {"a": [min(5 / 3, clip)], "b": [5 / 9, 5 / 9, 5 / 9, min(5 / 3, clip)]}}
    for average, rates in (("tensors", rms_norm(ms, lam)), ("elements", rms_norm(ms, lam, "elements"))):
        for name, value in rates.items():
            _assert_matches_equation(value.tolist(), expected[average][name])
    with pytest.raises(ValueError, match="valid: tensors, elements"):
        rms_norm(ms, lam, "layers")


@pytest.mark.numerics
def test_global_rms_decay_prior_uses_the_per_tensor_average_by_default():
    """One eq. (4.7) step on two tensors of different sizes: the decay rate is λ·RMS_norm with avg over tensors."""
    lr, lam, eps = 0.1, 0.5, 0.01
    theta = {"a": [1.0], "b": [1.0, -2.0, 0.5, 2.0]}
    grads = {"a": [0.5], "b": [-1.0, 2.0, 0.25, 1.0]}
    ms = {k: torch.tensor(v, dtype=torch.float64) for k, v in RMS_MS.items()}
    norm = {"tensors": {"a": [4 / 3], "b": [4 / 9, 4 / 9, 4 / 9, 4 / 3]},  # see RMS_MS; θ_g = 0
            "elements": {"a": [5 / 3], "b": [5 / 9, 5 / 9, 5 / 9, 5 / 3]}}
    for average in ("tensors", "elements"):
        params = {k: torch.tensor(v, dtype=torch.float64) for k, v in theta.items()}
        extra = {} if average == "tensors" else {"rms_average": "elements"}
        update = make_update_rule("global_rms", params, {k: torch.zeros_like(v) for k, v in params.items()}, lr=lr,
                                  decay=lam, eps=eps, ms_g=ms, **extra)
        update.step(params, {k: torch.tensor(v, dtype=torch.float64) for k, v in grads.items()})
        for k in theta:
            expected = [t - lr * g / (math.sqrt(m) + eps) - lam * r * t
                        for t, g, m, r in zip(theta[k], grads[k], RMS_MS[k], norm[average][k])]
            _assert_matches_equation(params[k].tolist(), expected)


@pytest.mark.numerics
def test_sgd_with_momentum_matches_eqs_5_10_and_5_11():
    lr, mu = 0.1, 0.5
    v1 = [-lr * g for g in GRADS[0]]
    theta1 = [t + v for t, v in zip(THETA, v1)]
    v2 = [mu * v - lr * g for v, g in zip(v1, GRADS[1])]
    expected = [t + v for t, v in zip(theta1, v2)]
    _assert_matches_equation(_apply("sgd", 2, lr=lr, momentum=mu), expected)


@pytest.mark.numerics
@pytest.mark.parametrize("mu", [0.5, 0.984375])
def test_momentum_scaled_by_one_minus_mu_takes_plain_sgds_step(mu):
    """Under a constant gradient g, eqs. 5.10-5.11 with η' = η(1-μ) move the weights by η'g(1-μ^k)/(1-μ) =
    ηg(1-μ^k) at step k: the step each μ's sweep starts near approaches plain SGD's step ηg."""
    lr, g, steps = 0.03, [0.5, -1.0, 2.0], 400
    params = {"w": torch.tensor(THETA, dtype=torch.float64)}
    update = make_update_rule("sgd", params, {"w": torch.tensor(THETA_G, dtype=torch.float64)},
                              lr=lr * (1 - mu), momentum=mu)
    for _ in range(steps):
        before = params["w"].clone()
        update.step(params, {"w": torch.tensor(g, dtype=torch.float64)})
    step = (params["w"] - before).tolist()
    # float64, a few hundred accumulations of numbers of order 1: 1e-12 is far above rounding, far below 1-μ^k's change
    assert step == pytest.approx([-lr * x * (1 - mu**steps) for x in g], rel=1e-12)
    assert 1 - mu**steps > 0.99  # the steady state is reached: the step is plain SGD's within 1%


@pytest.mark.parametrize("factor", [3.0, 1.5])
def test_each_momentums_sweep_starts_on_the_shared_grid_near_plain_sgds_step(factor):
    """Each μ's start is a point start·factor^k of the sweep's grid, the one nearest start·(1-μ) on a log scale; μ = 0
    starts where plain SGD does, and larger μ never start higher."""
    from paperlib.experiments.dynamic_evaluation.studies import _momentum_start

    start, mus = 0.03, [0.0, 0.5, 0.75, 0.875, 0.9375, 0.96875, 0.984375]
    starts = [_momentum_start(start, mu, factor) for mu in mus]
    assert starts[0] == start and starts == sorted(starts, reverse=True)
    for mu, lr in zip(mus, starts):
        k = math.log(lr / start) / math.log(factor)
        assert abs(k - round(k)) < 1e-9  # on the grid
        assert abs(math.log(lr / (start * (1 - mu)))) <= math.log(factor) / 2 + 1e-12  # the nearest grid point
    assert _momentum_start(start, 0.984375, 3.0) == pytest.approx(start / 81)  # 1/64 lies nearest 3^-4
    with pytest.raises(ValueError, match="μ < 1"):
        _momentum_start(start, 1.0, factor)


@pytest.mark.numerics
def test_rmsprop_matches_eqs_2_51_and_5_12():
    lr, alpha, eps = 0.1, 0.9, 0.01
    ms, theta = [0.0] * 3, list(THETA)
    for g in GRADS:
        ms = [alpha * m + (1 - alpha) * x * x for m, x in zip(ms, g)]
        theta = [t - lr * x / (math.sqrt(m) + eps) for t, x, m in zip(theta, g, ms)]
    _assert_matches_equation(_apply("rmsprop", 2, lr=lr, alpha=alpha, eps=eps), theta)


@pytest.mark.numerics
def test_adam_matches_the_bias_corrected_update_of_eqs_2_53_to_2_57():
    lr, mu, alpha, eps = 0.1, 0.9, 0.99, 0.01
    m, ms, theta = [0.0] * 3, [0.0] * 3, list(THETA)
    for i, g in enumerate(GRADS, start=1):
        m = [mu * a + (1 - mu) * x for a, x in zip(m, g)]
        ms = [alpha * a + (1 - alpha) * x * x for a, x in zip(ms, g)]
        theta = [t - lr * (a / (1 - mu**i)) / (math.sqrt(b / (1 - alpha**i)) + eps) for t, a, b in zip(theta, m, ms)]
    _assert_matches_equation(_apply("adam", 2, lr=lr, momentum=mu, alpha=alpha, eps=eps), theta)


def test_bad_arguments_name_the_valid_choices(lm):
    tokens = random_tokens((10,))
    with pytest.raises(ValueError, match="valid rules: sgd, global_rms, rmsprop, adam"):
        dynamic_evaluate(lm, tokens, rule="adagrad", lr=0.1)
    with pytest.raises(ValueError, match="needs ms_g"):
        dynamic_evaluate(lm, tokens, rule="global_rms", lr=0.1)
    with pytest.raises(ValueError, match="decay"):
        dynamic_evaluate(lm, tokens, rule="sgd", lr=0.1, decay=1.5)
    with pytest.raises(ValueError, match="valid names"):
        dynamic_evaluate(lm, tokens, rule="sgd", lr=0.1, adapt=["no.such.weight"])


# ------------------------------------------------------------------ gradient statistics (eq. 4.4)


@pytest.mark.numerics
def test_mean_squared_gradients_average_the_squared_batch_gradients(lm):
    train = random_tokens((121,), seed=4)
    got = mean_squared_gradients(lm, train, batch_size=3, bptt=8, max_batches=3)
    stream = train[: 40 * 3].view(3, 40)
    model, state, total = copy.deepcopy(lm), None, None
    for start in (0, 8, 16):
        logits, state = model(stream[:, start : start + 8], state)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), stream[:, start + 1 : start + 9].reshape(-1))
        grads = torch.autograd.grad(loss, list(model.parameters()))
        squares = [g * g for g in grads]
        total = squares if total is None else [a + b for a, b in zip(total, squares)]
        state = [tuple(t.detach() for t in layer) for layer in state]
    for (name, _), expected in zip(model.named_parameters(), total):
        # squared gradients are small: judge them on their own scale, not on max(1, |value|)
        assert_close_after_reduction(got[name], expected / 3, n_terms=lm_terms(24, passes=2),
                                     scale=float(expected.abs().max()) / 3,
                                     why="mean_squared_gradients vs a hand-written loop over the same batches")


# ------------------------------------------------------------------ sparse dynamic evaluation (§4.6)


@pytest.mark.numerics
def test_sparse_dynamic_evaluation_adapts_only_m_and_batches_one_m_per_stream(lm):
    tokens = random_tokens((2, 11))
    before = {n: p.clone() for n, p in lm.named_parameters()}
    result = dynamic_evaluate(lm, tokens, rule="sgd", lr=0.5, sparse_units=5, segment_len=4)
    assert set(result.params) == {"adaptation"} and result.params["adaptation"].shape == (2, 5, 5)
    assert result.params["adaptation"].abs().sum() > 0
    for n, p in lm.named_parameters():
        assert_bitwise(p, before[n], why="only M is adapted: the model's weights stay what they were")
    alone = dynamic_evaluate(lm, tokens, rule="sgd", lr=0.5, sparse_units=5, segment_len=4, batched=False)
    assert_close_after_reduction(result.losses, alone.losses, n_terms=lm_terms(10, passes=2),
                                 why="both streams in one call (an M per stream) vs one stream at a time")


def _lstm_with_m_after_every_step(model, tokens, m, units, state):
    """Hand-written eq. (4.8) in a one-layer tied LSTM LM: lstm_step, then h <- h + M h on ``units``, per step."""
    rnn, capped = model.layers[0].rnn, model.layers[0].capped_input_gate
    h, c = state
    hs, logits = [], []
    for x_t in model.embedding(tokens):  # tokens [T]: one stream, x_t [E]
        h, c = lstm_step(x_t.unsqueeze(0), h, c, rnn.weight_ih_l0, rnn.weight_hh_l0, rnn.bias_ih_l0 + rnn.bias_hh_l0,
                         capped)
        h = h.clone()
        h[:, units] = h[:, units] + h[:, units] @ m.T
        hs.append(h)
        logits.append(model.decoder(h))
    return torch.cat(hs), torch.cat(logits), (h, c)


@pytest.mark.numerics
def test_sparse_dynamic_evaluation_puts_m_inside_the_word_level_lstm_recurrence_eq_4_8():
    """Per-token losses and final state of ``sparse_units`` equal a hand-written loop with h <- h + M h after every step.

    M after each update is taken from the callback; segment i is scored with the M of update i - 1 (M = 0 first).
    With M on the decoder input only, the loop's state would not see M and the losses from the second step of
    the second segment on would differ.
    """
    model, units, n = tiny_lm("lstm", layers=1), [1, 4, 6], 4
    tokens = random_tokens((13,), seed=5)
    after: list[torch.Tensor] = []
    result = dynamic_evaluate(model, tokens, rule="sgd", lr=3.0, sparse_units=units, segment_len=n,
                              callback=lambda i, params, grads: after.append(params["adaptation"][0].clone()))
    assert len(after) == 3 and float(after[0].abs().max()) > 1e-2
    state = model.layers[0].init_state(1)
    losses = []
    with torch.no_grad():
        for i, start in enumerate(range(0, 12, n)):
            m = torch.zeros(3, 3, dtype=torch.float64) if i == 0 else after[i - 1]
            _, logits, state = _lstm_with_m_after_every_step(model, tokens[start : start + n], m, units, state)
            losses.append(F.cross_entropy(logits, tokens[start + 1 : start + n + 1], reduction="none"))
    why = "RecurrentSparseAdaptation's step loop (M [1, H, H] per batch row) vs lstm_step and a 2-d M h by hand"
    n_terms = lm_terms(12, layers=1) + 12 * len(units)
    assert_close_after_reduction(result.losses, torch.cat(losses), n_terms=n_terms, why=why)
    assert_close_after_reduction(result.state[0][0], state[0], n_terms=n_terms, why=why)
    assert_close_after_reduction(result.state[0][1], state[1], n_terms=n_terms, why=why)


@pytest.mark.numerics
def test_recurrent_m_changes_the_next_hidden_state_of_the_word_level_lstm():
    """Eq. (4.8) in an LSTM layer: h'_t = h_t + M h_t is the next step's h_{t-1}, so other units change from step 2."""
    model = tiny_lm("lstm", layers=1)
    adapted, name = with_recurrent_adaptation(model, [1, 4])
    assert name == "layers.0.adaptation" and isinstance(adapted.layers[0], RecurrentSparseAdaptation)
    m = torch.tensor([[0.5, -1.0], [2.0, 0.25]], dtype=torch.float64)
    with torch.no_grad():
        adapted.get_parameter(name).copy_(m)
    tokens = random_tokens((6,), seed=3)
    start = model.layers[0].init_state(1)
    with torch.no_grad():
        expected, _, (h_last, c_last) = _lstm_with_m_after_every_step(model, tokens, m, [1, 4], start)
        x = model.embedding(tokens).unsqueeze(1)  # [T, 1, E]
        out, (h, c) = adapted.layers[0](x, start)
        plain, _ = model.layers[0](x, start)
    why = "RecurrentSparseAdaptation's step loop vs lstm_step and M h written out by hand"
    n_terms = 6 * (2 * 8 + 1 + 2)  # per step x W^x + h W^h + b and M h over 2 units, carried over 6 steps
    assert_close_after_reduction(out[:, 0], expected, n_terms=n_terms, why=why)
    assert_close_after_reduction(h, h_last, n_terms=n_terms, why=why)
    assert_close_after_reduction(c, c_last, n_terms=n_terms, why=why)
    others = [0, 2, 3, 5, 6, 7]
    step_terms = 2 * 8 + 1  # x W^x + h W^h + b: the step reference vs nn.LSTM
    assert_close_after_reduction(out[0][:, others], plain[0][:, others], n_terms=step_terms,
                                 why="step 1 starts from the same zero state: only units 1 and 4 are transformed")
    assert (out[1:, :, others] - plain[1:, :, others]).abs().amax(dim=(1, 2)).min() > 1e-4  # M fed back from step 2 on


@pytest.mark.numerics
@pytest.mark.parametrize("cell, options", [("mlstm", {}), ("rlstm", {}),
                                           ("mogrifier_lstm", {"mogrifier_rounds": 2, "mogrifier_rank": 2})])
def test_recurrent_sparse_adaptation_with_zero_m_computes_the_layer(cell, options):
    model = tiny_lm(cell, layers=2, **options)
    adapted, name = with_recurrent_adaptation(model, 3, layer=0)
    assert name == "layers.0.adaptation"
    tokens = random_tokens((2, 7))
    with torch.no_grad():
        assert_close_after_reduction(adapted(tokens)[0], model(tokens)[0], n_terms=BATCHED_TERMS,
                                     why="M = 0 adds zeros; the per-step form of the layer vs its fused recurrence")
    streams = random_tokens((3, 9), seed=2)
    batched = dynamic_evaluate(model, streams, rule="sgd", lr=0.5, sparse_units=3, segment_len=4)
    alone = dynamic_evaluate(model, streams, rule="sgd", lr=0.5, sparse_units=3, segment_len=4, batched=False)
    assert_close_after_reduction(batched.losses, alone.losses, n_terms=BATCHED_TERMS,
                                 why="three streams in one call (an M per stream) vs one stream at a time")
    last, name = with_recurrent_adaptation(model, 3)  # the layer sparse_units adapts
    vmapped = dynamic_evaluate(last, streams, rule="sgd", lr=0.5, adapt=[name], segment_len=4, batched=True)
    assert_close_after_reduction(vmapped.losses, batched.losses, n_terms=BATCHED_TERMS,
                                 why="M as a Parameter of a copy, per-stream fast weights under vmap, vs an M per "
                                     "batch row in one call")


def test_sparse_modes_and_units_are_checked(lm):
    tokens = random_tokens((10,))
    with pytest.raises(ValueError, match="valid: recurrent, output"):
        dynamic_evaluate(lm, tokens, rule="sgd", lr=0.1, sparse_units=2, sparse_mode="inside")
    with pytest.raises(ValueError, match="distinct hidden units"):
        dynamic_evaluate(lm, tokens, rule="sgd", lr=0.1, sparse_units=[0, 0])
    with pytest.raises(ValueError, match="sparse_mode='output'"):
        with_recurrent_adaptation(tiny_lm("gru"), 2)
    with pytest.raises(ValueError, match="layer must index"):
        with_recurrent_adaptation(lm, 2, layer=2)
    transformer = tiny_lm("transformer", memory_length=4)
    with pytest.raises(ValueError, match="sparse_mode='output'"):
        dynamic_evaluate(transformer, tokens, rule="sgd", lr=0.1, sparse_units=2)
    assert dynamic_evaluate(transformer, tokens, rule="sgd", lr=0.1, sparse_units=2, sparse_mode="output").losses.shape == (9,)


# ------------------------------------------------------------------ the decoder-input ablation (sparse_mode="output")


@pytest.mark.numerics
def test_decoder_input_adaptation_with_zero_matrix_is_the_model(lm):
    tokens = random_tokens((2, 11))
    wrapper = DecoderInputAdaptation(lm, 5)
    with torch.no_grad():
        plain, _ = lm(tokens)
        adapted, _ = wrapper(tokens, None, wrapper.zeros(2))
        # M = 0 adds exact zeros, but the decoder then gets a contiguous copy (index_add) and Linear fuses its
        # bias into one GEMM (addmm), while the plain model's strided features take matmul + a separate bias add
        assert_close_after_reduction(adapted, plain, n_terms=lm.decoder.in_features + 1,
                                     why="the decoder's addmm on a contiguous copy vs matmul + bias on strided input")
        m = torch.randn(2, 5, 5, dtype=torch.float64)
        shifted, _ = wrapper(tokens, None, m)
        again, _ = lm(tokens)
    assert not torch.allclose(shifted, plain)
    assert_bitwise(again, plain, why="the same model on the same tokens: the hook is gone after the call")
    result = dynamic_evaluate(lm, tokens, rule="sgd", lr=0.5, sparse_units=5, sparse_mode="output", segment_len=4)
    alone = dynamic_evaluate(lm, tokens, rule="sgd", lr=0.5, sparse_units=5, sparse_mode="output", segment_len=4,
                             batched=False)
    assert_close_after_reduction(result.losses, alone.losses, n_terms=lm_terms(10, passes=2),
                                 why="both streams in one call (an M per stream) vs one stream at a time")
    recurrent = dynamic_evaluate(lm, tokens, rule="sgd", lr=0.5, sparse_units=5, segment_len=4)
    assert (recurrent.losses - result.losses).abs().max() > 1e-4  # the ablation is another method


@pytest.mark.numerics
def test_decoder_input_adaptation_gives_h_plus_mh_on_the_chosen_units():
    """The ablation applies eq. (4.8) to the decoder input: only the H chosen units change, by M h."""
    model = tiny_lm()
    captured = []
    model.decoder.register_forward_hook(lambda module, args, out: captured.append(args[0].detach()))  # what forward got
    tokens = random_tokens((1, 6))
    wrapper = DecoderInputAdaptation(model, [1, 4])
    m = torch.tensor([[[0.5, -1.0], [2.0, 0.25]]], dtype=torch.float64)
    with torch.no_grad():
        model(tokens)
        wrapper(tokens, None, m)
    h, h_adapted = captured[0], captured[-1]
    expected = h.clone()
    expected[..., [1, 4]] = h[..., [1, 4]] + h[..., [1, 4]] @ m[0].T
    assert_close_after_reduction(h_adapted, expected, n_terms=3,
                                 why="h + M h over 2 units: the wrapper's batched matmul with M [1, H, H] vs a 2-d one")


# ------------------------------------------------------------------ tuning


def test_grid_tuning_returns_the_best_trial_and_coordinate_search_is_cheaper(lm):
    tokens = random_tokens((16,))
    grid = {"lr": [0.0, 0.1, 1.0], "decay": [0.0, 0.5]}
    full = tune_dynamic_evaluation(lm, tokens, grid=grid, rule="sgd", segment_len=5)
    assert len(full.trials) == 6
    assert full.nll == min(t["nll"] for t in full.trials)
    again = dynamic_evaluate(lm, tokens, rule="sgd", segment_len=5, **full.best)
    assert_bitwise(again.mean_nll(), full.nll,
                   why="the best trial's call, repeated: the same kernels on the same inputs")
    # the best trial's own per-token losses are kept (not its adapted weights: one model's worth of memory)
    assert full.result is not None and full.result.mean_nll() == full.nll and full.result.params == {}
    assert_bitwise(full.result.losses, again.losses, why="the kept evaluation and its repeat: the same kernels")
    coordinate = tune_dynamic_evaluation(lm, tokens, grid=grid, search="coordinate", rule="sgd", segment_len=5)
    assert len(coordinate.trials) == 4
    with pytest.raises(ValueError, match="tunable"):
        tune_dynamic_evaluation(lm, tokens, grid={"gamma": [1.0]}, rule="sgd")


def test_optuna_search_samples_inside_the_log_ranges(lm):
    tokens = random_tokens((11,))
    tuned = tune_dynamic_evaluation(lm, tokens, ranges={"lr": (1e-3, 1.0), "segment_len": (1, 5)}, search="optuna",
                                    n_trials=4, rule="sgd")
    assert len(tuned.trials) == 4
    assert all(1e-3 <= t["lr"] <= 1.0 and 1 <= t["segment_len"] <= 5 for t in tuned.trials)
    assert tuned.nll == min(t["nll"] for t in tuned.trials)
    assert tuned.result is not None and tuned.result.mean_nll() == tuned.nll


@pytest.mark.parametrize("nll", [2.5, math.nan])
def test_tuning_keeps_the_losses_of_the_first_of_equally_good_trials(lm, monkeypatch, nll):
    """Ties go to the first trial, as ``min`` picks the best setting, so ``result`` holds that trial's losses: with
    every trial at one finite NLL, and with every trial diverged (NaN losses count as inf)."""
    import paperlib.dyneval.tune as tune

    made = []

    def constant(model, tokens, **call):  # each call's losses are their own tensor, all with one mean
        made.append(torch.full((len(tokens) - 1,), nll))
        return DynamicEvalResult(made[-1], params={"w": torch.zeros(1)})

    monkeypatch.setattr(tune, "dynamic_evaluate", constant)
    tokens = random_tokens((16,))
    for search in ("grid", "coordinate"):
        made.clear()
        tuned = tune_dynamic_evaluation(lm, tokens, grid={"lr": [0.1, 1.0, 10.0]}, search=search, rule="sgd",
                                        segment_len=5)
        expected = nll if math.isfinite(nll) else math.inf
        assert [t["nll"] for t in tuned.trials] == [expected] * 3 and len(made) == 3
        assert tuned.best == {"lr": 0.1} and tuned.nll == expected
        assert tuned.result.losses is made[0] and tuned.result.params == {}


def test_learning_rate_sweep_stops_past_the_optimum():
    calls = []

    def loss(lr):
        calls.append(lr)
        return (math.log(lr) - math.log(0.1)) ** 2

    best, value, trials = learning_rate_sweep(loss, start=0.01, factor=2.0)
    assert best == pytest.approx(0.08)  # 0.01 * 2^3, the closest power of two to 0.1
    assert len(trials) == 5 and trials[-1]["nll"] > value  # one step past the optimum, then stop
    best, _, trials = learning_rate_sweep(loss, start=1.0, factor=2.0)  # a start above the optimum goes down
    assert best == pytest.approx(0.125) and [t["lr"] for t in trials][:2] == [1.0, 2.0]


# ------------------------------------------------------------------ neural cache


@pytest.mark.numerics
def test_neural_cache_without_mixing_is_the_model(lm):
    tokens = random_tokens((2, 30))
    cached = neural_cache_losses(lm, tokens, cache_length=10, theta=0.7, lam=0.0, window=7)
    static = static_evaluate(lm, tokens, segment_len=7).losses
    assert_close_after_reduction(cached, static.double(), n_terms=VOCAB,
                                 why="the same logits (same windows); log_softmax + gather vs cross_entropy of the "
                                     "flattened logits")


@pytest.mark.numerics
def test_cache_distributions_are_normalised_and_flat_theta_counts_recent_tokens(lm):
    tokens = random_tokens((1, 25))
    inputs = collect_cache_inputs(lm, tokens)
    lam = 0.3
    cache = cache_distribution(inputs, VOCAB, cache_length=6, theta=2.0)  # [1, N, V]
    sums = cache.sum(-1)[0]
    assert float(sums[0]) == 0.0  # nothing cached before the first prediction
    assert_close_after_reduction(sums[1:], torch.ones_like(sums[1:]), n_terms=2 * 6,
                                 why="a softmax over at most 6 cached states, then summed over the vocabulary")
    with torch.no_grad():
        model_probs = torch.softmax(lm(tokens[:, :-1])[0].double(), -1)
    mixed = (1 - lam) * model_probs[0, 1:] + lam * cache[0, 1:]
    assert_close_after_reduction(mixed.sum(-1), torch.ones(mixed.shape[0], dtype=torch.float64), n_terms=2 * VOCAB + 2,
                                 why="two distributions over V (a softmax and the cache), mixed and summed")
    flat = cache_distribution(inputs, VOCAB, cache_length=6, theta=0.0)[0]
    targets = tokens[0, 1:]
    for t in (3, 10, 23):
        window = targets[max(0, t - 6) : t]  # x_{i+1} for the last 6 cached h_i
        counts = torch.bincount(window, minlength=VOCAB).double() / len(window)
        assert_close_after_reduction(flat[t], counts, n_terms=6,
                                     why="θ = 0: 1/6 per cached state, summed per word, vs count / 6")
    last_only = cache_distribution(inputs, VOCAB, cache_length=1, theta=5.0)[0]
    assert torch.equal(last_only[1:].argmax(-1), targets[:-1])


def test_neural_cache_helps_on_repeated_tokens():
    model = tiny_lm(vocab=50, hidden=32)
    tokens = random_tokens((25,), seed=3, vocab=50).repeat(6)
    static = static_evaluate(model, tokens, segment_len=25).losses
    cached = neural_cache_losses(model, tokens, cache_length=100, theta=100.0, lam=0.5)
    assert float(cached[-50:].mean()) < float(static[-50:].mean()) - 2.0
    tuned = tune_neural_cache(model, tokens, cache_lengths=[100], thetas=[0.0, 100.0], lams=[0.0, 0.5])
    assert (tuned.theta, tuned.lam) == (100.0, 0.5)
    assert_bitwise(tuned.nll, float(cached.mean()), why="the grid reuses collect_cache_inputs and mix_log_probs: the "
                   "same kernels on the same inputs (mean(-x) and -mean(x) round alike)")


# ------------------------------------------------------------------ non-local RMSprop (§5.4.4.2, Table 5.7)


@pytest.mark.numerics
@pytest.mark.parametrize("decay", [0.0, 0.2])
def test_nonlocal_rmsprop_fed_by_the_evaluation_stream_is_rmsprop(lm, decay):
    """With the statistics stream equal to the evaluation stream the parallel model is the evaluated one."""
    kwargs = {"lr": 0.01, "eps": 0.01, "alpha": 0.9, "decay": decay, "segment_len": 4}
    for tokens in (random_tokens((19,)), random_tokens((2, 13), seed=3)):  # one stream, and two batched by vmap
        plain = dynamic_evaluate(lm, tokens, rule="rmsprop", **kwargs)
        borrowed = dynamic_evaluate(lm, tokens, rule="nonlocal_rmsprop", statistics_tokens=tokens.clone(), **kwargs)
        why = "non-local RMSprop's own MS update and step vs torch.optim.RMSprop's, in another order"
        assert_close_after_reduction(borrowed.losses, plain.losses, n_terms=lm_terms(18, passes=2), why=why)
        for name, value in plain.params.items():
            assert_close_after_reduction(borrowed.params[name], value, n_terms=lm_terms(18, passes=2), why=why)
    static = static_evaluate(lm, tokens, segment_len=4).losses
    assert (plain.losses - static).abs().max() > 1e-4  # the updates are not negligible


@pytest.mark.numerics
def test_nonlocal_rmsprop_matches_two_hand_written_parallel_models(lm):
    """MS ← α MS + (1-α) g'², both models step with their own gradient over √MS + ε (eqs. 2.51, 5.12)."""
    tokens, other = random_tokens((17,), seed=5), random_tokens((17,), seed=6)
    n, lr, alpha, eps = 4, 0.02, 0.8, 0.05
    evaluated, parallel = copy.deepcopy(lm), copy.deepcopy(lm)
    ms = [torch.zeros_like(p) for p in lm.parameters()]
    state, state_other, expected = None, None, []
    for start in range(0, 16, n):
        stop = min(start + n, 16)
        logits, state = evaluated(tokens[start:stop].unsqueeze(0), state)
        losses = F.cross_entropy(logits[0], tokens[start + 1 : stop + 1], reduction="none")
        expected.append(losses.detach())
        grads = torch.autograd.grad(losses.mean(), list(evaluated.parameters()))
        logits_other, state_other = parallel(other[start:stop].unsqueeze(0), state_other)
        loss_other = F.cross_entropy(logits_other[0], other[start + 1 : stop + 1])
        grads_other = torch.autograd.grad(loss_other, list(parallel.parameters()))
        with torch.no_grad():
            for m, p, q, g, h in zip(ms, evaluated.parameters(), parallel.parameters(), grads, grads_other):
                m.mul_(alpha).add_((1 - alpha) * h * h)
                p.sub_(lr * g / (m.sqrt() + eps))
                q.sub_(lr * h / (m.sqrt() + eps))
        state = [tuple(t.detach() for t in layer) for layer in state]
        state_other = [tuple(t.detach() for t in layer) for layer in state_other]
    result = dynamic_evaluate(lm, tokens, rule="nonlocal_rmsprop", statistics_tokens=other, lr=lr, alpha=alpha,
                              eps=eps, segment_len=n)
    assert_close_after_reduction(result.losses, torch.cat(expected), n_terms=lm_terms(16, passes=2),
                                 why="two hand-written models updated in place vs functional_call and the rule")
    rmsprop = dynamic_evaluate(lm, tokens, rule="rmsprop", lr=lr, alpha=alpha, eps=eps, segment_len=n)
    assert (result.losses - rmsprop.losses).abs().max() > 1e-4  # the statistics stream matters
    sequential = dynamic_evaluate(lm, torch.stack([tokens, other]), rule="nonlocal_rmsprop", lr=lr, alpha=alpha,
                                  eps=eps, segment_len=n, statistics_tokens=torch.stack([other, tokens]), batched=False)
    batched = dynamic_evaluate(lm, torch.stack([tokens, other]), rule="nonlocal_rmsprop", lr=lr, alpha=alpha,
                               eps=eps, segment_len=n, statistics_tokens=torch.stack([other, tokens]))
    why = "vmapped functorch-compatible recurrences vs the fused ones, stream by stream"
    assert_close_after_reduction(batched.losses, sequential.losses, n_terms=lm_terms(16, passes=2), why=why)
    assert_close_after_reduction(batched.losses[0], result.losses, n_terms=lm_terms(16, passes=2), why=why)


def test_nonlocal_rmsprop_checks_its_statistics_stream(lm):
    tokens = random_tokens((10,))
    with pytest.raises(ValueError, match="statistics_tokens are required"):
        dynamic_evaluate(lm, tokens, rule="nonlocal_rmsprop", lr=0.1)
    with pytest.raises(ValueError, match="only used by it"):
        dynamic_evaluate(lm, tokens, rule="rmsprop", lr=0.1, statistics_tokens=tokens)
    with pytest.raises(ValueError, match="shape of tokens"):
        dynamic_evaluate(lm, tokens, rule="nonlocal_rmsprop", lr=0.1, statistics_tokens=tokens[:-1])
    with pytest.raises(ValueError, match="momentum"):
        dynamic_evaluate(lm, tokens, rule="nonlocal_rmsprop", lr=0.1, momentum=0.5, statistics_tokens=tokens)


# ------------------------------------------------------------------ related words (§5.3, Table 5.2)


@pytest.mark.numerics
def test_probed_change_of_log_probabilities_is_the_difference_of_two_forward_passes(lm):
    """Δ log p at a time step = forward pass after the update on its segment - forward pass before it."""
    from paperlib.dyneval import probe_updates

    tokens, n, lr, position = random_tokens((24,), seed=8), 5, 0.7, 13  # position 13 is step 2 of segment 2
    probe = probe_updates(lm, tokens, [position, 3], rule="sgd", lr=lr, segment_len=n)
    assert probe.positions == [3, 13] and probe.before.shape == (2, VOCAB)
    # by hand: SGD dynamic evaluation of the two earlier segments, then the update on the third one
    model, state = copy.deepcopy(lm), None
    for start in (0, 5, 10):
        inputs, targets = tokens[start : start + n].unsqueeze(0), tokens[start + 1 : start + n + 1]
        logits, new_state = model(inputs, state)
        loss = F.cross_entropy(logits[0], targets)
        grads = torch.autograd.grad(loss, list(model.parameters()))
        if start == 10:
            before = torch.log_softmax(logits[0, position - 1 - start].detach(), -1)
        with torch.no_grad():
            for p, g in zip(model.parameters(), grads):
                p.sub_(lr * g)
        if start == 10:
            with torch.no_grad():
                after = torch.log_softmax(model(inputs, state)[0][0, position - 1 - start], -1)  # same input and state
        state = [tuple(t.detach() for t in layer) for layer in new_state]
    why, terms = "probe_updates vs a hand-written SGD loop (module calls, p.sub_)", lm_terms(15, passes=2)
    assert_close_after_reduction(probe.before[1], before, n_terms=terms, why=why)
    assert_close_after_reduction(probe.delta[1], after - before, n_terms=terms, why=why)
    assert float(probe.delta[1, tokens[position]]) > 0  # the observed word gains probability
    scored = dynamic_evaluate(lm, tokens, rule="sgd", lr=lr, segment_len=n).losses  # what evaluation scored
    why = "probe_updates' log-softmax vs dynamic_evaluate's cross-entropy"
    assert_close_after_reduction(-probe.before[1, tokens[position]], scored[position - 1], n_terms=terms, why=why)
    assert_close_after_reduction(-probe.before[0, tokens[3]], scored[2], n_terms=terms, why=why)


def test_related_word_rows_follow_the_cosine_ranking_and_medians_cover_the_vocabulary():
    from paperlib.dyneval import related_words

    embedding = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [-1.0, 0.0], [0.5, 0.5], [2.0, 0.1]])
    delta = torch.tensor([3.0, 1.0, -1.0, -2.0, 0.5, 0.25])
    table = related_words(embedding, 0, delta, top=3)
    assert [r["id"] for r in table["rows"]] == [0, 5, 1, 4]  # target, then decreasing cosine
    assert table["rows"][0]["cosine"] == pytest.approx(1.0)
    cosines = [r["cosine"] for r in table["rows"]]
    assert cosines == sorted(cosines, reverse=True)
    assert table["median"]["delta"] == pytest.approx(0.375)  # median of the six values
    assert table["top_mean_delta"] == pytest.approx((0.25 + 1.0 + 0.5) / 3)
    assert table["top_above_median"] == 2 and table["spearman"] > 0.5
    with pytest.raises(ValueError, match="top"):
        related_words(embedding, 0, delta, top=6)


def test_target_is_the_thesis_word_if_present_else_the_first_frequent_long_word():
    from paperlib.data.text import Vocabulary
    from paperlib.experiments.dynamic_evaluation.studies import choose_targets

    vocab = Vocabulary(["<eos>", "the", "production", "theatre", "x1", "company", "of"])
    counts = torch.tensor([100, 100, 100, 100, 100, 3, 100])
    test = torch.tensor([1, 3, 6, 4, 5, 3, 2, 1, 3, 6, 3])
    kwargs = dict(min_count=50, min_length=6, min_context=2, extra=5)
    target, extra = choose_targets(test, vocab, counts, word="production", **kwargs)
    assert target == 6 and extra == [8, 10]  # later "theatre"s; "company" is too rare, "x1" not alphabetic
    target, _ = choose_targets(test, vocab, counts, word="absent", **kwargs)
    assert target == 5  # the first "theatre" with at least two tokens of context
    with pytest.raises(ValueError, match="no test position"):
        choose_targets(test, vocab, counts, word=None, **{**kwargs, "min_count": 1000})


# ------------------------------------------------------------------ Tables 5.6 and 5.7 on a tiny corpus


def test_statistics_studies_use_the_fractions_of_the_batches_and_share_their_baselines(monkeypatch):
    import time
    import types

    import paperlib.experiments.dynamic_evaluation.studies as de

    model = tiny_lm(vocab=20, hidden=8).float()
    corpus = types.SimpleNamespace(train=random_tokens((2100,), seed=11, vocab=20),
                                   valid=random_tokens((300,), seed=12, vocab=20),
                                   test=random_tokens((300,), seed=13, vocab=20))
    settings = types.SimpleNamespace(
        segment_len=5, test_block=20, gradient_stats={"batch_size": 4, "bptt": 5, "max_batches": 3},
        optimizers={"corpus": "tiny", "valid_tokens": 60, "lr_factor": 3.0, "max_evals": 3,
                    "lr_start": {"rmsprop": 1e-3, "global_rms": 1e-3}},
        statistics_study={"fractions": [1.0, 0.01, 0.1], "batches": 100, "source": "test", "offset": 7,
                          "rmsprop_eps": [0.01, 1e-6]})
    seen = []
    real = de.mean_squared_gradients
    monkeypatch.setattr(de, "mean_squared_gradients", lambda *a, **k: seen.append(k["max_batches"]) or real(*a, **k))
    started = time.time()
    amount = de._statistics_amount(settings, model, corpus, torch.device("cpu"), lambda _: None)
    locality = de._statistics_locality(settings, model, corpus, torch.device("cpu"), amount, lambda _: None)
    assert time.time() - started < 15
    assert seen == [1, 10, 100]  # 1%, 10% and 100% of the 100 batches (4 rows of 525 tokens hold 105)
    assert [r["batches"] for r in amount["global_rms"]] == [1, 10, 100] and amount["training_batches"] == 105
    assert [r["tokens"] for r in amount["global_rms"]] == [20, 200, 2000]
    assert amount["valid_tokens"] == 60
    assert [r["settings"] for r in amount["rmsprop"]] == [{"rule": "rmsprop", "eps": 0.01}, {"rule": "rmsprop", "eps": 1e-6}]
    assert locality["global_rms"] is amount["global_rms"][-1] and locality["rmsprop"] is amount["rmsprop"]
    assert locality["statistics_source"] == {"split": "test", "offset": 7, "tokens": 61}
    assert [r["settings"]["eps"] for r in locality["nonlocal_rmsprop"]] == [0.01, 1e-6]
    row = locality["nonlocal_rmsprop"][0]
    again = dynamic_evaluate(model, corpus.valid[:61], rule="nonlocal_rmsprop", eps=0.01, lr=row["lr"], segment_len=5,
                             statistics_tokens=corpus.test[7:68]).mean_nll()
    # the row's own evaluation, run again: abs=1e-6 (about 2 float32 eps of this ~4-nat loss) checks that the row
    # reports this setting; the settings of different rows move it by far more
    assert row["valid_nll"] == pytest.approx(again, abs=1e-6)
    # every row keeps its loss per block of 20 validation tokens at its chosen η, the paired bootstrap's units
    assert amount["valid_block_tokens"] == locality["valid_block_tokens"] == [20, 20, 20]
    for r in [*amount["global_rms"], *amount["rmsprop"], *locality["nonlocal_rmsprop"]]:
        assert len(r["valid_blocks"]) == 3 and sum(r["valid_blocks"]) / 3 == pytest.approx(r["valid_nll"], abs=1e-6)
    assert all(math.isfinite(r["valid_nll"]) for r in [*amount["global_rms"], *amount["rmsprop"], *locality["nonlocal_rmsprop"]])
    assert de.gradient_batches(0.01, 20) == 1 and de.gradient_batches(0.1, 1452) == 145


def test_optional_study_blocks_default_and_reject_unknown_keys():
    from paperlib.experiments.common.config import experiment_params, load_params

    params = load_params()
    settings = experiment_params("dyneval", "smoke", params)
    from paperlib.experiments.dynamic_evaluation.studies import related_words_settings, statistics_study_settings

    assert related_words_settings(settings)["corpus"] == settings.timescale["corpus"]
    study = statistics_study_settings(settings)
    assert study["valid_tokens"] == settings.optimizers["valid_tokens"]
    assert study["lr_start"]["nonlocal_rmsprop"] == settings.optimizers["lr_start"]["global_rms"]
    block = params["experiments"]["dyneval"]["smoke"]
    for bad in ({"related_words": {"colour": 1}}, {"statistics_study": {"fractions": [0.5]}},
                {"statistics_study": {"source": "valid"}}, {"related_words": {"row": "sparse"}},
                {"statistics_study": {"rmsprop_eps": 0.01}}, {"statistics_study": {"lr_start": {"adam": 0.1}}}):
        broken = {**params, "experiments": {**params["experiments"], "dyneval": {"smoke": {**block, **bad}}}}
        with pytest.raises(ValueError):
            experiment_params("dyneval", "smoke", broken)


def test_block_means_are_the_means_of_consecutive_blocks_with_a_shorter_last_one():
    from paperlib.dyneval import DynamicEvalResult, block_means

    losses = torch.arange(7, dtype=torch.float32)  # 0..6 in blocks of 3: (0, 1, 2), (3, 4, 5), (6)
    assert block_means(losses, 3) == ([1.0, 4.0, 6.0], [3, 3, 1])
    means, sizes = DynamicEvalResult(losses).block_means(3)
    assert sum(m * s for m, s in zip(means, sizes)) / sum(sizes) == pytest.approx(float(losses.mean()))
    with pytest.raises(ValueError, match="one stream"):
        block_means(losses.view(1, 7), 3)
    with pytest.raises(ValueError, match="block must be"):
        block_means(losses, 0)


def test_the_timescale_study_keeps_each_sequences_curve_and_its_seen_and_unseen_losses():
    """Fig. 5.1 / Table 5.1's study keeps, beside the pooled numbers, every sequence's own curve and its mean loss on
    seen and unseen words with their counts (the units of the claims' bootstrap over sequences); pooled back with
    those counts they give the pooled numbers."""
    import types

    import paperlib.experiments.dynamic_evaluation.studies as de
    from paperlib.dyneval import mean_squared_gradients

    model = tiny_lm(vocab=20, hidden=8).float()
    test = random_tokens((400,), seed=4, vocab=20)
    settings = types.SimpleNamespace(timescale={"corpus": "tiny", "sequences": 3, "length": 61, "bin": 20,
                                                "stream_batch": 2})
    table = {"rows": [{"key": "global_rms_rms_decay", "settings": {"rule": "global_rms", "lr": 1e-3, "decay": 0.01,
                                                                    "segment_len": 5}},
                      {"key": "neural_cache", "settings": {"cache_length": 10, "theta": 0.5, "lam": 0.2}}]}
    ms = {"full": mean_squared_gradients(model, random_tokens((600,), seed=5, vocab=20), batch_size=4, bptt=5,
                                         max_batches=2)}
    out = de._timescale(settings, model, test, table, ms, lambda _: None)
    for name, curve in out["curves"].items():
        rows = out["sequence_curves"][name]
        assert len(rows) == 3 and all(len(r) == len(curve) == 3 for r in rows)
        assert [sum(col) / 3 for col in zip(*rows)] == pytest.approx(curve, abs=1e-6)
    words = out["seen_unseen_sequences"]["words"]
    for name in ("static", "dynamic", "neural_cache"):
        for split in ("seen", "unseen"):
            means = out["seen_unseen_sequences"][name][split]
            pooled = sum(m * n for m, n in zip(means, words[split])) / sum(words[split])
            assert pooled == pytest.approx(out["seen_unseen"][name][split], abs=1e-9)


# ------------------------------------------------------------------ on a GPU: cuDNN's RNN in eval mode


def test_dynamic_evaluation_hands_back_every_module_mode_and_the_cudnn_switch_as_it_found_them():
    model = tiny_lm(layers=2).train()
    model.layers[1].eval()  # a mixed state, restored module by module
    before = torch.backends.cudnn.enabled
    dynamic_evaluate(model, random_tokens((2, 23)), rule="sgd", lr=0.1, segment_len=5, batched=False)  # nested blocks
    assert torch.backends.cudnn.enabled == before
    assert [m.training for m in model.modules()] == [m is not model.layers[1] and m not in
                                                     set(model.layers[1].modules()) for m in model.modules()]


@pytest.mark.cuda
@pytest.mark.parametrize("batched", [True, False])
def test_dynamic_evaluation_of_an_uncapped_lstm_runs_on_cuda_and_scores_as_on_the_cpu(batched):
    """An uncapped LSTM layer without state dropout is ``nn.LSTM``: cuDNN's on a GPU, whose backward pass refuses
    to run after an eval-mode forward ("cudnn RNN backward can only be called in training mode"). Dynamic
    evaluation and its gradient statistics take gradients in eval mode, so on CUDA they run without cuDNN, and
    give the CPU's losses: float64, so only rounding differs (rtol 1e-9 is ~1e7 ulps of headroom)."""
    model = tiny_lm(layers=2, capped_input_gate=False)
    assert isinstance(model.layers[0], LSTMLayer) and not model.layers[0].capped_input_gate
    train, tokens = random_tokens((400,), seed=7), random_tokens((3, 21))
    results = {}
    for device in ("cpu", "cuda"):
        here = copy.deepcopy(model).to(device)
        ms_g = mean_squared_gradients(here, train.to(device), batch_size=4, bptt=10)
        results[device] = dynamic_evaluate(here, tokens.to(device), rule="global_rms", lr=0.05, segment_len=5,
                                           ms_g=ms_g, batched=batched).losses.cpu()
    torch.testing.assert_close(results["cuda"], results["cpu"], rtol=1e-9, atol=1e-9)
    assert torch.backends.cudnn.enabled  # switched back on after each evaluation
