"""Dynamic evaluation: adapting a language model to the test sequence by gradient descent (Krause thesis ch. 4-6).

The test sequence x_{1:T} is cut into segments s_1, ..., s_M of ``segment_len`` tokens (eq. 4.2).
Segment s_i is scored with the current local weights θ_l^{i-1} (θ_l^0 = θ_g, the trained weights)
*before* the model is updated on it; the gradient ∇L(s_i) is backpropagated to the start of s_i only
(truncated BPTT with the hidden state carried across segments, Algorithm 1) and then one update rule
maps θ_l^{i-1} to θ_l^i (Figure 4.1). Every token is therefore predicted by weights that have only seen
the tokens before it, and the per-token losses form a valid log-probability of the sequence (§4.3).

Update rules (``rule``):

* ``sgd``: θ ← θ - η ∇L(s_i) + λ(θ_g - θ) (eq. 4.3; eq. 2.48, Mikolov's "traditional" dynamic
  evaluation, with ``segment_len=1`` and ``decay=0``); with ``momentum`` > 0 the gradient step is SGD
  with classical momentum (eqs. 5.10-5.11), the §5.4.1 baseline.
* ``global_rms``: θ ← θ - η ∇L(s_i) / (√MS_g + ε) + λ(θ_g - θ) ⊙ r, where MS_g are mean squared
  gradients over training batches (eq. 4.4, :func:`mean_squared_gradients`) and r = 1 (eq. 4.5) or,
  with ``rms_decay=True`` (the default), r = RMS_norm = √MS_g / avg(√MS_g) clipped at 1/λ
  (eqs. 4.6-4.7); avg is the mean over parameter tensors of each tensor's mean √MS_g, as in the
  author's released code (``rms_average="tensors"``), or over all adapted elements (``"elements"``).
* ``rmsprop`` and ``adam``: ``torch.optim.RMSprop`` / ``torch.optim.Adam`` on the local weights, the
  §5.4.2-5.4.3 baselines (Krause used PyTorch's implementations, whose ε sits outside the square root
  as in eq. 5.12 rather than inside as in eqs. 2.52/2.57). ``alpha`` is the averaging constant α of the
  squared gradients (β2) and ``momentum`` is μ (β1 for Adam). A decay prior λ may be added to any rule.
* ``nonlocal_rmsprop``: RMSprop whose running mean squared gradient is fed by a second, parallel model
  dynamically evaluated (with the same RMSprop step) on an independent ``statistics_tokens`` stream
  instead of by the evaluation sequence (§5.4.4.2, Table 5.7; :class:`NonLocalRMSpropRule`).

:func:`probe_updates` repeats the forward pass of probed time steps after their segment's update, and
:func:`related_words` compares the resulting change of log-probabilities of the words nearest to the
observed one in embedding space with the vocabulary's median (§5.3, Table 5.2).

Sparse dynamic evaluation (§4.6, ``sparse_units=H``) adapts only an H×H matrix M, initialised to zero,
acting on H of the hidden units of a recurrent layer as h'_t = h_t + M h_t (eq. 4.8); h'_t replaces h_t in
the next time step and in the layer's output (:class:`RecurrentSparseAdaptation`, by default on the last
layer of an LSTM, RLSTM, Mogrifier or mLSTM LM). The layer then runs its per-step autograd form instead of
its fused recurrence (the same function). ``sparse_mode="output"`` is an ablation that departs from
eq. (4.8): M acts on the final features only (the input of the output embedding,
:class:`DecoderInputAdaptation`), so it changes the predictions but not the recurrent dynamics; it works
for any LM with a ``decoder``, Transformers included.

Loss scale: L(s_i) is the *mean* cross-entropy over the tokens of s_i (the public implementation of the
thesis does the same); the scale only reparameterises η, and MS_g is computed with the same reduction
over each training batch, so a larger batch gives smaller MS_g, as §4.5 notes.

Beyond the seeds, many independent streams are dynamically evaluated at once, each with its own fast
weights: ``tokens`` of shape [S, T] are evaluated with ``torch.func.vmap`` over ``torch.func.grad`` of a
``functional_call`` of the model, with per-stream stacked weights, so one forward/backward serves all
streams. paperlib's LSTM and RLSTM layers use custom autograd Functions that functorch cannot transform;
during batched evaluation (only) a plain/capped LSTM layer runs a vmappable LSTM scan (:class:`~paperlib.models.transformable.LSTMScan`,
an autograd Function with ``setup_context`` whose backward takes the recurrent weight gradient in one
matmul) and other layers their per-step autograd references (``lstm_step``, ``rlstm_step``,
``Mogrifier``); all compute the same function. ``torch.nn.GRU`` has no batching rule, so a one-layer GRU
runs its step-by-step form (:func:`~paperlib.models.transformable.gru_forward`) there. Sparse dynamic
evaluation batches natively without vmap (the base weights are shared, every batch row multiplies its h by its own M). On a CPU, full-parameter batching is limited by the
memory traffic of S weight copies (``benchmarks/dyneval.py``); sparse batching scales.

The package, one module per part, in the order of the thesis' chapter 4: :mod:`.core` (the result of an
evaluation, which parameters adapt), :mod:`.rules` (the update rules), :mod:`.sparse` (sparse adaptation, eq. 4.8),
:mod:`.gradients` (a segment's gradients, direct or vmapped, and MS_g), :mod:`.evaluate` (dynamic and static
evaluation), :mod:`.songs` (the same rules on songs of piano-roll frames, weights reset per song, §4.8),
:mod:`.probes` (§5.3's update probes), :mod:`.tune` (hyperparameters on validation data) and
:mod:`.cache` (the neural cache, the adaptive baseline of §2.2.1). Everything a user calls is importable from
``paperlib.dyneval`` itself.
"""

from paperlib.dyneval.cache import (CacheInputs, CacheTuning, cache_distribution, cache_target_probabilities,
                                    collect_cache_inputs, mix_log_probs, neural_cache_losses, neural_cache_losses_from,
                                    tune_neural_cache)
from paperlib.dyneval.core import LN2, AdaptSpec, DynamicEvalResult, Params, adapted_parameters, block_means
from paperlib.dyneval.evaluate import dynamic_evaluate, static_evaluate
from paperlib.dyneval.gradients import GradientOracle, functorch_compatible, mean_squared_gradients
from paperlib.dyneval.probes import UpdateProbe, probe_updates, related_words
from paperlib.dyneval.rules import (RMS_AVERAGES, RULES, GlobalRMSRule, NonLocalRMSpropRule, SGDRule, StatisticsStream,
                                    TorchOptimizerRule, UpdateRule, make_update_rule, rms_norm)
from paperlib.dyneval.songs import (SONG_RULES, SongEvaluation, dynamic_evaluate_songs, song_mean_squared_gradients,
                                    static_evaluate_songs)
from paperlib.dyneval.sparse import (SPARSE_MODES, DecoderInputAdaptation, RecurrentSparseAdaptation, SparseCall,
                                     sparse_adaptation, with_recurrent_adaptation)
from paperlib.dyneval.tune import TUNABLE, TuningResult, finite_nll, learning_rate_sweep, tune_dynamic_evaluation

__all__ = [
    "AdaptSpec", "CacheInputs", "CacheTuning", "DecoderInputAdaptation", "DynamicEvalResult", "GlobalRMSRule",
    "GradientOracle", "LN2", "NonLocalRMSpropRule", "Params", "RMS_AVERAGES", "RULES", "RecurrentSparseAdaptation",
    "SGDRule", "SONG_RULES", "SPARSE_MODES", "SongEvaluation", "SparseCall", "StatisticsStream", "TUNABLE",
    "TorchOptimizerRule", "TuningResult", "UpdateProbe", "UpdateRule", "adapted_parameters", "block_means",
    "cache_distribution", "cache_target_probabilities", "collect_cache_inputs", "dynamic_evaluate",
    "dynamic_evaluate_songs", "finite_nll", "functorch_compatible", "learning_rate_sweep", "make_update_rule",
    "mean_squared_gradients", "mix_log_probs", "neural_cache_losses", "neural_cache_losses_from", "probe_updates",
    "related_words", "rms_norm", "song_mean_squared_gradients", "sparse_adaptation", "static_evaluate",
    "static_evaluate_songs", "tune_dynamic_evaluation", "tune_neural_cache", "with_recurrent_adaptation",
]
