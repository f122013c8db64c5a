"""Two-tailed averaging against tail averaging and EMA on Penn Treebank, and on a synthetic landscape where
optimisation enters a new basin (Melis ch. 3).

Stages: ``averaging_ptb`` (:mod:`.averaging_ptb`; seed items M-F3.1, M-F3.3, M-F3.4, M-F3.5) and ``averaging_basin``
(:mod:`.averaging_basin`; M-F3.6). Modules: :mod:`.tail_lengths` (the optimal tail at every evaluation, which
``averaging_ptb``'s main run records for M-F3.1), :mod:`.claims` (the claims the results index reads).
"""
