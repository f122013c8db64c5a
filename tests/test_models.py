"""Tests of paperlib.models: cells (Melis thesis eqs. 2.1, 2.2, §4.1; Krause eqs. 3.5-3.9),
the eq. (4.1) architecture, dropout masks, the §4.3 objective and evaluation helpers."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from paperlib.models.layers import stepwise_recurrence
import torch.nn.functional as F
from torch.autograd import gradcheck
from torch.func import functional_call

from paperlib.models import (
    CELL_OPTIONS,
    VALID_CELLS,
    DropoutMasks,
    build_lm,
    collect_logits,
    detach_state,
    evaluate_nll,
    mc_dropout_log_likelihood,
    multi_sample_loss,
    multi_sample_nll,
    nll_at_temperature,
    optimal_temperature,
)
from paperlib.models.layers import LSTMLayer, RLSTMLayer
from paperlib.models.lstm import lstm_recurrence, lstm_step
from paperlib.models.mlstm import MLSTMLayer
from paperlib.models.mogrifier import Mogrifier, MogrifierSpec, mogrifier_recurrence, mogrify
from paperlib.models.objective import token_log_likelihood
from paperlib.models.rlstm import rlstm_recurrence
from tests.numerics import assert_bitwise, assert_close_after_reduction

RECURRENT_CELLS = [c for c in VALID_CELLS if c not in ("transformer", "torch_lstm")]  # the cells of eq. (4.1)
ALL_DROPOUTS = dict(
    embedding_dropout=0.2, input_dropout=0.2, cell_output_dropout=0.2, state_dropout=0.3, output_dropout=0.2
)


def _dropouts_for(cell: str) -> dict:
    opts = dict(ALL_DROPOUTS)
    if cell == "gru":
        opts.pop("state_dropout")
    return opts


def _layer_gradcheck(layer: torch.nn.Module, x: torch.Tensor, state, mask) -> bool:
    """gradcheck of a layer's outputs and last state w.r.t. inputs, initial state and all parameters."""
    layer = layer.double()
    names = [name for name, _ in layer.named_parameters()]
    params = [p.detach().clone().requires_grad_(True) for _, p in layer.named_parameters()]
    state = tuple(s.double().requires_grad_(True) for s in (state if isinstance(state, tuple) else (state,)))

    def run(x, *args):
        init = args[: len(state)]
        weights = dict(zip(names, args[len(state) :]))
        out, last = functional_call(layer, weights, (x, init if len(init) > 1 else init[0], mask))
        return (out, *(last if isinstance(last, tuple) else (last,)))

    # eps=1e-6, atol=1e-5 (here and below): gradcheck's own defaults, central differences in float64
    return gradcheck(run, (x.double().requires_grad_(True), *state, *params), eps=1e-6, atol=1e-5)


# ---------------------------------------------------------------- Mogrifier (eq. 2.2)


def test_mogrify_with_zero_rounds_is_the_identity():
    h, x = torch.randn(3, 5), torch.randn(3, 4)
    h_out, x_out = mogrify(h, x, [])
    assert h_out is h and x_out is x


@pytest.mark.numerics
def test_mogrify_matches_eq_2_2_for_four_rounds():
    torch.manual_seed(0)
    m, n = 4, 5
    mog = Mogrifier(m, n, rounds=4, rank=0)
    q1, r2, q3, r4 = (t.weight for t in mog.transforms)
    h, x = torch.randn(3, n), torch.randn(3, m)
    x1 = 2 * torch.sigmoid(h @ q1.T) * x
    h2 = 2 * torch.sigmoid(x1 @ r2.T) * h
    x3 = 2 * torch.sigmoid(h2 @ q3.T) * x1
    h4 = 2 * torch.sigmoid(x3 @ r4.T) * h2
    h_out, x_out = mog(h, x)
    torch.testing.assert_close(h_out, h4)
    torch.testing.assert_close(x_out, x3)
    # odd r: the last update is to x, h stops at h^{2⌊r/2⌋}
    h3, x3b = mogrify(h, x, list(mog.transforms)[:3])
    torch.testing.assert_close(h3, h2)
    torch.testing.assert_close(x3b, x3)


@pytest.mark.numerics
def test_mogrifier_no_zigzag_gates_only_on_original_inputs():
    torch.manual_seed(1)
    m, n = 4, 5
    mog = Mogrifier(m, n, rounds=4, rank=0, zigzag=False)
    q1, r2, q3, r4 = (t.weight for t in mog.transforms)
    h, x = torch.randn(3, n), torch.randn(3, m)
    x3 = 2 * torch.sigmoid(h @ q3.T) * 2 * torch.sigmoid(h @ q1.T) * x
    h4 = 2 * torch.sigmoid(x @ r4.T) * 2 * torch.sigmoid(x @ r2.T) * h
    h_out, x_out = mog(h, x)
    torch.testing.assert_close(h_out, h4)
    torch.testing.assert_close(x_out, x3)


@pytest.mark.numerics
def test_mogrifier_low_rank_equals_full_rank_with_product_matrices():
    torch.manual_seed(2)
    m, n, k = 6, 7, 2
    low = Mogrifier(m, n, rounds=3, rank=k)
    full = Mogrifier(m, n, rounds=3, rank=0)
    with torch.no_grad():
        for lo, fu in zip(low.transforms, full.transforms):
            right, left = lo[0].weight, lo[1].weight  # [k, in], [out, k]
            assert right.shape[0] == k and left.shape[1] == k
            fu.weight.copy_(left @ right)
    h, x = torch.randn(3, n), torch.randn(3, m)
    for a, b in zip(low(h, x), full(h, x)):
        torch.testing.assert_close(a, b)
    assert sum(p.numel() for p in low.parameters()) == 3 * k * (m + n)


@pytest.mark.numerics
@pytest.mark.parametrize("base", ["lstm", "rlstm"])
def test_mogrifier_with_zero_rounds_equals_its_cell_exactly(base):
    torch.manual_seed(3)
    plain = build_lm(base, 20, 6, 2, state_dropout=0.3, input_dropout=0.1)
    mog = build_lm(f"mogrifier_{base}", 20, 6, 2, mogrifier_rounds=0, state_dropout=0.3, input_dropout=0.1)
    mog.load_state_dict(plain.state_dict(), strict=True)
    tokens = torch.randint(0, 20, (3, 9))
    masks = plain.sample_masks(3, 9, generator=torch.Generator().manual_seed(0))
    for masks_or_none in (masks, None):
        plain.eval(), mog.eval()
        a, state_a = plain(tokens, masks=masks_or_none)
        b, state_b = mog(tokens, masks=masks_or_none)
        why = "with zero rounds the layer takes its cell's own code path: the same kernels on the same weights"
        assert_bitwise(a, b, why=why)
        for (ha, ca), (hb, cb) in zip(state_a, state_b):
            assert_bitwise(ha, hb, why=why)
            assert_bitwise(ca, cb, why=why)


def test_mogrifier_changes_the_lstm_output_when_rounds_are_positive():
    torch.manual_seed(4)
    plain = build_lm("lstm", 20, 6, 1).eval()
    mog = build_lm("mogrifier_lstm", 20, 6, 1, mogrifier_rounds=2, mogrifier_rank=0).eval()
    mog.load_state_dict(plain.state_dict(), strict=False)
    tokens = torch.randint(0, 20, (2, 5))
    assert not torch.allclose(plain(tokens)[0], mog(tokens)[0])


# ---------------------------------------------------------------- LSTM and RLSTM recurrences


@pytest.mark.numerics
@pytest.mark.parametrize("capped", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_fused_lstm_matches_step_loop_forward_and_gradients(capped, masked):
    torch.manual_seed(5)
    steps, batch, m, n = 6, 3, 4, 5

    def rand(*shape):
        return torch.randn(*shape, dtype=torch.float64, requires_grad=True)

    x, w_ih, w_hh, bias = rand(steps, batch, m), rand(4 * n, m), rand(4 * n, n), rand(4 * n)
    h0, c0 = rand(batch, n), rand(batch, n)
    inputs = (x, w_ih, w_hh, bias, h0, c0)
    mask = (torch.rand(batch, n, dtype=torch.float64) > 0.3) / 0.7 if masked else None
    weights_out = torch.randn(steps, batch, n, dtype=torch.float64)

    gx = torch.addmm(bias, x.reshape(-1, m), w_ih.T).view(steps, batch, -1)
    out, c_last = lstm_recurrence(gx, w_hh, h0, c0, mask, capped)
    fused = torch.autograd.grad((out * weights_out).sum() + c_last.sum(), inputs)

    h, c, ref = h0, c0, []
    for x_t in x:
        h, c = lstm_step(x_t, h if mask is None else h * mask, c, w_ih, w_hh, bias, capped)
        ref.append(h)
    ref_out = torch.stack(ref)
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(c_last, c)
    reference = torch.autograd.grad((ref_out * weights_out).sum() + c.sum(), inputs)
    for a, b in zip(fused, reference):
        torch.testing.assert_close(a, b)


@pytest.mark.numerics
def test_uncapped_fused_lstm_matches_torch_lstm():
    torch.manual_seed(7)
    layer = LSTMLayer(4, 5, capped_input_gate=False)
    x = torch.randn(6, 3, 4)
    state = (torch.randn(3, 5), torch.randn(3, 5))
    torch_out, (torch_h, torch_c) = layer(x, state, None)  # nn.LSTM path
    ones = torch.ones(3, 5)
    fused_out, (fused_h, fused_c) = layer(x, state, ones)  # fused path, mask of ones
    torch.testing.assert_close(fused_out, torch_out)
    torch.testing.assert_close(fused_c, torch_c)
    torch.testing.assert_close(fused_h, torch_h)


def _reference_layer_loop(layer, x, state, mask):
    """Per-step autograd reference (paperlib.models.layers.stepwise_recurrence): returns (outputs, c)."""
    out, (_, c) = stepwise_recurrence(layer, x, state, mask)
    return out, c


@pytest.mark.numerics
@pytest.mark.parametrize(
    "make_layer",
    [
        pytest.param(lambda: LSTMLayer(3, 4, True, Mogrifier(3, 4, rounds=5, rank=2)), id="lstm_r5_low_rank"),
        pytest.param(lambda: LSTMLayer(3, 4, False, Mogrifier(3, 4, rounds=4, rank=0)), id="lstm_r4_full_uncapped"),
        pytest.param(lambda: LSTMLayer(3, 4, True, Mogrifier(3, 4, rounds=3, rank=2, zigzag=False)),
                     id="lstm_r3_no_zigzag"),
        pytest.param(lambda: LSTMLayer(3, 4, True, Mogrifier(3, 4, rounds=1, rank=0)), id="lstm_r1"),
        pytest.param(lambda: RLSTMLayer(3, 4, Mogrifier(3, 4, rounds=5, rank=2)), id="rlstm_r5_low_rank"),
        pytest.param(lambda: RLSTMLayer(3, 4, Mogrifier(3, 4, rounds=2, rank=0, zigzag=False)),
                     id="rlstm_r2_no_zigzag"),
        pytest.param(lambda: RLSTMLayer(3, 4), id="rlstm_plain"),
        pytest.param(lambda: LSTMLayer(3, 4, True), id="lstm_plain_capped"),
    ],
)
@pytest.mark.parametrize("masked", [False, True])
def test_fused_layers_match_per_step_reference(make_layer, masked):
    """Fused recurrences (manual backward) equal the per-step autograd reference in outputs and all gradients."""
    torch.manual_seed(29)
    layer = make_layer().double()
    x = torch.randn(5, 2, 3, dtype=torch.float64, requires_grad=True)
    h0 = torch.randn(2, 4, dtype=torch.float64, requires_grad=True)
    c0 = (torch.rand(2, 4, dtype=torch.float64) * 2 - 1).requires_grad_(True)
    mask = (torch.rand(2, 4, dtype=torch.float64) > 0.4) / 0.6 if masked else None
    weights_out = torch.randn(5, 2, 4, dtype=torch.float64)
    inputs = (x, h0, c0, *layer.parameters())

    out, (_, c_last) = layer(x, (h0, c0), mask)
    fused = torch.autograd.grad((out * weights_out).sum() + c_last.sum(), inputs, allow_unused=True)
    ref_out, ref_c = _reference_layer_loop(layer, x, (h0, c0), mask)
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(c_last, ref_c)
    reference = torch.autograd.grad((ref_out * weights_out).sum() + ref_c.sum(), inputs, allow_unused=True)
    for a, b in zip(fused, reference):
        torch.testing.assert_close(a, b)


@pytest.mark.numerics
@pytest.mark.parametrize("cell", ["lstm", "rlstm"])
@pytest.mark.parametrize("low_rank", [False, True])
def test_mogrifier_recurrence_gradcheck(cell, low_rank):
    torch.manual_seed(30)
    m, n, k, rounds = 3, 4, 2, 3
    mog = Mogrifier(m, n, rounds, rank=k if low_rank else 0).double()
    base = LSTMLayer(m, n).double() if cell == "lstm" else RLSTMLayer(m, n).double()
    if cell == "lstm":
        cell_w = [base.rnn.weight_ih_l0, base.rnn.weight_hh_l0, base.rnn.bias_ih_l0]
    else:
        cell_w = base.cell_weights()
    weights = [w.detach().clone().requires_grad_(True) for w in (*cell_w, *mog.round_weights())]
    x = torch.randn(3, 2, m, dtype=torch.float64, requires_grad=True)
    h0 = torch.randn(2, n, dtype=torch.float64, requires_grad=True)
    c0 = (torch.rand(2, n, dtype=torch.float64) * 2 - 1).requires_grad_(True)
    mask = (torch.rand(2, n, dtype=torch.float64) > 0.4) / 0.6
    spec = MogrifierSpec(cell, True, rounds, low_rank, True)
    run = lambda x, h0, c0, *w: mogrifier_recurrence(x, h0, c0, mask, spec, w)  # noqa: E731
    assert gradcheck(run, (x, h0, c0, *weights), eps=1e-6, atol=1e-5)


@pytest.mark.parametrize("layer_kind", ["rlstm", "capped_lstm", "uncapped_lstm"])
def test_rlstm_cell_state_is_bounded_by_one(layer_kind):
    """|c_t| <= 1 at every step for the RLSTM (and capped LSTM) under large inputs; not so without the cap."""
    torch.manual_seed(9)
    n = 16
    if layer_kind == "rlstm":
        layer = RLSTMLayer(8, n)
    else:
        layer = LSTMLayer(8, n, capped_input_gate=layer_kind == "capped_lstm")
    with torch.no_grad():
        for p in layer.parameters():
            p.mul_(20.0)
    state = (torch.zeros(4, n), torch.rand(4, n) * 2 - 1)
    mask = (torch.rand(4, n) > 0.3) / 0.7
    largest = 0.0
    with torch.no_grad():
        for _ in range(150):
            x = torch.randn(1, 4, 8) * 50.0
            _, state = layer(x, state, mask)
            largest = max(largest, state[1].abs().max().item())
    if layer_kind == "uncapped_lstm":
        assert largest > 1.5  # the bound is a property of the cap, not of the test inputs
    else:
        assert largest <= 1.0 + 1e-6  # float32: f c + min(i, 1 - f) j rounds above 1 by a few eps at most


# ---------------------------------------------------------------- gradients (float64 gradcheck)


@pytest.mark.numerics
@pytest.mark.parametrize("capped", [False, True])
def test_lstm_recurrence_gradcheck(capped):
    torch.manual_seed(10)
    steps, batch, n = 4, 2, 3
    gx = torch.randn(steps, batch, 4 * n, dtype=torch.float64, requires_grad=True)
    w_hh = torch.randn(4 * n, n, dtype=torch.float64, requires_grad=True)
    h0 = torch.randn(batch, n, dtype=torch.float64, requires_grad=True)
    c0 = torch.randn(batch, n, dtype=torch.float64, requires_grad=True)
    mask = (torch.rand(batch, n, dtype=torch.float64) > 0.4) / 0.6
    assert gradcheck(lambda *a: lstm_recurrence(*a, mask, capped), (gx, w_hh, h0, c0), eps=1e-6, atol=1e-5)


@pytest.mark.numerics
def test_rlstm_recurrence_gradcheck():
    torch.manual_seed(11)
    steps, batch, n = 4, 2, 3

    def rand(*shape):
        return torch.randn(*shape, dtype=torch.float64, requires_grad=True)

    args = (rand(steps, batch, 2 * n), rand(3 * n, n), rand(n, n), rand(n), rand(n, n), rand(n), rand(batch, n))
    c0 = (torch.rand(batch, n, dtype=torch.float64) * 2 - 1).requires_grad_(True)
    mask = (torch.rand(batch, n, dtype=torch.float64) > 0.4) / 0.6
    assert gradcheck(lambda *a: rlstm_recurrence(*a, mask), (*args, c0), eps=1e-6, atol=1e-5)


@pytest.mark.numerics
@pytest.mark.parametrize(
    "make_layer",
    [
        pytest.param(lambda: LSTMLayer(3, 4, True), id="lstm_capped"),
        pytest.param(lambda: LSTMLayer(3, 4, True, Mogrifier(3, 4, rounds=3, rank=2)), id="mogrifier_lstm"),
        pytest.param(lambda: LSTMLayer(3, 4, True, Mogrifier(3, 4, rounds=2, rank=0, zigzag=False)),
                     id="mogrifier_lstm_full_rank_no_zigzag"),
        pytest.param(lambda: RLSTMLayer(3, 4), id="rlstm"),
        pytest.param(lambda: RLSTMLayer(3, 4, Mogrifier(3, 4, rounds=3, rank=2)), id="mogrifier_rlstm"),
        pytest.param(lambda: MLSTMLayer(3, 4, capped_input_gate=False), id="mlstm"),
    ],
)
def test_cell_layer_gradcheck(make_layer):
    torch.manual_seed(12)
    layer = make_layer()
    x = torch.randn(3, 2, 3)
    state = (torch.randn(2, 4), torch.rand(2, 4) * 2 - 1)
    mask = ((torch.rand(2, 4) > 0.4) / 0.6).double()
    assert _layer_gradcheck(layer, x, state, mask)


@pytest.mark.numerics
def test_gru_language_model_gradcheck():
    torch.manual_seed(13)
    model = build_lm("gru", 7, 3, 2, embedding_size=2).double()
    tokens = torch.randint(0, 7, (2, 3))
    names = [n for n, _ in model.named_parameters()]
    params = [p.detach().clone().requires_grad_(True) for p in model.parameters()]
    model.eval()
    run = lambda *ps: functional_call(model, dict(zip(names, ps)), (tokens,))[0]  # noqa: E731
    assert gradcheck(run, tuple(params), eps=1e-6, atol=1e-5)


# ---------------------------------------------------------------- mLSTM (Krause eqs. 3.5-3.9)


@pytest.mark.numerics
def test_mlstm_with_one_hot_inputs_can_represent_an_lstm():
    """Krause §3.4: W_mx = 1, W_mh = I, W_*m = W_*h turns the mLSTM into the LSTM with W_*x, b."""
    torch.manual_seed(14)
    vocab, n = 6, 5
    lstm = LSTMLayer(vocab, n, capped_input_gate=False)
    mlstm = MLSTMLayer(vocab, n, capped_input_gate=False)
    with torch.no_grad():
        mlstm.weight_mx.fill_(1.0)
        mlstm.weight_mh.copy_(torch.eye(n))
        mlstm.weight_m.copy_(lstm.rnn.weight_hh_l0)
        mlstm.weight_x.copy_(lstm.rnn.weight_ih_l0)
        mlstm.bias.copy_(lstm.rnn.bias_ih_l0 + lstm.rnn.bias_hh_l0)
    x = F.one_hot(torch.randint(0, vocab, (7, 3)), vocab).float()  # [T, B, V]
    state = (torch.randn(3, n), torch.randn(3, n))
    a, (ha, ca) = lstm(x, state)
    b, (hb, cb) = mlstm(x, state)
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(ca, cb)
    # with dense inputs W_mx x is not all ones, so the two differ
    dense = torch.randn(7, 3, vocab)
    assert not torch.allclose(lstm(dense, state)[0], mlstm(dense, state)[0])


# ---------------------------------------------------------------- architecture (eq. 4.1) and dropout


@pytest.mark.numerics
@pytest.mark.parametrize("cell", RECURRENT_CELLS)
def test_forward_in_two_halves_equals_one_forward(cell):
    torch.manual_seed(15)
    model = build_lm(cell, 30, 8, 2, **_dropouts_for(cell)).eval()
    tokens = torch.randint(0, 30, (3, 10))
    whole, whole_state = model(tokens)
    first, state = model(tokens[:, :4])
    second, state = model(tokens[:, 4:], state)
    torch.testing.assert_close(torch.cat([first, second], dim=1), whole)
    for a, b in zip(state, whole_state):
        for x, y in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
            torch.testing.assert_close(x, y)
    state_h = state[0][0] if isinstance(state[0], tuple) else state[0]
    assert state_h.shape == (3, 8)


@pytest.mark.numerics
@pytest.mark.parametrize("positions", ["learned", "sinusoidal", "relative"])
def test_transformer_memory_makes_segmented_forward_equal_one_forward(positions):
    torch.manual_seed(16)
    model = build_lm("transformer", 30, 8, 2, num_heads=2, positions=positions, memory_length=16).eval()
    tokens = torch.randint(0, 30, (2, 12))
    whole, _ = model(tokens)
    first, state = model(tokens[:, :5])
    assert state.memory[0].shape == (2, 5, 8)
    second, state = model(tokens[:, 5:], state)
    torch.testing.assert_close(torch.cat([first, second], dim=1), whole)
    # without memory the second segment cannot see the first one
    plain = build_lm("transformer", 30, 8, 2, num_heads=2, positions=positions, memory_length=0).eval()
    plain.load_state_dict(model.state_dict())
    _, plain_state = plain(tokens[:, :5])
    assert not torch.allclose(plain(tokens[:, 5:], plain_state)[0], whole[:, 5:])


@pytest.mark.numerics
@pytest.mark.parametrize("positions", ["learned", "sinusoidal", "relative"])
def test_transformer_is_causal(positions):
    torch.manual_seed(17)
    model = build_lm("transformer", 30, 8, 2, num_heads=2, positions=positions, memory_length=4).eval()
    tokens = torch.randint(0, 30, (2, 9))
    _, state = model(torch.randint(0, 30, (2, 4)))  # non-empty memory
    changed = tokens.clone()
    changed[:, 6] = (changed[:, 6] + 1) % 30
    a, _ = model(tokens, state)
    b, _ = model(changed, state)
    assert_bitwise(a[:, :6], b[:, :6], why="the same kernels on the same shapes; earlier positions give token 6 the "
                                          "attention weight exp(-inf) = 0 exactly and all else is per position")
    assert not torch.allclose(a[:, 6:], b[:, 6:])


@pytest.mark.parametrize("embedding_size", [8, 5])
def test_tied_embeddings_are_one_parameter(embedding_size):
    model = build_lm("mogrifier_lstm", 30, 8, 2, embedding_size=embedding_size)
    assert model.decoder.weight is model.embedding.weight
    assert (model.projection is None) == (embedding_size == 8)
    assert sum(p is model.embedding.weight for p in model.parameters()) == 1
    untied = build_lm("lstm", 30, 8, 2, tie_embeddings=False, embedding_size=embedding_size)
    assert untied.decoder.weight is not untied.embedding.weight
    transformer = build_lm("transformer", 30, 8, 1, num_heads=2)
    assert transformer.decoder.weight is transformer.embedding.weight


@pytest.mark.numerics
@pytest.mark.parametrize("cell", ["lstm", "rlstm"])
def test_variational_state_mask_is_the_same_at_every_time_step(cell):
    """A state mask shared by all steps equals scaling the columns of the weights that read h_prev (and c in o)."""
    torch.manual_seed(18)
    model = build_lm(cell, 30, 6, 1, state_dropout=0.5, input_dropout=0.3)
    tokens = torch.randint(0, 30, (1, 12))
    masks = model.sample_masks(1, 12, generator=torch.Generator().manual_seed(3))
    assert masks.state[0].shape == (1, 6)  # no time axis
    assert (masks.state[0] == 0).any() and (masks.state[0] != 0).any()
    logits, _ = model(tokens, masks=masks)

    scaled = copy.deepcopy(model)
    layer = scaled.layers[0]
    with torch.no_grad():
        if cell == "lstm":
            layer.rnn.weight_hh_l0.mul_(masks.state[0])
        else:
            layer.weight_hh.mul_(masks.state[0])
            layer.weight_oc.mul_(masks.state[0])
    no_state_mask = DropoutMasks(masks.embedding, masks.input, masks.cell, [None], masks.output)
    torch.testing.assert_close(scaled(tokens, masks=no_state_mask)[0], logits)


def test_embedding_dropout_drops_whole_words():
    torch.manual_seed(19)
    model = build_lm("lstm", 5, 6, 1, embedding_dropout=0.5)
    tokens = torch.randint(0, 5, (8, 20))
    masks = model.sample_masks(8, 20, generator=torch.Generator().manual_seed(0))
    keep = masks.embedding.gather(1, tokens)  # [B, T]
    for row, toks in zip(keep, tokens):
        for word in toks.unique():
            values = row[toks == word]
            assert torch.all(values == values[0])  # every occurrence of a word shares its fate
    assert set(keep.unique().tolist()) == {0.0, 2.0}


@pytest.mark.numerics
def test_dropout_masks_active_only_in_training_mode():
    torch.manual_seed(20)
    model = build_lm("rlstm", 30, 8, 2, **ALL_DROPOUTS)
    tokens = torch.randint(0, 30, (2, 6))
    model.eval()
    assert_bitwise(model(tokens)[0], model(tokens)[0], why="eval mode: the same call twice")
    model.train()
    assert not torch.allclose(model(tokens)[0], model(tokens)[0])


@pytest.mark.numerics
def test_residual_equals_skip_for_two_layers_but_not_three():
    """Melis §4.7: on 2-layer models residual connections are identical to skip connections."""
    torch.manual_seed(21)
    tokens = torch.randint(0, 30, (2, 6))
    for layers, same in ((2, True), (3, False)):
        residual = build_lm("lstm", 30, 8, layers, connections="residual").eval()
        skip = build_lm("lstm", 30, 8, layers, connections="skip").eval()
        stacked = build_lm("lstm", 30, 8, layers, connections="stacked").eval()
        skip.load_state_dict(residual.state_dict())
        stacked.load_state_dict(residual.state_dict())
        assert torch.allclose(residual(tokens)[0], skip(tokens)[0]) == same
        assert not torch.allclose(residual(tokens)[0], stacked(tokens)[0])


def test_detach_state_cuts_the_graph_and_keeps_structure():
    model = build_lm("lstm", 30, 8, 2)
    _, state = model(torch.randint(0, 30, (2, 4)))
    assert state[0][0].requires_grad
    detached = detach_state(state)
    assert len(detached) == 2 and all(isinstance(s, tuple) and len(s) == 2 for s in detached)
    assert not any(t.requires_grad for s in detached for t in s)
    transformer = build_lm("transformer", 30, 8, 1, num_heads=2, memory_length=4, positions="sinusoidal")
    _, t_state = transformer(torch.randint(0, 30, (2, 4)))
    assert type(detach_state(t_state)) is type(t_state) and detach_state(t_state).offset == 4


# ---------------------------------------------------------------- objective (§4.3)


@pytest.mark.numerics
@pytest.mark.parametrize("cell", ["mogrifier_lstm", "rlstm"])
def test_multi_sample_objective_equals_log_mean_exp_of_single_mask_passes(cell):
    torch.manual_seed(22)
    num_samples, batch, steps = 4, 3, 7
    model = build_lm(cell, 25, 8, 2, mogrifier_rounds=3, mogrifier_rank=2, **ALL_DROPOUTS) if cell.startswith(
        "mogrifier") else build_lm(cell, 25, 8, 2, **ALL_DROPOUTS)
    inputs = torch.randint(0, 25, (batch, steps))
    targets = torch.randint(0, 25, (batch, steps))
    masks = model.sample_masks(num_samples * batch, steps, generator=torch.Generator().manual_seed(1))
    loss, state = multi_sample_loss(model, inputs, targets, num_samples, masks=masks)
    assert state[0][0].shape == (num_samples * batch, 8)

    per_sample = []
    for d in range(num_samples):
        logits, _ = model(inputs, masks=masks.select_batch(d * batch, (d + 1) * batch))
        per_sample.append(token_log_likelihood(logits, targets).exp())  # [B, T]
    expected = -torch.log(torch.stack(per_sample).mean(0)).mean()
    torch.testing.assert_close(loss, expected)
    # the multi-sample bound is tighter than the average single-sample log-likelihood (Jensen)
    single = -torch.stack([p.log() for p in per_sample]).mean()
    assert loss < single


@pytest.mark.numerics
def test_multi_sample_nll_with_one_sample_is_cross_entropy():
    torch.manual_seed(23)
    logits, targets = torch.randn(2, 5, 11), torch.randint(0, 11, (2, 5))
    torch.testing.assert_close(
        multi_sample_nll(logits, targets, 1), F.cross_entropy(logits.reshape(-1, 11), targets.reshape(-1))
    )
    with pytest.raises(ValueError):
        multi_sample_nll(logits, targets, 3)


# ---------------------------------------------------------------- evaluation


def _batches(vocab: int, count: int = 3, batch: int = 2, steps: int = 6, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    stream = torch.randint(0, vocab, (batch, count * steps + 1), generator=g)
    return [(stream[:, i * steps : (i + 1) * steps], stream[:, i * steps + 1 : (i + 1) * steps + 1])
            for i in range(count)]


@pytest.mark.numerics
def test_unit_temperature_leaves_likelihood_unchanged():
    torch.manual_seed(24)
    model = build_lm("lstm", 20, 8, 1)
    batches = _batches(20)
    logits, targets = collect_logits(model, batches)
    expected = F.cross_entropy(logits, targets).item()
    # float32 log-softmax over V = 20, then 36 losses summed in another order (a chunk or a batch at a time)
    why = "the same log-softmax, averaged over the 36 tokens in another order"
    assert_close_after_reduction(nll_at_temperature(logits, targets, 1.0), expected, n_terms=20 + 36,
                                 dtype=torch.float32, why=why)
    assert_close_after_reduction(evaluate_nll(model, batches, temperature=1.0), expected, n_terms=20 + 36,
                                 dtype=torch.float32, why=why)


def test_optimal_temperature_recovers_miscalibration_and_is_no_worse_than_one():
    g = torch.Generator().manual_seed(25)
    true_logits = torch.randn(4000, 30, generator=g) * 2.0
    targets = torch.multinomial(F.softmax(true_logits, -1), 1, generator=g).squeeze(1)
    overconfident = 3.0 * true_logits
    temperature = optimal_temperature(overconfident, targets)
    assert temperature == pytest.approx(3.0, rel=0.1)
    assert nll_at_temperature(overconfident, targets, temperature) < nll_at_temperature(overconfident, targets, 1.0)
    calibrated_t = optimal_temperature(true_logits, targets)
    assert nll_at_temperature(true_logits, targets, calibrated_t) <= nll_at_temperature(true_logits, targets, 1.0)
    assert calibrated_t == pytest.approx(1.0, abs=0.1)


@pytest.mark.numerics
def test_mc_dropout_without_dropout_equals_deterministic_evaluation():
    torch.manual_seed(26)
    model = build_lm("rlstm", 20, 8, 2)
    inputs, targets = _batches(20, count=1)[0]
    log_p, _ = mc_dropout_log_likelihood(model, inputs, targets, num_samples=5, chunk_size=2)
    model.eval()
    torch.testing.assert_close(log_p, token_log_likelihood(model(inputs)[0], targets))


@pytest.mark.numerics
def test_mc_dropout_averages_probabilities_over_masks():
    torch.manual_seed(27)
    model = build_lm("lstm", 20, 8, 2, **ALL_DROPOUTS)
    inputs, targets = _batches(20, count=1)[0]
    batch, steps = inputs.shape
    log_p, states = mc_dropout_log_likelihood(
        model, inputs, targets, num_samples=5, chunk_size=2, generator=torch.Generator().manual_seed(4)
    )
    assert len(states) == 3 and states[-1][0][0].shape == (batch, 8)
    g = torch.Generator().manual_seed(4)
    probs = []
    model.eval()
    with torch.no_grad():
        for size in (2, 2, 1):
            masks = model.sample_masks(size * batch, steps, generator=g)
            for d in range(size):
                logits, _ = model(inputs, masks=masks.select_batch(d * batch, (d + 1) * batch))
                probs.append(token_log_likelihood(logits, targets).exp())
    torch.testing.assert_close(log_p, torch.stack(probs).mean(0).log())
    deterministic = token_log_likelihood(model(inputs)[0], targets)
    assert not torch.allclose(log_p, deterministic)


# ---------------------------------------------------------------- construction


def test_build_lm_rejects_unknown_cells_and_options():
    with pytest.raises(ValueError, match="valid cells: lstm, mogrifier_lstm"):
        build_lm("lstmm", 10, 8, 1)
    with pytest.raises(ValueError, match="valid options"):
        build_lm("lstm", 10, 8, 1, dropout_rate=0.1)
    with pytest.raises(ValueError, match="mogrifier_rounds"):
        build_lm("lstm", 10, 8, 1, mogrifier_rounds=3)  # valid only for mogrifier cells
    with pytest.raises(ValueError, match="state_dropout"):
        build_lm("gru", 10, 8, 1, state_dropout=0.1)
    with pytest.raises(ValueError, match="connections"):
        build_lm("lstm", 10, 8, 1, connections="dense")
    with pytest.raises(ValueError, match="dropout"):
        build_lm("lstm", 10, 8, 1, input_dropout=1.0)
    with pytest.raises(ValueError, match="chrono_t_max"):
        build_lm("rlstm", 10, 8, 1, chrono_t_max=1.5)
    with pytest.raises(ValueError, match="positions"):
        build_lm("transformer", 10, 8, 1, num_heads=2, positions="rotary")
    with pytest.raises(ValueError, match="hidden_size"):
        build_lm("lstm", 10, 0, 1)


def test_every_cell_builds_with_its_documented_options():
    for cell in VALID_CELLS:
        options = {k: v for k, v in CELL_OPTIONS[cell].items() if v is not None}
        model = build_lm(cell, 12, 8, 2, **options)
        logits, _ = model(torch.randint(0, 12, (2, 3)))
        assert logits.shape == (2, 3, 12)


@pytest.mark.parametrize("cell", ["lstm", "mogrifier_lstm", "rlstm", "mogrifier_rlstm", "mlstm"])
def test_chrono_init_lies_in_log_uniform_range(cell):
    torch.manual_seed(28)
    t_max = 20.0
    model = build_lm(cell, 10, 400, 2, chrono_t_max=t_max)
    for layer in model.layers:
        bias = layer.forget_bias().detach()
        assert bias.min() >= 0.0 and bias.max() <= math.log(t_max - 1) + 1e-6
        # exp(b^f) ~ U(1, T_max - 1): mean (T_max)/2, standard error ~ 5.2/sqrt(400) = 0.26
        assert bias.exp().mean().item() == pytest.approx(t_max / 2, abs=1.3)
    default = build_lm(cell, 10, 400, 1)
    assert default.layers[0].forget_bias().min() < 0  # without Chrono, the default symmetric init


# ---------------------------------------------------------------- the nn.LSTM baseline (pytorch/examples)


@pytest.mark.numerics
def test_torch_lstm_baseline_is_embedding_nn_lstm_and_softmax_and_carries_its_state():
    torch.manual_seed(31)
    model = build_lm("torch_lstm", 30, 8, 2, embedding_size=6, dropout=0.2).eval()
    tokens = torch.randint(0, 30, (3, 10))
    logits, (h, c) = model(tokens)
    assert logits.shape == (3, 10, 30) and h.shape == c.shape == (2, 3, 8)
    # by hand: the same modules in sequence (eval mode: no dropout)
    out, _ = model.rnn(model.embedding(tokens))
    torch.testing.assert_close(logits, model.decoder(out))
    first, state = model(tokens[:, :4])
    second, _ = model(tokens[:, 4:], state)
    torch.testing.assert_close(torch.cat([first, second], dim=1), logits)
    # untied by default, initialised as in the example
    assert model.decoder.weight is not model.embedding.weight
    assert model.embedding.weight.abs().max() <= 0.1 and torch.all(model.decoder.bias == 0)
    tied = build_lm("torch_lstm", 30, 8, 1, tie_embeddings=True)
    assert tied.decoder.weight is tied.embedding.weight
    with pytest.raises(ValueError, match="embedding_size == hidden_size"):
        build_lm("torch_lstm", 30, 8, 1, embedding_size=6, tie_embeddings=True)


def test_torch_lstm_baseline_dropout_is_drawn_per_time_step_in_training_only():
    torch.manual_seed(32)
    model = build_lm("torch_lstm", 30, 8, 1, dropout=0.5)
    tokens = torch.zeros(1, 6, dtype=torch.long)  # the same word at every step
    embedded = model.drop(model.embedding(tokens))
    zeros = embedded[0] == 0
    assert not all(torch.equal(zeros[0], zeros[t]) for t in range(1, 6))  # a fresh mask at each step
    model.eval()
    assert torch.equal(model(tokens)[0], model(tokens)[0])


def test_embedding_init_uniform_bounds_the_tied_embedding_and_normal_is_torchs_default():
    torch.manual_seed(33)
    normal = build_lm("lstm", 500, 16, 1)
    torch.manual_seed(33)
    named = build_lm("lstm", 500, 16, 1, embedding_init="normal")
    for a, b in zip(normal.parameters(), named.parameters()):
        assert_bitwise(a, b, why="the default draws the same numbers as before the option existed")
    uniform = build_lm("lstm", 500, 16, 1, embedding_init="uniform")
    assert uniform.embedding.weight.abs().max() <= 0.1 and uniform.decoder.weight is uniform.embedding.weight
    assert normal.embedding.weight.std() > 0.9  # N(0, 1)
    with pytest.raises(ValueError, match="embedding_init must be one of"):
        build_lm("gru", 500, 16, 1, embedding_init="xavier")


def test_a_transformer_s_uniform_embedding_init_is_u_minus_to_plus_a_tenth_and_the_default_is_pytorch_s():
    torch.manual_seed(0)
    uniform = build_lm("transformer", 500, 32, 1, embedding_init="uniform").embedding.weight
    assert uniform.abs().max() <= 0.1 and uniform.std().item() == pytest.approx(0.2 / 12 ** 0.5, rel=0.05)
    assert build_lm("transformer", 500, 32, 1).embedding.weight.std().item() == pytest.approx(1.0, rel=0.05)
    with pytest.raises(ValueError, match="embedding_init must be one of"):
        build_lm("transformer", 50, 32, 1, embedding_init="xavier")
