"""Piano rolls of JSB Chorales and Nottingham: frames, grid, split, summary and clear errors on bad files."""

import json
from pathlib import Path

import pretty_midi
import pytest
import torch

from paperlib.data.corpora import DataError
from paperlib.data.music import (NOTES, PianoRolls, load_piano_rolls, midi_piano_roll, nottingham_split, piano_roll,
                                 piano_roll_summary, read_jsb_chorales, read_nottingham)

RESOLUTION = 480  # ticks per quarter note in the constructed files


def write_midi(path: Path, tracks: list[list[tuple[int, int, int]]], resolution: int = RESOLUTION) -> Path:
    """A MIDI file at 120 bpm with one instrument per track; notes as (pitch, start tick, end tick)."""
    midi = pretty_midi.PrettyMIDI(resolution=resolution, initial_tempo=120.0)
    for notes in tracks:
        instrument = pretty_midi.Instrument(program=0)
        for pitch, start, end in notes:
            instrument.notes.append(pretty_midi.Note(velocity=80, pitch=pitch, start=midi.tick_to_time(start),
                                                     end=midi.tick_to_time(end)))
        midi.instruments.append(instrument)
    midi.write(str(path))
    return path


def test_piano_roll_marks_pitch_21_in_column_0_and_108_in_column_87():
    roll = piano_roll([[21, 60], [], [108]], "song")
    assert roll.shape == (3, NOTES) and roll.dtype == torch.bool
    assert roll.nonzero().tolist() == [[0, 0], [0, 39], [2, 87]]


@pytest.mark.parametrize("pitch", [20, 109, "C4"])
def test_piano_roll_rejects_pitches_off_the_keyboard_naming_the_song(pitch):
    with pytest.raises(DataError, match=r"chorale 7: frame 1 (has pitch|holds)"):
        piano_roll([[60], [pitch]], "chorale 7")


def test_jsb_json_is_read_per_split_and_bad_files_name_themselves(tmp_path):
    good = tmp_path / "jsb.json"
    good.write_text(json.dumps({"train": [[[60, 64], [62]]], "valid": [[[]], [[21]]], "test": []}))
    songs, titles = read_jsb_chorales(good)
    assert [len(songs[s]) for s in ("train", "valid", "test")] == [1, 2, 0]
    assert songs["train"][0].nonzero().tolist() == [[0, 39], [0, 43], [1, 41]]
    assert titles["valid"] == ["valid/0", "valid/1"]
    broken = tmp_path / "broken.json"
    broken.write_text('{"train": [[[60]]')
    with pytest.raises(DataError, match="broken.json: not a readable JSB Chorales JSON"):
        read_jsb_chorales(broken)
    off = tmp_path / "off.json"
    off.write_text(json.dumps({"train": [[[60]], [[60], [120]]], "valid": [], "test": []}))
    with pytest.raises(DataError, match=r"off.json \(train/1\): frame 1 has pitch 120"):
        read_jsb_chorales(off)


def test_midi_roll_samples_the_pitches_sounding_at_each_eighth_note(tmp_path):
    eighth = RESOLUTION // 2
    melody = [(72, 0, 2 * eighth), (74, 2 * eighth, 3 * eighth),  # a quarter note, then an eighth
              (76, 3 * eighth + 60, 3 * eighth + 180)]  # a sixteenth off the grid: between two grid points
    chords = [(48, 0, 4 * eighth), (52, 0, 4 * eighth)]
    path = write_midi(tmp_path / "tune.mid", [melody, chords])
    roll = midi_piano_roll(path)
    expected = torch.zeros(4, NOTES, dtype=torch.bool)
    for pitch, frames in ((72, [0, 1]), (74, [2]), (48, [0, 1, 2, 3]), (52, [0, 1, 2, 3])):
        expected[frames, pitch - 21] = True
    assert torch.equal(roll, expected)
    quarters = midi_piano_roll(path, frames_per_quarter=1)
    assert quarters.shape[0] == 2 and quarters[1].nonzero().flatten().tolist() == [48 - 21, 52 - 21, 74 - 21]


def test_corrupt_midi_file_is_a_clear_error_naming_the_file(tmp_path):
    path = write_midi(tmp_path / "good.mid", [[(60, 0, 480)]])
    broken = tmp_path / "broken.mid"
    broken.write_bytes(path.read_bytes()[:30])  # truncated inside the track
    with pytest.raises(DataError, match="broken.mid: not a readable MIDI file"):
        midi_piano_roll(broken)
    garbage = tmp_path / "garbage.mid"
    garbage.write_bytes(b"this is not MIDI at all")
    with pytest.raises(DataError, match="garbage.mid: not a readable MIDI file"):
        midi_piano_roll(garbage)


@pytest.mark.parametrize("pitch", [12, 115])
def test_midi_pitch_off_the_keyboard_is_a_clear_error_naming_the_file(tmp_path, pitch):
    path = write_midi(tmp_path / "low.mid", [[(60, 0, 480)], [(pitch, 0, 480)]])
    with pytest.raises(DataError, match=f"low.mid: a note has pitch {pitch}, outside"):
        midi_piano_roll(path)


def test_nottingham_split_is_deterministic_and_near_67_16_16_percent():
    names = [f"tune{i}.mid" for i in range(20_000)]
    splits = [nottingham_split(n) for n in names]
    assert splits == [nottingham_split(n) for n in names]
    shares = {s: splits.count(s) / len(names) for s in ("train", "valid", "test")}
    assert shares["train"] == pytest.approx(0.67, abs=0.01)
    assert shares["valid"] == pytest.approx(0.165, abs=0.01) and shares["test"] == pytest.approx(0.165, abs=0.01)


def test_nottingham_folder_is_read_by_split_in_name_order(tmp_path):
    for index in range(12):
        write_midi(tmp_path / f"t{index:02d}.mid", [[(60 + index, 0, 480 * (1 + index % 3))]])
    songs, titles = read_nottingham(tmp_path)
    for split in ("train", "valid", "test"):
        assert titles[split] == sorted(titles[split])
        for title, song in zip(titles[split], songs[split]):
            index = int(title[1:3])
            assert nottingham_split(title) == split
            assert song.shape == (2 * (1 + index % 3), NOTES) and song[:, 60 + index - 21].all()
    assert sum(len(t) for t in titles.values()) == 12


def test_summary_counts_songs_frames_and_notes_per_frame():
    songs = {"train": [piano_roll([[60, 64, 67], []], "a"), piano_roll([[60]], "b")],
             "valid": [piano_roll([[21], [22], [23], [24, 25]], "c")], "test": []}
    rolls = PianoRolls("tiny", "a beat", songs, {s: [str(i) for i in range(len(v))] for s, v in songs.items()})
    splits = piano_roll_summary(rolls)["splits"]
    assert splits["train"] == {"songs": 2, "frames": 3, "mean_song_frames": 1.5, "mean_notes_per_frame": 4 / 3}
    assert splits["valid"]["mean_notes_per_frame"] == 5 / 4
    assert splits["test"] == {"songs": 0, "frames": 0, "mean_song_frames": 0.0, "mean_notes_per_frame": 0.0}


def test_jsb_chorales_from_the_mirror_have_the_manifest_counts(mirror, manifest, tmp_path):
    from paperlib.data.corpora import fetch_corpus

    fetch_corpus("jsb_chorales", tmp_path, mirror=mirror)
    rolls = load_piano_rolls("jsb_chorales", tmp_path)
    splits = piano_roll_summary(rolls)["splits"]
    counts = manifest["music"]["jsb_chorales"]["splits"]
    for split in ("train", "valid", "test"):
        assert (splits[split]["songs"], splits[split]["frames"]) == (counts[split]["sequences"],
                                                                    counts[split]["frames"])


def test_training_shapes_the_dry_run_reads_are_those_of_the_data(mirror, tmp_path):
    from paperlib.data.corpora import fetch_corpus
    from paperlib.data.music import TRAIN_SHAPES

    for corpus in TRAIN_SHAPES:
        fetch_corpus(corpus, tmp_path, mirror=mirror)
        train = load_piano_rolls(corpus, tmp_path).split("train")
        assert TRAIN_SHAPES[corpus] == (len(train), max(song.shape[0] for song in train)), corpus


def test_loading_an_unfetched_or_non_music_corpus_says_what_to_do(tmp_path):
    with pytest.raises(DataError, match="paperlib data fetch nottingham"):
        load_piano_rolls("nottingham", tmp_path)
    with pytest.raises(DataError, match="not a music corpus"):
        load_piano_rolls("ptb", tmp_path)


def test_dataset_summary_of_a_music_corpus_lists_songs_frames_and_notes(mirror, tmp_path):
    from paperlib.data.corpora import fetch_corpus
    from paperlib.data.summary import corpus_summary

    fetch_corpus("jsb_chorales", tmp_path, mirror=mirror)
    summary = corpus_summary("jsb_chorales", tmp_path, max_rank=10, sentence_max_len=35)
    assert summary["level"] == "piano_roll" and summary["splits"]["test"]["songs"] == 77
    assert 3.0 < summary["splits"]["train"]["mean_notes_per_frame"] <= 4.0  # four voices, some held or silent
