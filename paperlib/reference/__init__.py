"""The seeds' published numbers, one module per experiment family, to print beside ours (never used as results):
``language_models`` (Melis chs. 2 and 4), ``averaging`` (ch. 3), ``micmco`` (ch. 5), ``reverse_copy`` (§2.3.3),
``tuning`` (§2.B), ``dynamic_evaluation`` and ``byte_lm`` (Krause), ``word_generation`` (Schmidt & Hofmann).

Data only: no module imports anything of paperlib but another of these (and no torch), and this package's
``__init__`` imports none of them, so a stage's run cache, which keys on the bytes of every module the stage
imports, changes only with the numbers that stage reads.
"""
