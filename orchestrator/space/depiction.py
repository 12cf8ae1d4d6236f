"""2D structure drawings of candidates (rdkit SVG), for the report, the dashboard and anything else a chemist reads.

A drawing is an addition to a candidate's label (``pool.describe``: SMILES, formula or ``name=value`` pairs), never a
replacement: a material or a set of conditions without a molecule has no drawing, and its label says it all.
"""

from __future__ import annotations

import re
from functools import lru_cache

from vocabulary.domain import Candidate, Conditions

__all__ = ["candidate_svg", "molecule_svg"]

_MAX_SMILES_CHARS = 2_000
"""Longer text is not drawn: rdkit would take seconds on it and the drawing would be unreadable at 220 px."""


def molecule_svg(smiles: str, *, width: int = 220, height: int = 160) -> str | None:
    """An SVG drawing of one molecule, or None when ``smiles`` is not a molecule rdkit can read.

    Args:
        smiles: a SMILES string (any spelling; rdkit computes the 2D coordinates).
        width: drawing width in pixels.
        height: drawing height in pixels.

    Returns:
        The SVG document as text (no XML declaration, so it can be inlined in HTML), or None.

    Example:
        >>> svg = molecule_svg("c1ccccc1O")
        >>> svg.startswith("<svg") and "</svg>" in svg
        True
        >>> molecule_svg("not a molecule") is None
        True
    """
    if not isinstance(smiles, str) or width <= 0 or height <= 0:
        return None
    text = smiles.strip()
    if not text or len(text) > _MAX_SMILES_CHARS or any(character.isspace() for character in text):
        return None
    return _drawn(text, int(width), int(height))


def _bond_length_px(width: int, height: int) -> float:
    """A bond's drawn length: 14 % of the shorter side (22 px in a 220 x 160 drawing), so a card of methanol and one
    of a steroid show atoms at one size unless the steroid needs shrinking to fit."""
    return max(8.0, 0.14 * min(width, height))


@lru_cache(maxsize=1024)  # about 5 MB of drawings: a dashboard redraws the same candidates on every refresh
def _drawn(smiles: str, width: int, height: int) -> str | None:
    from rdkit import Chem, RDLogger
    from rdkit.Chem.Draw import rdMolDraw2D

    RDLogger.DisableLog("rdApp.*")
    mol = Chem.MolFromSmiles(smiles)
    if mol is None or mol.GetNumAtoms() == 0:
        return None
    drawer = rdMolDraw2D.MolDraw2DSVG(width, height)
    options = drawer.drawOptions()
    options.clearBackground = False  # the page's own background shows through (a card's tint, a highlighted row)
    options.addStereoAnnotation = True
    options.fixedBondLength = _bond_length_px(width, height)  # one scale for small molecules; big ones still shrink
    try:
        rdMolDraw2D.PrepareAndDrawMolecule(drawer, mol)
    except (RuntimeError, ValueError):  # rdkit refuses to kekulise or lay out a few odd but parseable molecules
        return None
    drawer.FinishDrawing()
    svg = drawer.GetDrawingText()
    return re.sub(r"^<\?xml[^>]*\?>\s*", "", svg)


def candidate_svg(candidate: Candidate, *, width: int = 220, height: int = 160) -> str | None:
    """The drawing of a candidate: its molecule; for conditions, each molecule among its values side by side.

    Materials (formulas) and conditions without a molecule among their values have no drawing (None). A condition's
    text value counts as a molecule when rdkit reads it and it has a carbon and at least ``_MIN_HEAVY_ATOMS`` heavy
    atoms, so labels such as ``"none"``, ``"CO"`` or ``"Cs"`` are not drawn. Each molecule of a set of conditions is
    panel captioned with its parameter's name, at most ``MAX_PANELS`` of them, in a grid that fills ``width`` x
    ``height`` (two columns for two or four molecules, three for three, five or six).

    Example:
        >>> from vocabulary.domain import Material, Molecule
        >>> candidate_svg(Molecule.parse("CCO")).startswith("<svg")
        True
        >>> candidate_svg(Material.parse("Fe2O3")) is None
        True
    """
    if isinstance(candidate, Conditions):
        parts = [(name, value.strip()) for name, value in candidate.values.items()
                 if isinstance(value, str) and _is_organic_smiles(value.strip())][:MAX_PANELS]
        if not parts:
            return None
        if len(parts) == 1:
            return molecule_svg(parts[0][1], width=width, height=height)
        return _panels(tuple(parts), int(width), int(height))
    smiles = getattr(candidate, "smiles", None)
    return molecule_svg(smiles, width=width, height=height) if smiles else None


MAX_PANELS = 6
"""The most molecules drawn side by side for one set of conditions."""

_MIN_HEAVY_ATOMS = 3


@lru_cache(maxsize=4096)
def _is_organic_smiles(text: str) -> bool:
    if not text or len(text) > _MAX_SMILES_CHARS or any(character.isspace() for character in text):
        return False
    from rdkit import Chem, RDLogger

    RDLogger.DisableLog("rdApp.*")
    mol = Chem.MolFromSmiles(text)
    if mol is None or mol.GetNumHeavyAtoms() < _MIN_HEAVY_ATOMS:
        return False
    return any(atom.GetAtomicNum() == 6 for atom in mol.GetAtoms())


@lru_cache(maxsize=1024)
def _panels(parts: tuple[tuple[str, str], ...], width: int, height: int) -> str | None:
    from rdkit import Chem
    from rdkit.Chem.Draw import rdMolDraw2D

    mols = [Chem.MolFromSmiles(smiles) for _, smiles in parts]
    n_columns = 2 if len(parts) in (2, 4) else 3
    n_rows = -(-len(parts) // n_columns)
    panel_width, panel_height = max(width // n_columns, 1), max(height // n_rows, 1)
    drawer = rdMolDraw2D.MolDraw2DSVG(panel_width * n_columns, panel_height * n_rows, panel_width, panel_height)
    options = drawer.drawOptions()
    options.clearBackground = False
    options.legendFontSize = 14
    options.fixedBondLength = _bond_length_px(panel_width, panel_height)
    try:
        drawer.DrawMolecules([rdMolDraw2D.PrepareMolForDrawing(m) for m in mols],
                             legends=[_legend(name) for name, _ in parts])
    except (RuntimeError, ValueError):
        return None
    drawer.FinishDrawing()
    return re.sub(r"^<\?xml[^>]*\?>\s*", "", drawer.GetDrawingText())


def _legend(name: str) -> str:
    """A parameter's name as a caption: ``Ligand_SMILES`` -> ``Ligand`` (the drawing says it is a structure)."""
    return re.sub(r"[_ ]?smiles$", "", name, flags=re.IGNORECASE) or name
