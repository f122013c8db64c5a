"""Two-tailed averaging against tail averaging and EMA on Penn Treebank (Melis ch. 3).

Stage: ``averaging_ptb`` (:mod:`.averaging_ptb`). Seed items: M-F3.1, M-F3.3, M-F3.4, M-F3.5, M-F3.6.
Modules: :mod:`.claims` (the claims the results index reads).
"""
