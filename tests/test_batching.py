"""Stream batching for truncated BPTT and padded sentence batches."""

import pytest
import torch

from paperlib.data import batchify, bptt_windows, num_windows, pad_sentences, sentence_batches, truncate_sentences


def test_batchify_makes_contiguous_batch_first_rows():
    stream = batchify(torch.arange(23), 4)  # [4, 5], 3 tokens dropped
    assert stream.shape == (4, 5)
    assert stream[1].tolist() == [5, 6, 7, 8, 9]


def test_bptt_windows_cover_every_target_once_and_targets_are_shifted_inputs():
    stream = batchify(torch.arange(40), 2)  # rows 0..19 and 20..39
    windows = list(bptt_windows(stream, 6))
    assert len(windows) == num_windows(stream, 6) == 4
    assert all(x.shape == y.shape and x.shape[0] == 2 for x, y in windows)
    targets = torch.cat([y for _, y in windows], dim=1)
    inputs = torch.cat([x for x, _ in windows], dim=1)
    assert torch.equal(targets, stream[:, 1:])
    assert torch.equal(inputs, stream[:, :-1])


def test_bptt_windows_resume_from_a_window_index():
    stream = batchify(torch.arange(100), 4)
    everything = list(bptt_windows(stream, 5))
    resumed = list(bptt_windows(stream, 5, start=2))
    assert len(resumed) == len(everything) - 2
    assert all(torch.equal(a[0], b[0]) for a, b in zip(everything[2:], resumed))


def test_bad_batching_arguments_are_value_errors():
    with pytest.raises(ValueError, match="batch_size"):
        batchify(torch.arange(10), 0)
    with pytest.raises(ValueError, match="too short"):
        batchify(torch.arange(3), 4)
    with pytest.raises(ValueError, match="bptt"):
        next(bptt_windows(torch.zeros(2, 5, dtype=torch.long), 0))


def test_padded_sentences_shift_targets_behind_an_eos_start_marker():
    eos = 0
    sents = [torch.tensor([5, 6, 7, eos]), torch.tensor([8, eos])]
    batch = pad_sentences(sents, eos_id=eos, pad_id=0)
    assert batch.targets.tolist() == [[5, 6, 7, eos], [8, eos, 0, 0]]
    assert batch.inputs.tolist() == [[eos, 5, 6, 7], [eos, 8, 0, 0]]
    assert batch.mask.tolist() == [[True] * 4, [True, True, False, False]]
    assert batch.lengths.tolist() == [4, 2]


def test_truncation_and_shuffled_batches_keep_every_sentence_once():
    sents = [torch.arange(n + 1) for n in range(10)]
    cut = truncate_sentences(sents, 4)
    assert max(len(s) for s in cut) == 4 and len(cut[2]) == 3
    gen = torch.Generator().manual_seed(0)
    batches = list(sentence_batches(cut, 3, eos_id=0, shuffle=True, generator=gen))
    assert [b.targets.shape[0] for b in batches] == [3, 3, 3, 1]
    assert sum(int(b.lengths.sum()) for b in batches) == sum(len(s) for s in cut)
