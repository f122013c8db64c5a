"""Reverse copy: encoder/decoder LSTM against Mogrifier LSTM on reversing a sequence (Melis §2.3.3, Fig. 2.4).

Stage: ``reverse_copy`` (:mod:`.reverse_copy`). Seed item: M-F2.4. Modules: :mod:`.claims` (the claims the
results index reads).
"""
