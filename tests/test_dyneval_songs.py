"""Dynamic evaluation of songs: scored before each update, weights and state reset per song, adaptation helps."""

import pytest
import torch

from paperlib.dyneval.songs import (SongEvaluation, dynamic_evaluate_songs, song_mean_squared_gradients,
                                    static_evaluate_songs)
from paperlib.models.rnn_nade import LSTMNADE


def _model(seed: int = 0) -> LSTMNADE:
    torch.manual_seed(seed)
    return LSTMNADE(notes=12, embedding_size=8, hidden_size=8, num_layers=2, nade_size=6)


def _repeating_song(repeats: int = 10) -> torch.Tensor:
    pattern = torch.zeros(4, 12, dtype=torch.bool)  # a 4-frame motif: a rising arpeggio over a held bass note
    for t, note in enumerate([4, 7, 9, 11]):
        pattern[t, note] = pattern[t, 0] = True
    return pattern.repeat(repeats, 1)  # [40, 12]


def _random_songs(count: int, seed: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.rand(6 + 3 * i, 12, generator=generator) < 0.3 for i in range(count)]


def test_zero_learning_rate_equals_static_evaluation_frame_by_frame():
    model = _model()
    songs = _random_songs(3, seed=1)
    static = static_evaluate_songs(model, songs, batch_size=2)
    dynamic = dynamic_evaluate_songs(model, songs, lr=0.0, segment_len=4, rule="sgd")
    for ours, theirs in zip(dynamic.losses, static.losses):
        assert torch.allclose(ours, theirs, atol=1e-5)


@pytest.mark.parametrize("rule", ["sgd", "global_rms"])
def test_adapting_to_a_repeating_song_lowers_the_loss_of_its_later_frames(rule):
    model = _model(seed=2)
    song = _repeating_song()
    ms_g = song_mean_squared_gradients(model, _random_songs(4, seed=3), batch_size=2) if rule == "global_rms" else None
    lr = 0.5 if rule == "sgd" else 0.002
    static = static_evaluate_songs(model, [song]).losses[0]
    dynamic = dynamic_evaluate_songs(model, [song], lr=lr, segment_len=4, rule=rule, ms_g=ms_g).losses[0]
    assert torch.allclose(dynamic[:4], static[:4], atol=1e-5)  # the first segment is scored before any update
    assert dynamic[20:].mean() < 0.7 * static[20:].mean()
    assert dynamic[20:].mean() < dynamic[4:8].mean()  # still improving as the motif recurs


def test_weights_and_state_are_restored_between_songs():
    model = _model(seed=4)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    first, second = _repeating_song(), _random_songs(1, seed=5)[0]
    together = dynamic_evaluate_songs(model, [first, second], lr=0.5, segment_len=4, rule="sgd")
    alone = dynamic_evaluate_songs(model, [second], lr=0.5, segment_len=4, rule="sgd")
    assert torch.equal(together.losses[1], alone.losses[0])
    assert all(torch.equal(p, before[n]) for n, p in model.named_parameters())
    adapted = {}
    dynamic_evaluate_songs(model, [first], lr=0.5, segment_len=4, rule="sgd",
                           callback=lambda i, params, grads: adapted.update(params))
    assert not torch.allclose(adapted["nade.bias_out"], before["nade.bias_out"])  # the first song moved the weights


def test_callback_sees_one_update_per_segment_and_decay_defaults_to_zero():
    model = _model(seed=6)
    seen = []
    dynamic_evaluate_songs(model, [_repeating_song(3)], lr=0.1, segment_len=5, rule="sgd",
                           callback=lambda i, params, grads: seen.append(i))
    assert seen == [0, 1, 2]  # 12 frames in segments of 5, 5 and 2


def test_mean_squared_gradients_are_the_mean_of_squared_batch_gradients():
    model = _model(seed=7)
    songs = _random_songs(4, seed=8)
    ms_g = song_mean_squared_gradients(model, songs, batch_size=2)
    model.eval()
    squares = []
    for pair in (songs[:2], songs[2:]):
        model.zero_grad()
        frames = [s.float() for s in pair]
        total = sum(-model(f.unsqueeze(0))[0].sum() for f in frames) / sum(len(f) for f in frames)
        total.backward()
        squares.append({n: p.grad.clone() ** 2 for n, p in model.named_parameters()})
    for name, value in ms_g.items():
        assert torch.allclose(value, (squares[0][name] + squares[1][name]) / 2, rtol=1e-4, atol=1e-10), name


def test_song_evaluation_averages_over_all_frames():
    result = SongEvaluation([torch.tensor([1.0, 2.0, 3.0]), torch.tensor([5.0])])
    assert result.log_likelihood_per_frame() == pytest.approx(-11.0 / 4)
    assert result.song_log_likelihoods().tolist() == [-2.0, -5.0]


def test_bad_songs_and_rules_are_clear_errors():
    model = _model()
    with pytest.raises(ValueError, match="rule must be one of"):
        dynamic_evaluate_songs(model, [_repeating_song()], lr=0.1, segment_len=4, rule="nonlocal_rmsprop")
    with pytest.raises(ValueError, match=r"song 1 must be a non-empty \[T, 12\]"):
        dynamic_evaluate_songs(model, [_repeating_song(), torch.zeros(5, 88)], lr=0.1, segment_len=4, rule="sgd")
    with pytest.raises(ValueError, match="segment_len"):
        dynamic_evaluate_songs(model, [_repeating_song()], lr=0.1, segment_len=0, rule="sgd")
    with pytest.raises(ValueError, match="needs ms_g"):
        dynamic_evaluate_songs(model, [_repeating_song()], lr=0.1, segment_len=4, rule="global_rms")
