"""How the tests compare floats, and why each tolerance is what it is.

A floating-point result is reproducible bit for bit only when the same kernels run on the same inputs.
PyTorch chooses its CPU kernels by the CPU's capability (AVX512, AVX2 or the portable ``default``; set
``ATEN_CPU_CAPABILITY`` to force one) and, within one process, by shapes, memory layout and autograd state:
for example ``matmul`` folds a strided 3-d input into one GEMM or runs a batched GEMM depending on whether
the weight requires grad, and ``Linear`` fuses its bias into the GEMM only for a contiguous 3-d input. Two
different code paths computing the same function therefore agree only up to rounding, and the rounding
differs from CPU to CPU, so a bitwise comparison of them can pass here and fail elsewhere.

The tests use two kinds of comparison:

* :func:`assert_bitwise`: the same kernels provably run on the same inputs: a resumed run against an
  uninterrupted one, the same call twice, copies, integer tensors, or an extra step that is exactly a no-op
  (adding a product with an exactly zero matrix). The caller states the reason.
* :func:`assert_close_after_reduction`: different code paths (batched vs sequential, fused vs reference, a
  wrapper vs the plain model, an implementation vs a closed form). The tolerance is
  :func:`reduction_tolerance`, derived from the dtype's machine epsilon and the number of rounded terms.

``torch.testing.assert_close`` with its default tolerances (rtol 1.3e-6 / atol 1e-5 for float32, 1e-7 /
1e-7 for float64) is also used for different paths; those defaults are millions of float64 eps and tens of
float32 eps, far above the rounding of the small models in these tests.
"""

from __future__ import annotations

import torch

# Safety factor c in c·n·eps. The classical bound for a sum of n terms rounded in any order is
# |fl(s) - s| <= γ_n Σ|x_i|, γ_n = n·u / (1 - n·u), u = eps / 2 (Higham, Accuracy and Stability of Numerical
# Algorithms, §3.1), so two evaluations in different orders differ by at most about n·eps·Σ|x_i|. c = 4 covers
# Σ|x_i| up to twice the compared magnitude (mild cancellation) and the few ulps added by the element-wise
# operations around the reduction (bias add, sigmoid / tanh, log-softmax), each about one eps.
SAFETY = 4.0


def _tensor(value) -> torch.Tensor:
    return value if isinstance(value, torch.Tensor) else torch.as_tensor(value, dtype=torch.float64)


def assert_bitwise(actual, expected, why: str) -> None:
    """``actual`` equals ``expected`` bit for bit (tensors of any dtype, or Python numbers).

    Only for comparisons in which the same kernels provably run on the same inputs; ``why`` says which
    (it is shown on failure). Everything else goes through :func:`assert_close_after_reduction`.
    """
    if not why:
        raise ValueError("assert_bitwise needs a reason: why do the same kernels run on the same inputs?")
    if not isinstance(actual, torch.Tensor) and not isinstance(expected, torch.Tensor):
        assert actual == expected, f"{actual!r} != {expected!r}, expected bit for bit because {why}"
        return
    torch.testing.assert_close(_tensor(actual), _tensor(expected), rtol=0, atol=0,
                               msg=lambda text: f"{text}\nExpected bit for bit because {why}")


def reduction_tolerance(dtype: torch.dtype, n_terms: int, scale: float = 1.0) -> dict[str, float]:
    """``rtol`` and ``atol`` for two evaluations of a result that rounds ``n_terms`` terms in different orders.

    Both are ``SAFETY · n_terms · eps(dtype)``, ``atol`` times ``scale`` (the magnitude of the compared values,
    so that entries near zero, e.g. after cancellation, are judged on the scale of the terms).

    ``n_terms`` is the number of rounded operations that can reach one compared value: the length of the
    longest reduction (a dot product over n inputs plus a bias is n + 1), and for chains (a recurrence over
    T steps, stacked layers, successive updates) the sum of the reductions along the chain, each link adding
    its own rounding while the contractive maps used here (sigmoid / tanh gates, softmax) do not amplify
    earlier errors by more than O(1).
    """
    if n_terms < 1:
        raise ValueError(f"n_terms must be >= 1, got {n_terms}")
    tol = SAFETY * n_terms * torch.finfo(dtype).eps
    return {"rtol": tol, "atol": tol * scale}


def assert_close_after_reduction(actual, expected, *, n_terms: int, why: str, dtype: torch.dtype | None = None,
                                 scale: float | None = None) -> None:
    """``actual`` and ``expected`` agree up to the rounding of ``n_terms`` terms (:func:`reduction_tolerance`).

    ``dtype`` is the precision the values were computed in (default: ``expected``'s dtype, float64 for Python
    numbers); ``scale`` defaults to max(1, max |expected|). ``why`` names the two code paths.
    """
    if not why:
        raise ValueError("assert_close_after_reduction needs a reason: which code paths are compared?")
    actual, expected = _tensor(actual), _tensor(expected)
    dtype = dtype or expected.dtype
    if scale is None:
        scale = max(1.0, float(expected.detach().abs().max())) if expected.numel() else 1.0
    tolerance = reduction_tolerance(dtype, n_terms, scale)
    torch.testing.assert_close(
        actual, expected, **tolerance,
        msg=lambda text: f"{text}\nTolerance {tolerance} = {SAFETY:g} x {n_terms} terms x eps({dtype}) "
                         f"x scale {scale:.3g}, because {why}")
