"""MICMCO on synthetic data: rate vs data-fit frontiers of one uniform symbol (Melis §5.7.1, §5.A-§5.C).

Stages: ``micmco_synthetic`` (:mod:`.micmco_synthetic`) and ``micmco_synthetic_ladder`` (:mod:`.ladder`). Seed
items: Figs. 5.2-5.7, 5.15, 5.26, 5.27 (M-F5.2 to M-F5.7, M-F5.15, M-F5.26, M-F5.27).

Modules: :mod:`.design` (configurations, figures, ranges), :mod:`.trials` (model, training, evaluation),
:mod:`.studies` (settings, resumable studies), :mod:`.verdicts` (the stage's own claim verdicts) and :mod:`.claims`
(the claims the results index reads).
"""
