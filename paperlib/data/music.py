"""Polyphonic music as piano rolls: JSB Chorales and Nottingham (Krause thesis §4.8, Table 4.6).

A song is a binary piano roll ``[T, 88]``: frame t, column k is 1 when MIDI pitch 21 + k (the 88 piano keys,
A0 to C8, §4.8) sounds at frame t. The corpora are fetched and verified by :mod:`paperlib.data.corpora`.

* **JSB Chorales** ships as frames at quarter-note resolution with the split of Boulanger-Lewandowski et al.
  (2012), 229 / 76 / 77 chorales, the data and split of the thesis' column; it is read as given.
* **Nottingham** ships as 1,034 MIDI files without a split, so both the split and the frame rate are ours.
  *Split:* a file goes to train, valid or test by the first 8 bytes of the sha256 of its name, read as a
  fraction u in [0, 1): train when u < 0.67, valid when u < 0.835, test otherwise (Boulanger-Lewandowski's
  proportions, about 67 / 16.5 / 16.5 %); adding or removing a file never moves another. *Frame rate:* two
  frames per quarter note (eighth notes), counted in MIDI ticks, so independent of tempo. The tunes are
  mostly jigs and reels in 6/8, 4/4 and 2/4 whose shortest common value is the eighth note: 98.6 % of the
  356,269 note onsets lie on the eighth-note grid (99.5 % on the sixteenth). A quarter-note grid, JSB's,
  would drop every second melody note; a sixteenth-note grid would double the sequence length for 0.9 %
  more onsets. The split gives 664 / 179 / 191 tunes.
  A frame holds the pitches sounding at its grid point (a note is on in frame k when it starts at or before
  tick k·step and ends after it), the same sampling as JSB's quarter-note grid; a note shorter than an
  eighth that starts off the grid and ends before the next grid point is not seen. Both tracks (melody and
  chords) are merged; drum tracks, of which the corpus has none, would be skipped as they carry no pitch.

A file that cannot be parsed, or a pitch outside 21-108, raises :class:`~paperlib.data.corpora.DataError`
naming the file.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from paperlib.data.corpora import Corpus, DataError, corpus_dir, get_corpus, is_fetched
from paperlib.data.text import SPLITS

LOWEST_PITCH = 21  # A0
HIGHEST_PITCH = 108  # C8
NOTES = HIGHEST_PITCH - LOWEST_PITCH + 1  # 88

NOTTINGHAM_FRAMES_PER_QUARTER = 2
NOTTINGHAM_SPLIT = (("train", 0.67), ("valid", 0.835), ("test", 1.0))  # cumulative upper bounds of u
# Training songs and the longest training song (frames) per corpus, as loaded here; the paper-scale dry run
# (paperlib.experiments.dryrun) sizes its batches from them without reading the data (tests check them on the data).
TRAIN_SHAPES = {"jsb_chorales": (229, 129), "nottingham": (664, 1806)}
FRAMES = {
    "jsb_chorales": "one quarter note (as shipped)",
    "nottingham": f"1/{NOTTINGHAM_FRAMES_PER_QUARTER} of a quarter note (an eighth note), counted in MIDI ticks",
}


@dataclass
class PianoRolls:
    """The songs of a corpus per split, each a bool piano roll ``[T, 88]``, with the songs' names."""

    name: str
    frame: str  # what one frame is
    songs: dict[str, list[Tensor]]
    titles: dict[str, list[str]]

    def split(self, name: str) -> list[Tensor]:
        if name not in SPLITS:
            raise ValueError(f"unknown split {name!r}; valid splits: {', '.join(SPLITS)}")
        return self.songs[name]


def piano_roll(frames: Sequence[Sequence[int]], source: str) -> Tensor:
    """Bool piano roll ``[T, 88]`` from frames given as lists of sounding MIDI pitches (``[]``: silence).

    ``source`` names the song in the error raised for a pitch outside 21-108 or a non-integer pitch.
    """
    roll = torch.zeros(len(frames), NOTES, dtype=torch.bool)
    for t, pitches in enumerate(frames):
        for pitch in pitches:
            if isinstance(pitch, float) and pitch.is_integer():
                pitch = int(pitch)
            if isinstance(pitch, bool) or not isinstance(pitch, int):
                raise DataError(f"{source}: frame {t} holds {pitch!r}, not a MIDI pitch")
            if not LOWEST_PITCH <= pitch <= HIGHEST_PITCH:
                raise DataError(f"{source}: frame {t} has pitch {pitch}, outside the piano's "
                                f"{LOWEST_PITCH}-{HIGHEST_PITCH}")
            roll[t, pitch - LOWEST_PITCH] = True
    return roll


def read_jsb_chorales(path: str | os.PathLike) -> tuple[dict[str, list[Tensor]], dict[str, list[str]]]:
    """Songs and names per split of the JSB Chorales JSON (``{"train": [chorale, ...], ...}``)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DataError(f"{path}: not a readable JSB Chorales JSON file ({err})") from None
    if not isinstance(data, dict) or any(not isinstance(data.get(s), list) for s in SPLITS):
        raise DataError(f"{path}: expected a JSON object with lists under {', '.join(SPLITS)}")
    songs, titles = {}, {}
    for split in SPLITS:
        titles[split] = [f"{split}/{index}" for index in range(len(data[split]))]
        songs[split] = [piano_roll(chorale, f"{path} ({title})") for chorale, title in zip(data[split], titles[split])]
    return songs, titles


def midi_piano_roll(path: str | os.PathLike, frames_per_quarter: int = NOTTINGHAM_FRAMES_PER_QUARTER) -> Tensor:
    """Bool piano roll ``[T, 88]`` of a MIDI file on a grid of ``frames_per_quarter`` frames per quarter note.

    Parsed with ``pretty_midi``; frame k holds the pitches sounding at tick k·step (step = resolution /
    frames_per_quarter), and T covers the last note's end. See the module docstring for the choice of grid.
    """
    import pretty_midi

    if not isinstance(frames_per_quarter, int) or frames_per_quarter < 1:
        raise ValueError(f"frames_per_quarter must be a positive integer, got {frames_per_quarter!r}")
    path = Path(path)
    try:
        with warnings.catch_warnings():
            # the corpus' files keep their tempo and key events in the chords track, which pretty_midi warns of;
            # every file has one constant tempo, so the tick grid below is unaffected
            warnings.simplefilter("ignore", RuntimeWarning)
            midi = pretty_midi.PrettyMIDI(str(path))
    except Exception as err:  # mido and pretty_midi raise many types (OSError, EOFError, ValueError, KeyError...)
        raise DataError(f"{path}: not a readable MIDI file ({type(err).__name__}: {err})") from None
    step = midi.resolution / frames_per_quarter
    notes = [(midi.time_to_tick(n.start), midi.time_to_tick(n.end), n.pitch)
             for instrument in midi.instruments if not instrument.is_drum for n in instrument.notes]
    if not notes:
        raise DataError(f"{path}: the MIDI file holds no notes")
    end = max(stop for _, stop, _ in notes)
    roll = torch.zeros(math.ceil(end / step), NOTES, dtype=torch.bool)
    for start, stop, pitch in notes:
        if not LOWEST_PITCH <= pitch <= HIGHEST_PITCH:
            raise DataError(f"{path}: a note has pitch {pitch}, outside the piano's {LOWEST_PITCH}-{HIGHEST_PITCH}")
        first, last = math.ceil(start / step), math.ceil(stop / step)  # frames k with start <= k·step < stop
        roll[first:last, pitch - LOWEST_PITCH] = True
    return roll


def nottingham_split(file_name: str) -> str:
    """The split of a Nottingham file: u = first 8 bytes of sha256(name) / 2^64; train < 0.67 <= valid < 0.835."""
    u = int.from_bytes(hashlib.sha256(file_name.encode("utf-8")).digest()[:8], "big") / 2.0**64
    return next(split for split, bound in NOTTINGHAM_SPLIT if u < bound)


def read_nottingham(folder: str | os.PathLike) -> tuple[dict[str, list[Tensor]], dict[str, list[str]]]:
    """Songs and file names per split of a folder of Nottingham MIDI files (files in name order)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(f"{folder} is not a folder of MIDI files")
    songs: dict[str, list[Tensor]] = {s: [] for s in SPLITS}
    titles: dict[str, list[str]] = {s: [] for s in SPLITS}
    for path in sorted(folder.glob("*.mid")):
        split = nottingham_split(path.name)
        songs[split].append(midi_piano_roll(path))
        titles[split].append(path.name)
    return songs, titles


def load_piano_rolls(corpus: Corpus | str, root: str | os.PathLike = "data/raw", verify: bool = True) -> PianoRolls:
    """The songs of a fetched music corpus (``jsb_chorales`` or ``nottingham``) as bool piano rolls per split."""
    corpus = get_corpus(corpus) if isinstance(corpus, str) else corpus
    if corpus.name not in FRAMES:
        raise DataError(f"{corpus.name} is not a music corpus; music corpora: {', '.join(FRAMES)}")
    if verify and not is_fetched(corpus, root):
        raise DataError(f"{corpus.name} is missing or fails its checksum under {Path(root).resolve()}: "
                        f"run `paperlib data fetch {corpus.name}`")
    folder = corpus_dir(corpus.name, root)
    if corpus.name == "jsb_chorales":
        songs, titles = read_jsb_chorales(folder / corpus.files[0].name)
    else:
        songs, titles = read_nottingham(folder / corpus.folders[0].name)
    return PianoRolls(corpus.name, FRAMES[corpus.name], songs, titles)


def piano_roll_summary(rolls: PianoRolls) -> dict[str, Any]:
    """Songs, frames, mean frames per song and mean notes per frame (over all frames) of every split."""
    splits = {}
    for split in SPLITS:
        songs = rolls.split(split)
        frames = sum(song.shape[0] for song in songs)
        notes = sum(int(song.sum()) for song in songs)
        splits[split] = {
            "songs": len(songs),
            "frames": frames,
            "mean_song_frames": frames / len(songs) if songs else 0.0,
            "mean_notes_per_frame": notes / frames if frames else 0.0,
        }
    return {"name": rolls.name, "frame": rolls.frame, "notes": NOTES, "splits": splits}


def pad_songs(songs: Sequence[Tensor], dtype: torch.dtype = torch.float32) -> tuple[Tensor, Tensor]:
    """Songs ``[T_i, N]`` (N = 88 for the piano) as one batch ``[B, max T_i, N]``, silent after each song's end,
    and their lengths [B].

    Models that read frames in order never see the padding before a song's last real frame; losses
    average over the real frames only (:func:`paperlib.models.rnn_nade.frame_mean_log_likelihood`).
    """
    if not songs:
        raise ValueError("pad_songs needs at least one song")
    notes = songs[0].shape[-1]
    if any(song.dim() != 2 or song.shape[1] != notes or song.shape[0] < 1 for song in songs):
        raise ValueError(f"every song must be a non-empty [T, N] piano roll with one N, got shapes "
                         f"{[tuple(s.shape) for s in songs]}")
    lengths = torch.tensor([song.shape[0] for song in songs])
    batch = torch.zeros(len(songs), int(lengths.max()), notes, dtype=dtype)
    for row, song in enumerate(songs):
        batch[row, : song.shape[0]] = song.to(dtype)
    return batch, lengths
