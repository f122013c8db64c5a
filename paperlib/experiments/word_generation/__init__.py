"""Unconditional word generation with deep state space models (Schmidt & Hofmann, Tables 1-3, Figs. 1-3).

Stages: ``word_generation`` (:mod:`.word_generation`) and ``word_generation_ladder`` (:mod:`.ladder`). Seed items:
S-T1, S-T2, S-T3, S-F1, S-F2, S-F3.

Modules: :mod:`.settings` (the schema), :mod:`.data` (splits, oracles, n-grams), :mod:`.training` (one run),
:mod:`.presentation` (tables) and :mod:`.claims` (the claims the results index reads).
"""
