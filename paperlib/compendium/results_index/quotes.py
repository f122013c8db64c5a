"""The seed sentences each row of the results index judges, keyed by seed item id (data; imports nothing).

Every quote is a contiguous, verbatim excerpt of its seed's text (``SEEDS`` names the file), shortened only with
" … " between verbatim pieces; a test checks each piece against the seed text after normalising whitespace. A
row whose verdict judges nothing (a diagram, an encoded search space, an item not attempted) quotes the caption
or the sentence that describes the item. Each quote is ``(seed, section, text)``: the seed's number as
``results/seed_items.csv`` gives it, where in the seed the text stands, and the text.

Data like ``paperlib.reference``, but read by the index alone, so it lives in the index's package: a changed
quote reruns only the ``results_index`` stage and no experiment stage's run cache.
"""

from __future__ import annotations

SEEDS: dict[str, tuple[str, str]] = {
    "000": ("Melis thesis", "000_ef40330f94fd79c5.txt"),
    "001": ("Circling Back", "001_2ff87b1a38bcf7b4.txt"),
    "002": ("Krause thesis", "002_3e055454ce653875.txt"),
    "004": ("Schmidt & Hofmann", "004_e14aa08e772151b4.txt"),
}

ELLIPSIS = " … "

QUOTES: dict[str, list[tuple[str, str, str]]] = {
    # -- Melis thesis, ch. 2: the Mogrifier LSTM ------------------------------------------------------------------
    "M-F2.1": [("000", "§2.1, Figure 2.1", "Figure 2.1: Mogrifier with 5 rounds of updates.")],
    "M-F2.2": [("000", "§2.3.1, Figure 2.2",
                "Figure 2.2: No-zigzag Mogrifier for the ablation study, whose gating is always based on the "
                "original inputs.")],
    "M-F2.3": [("000", "§2.3.1 Ablation Study",
                "Figure 2.3 shows that the number of rounds r greatly influences the results."),
               ("000", "§2.3.1, Figure 2.3",
                "Figure 2.3: Perplexity vs the number of rounds r in the PTB ablation study.")],
    "M-F2.4": [("000", "§2.3.3 The Reverse Copy Task",
                "Figure 2.4a shows that, for sequences of length 50 and 100, both models can solve the task "
                "perfectly. At higher lengths though, the Mogrifier has a considerable advantage."),
               ("000", "§2.3.3, Figure 2.4",
                "The Mogrifier is better than the LSTM even in this synthetic task with no resemblance to natural "
                "language."),
               ("000", "§2.3.3 The Reverse Copy Task",
                "We also conducted experiments with a larger model and vocabulary size, and found the effect even more "
                "pronounced (see Figure 2.4b).")],
    "M-F2.5": [("000", "§2.B Hyperparameter Sensitivity",
                "The red lines correspond to hyperparameter combinations closest to the best solution found." + ELLIPSIS
                + "For both the LSTM and the Mogrifier, the results are at most 1.2 perplexity points off the best "
                "result, so our results are somewhat insensitive to jitter in the hyperparameters.")],
    "M-F2.6": [("000", "§2.B Hyperparameter Sensitivity",
                "For both the LSTM and the Mogrifier, the results are at most 1.2 perplexity points off the best "
                "result, so our results are somewhat insensitive to jitter in the hyperparameters."),
               ("000", "§2.B, Figure 2.6",
                "Figure 2.6: Average per-word validation cross-entropies for hyperparameter combinations in the "
                "neighbourhood of the best solution for a 2-layer Mogrifier LSTM with 24M weights on the Penn "
                "Treebank dataset.")],
    "M-T2.1": [("000", "§2.2.3 Results",
                "On the PTB and Wikitext-2 datasets, the Mogrifier has lower perplexity than the LSTM by 3–4 "
                "perplexity points regardless of whether or not dynamic evaluation [Krause et al., 2017] and Monte "
                "Carlo averaging are used."),
               ("000", "§2.2.3, Table 2.1",
                "Note the comfortable margin of 2.8–4.3 perplexity points the Mogrifier enjoys over the LSTM.")],
    "M-T2.2": [("000", "§2.2.3, Table 2.2",
                "Once again the Mogrifier strictly dominates the LSTM and sets a new state of the art on all but "
                "the Enwik8 dataset"),
               ("000", "§2.2.3 Results",
                "Even the smallest improvement of 0.012 bpc on the highly idiosyncratic, character-based, Mikolov "
                "preprocessed PTB task is equivalent to gaining about 3 perplexity points on word-level PTB.")],
    "M-T2.3": [("000", "§2.3.1 Ablation Study",
                "Figure 2.3 shows that the number of rounds r greatly influences the results. Second, we found the "
                "low-rank factorization of" + ELLIPSIS + "to help a bit, but the full-rank variant is close behind, "
                "which is what we observed on other datasets, as well."),
               ("000", "§2.3.1 Ablation Study",
                "In our experiments, the no-zigzag variant underperformed the baseline Mogrifier by a small but "
                "significant margin"),
               ("000", "§2.3.2 Comparison to the mLSTM",
                "We also conducted experiments on PTB based on our reimplemention of the mLSTM following the same "
                "methodology as the ablation study and found that the mLSTM did not improve on the LSTM (see "
                "Table 2.3)."),
               ("000", "§2.3.1, Table 2.3",
                "Table 2.3: PTB ablation study validation perplexities with 24M parameters.")],
    "M-T2.4": [("000", "§2.A Hyperparameter Tuning Ranges",
                "In all experiments, we tuned hyperparameters using Google Vizier [Golovin et al., 2017]. The tuning "
                "ranges are listed in Table 2.4."),
               ("000", "§2.A, Table 2.4", "Table 2.4: Hyperparameter tuning ranges for all tasks except Enwik8.")],
    "M-T2.5": [("000", "§2.A Hyperparameter Tuning Ranges",
                "Since Enwik8 is a much larger dataset, we do not tune *input_embedding_ratio* and specify tighter "
                "tuning ranges for dropout based on preliminary experiments (see Table 2.5)."),
               ("000", "§2.A, Table 2.5", "Table 2.5: Hyperparameter tuning ranges for Enwik8.")],
    "M-T2.6": [("000", "§2.A Hyperparameter Tuning Ranges",
                "Dynamic evaluation hyperparameters were tuned according to Table 2.6."),
               ("000", "§2.A, Table 2.6", "Table 2.6: Hyperparameter tuning ranges for dynamic evaluation.")],
    # -- Melis thesis, ch. 3: Two-Tailed Averaging ----------------------------------------------------------------
    "M-F3.1": [("000", "§3.1, Figure 3.1",
                "The two averages start out the same, but after the first evaluation, there is always one short (S) "
                "and one long (L) average, where the long one has more iterates averaged and a better loss. When "
                "the loss with the short one is not worse than with the long average, the long one is reset, and "
                "the short average becomes the long one." + ELLIPSIS + "In any interval labelled with L, there is at "
                "least one point where the length of the long average is near optimal.")],
    "M-F3.2": [("000", "§3.5, Figure 3.2", "Figure 3.2: Idealized illustration of switching.")],
    "M-F3.3": [("000", "§3.6 Experiments",
                "Figure 3.3 shows that the final validation losses with all methods are very close, but early "
                "losses with 2TA are much better."),
               ("000", "§3.6, Figure 3.3",
                "2TA has no hyperparameters and produces much better early solutions." + ELLIPSIS
                + "Additionally, the noise in the raw loss is effectively smoothed out."),
               ("000", "§3.6 Experiments",
                "On this particular language modelling task, the best validation loss with the modified algorithm "
                "worsened moderately (3.93 vs 3.92) and was well below the raw validation loss (4.02).")],
    "M-F3.4": [("000", "§3.6, Figure 3.4",
                "Figure 3.4: Length of the long average (L) vs number of evaluations of 2TA in Figure 3.3. Note how "
                "the heights of both peaks and valleys increase almost monotonically.")],
    "M-F3.5": [("000", "§3.6, Figure 3.5",
                "Figure 3.5: Raw (green) and 2TA (orange) validation loss with overfitting. The averaged loss "
                "bottoms out due to overfitting. Thus when the averages are reset (twice), the validation loss does "
                "not recover.")],
    "M-F3.6": [("000", "§3.6, Figure 3.6",
                "Figure 3.6: Example of optimization entering a new basin. At $t = 40E$ the validation loss bottoms "
                "out and starts to slightly worsen. This is detected at $t = 43E$, and both averages are reset. With "
                "the averages now way too short, the loss spikes but then recovers.")],
    # -- Melis thesis, ch. 4 and Circling Back: the RLSTM ---------------------------------------------------------
    "M-F4.1": [("000", "§4.1, Figure 4.1",
                "All gates are computed from \\mathbf{h}_{prev} and \\mathbf{x} .")],
    "M-F4.2": [("000", "§4.1, Figure 4.2", "Figure 4.2: Schematic of the RLSTM cell.")],
    "M-T4.1": [("000", "§4.7 Results",
                "On word-level language modelling (see Table 4.1), only training for half the epochs, our Mogrifier "
                "LSTM outperformed the same model in Melis et al. [2020], the baseline." + ELLIPSIS + "On top of "
                "these improvements, the RLSTM outperformed the LSTM by a small margin, and we established a new state "
                "of the art on both datasets with and without dynamic evaluation.")],
    "M-T4.2": [("000", "§4.7 Results",
                "Our results were then further improved by switching to the RLSTM."),
               ("000", "§4.7, Table 4.2",
                "Table 4.2: Bits per character on character-based datasets of near state-of-the-art models.")],
    # -- Melis thesis, ch. 5: Monte Carlo objectives and mutual information (MICMCO) ------------------------------
    "M-F5.1": [("000", "§5.1, Figure 5.1",
                "Figure 5.1: Causes of posterior collapse in VAEs. 1. High variance gradient estimates and SGD’s "
                "preference for flat minima exerts pressure to reduce variance by ignoring the latents. 2. A loose "
                "lower bound underestimates the benefits of the latents.")],
    "M-F5.2": [("000", "§5.7.1 Experiments with Synthetic Data",
                "In more detail, Figure 5.2 shows that both of our estimators perform much worse with IWAE 1 as the "
                "base estimator than with the ELBO. As the number of samples grows, this is reversed, although with "
                "a high number of samples we do see the predicted degradation [Rainforth et al., 2018]."),
               ("000", "§5.7.1 Experiments with Synthetic Data (continuous latents, Figs. 5.2 and 5.3)",
                "The Rényi objective performs slightly better than the KL objective with the same base estimator.")],
    "M-F5.3": [("000", "§5.7.1 Experiments with Synthetic Data",
                "Next, Figure 5.3 confirms DReG’s advantage over the IWAE, performing more efficiently than the ELBO "
                "even with a single sample. Our multi-sample objectives both improve on the stronger baseline DReG 1 "
                "represents. The Rényi objective outperforms the KL objective by a small but consistent margin "
                "before all estimators start degenerating quickly nearing the maximal average KL possible.")],
    "M-F5.4": [("000", "§5.7.1 Experiments with Synthetic Data",
                "DReG 16/1 and DReG 1/16 (which use multiple samples to estimate only the marginal likelihood or the "
                "mutual information, respectively) are less efficient than DReG 16, sometimes being outperformed "
                "even by DReG 1. Out of the two, DReG 1/16 performs better")],
    "M-F5.5": [("000", "§5.7.1 Experiments with Synthetic Data",
                "Using the high-variance REINFORCE base estimator (Figure 5.5), we could only get a small "
                "improvement over the single-sample case with 16 samples and a similar degradation with 64.")],
    "M-F5.6": [("000", "§5.7.1 Experiments with Synthetic Data",
                "However, with the much lower variance VIMCO estimator, we achieved almost perfect results (see "
                "Figure 5.6) with 16 samples." + ELLIPSIS + "It may be surprising that these results are even better "
                "than with continuous latents, especially at near-maximal latent usage."),
               ("000", "§5.7.1 Experiments with Synthetic Data",
                "Increasing the number of samples further to 64 made results much worse")],
    "M-F5.7": [("000", "§5.7.1 Experiments with Synthetic Data",
                "Both VIMCO 16/1 and VIMCO 1/16 improve significantly on REINFORCE 1 but only with the Rényi "
                "objective. Still, both fall way short of VIMCO 16, which employs multiple samples for both terms.")],
    "M-F5.8": [("000", "§5.7.2 Language Modelling Experiments (Training Fit)",
                "In Figure 5.8, there is improvement in the continuous case with multiple samples, initially with "
                "both the KL and the Rényi objectives but only with the Rényi at high latent usage.")],
    "M-F5.9": [("000", "§5.7.2 Language Modelling Experiments (Training Fit)",
                "Figure 5.9 shows the discrete latents case. Once again, with either the KL or the Rényi objective, "
                "the results improve markedly, outperforming the continuous models.")],
    "M-F5.10": [("000", "§5.7.2 Language Modelling Experiments (Validation and Test Results)",
                 "As Figure 5.10 shows, with this strong form of regularization, the multi-sample results brought no "
                 "improvement with continuous latents. With discrete latents, the results improved but not nearly to "
                 "the extent observed on the training set, and discrete latents performed considerably worse than "
                 "their continuous counterparts.")],
    "M-F5.11": [("000", "§5.7.2 Language Modelling Experiments (Validation and Test Results)",
                 "As before, multiple samples significantly improve efficiency. Unlike the training fit though, "
                 "validation NLL with discrete latents degrades faster than with continuous ones." + ELLIPSIS +
                 "On the other hand, with only L2 regularization, the best NLL is higher than with dropout.")],
    "M-F5.12": [("000", "§5.7.2 Language Modelling Experiments (Validation and Test Results)",
                 "As Figure 5.12 shows, this change was successful, and we observed that our proposed estimators "
                 "improve latent usage for both continuous and discrete latents, and discrete and continuous latents "
                 "are on par up to an average KL of about 0.5.")],
    "M-F5.13": [("000", "§5.7.2, Figure 5.13",
                 "While their best NLL at very low latent usage is lower than that of VIMCO 16, they lose this "
                 "advantage at higher latent usage."),
                ("000", "§5.7.2 Language Modelling Experiments (Single- vs multi-sample at the same computational "
                        "budget)",
                 "In Figure 5.13, we observe that with more computation, the best training fit of VIMCO 1 improves "
                 "beyond that of VIMCO 16, but the tradeoff remains severe")],
    "M-F5.14": [("000", "§5.7.2, Figure 5.14", "VIMCO 16 performs better than either."),
                ("000", "§5.7.2 Language Modelling Experiments (Single- vs multi-sample at the same computational "
                        "budget)",
                 "Consequently, all single-sample estimators shall exhibit similar validation results at zero latent "
                 "usage. Figure 5.14 confirms this")],
    "M-F5.15": [("000", "§5.A Additional Experiments on Synthetic Data",
                 "As Figure 5.15 shows, the VQ-VAE is generally better than REINFORCE 1 but quite far from the "
                 "optimum and much worse than VIMCO 16 with either the KL or the Rényi objective.")],
    "M-F5.16": [("000", "§5.B.1 Robustness",
                 "In most cases, we observed that varying these nuisance factors only shifted the Pareto curves "
                 "downwards or upwards, leaving their relative positions the same."),
                ("000", "§5.B.1, Figure 5.16",
                 "Figure 5.16: The effect of batch size with DReG and 128 hidden units on PTB.")],
    "M-F5.17": [("000", "§5.B.1 Robustness",
                 "In most cases, we observed that varying these nuisance factors only shifted the Pareto curves "
                 "downwards or upwards, leaving their relative positions the same."),
                ("000", "§5.B.1, Figure 5.17",
                 "Figure 5.17: The effect of optimization length (40 or 80 thousand optimization steps) with DReG "
                 "and 128 hidden units on PTB.")],
    "M-F5.18": [("000", "§5.B.1 Robustness",
                 "The exception is Figure 5.18, DREG with 256 hidden units, where the differences between the three "
                 "estimators are very small.")],
    "M-F5.19": [("000", "§5.B.1 Robustness",
                 "For VIMCO, the best performing base estimator for the discrete latents, Figures 5.19 to 5.21 tell "
                 "a similar story. In most cases, we observed that varying these nuisance factors only shifted the "
                 "Pareto curves downwards or upwards, leaving their relative positions the same."),
                ("000", "§5.B.1, Figure 5.19",
                 "Figure 5.19: The effect of batch size with VIMCO and 128 hidden units on PTB.")],
    "M-F5.20": [("000", "§5.B.1 Robustness",
                 "For VIMCO, the best performing base estimator for the discrete latents, Figures 5.19 to 5.21 tell "
                 "a similar story. In most cases, we observed that varying these nuisance factors only shifted the "
                 "Pareto curves downwards or upwards, leaving their relative positions the same."),
                ("000", "§5.B.1, Figure 5.20",
                 "Figure 5.20: The effect of optimization length (40 or 80 thousand optimization steps) with VIMCO "
                 "and 128 hidden units on PTB.")],
    "M-F5.21": [("000", "§5.B.1 Robustness",
                 "For VIMCO, the best performing base estimator for the discrete latents, Figures 5.19 to 5.21 tell "
                 "a similar story. In most cases, we observed that varying these nuisance factors only shifted the "
                 "Pareto curves downwards or upwards, leaving their relative positions the same."),
                ("000", "§5.B.1, Figure 5.21",
                 "Figure 5.21: The effect of optimization length (40 or 80 thousand optimization steps) with VIMCO "
                 "and 256 hidden units on PTB.")],
    "M-F5.22": [("000", "§5.B.2 Asymmetric Samples",
                 "Figures 5.22 and 5.23 show that improvements in training fit require" + ELLIPSIS + "multiple "
                 "samples in both terms, even more so than in the experiments on the synthetic data earlier (Figures 5.4 and 5.7).")],
    "M-F5.23": [("000", "§5.B.2 Asymmetric Samples",
                 "Figures 5.22 and 5.23 show that improvements in training fit require" + ELLIPSIS + "multiple "
                 "samples in both terms, even more so than in the experiments on the synthetic data earlier (Figures 5.4 and 5.7).")],
    "M-F5.24": [("000", "§5.B.1, Figure 5.24",
                 "While their best NLL at very low latent usage is lower than that of DREG 16, they lose this "
                 "advantage at higher latent usage."),
                ("000", "§5.B.1 Robustness",
                 "As training (Figure 5.24) and validation (Figure 5.25) results show, the overall picture may be the "
                 "same as for VIMCO, (that is, steeper training curves translate to steeper validation curves), but "
                 "it is harder to assess this since the curves are closer.")],
    "M-F5.25": [("000", "§5.B.1, Figure 5.25", "DREG 16 generalizes better than either."),
                ("000", "§5.7.2 Language Modelling Experiments (Single- vs multi-sample at the same computational "
                        "budget)",
                 "In §5.B.1, Figure 5.24 and Figure 5.25 tell a similar story for DReG, but the results are less "
                 "conclusive there since the curves are much closer."),
                ("000", "§5.B.1 Robustness",
                 "As training (Figure 5.24) and validation (Figure 5.25) results show, the overall picture may be the "
                 "same as for VIMCO, (that is, steeper training curves translate to steeper validation curves), but "
                 "it is harder to assess this since the curves are closer.")],
    "M-F5.26": [("000", "§5.B.3 Experiments with the Power Objective",
                 "As Figures 5.26 to 5.29 show, the power objective is often better than the KL objective but lags "
                 "the Rényi objective")],
    "M-F5.27": [("000", "§5.B.3 Experiments with the Power Objective",
                 "As Figures 5.26 to 5.29 show, the power objective is often better than the KL objective but lags "
                 "the Rényi objective")],
    "M-F5.28": [("000", "§5.B.3 Experiments with the Power Objective",
                 "As Figures 5.26 to 5.29 show, the power objective is often better than the KL objective but lags "
                 "the Rényi objective")],
    "M-F5.29": [("000", "§5.B.3 Experiments with the Power Objective",
                 "As Figures 5.26 to 5.29 show, the power objective is often better than the KL objective but lags "
                 "the Rényi objective")],
    "M-T5.1": [("000", "§5.7.2 Language Modelling Experiments (Validation and Test Results)",
                "As Table 5.1" + ELLIPSIS + "shows, the best test perplexity improves only slightly with more samples "
                "for this combination of a small model and strong regularization."),
               ("000", "§5.7.2, Table 5.1",
                "These optima are at low (or, in the single-sample case, mostly negligible) latent usage.")],
    "M-T5.2": [("000", "§5.C Optimization Settings", "Table 5.2: Hyperparameter tuning ranges."),
               ("000", "§5.7.2 Language Modelling Experiments",
                "Every point on the Pareto curves is the result of tuning several hyperparameters: the learning rate, "
                "λ , α for the Rényi objective, and three different dropout rates.")],
    "C-T1": [("001", "§8 Results",
              "On word-level language modelling (see Table 1), only training for half the epochs, our Mogrifier LSTM "
              "outperformed the same model in Melis et al. (2019), the baseline." + ELLIPSIS + "On top of these "
              "improvements, the RLSTM outperformed the LSTM by a small margin, and we established a new state of the "
              "art on both datasets with and without dynamic evaluation.")],
    "C-T2": [("001", "§8 Results",
              "Table 2 shows our results on character-based language modelling. On Penn Treebank, again only training "
              "for half the epochs, we significantly boosted the results of the state-of-the-art baseline model by "
              "using multiple dropout samples and to a smaller degree by tuning the forget gate initialization. Our "
              "results were then further improved by switching to the RLSTM.")],
    # -- Krause thesis, ch. 2: background diagrams ------------------------------------------------------------
    "K-F2.1": [("002", "ch. 2, Figure 2.1",
                "Figure 2.1: A neural auto-regressive sequence model. The model repeatedly predicts a probability "
                "distribution over the next symbol conditioned on all previous symbols, using a hidden state to "
                "summarize information about the past.")],
    "K-F2.2": [("002", "ch. 2, Figure 2.2",
                "Figure 2.2: A vanilla RNN. Edges represent multiplication by a weight matrix, and nodes represent "
                "state vectors.")],
    "K-F2.3": [("002", "ch. 2, Figure 2.3",
                "Figure 2.3: A multiplicative RNN. Inputs to the elliptical nodes are added, and inputs to the "
                "rectangular nodes are multiplied.")],
    "K-F2.4": [("002", "ch. 2, Figure 2.4",
                "Figure 2.4: A 2-layer stacked RNN. The second RNN takes the hidden state of the first RNN as its "
                "input.")],
    "K-F2.5": [("002", "ch. 2, Figure 2.5",
                "Figure 2.5: An RNN with a recurrent depth of 2. The model has an additional non-linear layer "
                "between recurrent steps.")],
    "K-F2.6": [("002", "ch. 2, Figure 2.6",
                "Figure 2.6: When using tied embeddings, the output weights of the RNN are set to be the transpose "
                "of the input weights to the RNN.")],
    "K-F2.7": [("002", "ch. 2, Figure 2.7",
                "Figure 2.7: A NADE iterating through a high dimensional vector. The model iteratively predicts a "
                "distribution over the next symbol, and then conditions on the ground truth value of that "
                "symbol.")],
    "K-F2.8": [("002", "ch. 2, Figure 2.8",
                "Figure 2.8: An RNN-NADE acts as a probabilistic model of sequences of high dimensional vectors.")],
    # -- Krause thesis, ch. 3: the multiplicative LSTM ------------------------------------------------------------
    "K-F3.1": [("002", "§3.2 Input-dependent transition functions, Figure 3.1",
                "Figure 3.1: Diagram of hidden states of a generative RNN as a tree")],
    "K-F3.2": [("002", "§3.5.2 Enwik8",
                "In our initial experiments, we compared mLSTMs and 2-layer stacked LSTMs for varying network "
                "sizes, ranging from about 3–20 million parameters." + ELLIPSIS + "The results, shown in Figure 3.2, "
                "show that mLSTM gives an improvement across all network sizes.")],
    "K-F3.3": [("002", "§3.5.2 Enwik8",
                "However, stacked LSTM tended to take larger losses than mLSTM in the timesteps immediately "
                "following surprising inputs." + ELLIPSIS + "mLSTM’s advantage over stacked LSTM was greater after a "
                "surprising input than it is in general."),
               ("000", "§2.3.2 Comparison to the mLSTM",
                "Krause et al. [2016] posit and verify the recovery hypothesis that says that having just suffered "
                "a large loss, the loss on the next time step will be smaller on average for the mLSTM than for the "
                "LSTM. This was found not to be the case for the Mogrifier.")],
    "K-T3.1": [("002", "§3.5.2 Enwik8",
                "However, when combined with variational dropout, this model outperformed all previous static "
                "single model neural network results on enwik8."),
               ("002", "§3.5.2, Table 3.1", "Table 3.1: enwik8 dataset test error in bits/char.")],
    "K-T3.2": [("002", "§3.5.3 Text8",
                "mLSTM showed an improvement over our baseline and the previously reported best deep LSTM variant."
                + ELLIPSIS + "This well regularized mLSTM was able to achieve a much stronger performance on text8, "
                "tying recurrent highway networks (RHNs) with a recurrent depth of 10 for the best result on this "
                "dataset.")],
    "K-T3.3": [("002", "§3.5.4 WikiText-2",
                "Despite all the disadvantages faced by character level models, byte level mLSTM achieves similar "
                "word level perplexity to previous word-level LSTM baselines that also use variational dropout for "
                "regularization."),
               ("002", "§3.5.4, Table 3.3",
                "Table 3.3: WikiText-2 perplexity. The mLSTM operates on UTF-8 bytes, and all previous results are "
                "word-level.")],
    # -- Krause thesis, ch. 4: dynamic evaluation -----------------------------------------------------------------
    "K-F4.1": [("002", "§4.3 Dynamic evaluation, Figure 4.1",
                "Figure 4.1: Illustration of dynamic evaluation." + ELLIPSIS + "Dashed edges are what distinguish "
                "dynamic evaluation from static (normal) evaluation.")],
    "K-T4.1": [("002", "§4.7.1, Table 4.1",
                "The bold lines show that dynamic evaluation gives a large improvement over a state-of-the-art "
                "static model. Each of our other contributions leads to further improvements."),
               ("002", "§4.7.1 Small scale word-level language modeling",
                "All dynamic evaluation variants give large improvements to both datasets." + ELLIPSIS + "Our most "
                "advanced dynamic evaluation variant achieves better final results than the neural cache, "
                "improving the state-of-the-art on PTB and WikiText-2.")],
    "K-T4.2": [("002", "§4.7.1, Table 4.1's caption (Table 4.2, the same rows on WikiText-2, states no claim)",
                "Each of our other contributions leads to further improvements."),
               ("002", "§4.7.1 Small scale word-level language modeling",
                "All dynamic evaluation variants give large improvements to both datasets." + ELLIPSIS + "Our most "
                "advanced dynamic evaluation variant achieves better final results than the neural cache, "
                "improving the state-of-the-art on PTB and WikiText-2. This improvement is especially pronounced on "
                "WikiText-2")],
    "K-T4.3": [("002", "§4.7.2 Medium scale word-level language modeling",
                "Dynamic evaluation soundly outperforms static evaluation and the neural cache method, demonstrating "
                "that the benefits of dynamic evaluation are maintained when using a stronger model with more "
                "training data.")],
    "K-T4.4": [("002", "§4.7.3 Character-level language modeling",
                "Dynamic evaluation achieves large improvements to our base models and state-of-the-art results on "
                "both datasets. Sparse dynamic evaluation also achieves significant improvements on enwik8 using "
                "only 0.5% of the adaptation parameters of regular dynamic evaluation.")],
    "K-T4.5": [("002", "§4.7.3 Character-level language modeling",
                "Dynamic evaluation achieves large improvements to our base models and state-of-the-art results on "
                "both datasets."),
               ("002", "§4.7.3, Table 4.5", "Table 4.5: text8 (char-level) test set error in bits/char.")],
    "K-T4.6": [("002", "§4.8 Music modeling experiments",
                "Dynamic evaluation performed especially well on the Nottingham dataset, which contains sequences "
                "with many repeating motifs."),
               ("002", "§4.8 Music modeling experiments",
                "The sequences in JSB Chorales were shorter than in the other three datasets, meaning that dynamic "
                "evaluation had less data to adapt to, which may partially explain why it did not perform as well."),
               ("002", "§4.8 Music modeling experiments",
                "Our models do not have these inductive biases, and still perform better on some datasets."),
               ("002", "§4.8, Table 4.6",
                "Table 4.6: Performance of models in log-likelihood per frame on four music prediction tasks.")],
    # -- Krause thesis, ch. 5: why dynamic evaluation works ----------------------------------------------------------
    "K-F5.1": [("002", "§5.1 Time-scales of adaptive sequence modeling",
                "We examined the timescales at which dynamic evaluation gains an advantage over static evaluation "
                "at language modeling."),
               ("002", "§5.1, Figure 5.1",
                "Figure 5.1: Average losses in nats/word of dynamic evaluation, the neural cache, and static "
                "evaluation plotted against number of words processed; on sequences from the WikiText-2 test set, "
                "averaged over 122 trials for each.")],
    "K-F5.2": [("002", "§5.1 Time-scales of adaptive sequence modeling",
                "Dynamic evaluation gave a very noticeable advantage after a few hundred characters. For Spanish, "
                "this advantage continued to grow as more of the sequence was processed."),
               ("002", "§5.1 Time-scales of adaptive sequence modeling",
                "For enwik8, this advantage was maximized after viewing around 2–3k characters, demonstrating that "
                "the adaptation effect was local rather than global.")],
    "K-T5.1": [("002", "§5.3 Generalizing to unseen words",
                "As would be expected, dynamic evaluation and the neural cache are both much more effective than "
                "static evaluation at predicting words that re-occur in a sequence. Dynamic evaluation gains its "
                "advantage over the neural cache on both seen and unseen words. Static evaluation performs better "
                "than both methods on previously unseen words."),
               ("002", "§5.3 Generalizing to unseen words",
                "Dynamic evaluation achieves a lower prediction error than static evaluation on 42.6% of unseen "
                "words, as opposed to the neural cache, which as expected, always performs worse than static "
                "evaluation on unseen words.")],
    "K-T5.2": [("002", "§5.3 Generalizing to unseen words",
                "We generally found that dynamic evaluation can increase the probability of related words, and we "
                "demonstrate this for a specific point in the WikiText-2 test set."),
               ("002", "§5.3 Generalizing to unseen words",
                "Updating on the observation of the word “production” also increases the log probability of words "
                "with similar word embeddings."),
               ("002", "§5.3, Table 5.2",
                "The median values across the entire vocabulary are given in the bottom entry.")],
    "K-T5.3": [("002", "§5.4.1 Incorporating momentum",
                "Increasing momentum always hurt dynamic evaluation performance, with  $\\mu = 0$  (vanilla SGD) "
                "giving the best validation error.")],
    "K-T5.4": [("002", "§5.4.2 Adaptive learning rates",
                "These experiments showed that momentum still hurt performance with adaptive learning rates, and "
                "that the bias correction of Adam helped slightly (Adam without momentum could be seen as bias "
                "corrected RMSprop)." + ELLIPSIS + "from these experiments is that RMSprop and Adam perform much "
                "worse than even vanilla SGD in a dynamic evaluation setting. This could be seen as surprising, "
                "because the optimizer originally presented for dynamic evaluation that worked noticeably better "
                "than SGD had an update rule similar to RMSprop.")],
    "K-T5.5": [("002", "§5.4.3 Hybridizing RMSprop and SGD",
                "The performance of RMSprop peaked at slightly better than SGD for an  $\\epsilon$  value of 0.01, "
                "suggesting that there was a slight benefit to using adaptive learning rates if carefully hybridized "
                "with SGD." + ELLIPSIS + "the gains relative to SGD are much smaller than achieved by the global RMS "
                "optimizer.")],
    "K-T5.6": [("002", "§5.4.4.1 Amount of data for gradient statistics",
                "Using smaller portions of the training data to collect gradient statistics had a negligible effect "
                "on performance, which contradicts the hypothesis that the amount of data used for gradient "
                "statistics could explain the performance difference between RMSprop and global RMS.")],
    "K-T5.7": [("002", "§5.4.4.2 Local vs. global gradient statistics",
                "Non-local RMSprop achieved results on par with the Global RMS optimizer from the previous chapter. "
                "This result supports the hypothesis that using local gradient statistics for RMSprop has an "
                "undesirable effect for dynamic evaluation.")],
    "K-T5.8": [("002", "§5.5 Comparing state of the art character models with human predictors",
                "The mLSTM trained on text8 with dynamic evaluation applied performs on par with the best human "
                "text predictors.")],
    # -- Krause thesis, ch. 6: dynamic evaluation of Transformers ----------------------------------------------------
    "K-T6.1": [("002", "§6.2.3 Character-level experiments",
                "Applying Dynamic evaluation improves the Transformer-XL by a noticeable margin, achieving state of "
                "the art on both of these character-level datasets."),
               ("002", "§6.2.3, Table 6.1", "Table 6.1: Character-level cross-entropy (bits/char) on enwik8.")],
    "K-T6.2": [("002", "§6.2.3 Character-level experiments",
                "Applying Dynamic evaluation improves the Transformer-XL by a noticeable margin, achieving state of "
                "the art on both of these character-level datasets."),
               ("002", "§6.2.3, Table 6.2", "Table 6.2: Character-level cross-entropy (bits/char) on text8.")],
    "K-T6.3": [("002", "§6.2.4 Word-level experiments",
                "There was no noticeable validation advantage to using a decay rate, so we refer to the dynamic "
                "evaluation optimizer for this experiment as “global RMS dynamic eval”, since the decay rate was set "
                "to zero. Dynamic evaluation gave a 9% perplexity improvement to Transformer-XL on WikiText-103.")],
    "K-T6.4": [("002", "§6.3.2 Experiments",
                "Dynamic evaluation improves GPT-2 by a significant margin on all tasks, especially enwik8, which "
                "contains a mix of markup and text.")],
    # -- Schmidt & Hofmann: deep state space models for word generation -------------------------------------------
    "S-T1": [("004", "§5.3 Results",
              "We observe that two layers of the TRIL flow improve performance. Furthermore, importance weighting "
              "significantly improves the results across all metrics with diminishing returns at K=10."),
             ("004", "Abstract",
              "The result is a highly interpretable generative model on par with comparable auto-regressive models "
              "on the task of word generation.")],
    "S-T2": [("004", "§5.3 Results",
              "Table 2 shows that generalization for the alternative split is indeed harder but cross entropy results "
              "carry over from the standard setting." + ELLIPSIS + "Under n-gram perplexity both models are on par "
              "with a slight advantage of the baseline on longer n-grams and slightly better generalization of our "
              "proposed model.")],
    "S-T3": [("004", "§5.3 Results",
              "We observe that a powerful generative" + ELLIPSIS + "flow is essential for successful models while the "
              "inference flow can remain relatively simple – yet simplistic choices, such as ID degrade performance. "
              "Choosing F_g slightly more powerful than F_q emerges as a successful pattern."),
             ("004", "§5.3, Table 3",
              "We also report ID for F_g for completeness but note that it is by design unsitted for this contextual "
              "setting.")],
    "S-F1": [("004", "§5.4 Noise Model Analysis", "Figures 1 and 1b show \\bar{I} for all trained models."),
             ("004", "§2.1 State space model",
              "Thus in this model, all entropy about possible sequence continuations must arise from the noise process "
              "ξ , which cannot be ignored in a successfully trained model."),
             ("004", "§4.2 Entropy Inspection",
              "For a model ignoring the noise variables, knowledge of ξ_t does not reduce the uncertainty about w_t , "
              "so that I(t) = 0.")],
    "S-F2": [("004", "§5.4 Noise Model Analysis",
              "As initial tokens are more important to remember, it should not come as a surprise that I(t) is "
              "largest first and decreases over time, yet with increased variance."),
             ("004", "§5.4, Figure 2",
              "Figure 2: Noise mutual information I(t) over sequence position $t = 1 \\dots T$.")],
    "S-F3": [("004", "§5.4 Noise Model Analysis",
              "Figure 3 shows how \\bar{I} along with the symbolic entropy $H[w_t|h_t]$ changes during training."
              + ELLIPSIS + "Over the course of the training, more and more information is driven by ξ_t and "
              "absorbed into states h_t where it can be stored.")],
}
