"""Many small models of one architecture run as one: parameters stacked along a leading axis, a function of the
model vmapped over it.

On a GPU a small model (a sentence VAE of hidden size 128, a synthetic-task VAE) is launch-bound: every step issues
hundreds of kernels whose work is tiny. Training the trials and seeds of a study as one stacked model turns M
sequences of small kernels into one sequence of M-times larger (batched) ones. :class:`StackedModels` keeps every
model with its own parameters (the leaves an optimizer updates, so per-model settings such as a learning rate per
trial are ordinary ``torch.optim`` parameter groups) and, for one pass, stacks them and calls
``torch.func.vmap(torch.func.functional_call(...))`` of a function of the model over the stack, with the model's
recurrent layers in their transformable form (:func:`~paperlib.models.transformable.functorch_compatible`).
Autograd returns each model's gradient into its own leaves.

Model m's outputs depend on model m's parameters and inputs only; batching changes the shapes of the matmuls, not
the function, so a stacked run matches separate runs up to float rounding when every model draws its randomness
from its own stream (pass random draws in; ``vmap`` here refuses to draw: ``randomness="error"``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor, nn
from torch.func import functional_call, vmap

from paperlib.models.transformable import functorch_compatible


class _Applied(nn.Module):
    """``fn(model, *args)`` as a module's forward, so ``functional_call`` can swap the model's parameters."""

    def __init__(self, model: nn.Module, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.model = model
        self.fn = fn

    def forward(self, *args: Any) -> Any:
        return self.fn(self.model, *args)


class StackedModels:
    """``models`` (one architecture, equal parameter and buffer shapes) evaluated together by :meth:`call`."""

    def __init__(self, models: Sequence[nn.Module]) -> None:
        if not models:
            raise ValueError("StackedModels needs at least one model")
        self.models = list(models)
        first = self._shapes(self.models[0])
        for index, model in enumerate(self.models[1:], 1):
            if type(model) is not type(self.models[0]) or self._shapes(model) != first:
                raise ValueError(f"model {index} differs from model 0 in type or in its parameter/buffer shapes; "
                                 "only models of one architecture can be stacked")

    @staticmethod
    def _shapes(model: nn.Module) -> dict[str, tuple[int, ...]]:
        return {name: tuple(t.shape) for name, t in (*model.named_parameters(), *model.named_buffers())}

    def __len__(self) -> int:
        return len(self.models)

    def stacked(self, members: Sequence[int] | None = None) -> dict[str, Tensor]:
        """Every parameter and buffer of the models ``members`` (default all), stacked: ``[M, *shape]`` each.

        The stacked parameters are differentiable functions of each model's own parameters.
        """
        chosen = [self.models[i] for i in (range(len(self)) if members is None else members)]
        named = [dict((*m.named_parameters(), *m.named_buffers())) for m in chosen]
        return {name: torch.stack([n[name] for n in named]) for name in named[0]}

    def call(self, fn: Callable[..., Any], *args: Any, in_dims: Sequence[int | None] | None = None,
             members: Sequence[int] | None = None) -> Any:
        """``[fn(model_m, *args_m) for m in members]`` as one batched pass, outputs stacked on a leading axis.

        ``fn(model, *args)`` is any function of a model (e.g. ``lambda vae, z, x: vae.log_likelihood(z, x,
        dense=True)``);
        it must be traceable by ``torch.func`` (no data-dependent shapes, no random draws). ``in_dims``: per
        argument, 0 when it carries a leading model axis, None when every model gets the same value (default: 0
        for all). Model state (parameters and buffers) comes from :meth:`stacked`.
        """
        template = self.models[0]
        state = {f"model.{name}": t for name, t in self.stacked(members).items()}
        applied = _Applied(template, fn)
        dims = tuple(in_dims) if in_dims is not None else (0,) * len(args)
        if len(dims) != len(args):
            raise ValueError(f"in_dims has {len(dims)} entries for {len(args)} arguments")

        def one(model_state: dict[str, Tensor], *model_args: Any) -> Any:
            return functional_call(applied, model_state, model_args)

        with functorch_compatible(template):
            return vmap(one, in_dims=(0, *dims), randomness="error")(state, *args)


def pad_to(t: Tensor, width: int, dim: int, value: float | bool | int = 0) -> Tensor:
    """``t`` extended with ``value`` to length ``width`` along ``dim`` (``t`` itself when already that long), so that
    the models of a stack can take inputs of different lengths (sentences, words) in one tensor: what a model would
    not have seen is padding, masked out by the caller."""
    extra = width - t.shape[dim]
    if extra < 0:
        raise ValueError(f"cannot pad a length of {t.shape[dim]} along dim {dim} down to {width}")
    if extra == 0:
        return t
    pad_shape = list(t.shape)
    pad_shape[dim] = extra
    return torch.cat([t, t.new_full(pad_shape, value)], dim)


__all__ = ["StackedModels", "pad_to"]
