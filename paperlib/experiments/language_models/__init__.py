"""Recurrent language models: the LSTM / Mogrifier / RLSTM comparisons, tuning and the byte-level model.

Stages: ``lm_ptb``, ``lm_ptb_char`` and ``lm_ptb_ablation`` (:mod:`.lm_ptb`), ``lm_wt2_bytes``
(:mod:`.lm_wt2_bytes`), ``tuning_ptb`` (:mod:`.tuning_ptb`). Seed items: Melis Tables 2.1, 2.2, 4.1, 4.2
(M-T2.1, M-T2.2, M-T4.1, M-T4.2), the ablation Table 2.3 and Fig. 2.3 (M-T2.3, M-F2.3), the tuning Figs. 2.5/2.6
(M-F2.5, M-F2.6) and Krause's byte-level Table 3.3 (K-T3.3).

Modules: :mod:`.settings` (the schema the LM stages share), :mod:`.recipe_search` (``paperlib recipe``: cpu
training recipes chosen by search, no stage of its own) and :mod:`.claims` (the claims the results index reads).
"""
