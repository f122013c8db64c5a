"""Polyphonic music: an LSTM-NADE, statically and dynamically evaluated (Krause Table 4.6).

Stage: ``music`` (:mod:`.music`). Seed item: K-T4.6. Modules: :mod:`.claims` (the claims the results index reads).
"""
