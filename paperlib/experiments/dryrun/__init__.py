"""The ``dryrun`` stage: every stage's paper profile built and stepped on fake tensors, and its GPU time estimated.

Modules: :mod:`.dryrun` (the stage: one adapter per experiment, counting parameters, memory and work) and
:mod:`.gpu_time` (GPU time from counted work). It holds no seed item; its ``results/dryrun.json`` gives the results
index its compute budget. To time each family's workload it imports every family: the one folder allowed to.
"""
