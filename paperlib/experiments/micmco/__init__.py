"""MICMCO: Monte Carlo objectives for latent-variable models (Melis ch. 5), in two halves with the same shape.

:mod:`.synthetic` (§5.7.1: one symbol of a uniform vocabulary) and :mod:`.ptb` (§5.7.2: sentence VAEs on Penn
Treebank, which reuses the synthetic half's estimators, studies and frontiers). Each half has its stage module,
its ``ladder.py`` and its ``claims.py``.
"""
