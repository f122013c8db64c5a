"""The sizes of the corpora's splits, for counting evaluation passes without reading the data
(:mod:`paperlib.experiments.dryrun.evaluation_plans`); the tests check every number against the data as the loaders
make it (``tests/test_data_text.py``)."""

# Token ids per split: words or characters with one <eos> per line (paperlib.data.load_corpus); the bytes of the
# files for the byte-level stream (paperlib.experiments.language_models.lm_wt2_bytes); WikiText-2's test text mapped
# into the PTB character vocabulary (paperlib.experiments.dynamic_evaluation.out_of_domain_text).
SPLIT_TOKENS: dict[str, dict[str, int]] = {
    "ptb": {"train": 929_589, "valid": 73_760, "test": 82_430},
    "ptb_char": {"train": 5_017_482, "valid": 393_042, "test": 442_423},
    "wikitext2": {"train": 2_088_628, "valid": 217_646, "test": 245_569},
    "wikitext2_bytes": {"train": 10_797_148, "valid": 1_121_681, "test": 1_256_449},
    "wikitext2_as_ptb_char": {"test": 1_177_707},
}
# Lines (sentences, each ending in <eos>) per split.
SPLIT_LINES: dict[str, dict[str, int]] = {
    "ptb": {"train": 42_068, "valid": 3_370, "test": 3_761},
    "ptb_char": {"train": 42_068, "valid": 3_370, "test": 3_761},
    "wikitext2": {"train": 36_718, "valid": 3_760, "test": 4_358},
}

__all__ = ["SPLIT_LINES", "SPLIT_TOKENS"]
