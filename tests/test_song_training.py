"""Training a model of songs: it learns, keeps the best validation weights, and batches and windows songs as stated."""

import pytest
import torch

from paperlib.dyneval.songs import static_evaluate_songs
from paperlib.models.rnn_nade import LSTMNADE
from paperlib.song_training import SongTrainConfig, length_batches, train_on_songs


def _songs(count: int, seed: int) -> list[torch.Tensor]:
    """Songs of a 3-frame motif (each song its own transposition) with some random extra notes."""
    generator = torch.Generator().manual_seed(seed)
    songs = []
    for index in range(count):
        length = 6 + int(torch.randint(0, 10, (1,), generator=generator))
        song = torch.rand(length, 10, generator=generator) < 0.05
        for t in range(length):
            song[t, (index + 2 * (t % 3)) % 10] = True
        songs.append(song)
    return songs


def _model() -> LSTMNADE:
    torch.manual_seed(0)
    return LSTMNADE(notes=10, embedding_size=12, hidden_size=12, num_layers=1, nade_size=8)


def test_training_raises_validation_likelihood_and_keeps_the_best_weights():
    model = _model()
    train, valid = _songs(24, seed=1), _songs(6, seed=2)
    before = static_evaluate_songs(model, valid).log_likelihood_per_frame()
    result = train_on_songs(model, train, valid, SongTrainConfig(batch_size=4, lr=0.01, optimizer="adam", max_epochs=8))
    after = static_evaluate_songs(model, valid).log_likelihood_per_frame()
    assert after == pytest.approx(result.best_valid_ll, abs=1e-5)  # the best epoch's weights are loaded
    assert after == max(h["valid_ll"] for h in result.history)
    assert after > before + 1.0
    assert result.steps == 8 * 6  # 24 songs in batches of 4, one update per batch and epoch


def test_whole_song_windows_equal_no_truncation_and_short_windows_make_more_updates():
    train, valid = _songs(8, seed=3), _songs(2, seed=4)
    longest = max(song.shape[0] for song in train)
    results, weights = [], []
    for bptt in (None, longest):
        model = _model()
        results.append(train_on_songs(model, train, valid, SongTrainConfig(batch_size=4, lr=0.05, max_epochs=2,
                                                                           bptt=bptt)))
        weights.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
    assert torch.allclose(weights[0], weights[1]) and results[0].steps == results[1].steps
    truncated = train_on_songs(_model(), train, valid, SongTrainConfig(batch_size=4, lr=0.05, max_epochs=1, bptt=4))
    batches = length_batches(train, 4)
    assert truncated.steps == sum(-(-max(s.shape[0] for s in batch) // 4) for batch in batches)


def test_batches_hold_songs_of_similar_length_and_bad_settings_are_rejected():
    songs = [torch.zeros(n, 10, dtype=torch.bool) for n in (9, 3, 7, 5, 1)]
    assert [[s.shape[0] for s in b] for b in length_batches(songs, 2)] == [[1, 3], [5, 7], [9]]
    with pytest.raises(ValueError, match="optimizer must be one of"):
        SongTrainConfig(optimizer="lbfgs")
    with pytest.raises(ValueError, match="bptt"):
        SongTrainConfig(bptt=0)


def test_the_frame_independent_nade_trains_and_evaluates_as_a_model_of_songs():
    from paperlib.models.nade import NADE

    torch.manual_seed(0)
    nade = NADE(10, 8)
    train, valid = _songs(16, seed=5), _songs(4, seed=6)
    before = static_evaluate_songs(nade, valid).log_likelihood_per_frame()
    result = train_on_songs(nade, train, valid, SongTrainConfig(batch_size=4, lr=0.02, optimizer="adam", max_epochs=5))
    frames = torch.cat(valid).float()
    with torch.no_grad():
        assert result.best_valid_ll == pytest.approx(float(nade.log_prob(frames).mean()), abs=1e-5)
    assert result.best_valid_ll > before + 1.0
