"""Deep state space model for word generation (Schmidt & Hofmann): flows, bounds, metrics."""

import copy
import itertools
import math

import pytest
import torch
from torch.autograd.functional import jacobian

from paperlib.flows import (
    InverseFlow,
    TriangularFlow,
    build_flow,
    clip_away_from_zero,
    combined_flow,
)
from paperlib.models.dssm import (
    CharVocab,
    DeepStateSpaceModel,
    DSSMConfig,
    GRUWordModel,
    TrajectoryNoise,
    resample_index,
)
from paperlib.word_metrics import (
    char_ngram_perplexities,
    char_ngram_perplexity,
    cross_entropy,
    fit_char_ngram,
    noise_mutual_information,
    train_test_cross_entropy,
    vocabulary_coverage,
)
from tests.numerics import assert_bitwise

# Float comparisons here (float64 models of width 3-8): torch.allclose keeps its default rtol = 1e-5, which is what
# decides for values of order one; atol = 1e-8 ... 1e-12 only matters near zero (log-dets of identity maps, a noise
# difference of zero). Both are more than 1e4 times the rounding of these few-term reductions (n·eps ~ 1e-14) and far
# below a modelling error (>= 1e-3, which the negative checks with atol = 1e-3 confirm). The sampling checks are
# statistical, not rounding: atol = 0.015 is about 4 standard errors of a frequency over 20000 draws, 0.02 the
# allowance of a Monte Carlo information estimate.
FLOW_SPECS = ["ID", "DIAG", "TRIL", "2xTRIL", "REAL-NVP-[1,2]", "TRIL+DIAG"]
WORDS = ["ab", "ba", "abc", "cab", "bca", "aab", "cc", "bab", "abca", "ca"]


def _flow(spec: str, dim: int = 3, seed: int = 0, invert: bool = False):
    """A float64 flow whose parameters are moved away from the (near-identity) initialisation."""
    torch.manual_seed(seed)
    flow = build_flow(spec, dim, hidden=(5,)).double()
    with torch.no_grad():
        for p in flow.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return InverseFlow(flow) if invert else flow


def _all_strings(letters: str, max_len: int) -> list[str]:
    return ["".join(p) for n in range(max_len + 1) for p in itertools.product(letters, repeat=n)]


def _model(letters: str = "ab", seed: int = 0, **config) -> DeepStateSpaceModel:
    torch.manual_seed(seed)
    defaults = dict(state_size=3, embedding_size=4, inference_hidden=5, flow_hidden=(8,), q_hidden=(8,), max_len=4)
    return DeepStateSpaceModel(CharVocab(letters), DSSMConfig(**{**defaults, **config})).double()


# -- flows ----------------------------------------------------------------------------------


@pytest.mark.parametrize("invert", [False, True])
@pytest.mark.parametrize("spec", FLOW_SPECS)
def test_flow_log_det_equals_log_abs_det_of_autograd_jacobian(spec, invert):
    flow = _flow(spec, invert=invert)
    gen = torch.Generator().manual_seed(1)
    context, x = torch.randn(2, 3, generator=gen, dtype=torch.float64)
    y, ladj = flow(context, x)
    jac = jacobian(lambda v: flow(context, v)[0], x)
    assert torch.allclose(ladj, torch.linalg.slogdet(jac).logabsdet, atol=1e-10)
    x_back, ladj_inv = flow.inverse(context, y)
    jac_inv = jacobian(lambda v: flow.inverse(context, v)[0], y)
    assert torch.allclose(ladj_inv, torch.linalg.slogdet(jac_inv).logabsdet, atol=1e-10)


@pytest.mark.parametrize("spec", FLOW_SPECS)
def test_flow_inverse_undoes_forward_with_broadcast_context(spec):
    flow = _flow(spec)
    gen = torch.Generator().manual_seed(2)
    context = torch.randn(4, 3, generator=gen, dtype=torch.float64)  # [B, d]
    x = torch.randn(5, 4, 3, generator=gen, dtype=torch.float64)  # [K, B, d]
    y, ladj = flow(context, x)
    x_back, ladj_inv = flow.inverse(context, y)
    assert y.shape == x.shape and ladj.shape == (5, 4)
    assert torch.allclose(x_back, x, atol=1e-10)
    assert torch.allclose(flow(context, flow.inverse(context, x)[0])[0], x, atol=1e-10)
    assert torch.allclose(ladj + ladj_inv, torch.zeros_like(ladj), atol=1e-10)
    if spec != "ID":
        assert not torch.allclose(y, x, atol=1e-3)


@pytest.mark.parametrize("spec", ["DIAG", "TRIL", "2xTRIL", "REAL-NVP-[1,2]"])
def test_combined_flow_is_identity_when_generative_equals_inference(spec):
    inference = _flow(spec)
    generative = copy.deepcopy(inference)  # same function, separately evaluated
    gen = torch.Generator().manual_seed(3)
    context = torch.randn(4, 3, generator=gen, dtype=torch.float64)
    xi = torch.randn(6, 4, 3, generator=gen, dtype=torch.float64)
    out = combined_flow(generative, inference, context, xi)
    assert torch.allclose(out.noise, xi, atol=1e-10)
    assert torch.allclose(out.log_abs_det, torch.zeros(6, 4, dtype=torch.float64), atol=1e-10)
    assert torch.allclose(out.state, inference(context, xi)[0])


@pytest.mark.parametrize("g_spec,q_spec", [("TRIL", "DIAG"), ("2xTRIL", "TRIL"), ("REAL-NVP-[1,2]", "TRIL")])
def test_combined_flow_log_det_matches_jacobian_of_s(g_spec, q_spec):
    generative, inference = _flow(g_spec, seed=4), _flow(q_spec, seed=5)
    gen = torch.Generator().manual_seed(6)
    context, xi = torch.randn(2, 3, generator=gen, dtype=torch.float64)
    out = combined_flow(generative, inference, context, xi)
    jac = jacobian(lambda v: combined_flow(generative, inference, context, v).noise, xi)
    assert torch.allclose(out.log_abs_det, torch.linalg.slogdet(jac).logabsdet, atol=1e-10)
    assert not torch.allclose(out.noise, xi, atol=1e-3)


def test_tril_diagonal_is_clipped_away_from_zero():
    values = torch.tensor([-0.05, 0.0, 0.05, -0.3, 0.7])
    assert_bitwise(clip_away_from_zero(values, 0.2), torch.tensor([-0.2, 0.2, 0.2, -0.3, 0.7]),
                   why="entries are selected (x or ±delta with delta times an exact ±1), not computed")
    flow = TriangularFlow(3, hidden=(4,), delta=0.2).double()
    with torch.no_grad():  # G(h) = 0 before clipping
        flow.factor[-1].weight.zero_()
        flow.factor[-1].bias.zero_()
    context, x = torch.randn(2, 3, dtype=torch.float64)
    y, ladj = flow(context, x)
    assert torch.allclose(y, flow.shift(context) + 0.2 * x)
    assert torch.allclose(ladj, torch.tensor(3 * math.log(0.2), dtype=torch.float64))


def test_unknown_flow_name_raises_value_error():
    with pytest.raises(ValueError, match="TRIL"):
        build_flow("LOWER", 3)
    with pytest.raises(ValueError, match="delta"):
        build_flow("TRIL", 3, delta=0.7)
    with pytest.raises(ValueError, match="masking"):
        build_flow("REAL-NVP-[3]", 3)


# -- generative model and word probabilities ----------------------------------------------


@pytest.mark.parametrize("config", [
    dict(generative_flow="2xTRIL"),
    dict(generative_flow="TRIL", invert_generative=True),
    dict(generative_flow="REAL-NVP-[1,2]"),
])
def test_monte_carlo_word_probabilities_sum_to_one_over_all_strings(config):
    model = _model(max_len=3, **config)
    words = _all_strings("ab", 3)  # 15 strings of length 0..3
    log_p = model.log_prob_words(words, n_samples=7, generator=torch.Generator().manual_seed(0), chunk_size=4)
    assert torch.isclose(log_p.exp().sum(), torch.tensor(1.0, dtype=torch.float64), atol=1e-10)
    assert bool((log_p.exp() > 1e-6).all())


def test_gru_baseline_probabilities_sum_to_one_and_follow_teacher_forcing():
    torch.manual_seed(0)
    vocab = CharVocab("ab")
    model = GRUWordModel(vocab, state_size=3, max_len=3).double()
    log_p = model.log_prob_words(_all_strings("ab", 3))
    assert torch.isclose(log_p.exp().sum(), torch.tensor(1.0, dtype=torch.float64), atol=1e-10)
    # P("ab") by feeding the previous symbol step by step: start(=</w>) -> a -> b -> </w>.
    state, total = None, 0.0
    with torch.no_grad():
        for inp, out in [(vocab.eow_index, 0), (0, 1), (1, vocab.eow_index)]:
            logits, state = model(torch.tensor([[inp]]), state)
            total += float(logits[0, 0].log_softmax(-1)[out])
    assert math.isclose(float(model.log_prob_words(["ab"])[0]), total, abs_tol=1e-10)


def test_sampled_words_respect_alphabet_and_maximum_length():
    gen = torch.Generator().manual_seed(0)
    for model in (_model("abc", max_len=3), GRUWordModel(CharVocab("abc"), 3, max_len=3).double()):
        for emission in ("sample", "argmax"):
            words = model.sample_words(50, generator=gen, emission=emission)
            assert len(words) == 50 and all(len(w) <= 3 and set(w) <= set("abc") for w in words)
        with pytest.raises(ValueError, match="argmax"):
            model.sample_words(2, emission="greedy")


# -- inference network and bounds ---------------------------------------------------------


def test_backward_encoder_state_reads_only_the_suffix_and_ignores_padding():
    model = _model("abc")
    tokens, lengths = model.vocab.encode(["abc", "bbc"])
    a = model.encode_suffixes(tokens, lengths)
    assert torch.allclose(a[0, 1:], a[1, 1:]) and not torch.allclose(a[0, 0], a[1, 0])
    alone = model.encode_suffixes(*model.vocab.encode(["ab"]))
    padded = model.encode_suffixes(*model.vocab.encode(["ab", "abcab"]))
    assert torch.allclose(alone[0], padded[0, :3])


def test_bidirectional_encoder_also_reads_the_prefix():
    model = _model("abc", bidirectional=True)
    a = model.encode_suffixes(*model.vocab.encode(["abc", "bbc"]))
    assert not torch.allclose(a[0, 1], a[1, 1])
    assert torch.allclose(a[0, 1:, :5], a[1, 1:, :5])  # the backward half still sees w_{t:T} only


def _make_q_the_prior(model: DeepStateSpaceModel) -> None:
    """q(xi) = N(0, I) exactly and F_q = F_g, so eq. (9) collapses to log P(w | h), h ~ p(h)."""
    cfg = model.config
    with torch.no_grad():
        model.q_net[-1].weight.zero_()
        model.q_net[-1].bias.zero_()
        model.q_net[-1].bias[cfg.state_size:] = math.log(math.expm1(1.0 - cfg.min_scale))
    model.inference_flow.load_state_dict(model.generative_flow.state_dict())


def test_elbo_reduces_to_prior_log_likelihood_when_q_is_the_prior():
    model = _model("ab", generative_flow="TRIL", inference_flow="TRIL")
    _make_q_the_prior(model)
    tokens, lengths = model.vocab.encode(["ab", "bba", "a"])
    noise = model.draw_noise(tokens.shape[1], 1, 3, torch.Generator().manual_seed(0))
    elbo = model.elbo(tokens, lengths, noise)
    h, expected = model.initial_state((3,)), torch.zeros(3, dtype=torch.float64)
    for t in range(tokens.shape[1]):
        h = model.transition(h, noise.xi[t, 0])
        log_emit = model.emission(h).log_softmax(-1).gather(-1, tokens[:, t:t + 1]).squeeze(-1)
        expected += torch.where(t < lengths, log_emit, 0.0)
    assert torch.allclose(elbo, expected, atol=1e-10)


def _affine_map(flow, context):
    """``f(x) = A x + b`` of an affine flow, read off by probing with 0 and the unit vectors."""
    b = flow(context, torch.zeros_like(context))[0]  # [B, d]
    cols = [flow(context, e.expand_as(context))[0] - b for e in torch.eye(context.shape[-1], dtype=context.dtype)]
    return torch.stack(cols, -1), b  # [B, d, d], [B, d]


@pytest.mark.parametrize("config", [
    dict(generative_flow="TRIL", inference_flow="DIAG"),
    dict(generative_flow="2xTRIL", inference_flow="TRIL"),
    dict(generative_flow="TRIL", inference_flow="DIAG", invert_generative=True),
])
def test_two_flow_elbo_equals_state_space_density_ratio(config):
    # For affine flows p(h_t | h_{t-1}) and q(h_t | ...) are Gaussians in h-space, so the
    # noise-space objective (eq. 9) must equal the state-space one (eq. 5) sample by sample.
    model = _model("ab", seed=3, **config)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.2 * torch.randn_like(p))
    tokens, lengths = model.vocab.encode(["ab", "bba", "a"])
    noise = model.draw_noise(tokens.shape[1], 1, 3, torch.Generator().manual_seed(0))
    a = model.encode_suffixes(tokens, lengths)
    h_prev, expected = model.initial_state((3,)), torch.zeros(3, dtype=torch.float64)
    for t in range(tokens.shape[1]):
        q = model.inference_distribution(a[:, t], h_prev, None)
        h = model.inference_flow(h_prev, q.loc + q.scale * noise.xi[t, 0])[0]
        a_g, b_g = _affine_map(model.generative_flow, h_prev)
        a_q, b_q = _affine_map(model.inference_flow, h_prev)
        log_p = torch.distributions.MultivariateNormal(b_g, a_g @ a_g.mT).log_prob(h)
        cov_q = a_q @ torch.diag_embed(q.scale ** 2) @ a_q.mT
        log_q = torch.distributions.MultivariateNormal(b_q + (a_q @ q.loc.unsqueeze(-1)).squeeze(-1), cov_q).log_prob(h)
        log_emit = model.emission(h).log_softmax(-1).gather(-1, tokens[:, t:t + 1]).squeeze(-1)
        expected += torch.where(t < lengths, log_emit + log_p - log_q, 0.0)
        h_prev = h
    assert torch.allclose(model.elbo(tokens, lengths, noise), expected, atol=1e-8)


def test_elbo_lower_bounds_monte_carlo_log_likelihood():
    model = _model("ab", generative_flow="TRIL", inference_flow="DIAG", q_uses_state=True)
    tokens, lengths = model.vocab.encode(["ab"] * 4000)
    with torch.no_grad():
        elbo = model.elbo(tokens, lengths, generator=torch.Generator().manual_seed(0)).mean()
    log_p = model.log_prob_words(["ab"], n_samples=20000, generator=torch.Generator().manual_seed(1))[0]
    assert float(elbo) < float(log_p) - 0.05


IW_CONFIG = dict(q_uses_proposal=True, q_uses_state=True, bidirectional=True, generative_flow="2xTRIL")


def test_iwae_with_one_sample_equals_elbo_under_shared_noise():
    model = _model("ab", **IW_CONFIG)
    tokens, lengths = model.vocab.encode(["ab", "bab", "a", "bbba"])
    noise = model.draw_noise(tokens.shape[1], 1, 4, torch.Generator().manual_seed(0))
    assert torch.allclose(model.iwae_elbo(tokens, lengths, 1, noise), model.elbo(tokens, lengths, noise), atol=1e-12)
    seeded = [model.iwae_elbo(tokens, lengths, 1, generator=torch.Generator().manual_seed(5)),
              model.elbo(tokens, lengths, generator=torch.Generator().manual_seed(5))]
    assert torch.allclose(*seeded, atol=1e-12)


def test_iwae_with_identical_particles_equals_elbo():
    model = _model("ab", **IW_CONFIG)
    tokens, lengths = model.vocab.encode(["ab", "bab", "a", "bbba"])
    steps, k = tokens.shape[1], 5
    one = model.draw_noise(steps, 1, 4, torch.Generator().manual_seed(0))
    copies = TrajectoryNoise(one.xi.expand(steps, k, 4, 3), one.proposal.expand(steps, k, 4, 3),
                             torch.rand(steps, 4, dtype=torch.float64))
    assert torch.allclose(model.iwae_elbo(tokens, lengths, k, copies), model.elbo(tokens, lengths, one), atol=1e-10)


def test_iwae_bound_is_invariant_to_particle_order():
    # Reversing the particles and mirroring the resampling uniforms (u -> 1 - u) selects the same
    # particle at every step, so the bound only stays equal if each state follows its own weight.
    model = _model("ab", **IW_CONFIG)
    tokens, lengths = model.vocab.encode(["ab", "bab", "a", "bbba"])
    noise = model.draw_noise(tokens.shape[1], 2, 4, torch.Generator().manual_seed(0))
    flipped = TrajectoryNoise(noise.xi.flip(1), noise.proposal.flip(1), 1.0 - noise.uniform)
    original, reordered = model.iwae_elbo(tokens, lengths, 2, noise), model.iwae_elbo(tokens, lengths, 2, flipped)
    assert torch.allclose(original, reordered, atol=1e-10)
    one_each = [model.elbo(tokens, lengths, TrajectoryNoise(noise.xi[:, k:k + 1], noise.proposal[:, k:k + 1],
                                                            noise.uniform)) for k in range(2)]
    assert not torch.allclose(original, one_each[0], atol=1e-3) and not torch.allclose(original, one_each[1], atol=1e-3)


def test_resampling_picks_particles_in_proportion_to_weights():
    probs = torch.tensor([0.2, 0.5, 0.3], dtype=torch.float64)
    n = 20000
    log_w = (probs.log() + 1.7)[:, None].expand(3, n)  # unnormalised weights
    k = resample_index(log_w, torch.rand(n, generator=torch.Generator().manual_seed(0), dtype=torch.float64))
    freq = torch.bincount(k, minlength=3).double() / n
    assert torch.allclose(freq, probs, atol=0.015)
    assert int(resample_index(torch.tensor([[0.0], [-1e9]]), torch.tensor([0.999999]))[0]) == 0


# -- training -------------------------------------------------------------------------------


@pytest.mark.parametrize("n_samples", [1, 2])
def test_training_steps_lower_the_dssm_loss(n_samples):
    model = _model("abc", generative_flow="TRIL", q_uses_proposal=n_samples > 1)
    tokens, lengths = model.vocab.encode(WORDS)

    def evaluate() -> float:
        with torch.no_grad():
            return float(model.loss(tokens, lengths, n_samples, torch.Generator().manual_seed(123)))

    before = evaluate()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    gen = torch.Generator().manual_seed(0)
    for _ in range(40):
        optimizer.zero_grad()
        model.loss(tokens, lengths, n_samples, gen).backward()
        optimizer.step()
    assert evaluate() < before - 1.0


def test_training_steps_lower_the_gru_baseline_loss():
    torch.manual_seed(0)
    vocab = CharVocab("abc")
    model = GRUWordModel(vocab, state_size=4, max_len=4)
    tokens, lengths = vocab.encode(WORDS)
    before = float(model.loss(tokens, lengths).detach())
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(40):
        optimizer.zero_grad()
        model.loss(tokens, lengths).backward()
        optimizer.step()
    assert float(model.loss(tokens, lengths).detach()) < before - 1.0


# -- evaluation metrics (§4) ---------------------------------------------------------------


def test_cross_entropy_of_the_data_distribution_is_its_entropy():
    counts = torch.tensor([3.0, 1.0], dtype=torch.float64)
    entropy_bits = -(0.75 * math.log2(0.75) + 0.25 * math.log2(0.25))
    assert math.isclose(cross_entropy(torch.log(counts / 4), counts, base=2), entropy_bits)
    assert cross_entropy(torch.log(torch.tensor([0.5, 0.5])), counts) > entropy_bits * math.log(2)
    table = {"ab": math.log(0.5), "ba": math.log(0.25), "c": math.log(0.25)}
    train, test = train_test_cross_entropy(lambda ws: torch.tensor([table[w] for w in ws], dtype=torch.float64),
                                           ["ab", "ba"], [1, 1], ["c", "ab"], [1, 3])
    assert math.isclose(train, -(math.log(0.5) + math.log(0.25)) / 2)
    assert math.isclose(test, -(math.log(0.25) + 3 * math.log(0.5)) / 4)


def test_vocabulary_coverage_counts_repeats_and_distinct_words():
    cov = vocabulary_coverage(["the", "the", "xq", "a", "the"], {"the", "a", "of"})
    assert (cov.in_vocabulary, cov.unique_in_vocabulary, cov.unique) == (4 / 5, 2 / 5, 3 / 5)


def _sign_coded_model(scale: float) -> DeepStateSpaceModel:
    """h_t = xi_t (ID flow, d = 1); the letter is 'a' if xi_t > 0 else 'b' (scale -> infinity)."""
    model = _model("ab", state_size=1, generative_flow="ID")
    with torch.no_grad():
        model.emission.weight.copy_(torch.tensor([[scale], [-scale], [0.0]]))
        model.emission.bias.copy_(torch.tensor([0.0, 0.0, -50.0]))
    return model


def test_noise_information_is_log_two_when_the_noise_sign_picks_the_letter():
    info = noise_mutual_information(_sign_coded_model(200.0), steps=3, n_prefixes=100, n_noise=400,
                                    generator=torch.Generator().manual_seed(0))
    assert torch.allclose(info.per_step, torch.full((3,), math.log(2), dtype=torch.float64), atol=0.02)
    assert float(info.emission_entropy.max()) < 0.05
    assert math.isclose(info.mean, float(info.per_step.mean()))


def test_noise_information_is_zero_when_emissions_ignore_the_state():
    info = noise_mutual_information(_sign_coded_model(0.0), steps=2, n_prefixes=10, n_noise=20,
                                    generator=torch.Generator().manual_seed(0))
    assert torch.allclose(info.per_step, torch.zeros(2, dtype=torch.float64), atol=1e-12)
    p = torch.softmax(torch.tensor([0.0, 0.0, -50.0], dtype=torch.float64), -1)
    assert torch.allclose(info.emission_entropy, -(p * p.log()).sum().expand(2))


def test_witten_bell_bigram_perplexity_matches_hand_computation():
    # Corpus "ab": unigrams a, b, </s> have 1/3 each; every bigram context has one type and one
    # token, so gamma = 1/2 and P = 1/2 + 1/2 * 1/3 = 2/3 for each of the 3 symbols of "ab".
    assert math.isclose(char_ngram_perplexity(fit_char_ngram(["ab"], 2), ["ab"]), 1.5)
    # "b" was never seen after <s>: only the back-off share survives, P = 1/2 * 1/3 = 1/6.
    assert math.isclose(char_ngram_perplexity(fit_char_ngram(["ab"], 2), ["b"]), (1 / 6 * 2 / 3) ** -0.5)


def test_weighted_ngram_counts_equal_repeated_words():
    weighted = fit_char_ngram(["ab", "ba"], 3, counts=[3, 1])
    repeated = fit_char_ngram(["ab", "ab", "ab", "ba"], 3)
    once = fit_char_ngram(["ab", "ba"], 3)
    probe = ["abba", "b", "", "aab"]
    assert math.isclose(char_ngram_perplexity(weighted, probe), char_ngram_perplexity(repeated, probe))
    assert not math.isclose(char_ngram_perplexity(weighted, probe), char_ngram_perplexity(once, probe))
    table = char_ngram_perplexities(["ab", "ba"], ["ab", "ba", "abc"], orders=(2, 3))
    assert set(table) == {2, 3} and all(1.0 < v < 4.0 for v in table.values())
