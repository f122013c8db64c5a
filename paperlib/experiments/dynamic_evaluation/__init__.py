"""Dynamic evaluation of word- and character-level language models (Krause chs. 4-6).

Stages: ``dyneval`` (:mod:`.dyneval`, with the chapter-5 studies in :mod:`.studies`), ``dyneval_char``
(:mod:`.dyneval_char`, with the out-of-domain text of :mod:`.out_of_domain_text`) and ``dyneval_transformer``
(:mod:`.dyneval_transformer`). Seed items: K-T4.1, K-T4.2, K-F5.1, K-T5.1 to K-T5.7 (``dyneval``); K-F3.2, K-F3.3,
K-T4.4, K-F5.2, K-T6.1, K-T6.4 (``dyneval_char``); K-T6.3 (``dyneval_transformer``).

Modules: :mod:`.claims` (the claims the results index reads for ``dyneval``), :mod:`.char_claims` (those of
``dyneval_char``) and :mod:`.transformer_claims` (that of ``dyneval_transformer``).
"""
