"""Recurrent-state utilities for truncated backpropagation through time."""

from __future__ import annotations

from typing import Any

from torch import Tensor


def detach_state(state: Any) -> Any:
    """Detach every tensor in a (nested) state so BPTT stops at the window boundary.

    Handles tensors, lists, tuples (including NamedTuples), dicts and leaves
    anything else (ints, None) unchanged.
    """
    if isinstance(state, Tensor):
        return state.detach()
    if isinstance(state, list):
        return [detach_state(s) for s in state]
    if isinstance(state, tuple):
        items = [detach_state(s) for s in state]
        return type(state)(*items) if hasattr(state, "_fields") else tuple(items)
    if isinstance(state, dict):
        return {k: detach_state(v) for k, v in state.items()}
    return state
