"""MICMCO on Penn Treebank: sentence VAEs, rate vs data-fit frontiers and Table 5.1 (Melis §5.7.2, §5.B).

Stages: ``micmco_ptb`` (:mod:`.micmco_ptb`) and ``micmco_ptb_ladder`` (:mod:`.ladder`). Seed items: the PTB
figures of §5.7.2 and §5.B (M-F5.8 to M-F5.29) and Table 5.1 (M-T5.1).

Modules: :mod:`.design` (Table 5.1 layout, ranges, curves, settings), :mod:`.data` (sentences), :mod:`.trials`
(one trial), :mod:`.studies` (one resumable study per curve), :mod:`.stacked_trials` (trials x seeds of a curve as
one stacked model, resumable in chunks; the studies' and the ladder's ``stack_size``), :mod:`.analysis` (frontiers, hypervolumes, Table 5.1), :mod:`.verdicts` (the
stage's own verdicts) and :mod:`.claims` (the claims the results index reads). Shares the synthetic half's
machinery (:mod:`paperlib.experiments.micmco.synthetic`).
"""
