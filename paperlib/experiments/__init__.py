"""The experiments: one folder per experiment family, turning ``params.yaml`` settings into results JSON.

Each folder holds the DVC stages of one family of the seed papers and calls the methods of the library
(:mod:`paperlib` outside this package); none holds method code that a user would import for their own work.
The compendium (:mod:`paperlib.compendium`) reads what these modules write; the library never imports them.

==========================  ==========================================================================================
folder                      stages (``dvc.yaml``)
==========================  ==========================================================================================
``common/``                 none: the machinery every stage stands on (``params.yaml`` and its shared schemas, the
                            start of a stage, runs, scale ladders, code hashes, provenance, the claim rules)
``language_models/``        ``lm_ptb``, ``lm_ptb_char``, ``lm_ptb_ablation``, ``lm_wt2_bytes``, ``tuning_ptb``
``averaging/``              ``averaging_ptb``, ``averaging_basin``
``dynamic_evaluation/``     ``dyneval``, ``dyneval_char``, ``dyneval_transformer``
``micmco/synthetic/``       ``micmco_synthetic``, ``micmco_synthetic_ladder``
``micmco/ptb/``             ``micmco_ptb``, ``micmco_ptb_ladder``
``word_generation/``        ``word_generation``, ``word_generation_ladder``
``reverse_copy/``           ``reverse_copy``
``music/``                  ``music``
``dryrun/``                 ``dryrun`` (times every family's paper workload, so it alone imports every family)
==========================  ==========================================================================================

Naming rule, the same in every family: a family folder has an ``__init__.py`` that only documents it (its stages,
seed items and modules; importing it runs nothing), a ``claims.py`` holding the claims the results index reads for
the family, one entry module per stage named after the stage it runs (``lm_ptb.py`` also runs ``lm_ptb_char`` and
``lm_ptb_ablation``, which share its code), except that a scale-ladder stage's module is ``ladder.py``, and further
modules named by what they hold (``settings.py``, ``studies.py``, ``verdicts.py``, ...). A family with two halves
(``micmco/``: the synthetic task and Penn Treebank) applies the rule to each sub-package. A family imports only
``common/``, the library and :mod:`paperlib.reference`, never another family (``tests/test_layout.py`` checks it).
"""
