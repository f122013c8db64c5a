"""Data layer: corpus registry and verified fetching, tokenisation, batching, piano rolls, synthetic sets."""

from paperlib.data.batching import (
    SentenceBatch,
    batchify,
    bptt_windows,
    num_windows,
    pad_sentences,
    sentence_batches,
    truncate_sentences,
)
from paperlib.data.corpora import (CORPORA, MIRROR_ENV, Corpus, CorpusFile, CorpusFolder, DataError, fetch_corpus,
                                   get_corpus, is_fetched, pinned_checksums)
from paperlib.data.music import NOTES, PianoRolls, load_piano_rolls, pad_songs, piano_roll_summary
from paperlib.data.synthetic import ReverseCopyData, reverse_copy, uniform_symbols
from paperlib.data.text import EOS, SPLITS, UNK, TokenizedCorpus, Vocabulary, load_corpus, tokenize
from paperlib.data.wordlist import END_OF_WORD, WordList, english_word_list, split_tokens, split_types

__all__ = [
    "CORPORA", "EOS", "END_OF_WORD", "MIRROR_ENV", "NOTES", "SPLITS", "UNK", "Corpus", "CorpusFile", "CorpusFolder",
    "DataError", "PianoRolls", "ReverseCopyData", "SentenceBatch", "TokenizedCorpus", "Vocabulary", "WordList",
    "batchify", "bptt_windows", "english_word_list", "fetch_corpus", "get_corpus", "is_fetched", "load_corpus",
    "load_piano_rolls", "num_windows", "pad_sentences", "pad_songs", "piano_roll_summary", "reverse_copy",
    "sentence_batches", "split_tokens", "split_types", "tokenize", "truncate_sentences", "uniform_symbols",
]
