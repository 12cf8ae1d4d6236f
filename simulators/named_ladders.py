"""Built-in ladders: the ordered rungs ``closedloop simulate --ladder NAME`` runs, by candidate kind."""

from __future__ import annotations

from vocabulary.domain import SetupError

__all__ = ["LADDERS", "ladder_rungs"]

#: name -> (candidate kind, simulator names from cheapest to most faithful)
LADDERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "molecule": ("molecule", ("rdkit_descriptors", "conformers", "xtb")),
    "molecule-dft": ("molecule", ("rdkit_descriptors", "conformers", "xtb", "dft")),
    "material": ("material", ("composition", "prototype", "chgnet")),
}


def ladder_rungs(kind: str, name: str | None = None) -> tuple[str, ...]:
    """The simulator names of a built-in ladder (the kind's default when ``name`` is None).

    Example:
        >>> ladder_rungs("material")
        ('composition', 'prototype', 'chgnet')
    """
    name = name or kind
    if name not in LADDERS:
        raise SetupError(f"ladder {name!r} is unknown; built-in ladders: {sorted(LADDERS)}")
    ladder_kind, rungs = LADDERS[name]
    if ladder_kind != kind:
        raise SetupError(f"ladder {name!r} is for {ladder_kind}s, not {kind}s; pick one of "
                         f"{sorted(n for n, (k, _) in LADDERS.items() if k == kind)}")
    return rungs
