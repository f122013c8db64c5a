"""The music stage's core on constructed songs: per-seed static rows, tuned dynamic rows, runs read back."""

import pytest
import torch

from paperlib.data.music import PianoRolls
from paperlib.experiments.music.music import MusicParams, _train_or_load, corpus_results


def _rolls() -> PianoRolls:
    generator = torch.Generator().manual_seed(0)
    songs = {}
    for split, count in (("train", 8), ("valid", 3), ("test", 3)):
        songs[split] = []
        for index in range(count):
            song = torch.zeros(12, 88, dtype=torch.bool)
            for t in range(12):  # a repeating 3-frame motif in a key of its own, with a random extra note
                song[t, 40 + index % 5 + 4 * (t % 3)] = True
                song[t, int(torch.randint(30, 60, (1,), generator=generator))] = True
            songs[split].append(song)
    return PianoRolls("jsb_chorales", "a beat", songs, {s: [str(i) for i in range(len(v))] for s, v in songs.items()})


def _settings(**changes) -> MusicParams:
    settings = dict(
        corpora=["jsb_chorales"],
        model={"jsb_chorales": {"embedding_size": 8, "hidden_size": 8, "num_layers": 1, "nade_size": 6}},
        train={"jsb_chorales": {"batch_size": 4, "lr": 0.01, "optimizer": "adam", "max_epochs": 3}},
        seeds=[0, 1],
        dyneval={"segment_len": 3, "sgd_lr": [0.01, 0.1], "global_rms_lr": [0.0001, 0.001],
                 "gradient_batch_size": 4, "gradient_max_batches": None},
    )
    return MusicParams(**{**settings, **changes})


def test_corpus_results_have_static_rows_per_seed_and_tuned_dynamic_rows(tmp_path):
    rolls, settings = _rolls(), _settings()
    train_model = _train_or_load(settings, "jsb_chorales", rolls, tmp_path, torch.device("cpu"), False, lambda m: None)
    result = corpus_results(rolls, settings, train_model, lambda m: None)
    assert [s["seed"] for s in result["seeds"]] == [0, 1]
    assert result["seeds"][0]["test_ll"] != result["seeds"][1]["test_ll"]
    seed_lls = [s["test_ll"] for s in result["seeds"]]
    assert result["static_test_mean"] == pytest.approx(sum(seed_lls) / 2)
    rows = result["rows"]
    assert rows["sgd"]["lr"] in (0.01, 0.1) and len(rows["sgd"]["trials"]) == 2
    for key in ("static", "sgd", "global_rms"):
        songs = rows[key]["test_song_ll"]
        assert len(songs) == 3 and rows[key]["test_ll"] == pytest.approx(sum(songs) / 3)  # equal lengths: mean of songs
    assert rows["sgd"]["valid_ll"] == max(t["valid_ll"] for t in rows["sgd"]["trials"])
    assert result["thesis"]["static"] == -5.28 and "nade" not in rows
    again = corpus_results(rolls, settings, train_model, lambda m: None)  # the finished runs are read back
    assert again["seeds"] == result["seeds"] and again["rows"]["static"] == rows["static"]


def test_music_settings_are_checked():
    with pytest.raises(ValueError, match="corpora must be among"):
        _settings(corpora=["ptb"])
    with pytest.raises(ValueError, match=r"model.jsb_chorales: needs keys"):
        _settings(model={"jsb_chorales": {"hidden_size": 8}})
    with pytest.raises(ValueError, match="train.jsb_chorales"):
        _settings(train={"jsb_chorales": {"batch": 4}})
    with pytest.raises(ValueError, match="dyneval.sgd_lr"):
        _settings(dyneval={"segment_len": 3, "sgd_lr": [], "global_rms_lr": [0.1], "gradient_batch_size": 4,
                           "gradient_max_batches": None})


def test_frame_nade_row_is_trained_when_asked_and_lies_below_its_untrained_start(tmp_path):
    rolls = _rolls()
    settings = _settings(seeds=[0], frame_nade={"jsb_chorales": {"hidden_size": 6, "train": {
        "batch_size": 4, "lr": 0.02, "optimizer": "adam", "max_epochs": 4}}})
    train_model = _train_or_load(settings, "jsb_chorales", rolls, tmp_path, torch.device("cpu"), False, lambda m: None)
    rows = corpus_results(rolls, settings, train_model, lambda m: None)["rows"]
    assert rows["nade"]["parameters"] == 2 * 88 * 6 + 6 + 88
    from paperlib.dyneval.songs import static_evaluate_songs
    from paperlib.models.nade import NADE

    torch.manual_seed(0)
    untrained = static_evaluate_songs(NADE(88, 6), rolls.split("test")).log_likelihood_per_frame()
    assert rows["nade"]["test_ll"] > untrained + 5.0
    with pytest.raises(ValueError, match="frame_nade.nottingham: not one of corpora"):
        _settings(frame_nade={"nottingham": {"hidden_size": 6, "train": {}}})


def test_thesis_column_of_table_4_6_is_read_by_corpus_name():
    from paperlib.reference.music import table_4_6

    assert table_4_6("nottingham")["global_rms"] == -1.27 and table_4_6("jsb_chorales")["nade"] == -7.19
    with pytest.raises(ValueError, match="Table 4.6 has no corpus 'ptb'"):
        table_4_6("ptb")
