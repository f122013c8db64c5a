"""The experiments: one module per DVC stage, turning ``params.yaml`` settings into results JSON.

Each module names its stage (``lm_ptb`` also runs ``lm_ptb_char`` and ``lm_ptb_ablation``) and calls the methods
of the library (:mod:`paperlib` outside this package); none holds method code that a user would import for their
own work. The base every stage stands on lives here too: :mod:`~paperlib.experiments.config` (``params.yaml``,
profiles, schemas), :mod:`~paperlib.experiments.stage` (device and precision at the start of a stage) and
:mod:`~paperlib.experiments.provenance` (what a result was made with, atomic JSON writes). The compendium
(:mod:`paperlib.compendium`) reads what these modules write; the library never imports them.
"""
