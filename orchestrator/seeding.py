"""Deterministic seeds derived from the campaign seed, so a resumed step draws the same numbers."""

from __future__ import annotations

import hashlib

import numpy as np

__all__ = ["derive_rng", "derive_seed"]


def derive_seed(seed: int, *parts: object) -> int:
    """A 32-bit seed (what numpy, torch and pyro all accept) from the campaign seed and labels such as ``(iteration, "plan", "random")``.

    Example:
        >>> derive_seed(0, 3, "plan") == derive_seed(0, 3, "plan") != derive_seed(0, 4, "plan")
        True
    """
    text = ":".join(str(p) for p in (seed, *parts))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")


def derive_rng(seed: int, *parts: object) -> np.random.Generator:
    return np.random.default_rng(derive_seed(seed, *parts))
