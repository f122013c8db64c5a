"""The machinery every stage stands on, owned by no experiment family.

:mod:`.config` (``params.yaml``, profiles, where each schema lives), :mod:`.schemas` (the shared sections
``data`` and ``dryrun`` and the ``dataset_summary`` block of the ``data_summary`` stage), :mod:`.stage` (device,
precision and seeds at the start of a stage), :mod:`.runs` (running, resuming and reading back a stage's runs),
:mod:`.ladder` (what the scale-ladder stages share), :mod:`.code_hash` (which code made a run),
:mod:`.provenance` (what a result was made with) and :mod:`.claims` (the claim and verdict vocabulary every
family's ``claims.py`` uses). Runs no stage and holds no seed item.
"""
