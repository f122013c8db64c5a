"""NADE and LSTM-NADE against closed forms: normalisation, the note-by-note definition, gradients, causality."""

import itertools
import math

import pytest
import torch

from paperlib.data.music import pad_songs, piano_roll
from paperlib.models.nade import NADE, nade_log_prob, nade_logits, sparse_nade_logits
from paperlib.models.rnn_nade import LSTMNADE, frame_mean_log_likelihood, thesis_lstm_nade


def _random_nade(notes: int, hidden: int, activation: str, seed: int = 0) -> NADE:
    torch.manual_seed(seed)
    nade = NADE(notes, hidden, activation).double()
    with torch.no_grad():
        for p in nade.parameters():
            p.normal_(0.0, 1.0)  # far from the zero biases of the initialisation
    return nade


def all_binary_vectors(n: int) -> torch.Tensor:
    return torch.tensor(list(itertools.product([0.0, 1.0], repeat=n)), dtype=torch.float64)  # [2^n, n]


FORMS = [nade_logits, sparse_nade_logits]  # eq. (2.61) over all notes, and over the sounding notes only


def _log_prob(form, nade: NADE, x: torch.Tensor) -> torch.Tensor:
    logits = form(x, nade.weight_in, nade.weight_out, nade.bias_hidden, nade.bias_out, nade.activation)
    return nade_log_prob(x, logits)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("activation", ["relu", "sigmoid"])
@pytest.mark.parametrize("notes", [1, 3, 7])
def test_nade_probabilities_of_all_binary_vectors_sum_to_one(form, activation, notes):
    nade = _random_nade(notes, 5, activation)
    total = _log_prob(form, nade, all_binary_vectors(notes)).exp().sum()
    assert total.item() == pytest.approx(1.0, abs=1e-12)


def test_per_frame_biases_keep_every_frame_normalised():
    nade = _random_nade(5, 4, "relu")
    x = all_binary_vectors(5).expand(3, 32, 5)  # every frame, under each of three frames' biases
    bias_hidden = torch.randn(3, 1, 4, dtype=torch.float64)  # three frames' biases (eqs. 2.64-2.65)
    bias_out = torch.randn(3, 1, 5, dtype=torch.float64)
    log_p = nade_log_prob(x, nade.logits(x, bias_hidden, bias_out))  # [3, 32]
    assert torch.allclose(log_p.exp().sum(1), torch.ones(3, dtype=torch.float64), atol=1e-12)
    assert not torch.allclose(log_p[0], log_p[1])  # the biases matter


def _note_by_note_log_prob(x, weight_in, weight_out, bias_hidden, bias_out, act):
    """Eqs. (2.58)-(2.63) written out: one note at a time, the hidden pre-activation updated by eq. (2.61)."""
    weight_in, weight_out, bias_hidden, bias_out = (t.detach() for t in (weight_in, weight_out, bias_hidden, bias_out))
    total = 0.0
    p = torch.sigmoid(bias_out[0])  # (2.59)
    total += math.log(p if x[0] == 1 else 1 - p)
    pre = bias_hidden.clone()
    for n in range(1, len(x)):
        pre = pre + weight_in[:, n - 1] * x[n - 1]  # (2.61)
        p = torch.sigmoid(weight_out[n] @ act(pre) + bias_out[n])  # (2.62)-(2.63)
        total += math.log(p if x[n] == 1 else 1 - p)
    return total


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("activation", ["relu", "sigmoid"])
def test_nade_log_likelihood_equals_the_note_by_note_loop(form, activation):
    nade = _random_nade(12, 6, activation, seed=3)
    act = torch.relu if activation == "relu" else torch.sigmoid
    x = (torch.rand(20, 12, generator=torch.Generator().manual_seed(1)) < 0.4).double()
    x[0] = 0  # a silent frame
    x[1] = 1  # every note sounding
    ours = _log_prob(form, nade, x)
    for row in range(20):
        expected = _note_by_note_log_prob(x[row], nade.weight_in, nade.weight_out, nade.bias_hidden, nade.bias_out, act)
        assert ours[row].item() == pytest.approx(expected, abs=1e-10)


def test_first_note_depends_on_its_bias_alone():
    nade = _random_nade(4, 3, "relu")
    logits = nade.logits(all_binary_vectors(4))
    assert torch.all(logits[:, 0] == nade.bias_out[0])
    # note 3's conditional moves only with notes 1 and 2
    x = all_binary_vectors(4)
    flipped = x.clone()
    flipped[:, 2:] = 1 - flipped[:, 2:]
    assert torch.equal(nade.logits(flipped)[:, :3], logits[:, :3])


@pytest.mark.parametrize("form", FORMS)
def test_nade_gradients_pass_gradcheck_in_float64(form):
    torch.manual_seed(0)
    x = (torch.rand(3, 6) < 0.5).double()
    params = [torch.randn(4, 6, dtype=torch.float64, requires_grad=True),  # W_in
              torch.randn(6, 4, dtype=torch.float64, requires_grad=True),  # W_out
              torch.randn(3, 4, dtype=torch.float64, requires_grad=True),  # per-frame b_h
              torch.randn(3, 6, dtype=torch.float64, requires_grad=True)]  # per-frame b_y
    for activation in ("relu", "sigmoid"):
        assert torch.autograd.gradcheck(lambda *p: nade_log_prob(x, form(x, *p, activation)), params)


def test_sparse_and_dense_forms_agree_on_piano_roll_batches_with_dropout_masks():
    generator = torch.Generator().manual_seed(4)
    x = (torch.rand(3, 7, 88, generator=generator, dtype=torch.float64) < 0.05).double()  # [B, T, N]
    x[0, 0] = 0
    args = (torch.randn(40, 88, generator=generator, dtype=torch.float64),
            torch.randn(88, 40, generator=generator, dtype=torch.float64),
            torch.randn(3, 7, 40, generator=generator, dtype=torch.float64),
            torch.randn(3, 7, 88, generator=generator, dtype=torch.float64))
    mask = (torch.rand(3, 7, 40, generator=generator) < 0.5).double() * 2
    dense, sparse = nade_logits(x, *args, "relu", mask), sparse_nade_logits(x, *args, "relu", mask)
    assert sparse.shape == (3, 7, 88) and torch.allclose(sparse, dense, atol=1e-10)


def _tiny_lstm_nade(seed: int = 0, **options) -> LSTMNADE:
    torch.manual_seed(seed)
    settings = dict(notes=6, embedding_size=5, hidden_size=4, num_layers=2, nade_size=3)
    return LSTMNADE(**{**settings, **options}).double()


def test_lstm_nade_gradients_pass_gradcheck_in_float64():
    model = _tiny_lstm_nade().eval()
    frames = (torch.rand(2, 4, 6, generator=torch.Generator().manual_seed(2)) < 0.5).double()
    names = [n for n, _ in model.named_parameters()]
    params = [p.detach().clone().requires_grad_() for p in model.parameters()]

    def log_likelihood(*values):
        out, _ = torch.func.functional_call(model, dict(zip(names, values)), (frames,))
        return out

    assert torch.autograd.gradcheck(log_likelihood, params)


def test_lstm_nade_biases_depend_only_on_past_frames():
    model = _tiny_lstm_nade(seed=1).eval()
    frames = (torch.rand(1, 8, 6, generator=torch.Generator().manual_seed(3)) < 0.5).double()
    bias_hidden, bias_out, _ = model.biases(frames)
    for t in range(8):
        changed = frames.clone()
        changed[:, t:] = 1 - changed[:, t:]
        hidden_after, out_after, _ = model.biases(changed)
        assert torch.equal(hidden_after[:, : t + 1], bias_hidden[:, : t + 1]), t  # frames >= t leave b_t alone
        assert torch.equal(out_after[:, : t + 1], bias_out[:, : t + 1]), t
        if t < 7:
            assert not torch.allclose(out_after[:, t + 1], bias_out[:, t + 1])  # ... and frame t reaches b_{t+1}


def test_lstm_nade_frames_are_normalised_given_their_past():
    model = _tiny_lstm_nade(seed=4, notes=5).eval()
    past = (torch.rand(1, 3, 5, generator=torch.Generator().manual_seed(5)) < 0.5).double()
    candidates = all_binary_vectors(5)  # every possible 4th frame after the same 3 frames
    songs = torch.cat([past.expand(32, 3, 5), candidates.unsqueeze(1)], 1)  # [32, 4, 5]
    log_p, _ = model(songs)
    assert log_p[:, 3].exp().sum().item() == pytest.approx(1.0, abs=1e-12)
    assert torch.allclose(log_p[:, :3], log_p[:1, :3].expand(32, 3))


def test_lstm_nade_with_zero_recurrent_biases_is_a_frame_independent_nade():
    model = _tiny_lstm_nade(seed=6).eval()
    with torch.no_grad():
        model.to_hidden_bias.weight.zero_()
        model.to_output_bias.weight.zero_()
    frames = (torch.rand(3, 5, 6, generator=torch.Generator().manual_seed(7)) < 0.5).double()
    log_p, _ = model(frames)
    assert torch.allclose(log_p, model.nade.log_prob(frames), atol=1e-12)


def test_lstm_nade_in_segments_with_carried_state_equals_one_pass():
    model = _tiny_lstm_nade(seed=8).eval()
    frames = (torch.rand(2, 9, 6, generator=torch.Generator().manual_seed(9)) < 0.5).double()
    whole, _ = model(frames)
    first, state = model(frames[:, :4])
    second, _ = model(frames[:, 4:], state)
    assert torch.allclose(torch.cat([first, second], 1), whole, atol=1e-12)


def test_dropout_is_off_in_eval_mode_and_samples_masks_in_training():
    model = _tiny_lstm_nade(seed=10, dropout=0.5, nade_dropout=0.5)
    frames = (torch.rand(2, 6, 6, generator=torch.Generator().manual_seed(11)) < 0.5).double()
    model.eval()
    assert torch.equal(model(frames)[0], model(frames)[0])
    model.train()
    assert not torch.equal(model(frames)[0], model(frames)[0])


def test_thesis_network_has_the_stated_7_2m_parameters():
    model = thesis_lstm_nade()
    count = sum(p.numel() for p in model.parameters())
    assert count == 88 * 650 + 2 * (4 * 650 * (650 + 650) + 2 * 4 * 650) + 2 * 88 * 400 + 400 + 88 + 650 * (400 + 88)
    assert round(count / 1e6, 1) == 7.2


def test_frame_mean_skips_padding_and_bad_input_is_rejected():
    songs = [piano_roll([[60], [62], [64]], "a"), piano_roll([[60]], "b")]
    frames, lengths = pad_songs(songs)
    assert frames.shape == (2, 3, 88) and lengths.tolist() == [3, 1] and frames[1, 1:].sum() == 0
    log_probs = torch.tensor([[-1.0, -2.0, -3.0], [-4.0, -100.0, -100.0]])
    assert frame_mean_log_likelihood(log_probs, lengths).item() == pytest.approx(-10.0 / 4)
    model = LSTMNADE(notes=88, embedding_size=4, hidden_size=4, num_layers=1, nade_size=3)
    with pytest.raises(ValueError, match="only 0 and 1"):
        model(frames * 0.5 + 0.25)
    with pytest.raises(ValueError, match="88 notes"):
        model(frames[..., :80])
    with pytest.raises(ValueError, match="floating-point"):
        model(frames.bool())
    with pytest.raises(ValueError, match="activation must be one of"):
        NADE(4, 3, activation="tanh")
