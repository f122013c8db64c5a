"""Tokenisation, vocabularies and the corpus facts of shared/data/README.md."""

import pytest
import torch

from paperlib.data import EOS, Vocabulary, load_corpus, tokenize
from paperlib.data.corpora import DataError
from paperlib.experiments.dryrun.split_sizes import SPLIT_LINES, SPLIT_TOKENS
from paperlib.data.summary import corpus_summary

# types per split and vocabulary size with <eos>, from shared/data/README.md; the tokens and lines per split are
# paperlib.experiments.dryrun.split_sizes (the README's numbers too), checked here
FACTS = {
    "ptb": ({"train": 9_999, "valid": 6_021, "test": 6_048}, 10_000),
    "ptb_char": ({"train": 49, "valid": 49, "test": 47}, 50),
    "wikitext2": ({"train": 33_277, "valid": 13_776, "test": 14_142}, 33_278),
}


def test_tokenize_appends_eos_per_line_and_drops_a_trailing_blank_fragment():
    assert tokenize("a b\n\nc\n ") == ["a", "b", EOS, EOS, "c", EOS]
    assert tokenize("a b\nc") == ["a", "b", EOS, "c", EOS]


def test_vocabulary_orders_by_frequency_and_maps_unknowns_to_unk():
    from collections import Counter

    vocab = Vocabulary.from_counts(Counter({"b": 3, "a": 3, "<unk>": 1, "c": 5}))
    assert vocab.itos == [EOS, "c", "a", "b", "<unk>"]
    assert vocab.encode(["c", "zzz"]).tolist() == [1, 4]
    assert vocab.decode([2, 0]) == ["a", EOS]
    with pytest.raises(KeyError, match="no <unk>"):
        Vocabulary([EOS, "a"]).encode(["b"])


@pytest.mark.parametrize("name", sorted(FACTS))
def test_corpus_counts_and_vocabulary_match_the_reference(data_root, name):
    splits, vocab_size = FACTS[name]
    data = load_corpus(name, data_root)
    assert len(data.vocab) == vocab_size
    for split, types in splits.items():
        ids, tokens, lines = data.split(split), SPLIT_TOKENS[name][split], SPLIT_LINES[name][split]
        assert ids.numel() == tokens
        assert data.line_lengths[split].numel() == lines
        assert int(data.line_lengths[split].sum()) == tokens
        assert torch.unique(ids).numel() - 1 == types  # the reference counts types without <eos>
    # every valid/test type is a training type (no <unk> substitution needed)
    assert set(data.valid.tolist()) <= set(data.train.tolist())


def test_split_tokens_of_the_byte_stream_and_the_mapped_text_match_the_data(data_root):
    from paperlib.data.text import read_split_lines
    from paperlib.experiments.dynamic_evaluation.out_of_domain_text import map_words_to_chars
    from paperlib.experiments.language_models.lm_wt2_bytes import load_bytes

    stream = load_bytes("wikitext2", data_root)
    assert {s: stream.split(s).numel() for s in ("train", "valid", "test")} == SPLIT_TOKENS["wikitext2_bytes"]
    mapped = map_words_to_chars(read_split_lines("wikitext2", data_root, "test"), load_corpus("ptb_char", data_root).vocab)
    assert mapped.ids.numel() == SPLIT_TOKENS["wikitext2_as_ptb_char"]["test"]


def test_sentences_are_lines_ending_in_eos(data_root):
    data = load_corpus("ptb", data_root)
    sentences = data.sentences("valid")
    eos = data.vocab.stoi[EOS]
    assert len(sentences) == 3_370
    assert all(int(s[-1]) == eos and (s[:-1] != eos).all() for s in sentences)
    assert data.vocab.decode(sentences[0][:3]) == data.vocab.decode(data.valid[:3])


def test_truncating_ptb_sentences_to_35_tokens_removes_about_three_percent(data_root):
    """Melis thesis §5.7.2: truncation to 35 tokens reduces the number of tokens by 3%."""
    summary = corpus_summary("ptb", data_root, max_rank=10, sentence_max_len=35)
    for split in ("train", "valid"):
        assert 0.02 < summary["splits"][split]["truncated_token_share"] < 0.04


def test_loading_an_unfetched_corpus_says_how_to_fetch_it(tmp_path):
    with pytest.raises(DataError, match="paperlib data fetch ptb"):
        load_corpus("ptb", tmp_path)
