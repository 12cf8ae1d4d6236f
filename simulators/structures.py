"""Crystal prototypes for ionic compositions, shared by the prototype and CHGNet rungs.

A composition is matched to the prototypes of its stoichiometry (``PROTOTYPES``), its elements are substituted
onto the prototype's cation and anion sites in every way the counts allow, each structure is scaled isotropically
until no cation-anion distance is shorter than the sum of the two Shannon radii and no anion-anion distance shorter
than twice the anion radius (hard-sphere contact), and the structures are ranked by Ewald energy per atom.
``best_prototype_structure`` gives the winner, which the CHGNet rung relaxes.

Every ion takes its six-coordinate Shannon radius whatever the site. With one radius per ion, anion-anion contact
plus Ewald energy reproduces Pauling's radius-ratio rules (CsCl above r+/r- of about 0.72, rocksalt below, four-fold
coordination below about 0.33). Coordination-dependent radii were tried and put MgO and LiF in wurtzite, because the
radius grows from CN 4 to CN 6 faster than the Madelung constant does.

Conventions: the anion is the most electronegative element (Pauling) and must be the only negative one in the most
probable charge-balanced guess of pymatgen's ``Composition.oxi_state_guesses``; energies are in eV, lengths in Å.
Prototype cells are primitive (1–2 formula units, at most 14 atoms), built from Wyckoff positions with spglib's
symmetry database, because ``Structure.from_spacegroup`` spends about a second generating a cubic group.

pymatgen and spglib are imported inside the functions, so importing this module stays cheap.

Example:
    >>> from vocabulary.domain import Material
    >>> name, structure = best_prototype_structure(Material.parse("NaCl"))
    >>> name, structure.composition.reduced_formula, len(structure)
    ('rocksalt', 'NaCl', 2)
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from itertools import permutations
from typing import TYPE_CHECKING, Literal

import numpy as np

from vocabulary.domain import Material, SimulationFailed

if TYPE_CHECKING:
    from pymatgen.core import Composition, Structure

__all__ = [
    "PROTOTYPES",
    "PrototypeFit",
    "best_prototype_structure",
    "bond_valence_misfit",
    "integer_composition",
    "ionic_oxidation_states",
    "oxidation_state_guesses",
    "prototype_fits",
    "quiet_electronegativity",
]

PROTOTYPES: tuple[str, ...] = (
    "rocksalt",  # AX, Fm-3m (NaCl, MgO)
    "cesium_chloride",  # AX, Pm-3m (CsCl)
    "zincblende",  # AX, F-43m (ZnS, GaAs)
    "wurtzite",  # AX, P6_3mc (ZnO, GaN)
    "fluorite",  # AX2, Fm-3m (CaF2, UO2)
    "antifluorite",  # A2X, Fm-3m (Li2O, Na2S)
    "rutile",  # AX2, P4_2/mnm (TiO2, SnO2)
    "perovskite",  # ABX3, Pm-3m (SrTiO3; A is the 12-coordinated site)
    "spinel",  # AB2X4, Fd-3m (MgAl2O4; A tetrahedral, B octahedral)
    "corundum",  # A2X3, R-3c (Al2O3, Fe2O3)
    "layered_rocksalt",  # ABX2, R-3m alpha-NaFeO2 (LiCoO2)
)
"""Prototype names; ``best_prototype_index`` in observations indexes this tuple. Append only: never reorder."""

Role = Literal["A", "B", "X"]
_CATION_ROLES: tuple[Role, ...] = ("A", "B")
_SHELL_TOLERANCE = 1.1  # counter-ions within 10 % of the nearest one form the first coordination shell
_ROMAN = dict(zip("I II III IV V VI VII VIII IX X XI XII XIII XIV".split(), range(1, 15), strict=True))


@dataclass(frozen=True)
class _Spec:
    """A prototype as spglib Hall number, conventional cell at a = 1 Å, centring and Wyckoff representatives."""

    hall_number: int
    abc_angles: tuple[float, float, float, float, float, float]
    centring: Literal["P", "F", "R"]
    sites: tuple[tuple[Role, tuple[float, float, float]], ...]


_C_HEX_IDEAL = math.sqrt(8 / 3)
_SPECS: dict[str, _Spec] = {
    "rocksalt": _Spec(523, (1, 1, 1, 90, 90, 90), "F", (("A", (0, 0, 0)), ("X", (0.5, 0.5, 0.5)))),
    "cesium_chloride": _Spec(517, (1, 1, 1, 90, 90, 90), "P", (("A", (0, 0, 0)), ("X", (0.5, 0.5, 0.5)))),
    "zincblende": _Spec(512, (1, 1, 1, 90, 90, 90), "F", (("A", (0, 0, 0)), ("X", (0.25, 0.25, 0.25)))),
    "wurtzite": _Spec(
        480, (1, 1, _C_HEX_IDEAL, 90, 90, 120), "P", (("A", (1 / 3, 2 / 3, 0)), ("X", (1 / 3, 2 / 3, 0.375)))
    ),
    "fluorite": _Spec(523, (1, 1, 1, 90, 90, 90), "F", (("A", (0, 0, 0)), ("X", (0.25, 0.25, 0.25)))),
    "antifluorite": _Spec(523, (1, 1, 1, 90, 90, 90), "F", (("X", (0, 0, 0)), ("A", (0.25, 0.25, 0.25)))),
    # TiO2: c/a = 0.644, x(O) = 0.305
    "rutile": _Spec(419, (1, 1, 0.644, 90, 90, 90), "P", (("A", (0, 0, 0)), ("X", (0.305, 0.305, 0)))),
    "perovskite": _Spec(
        517, (1, 1, 1, 90, 90, 90), "P", (("B", (0, 0, 0)), ("A", (0.5, 0.5, 0.5)), ("X", (0.5, 0, 0)))
    ),
    # origin choice 1: A 8a, B 16d, X 32e with x = 0.387 (MgAl2O4)
    "spinel": _Spec(
        525, (1, 1, 1, 90, 90, 90), "F", (("A", (0, 0, 0)), ("B", (0.625, 0.625, 0.625)), ("X", (0.387,) * 3))
    ),
    # hexagonal setting, Al2O3: c/a = 2.730, z(Al) = 0.3523, x(O) = 0.3064
    "corundum": _Spec(460, (1, 1, 2.730, 90, 90, 120), "R", (("A", (0, 0, 0.3523)), ("X", (0.3064, 0, 0.25)))),
    # hexagonal setting, ideal cation ordering on rocksalt: c/a = 2 sqrt(6), z(X) = 1/4
    "layered_rocksalt": _Spec(
        458,
        (1, 1, 2 * math.sqrt(6), 90, 90, 120),
        "R",
        (("A", (0, 0, 0.5)), ("B", (0, 0, 0)), ("X", (0, 0, 0.25))),
    ),
}

# rows: primitive vectors in conventional fractional coordinates
_CENTRING = {
    "P": np.eye(3),
    "F": np.array([[0, 0.5, 0.5], [0.5, 0, 0.5], [0.5, 0.5, 0]]),
    "R": np.array([[2 / 3, 1 / 3, 1 / 3], [-1 / 3, 1 / 3, 1 / 3], [-1 / 3, -2 / 3, 1 / 3]]),  # obverse setting
}


@dataclass(frozen=True)
class _Template:
    """A primitive prototype cell at unit scale with its first-shell geometry."""

    name: str
    matrix: np.ndarray  # (3, 3) lattice vectors in Å at a = 1 Å
    roles: tuple[Role, ...]
    frac_coords: np.ndarray  # (n_sites, 3)
    formula: dict[Role, int]  # role -> count in the reduced formula unit
    shell_distance: tuple[float, ...]  # per site: distance to the nearest counter-ion, at unit scale
    anion_anion_distance: float


@dataclass(frozen=True)
class PrototypeFit:
    """One composition placed in one prototype.

    Attributes:
        prototype: a name from ``PROTOTYPES``.
        assignment: role ("A", "B", "X") -> element symbol.
        oxidation_states: element symbol -> oxidation state (may be fractional for mixed valence).
        structure: the oxidation-state-decorated primitive cell, scaled to Shannon-radius contact (Å).
        ewald_energy_per_atom_ev: point-charge Ewald energy of ``structure`` per atom, in eV.
    """

    prototype: str
    assignment: Mapping[str, str]
    oxidation_states: Mapping[str, float]
    structure: Structure
    ewald_energy_per_atom_ev: float

    @property
    def prototype_index(self) -> int:
        return PROTOTYPES.index(self.prototype)

    @property
    def volume_per_atom_a3(self) -> float:
        return self.structure.volume / len(self.structure)


# ----------------------------------------------------------------------------------------------- public helpers
def integer_composition(material: Material, max_denominator: int = 100, tolerance: float = 1e-3) -> Composition:
    """The reduced composition with whole-number amounts (``Li0.5CoO2`` -> ``LiCo2O4``, ``Li0.333CoO2`` -> ``LiCo3O6``).

    The amounts are multiplied by the smallest whole number up to ``max_denominator`` that brings every one within
    ``tolerance`` (formula units) of a positive whole number, so rounded thirds read as thirds.

    Raises:
        SimulationFailed: if the formula does not parse or no such multiplier exists.
    """
    from pymatgen.core import Composition, Element

    try:
        composition = material.to_composition()
    except Exception as exc:  # a corrupted ledger row: bad syntax
        raise SimulationFailed(f"formula {material.formula!r} of {material.id} is not a composition: {exc}") from exc
    unknown = [getattr(el, "symbol", str(el)) for el in composition.elements if not isinstance(el, Element)]
    if unknown:  # pymatgen reads unknown symbols such as 'Xx' as dummy species
        raise SimulationFailed(f"formula {material.formula!r} of {material.id} has unknown elements {unknown}")
    amounts = composition.get_el_amt_dict()
    if not amounts or any(amount <= 0 for amount in amounts.values()):
        raise SimulationFailed(f"formula {material.formula!r} of {material.id} has no positive amounts")
    for multiplier in range(1, max_denominator + 1):
        counts = {el: round(amount * multiplier) for el, amount in amounts.items()}
        if all(n >= 1 and abs(n / multiplier - amounts[el]) <= tolerance for el, n in counts.items()):
            return Composition(counts).reduced_composition
    raise SimulationFailed(
        f"formula {material.formula!r} has amounts that are not ratios of whole numbers with denominators up to "
        f"{max_denominator}; give them as simple fractions, e.g. 'Li0.5CoO2'"
    )


_GUESSES: dict[tuple, tuple] = {}
_GUESSES_MAX = 4096


def oxidation_state_guesses(composition: Composition) -> tuple[dict[str, float], ...]:
    """pymatgen's ``composition.oxi_state_guesses()`` (charge-balanced guesses, most probable first), computed by
    ``oxidation_states.charge_balanced_guesses`` (identical, up to 10× faster) and remembered in this process by the
    composition's species and amounts in their order, so that the composition rung and the rubric's
    ``stoichiometry`` scorer enumerate a formula's oxidation states once between them. Do not change what it
    returns; errors are raised, not remembered.

    Example:
        >>> from pymatgen.core import Composition
        >>> oxidation_state_guesses(Composition("Fe2O3"))[0]
        {'Fe': 3.0, 'O': -2.0}
    """
    from simulators.oxidation_states import charge_balanced_guesses

    key = tuple((str(species), float(amount)) for species, amount in composition.items())
    found = _GUESSES.get(key)
    if found is None:
        found = charge_balanced_guesses(composition)
        if len(_GUESSES) < _GUESSES_MAX:
            _GUESSES[key] = found
    return found


def ionic_oxidation_states(composition: Composition) -> dict[str, float] | None:
    """The most probable charge-balanced oxidation states with the most electronegative element as the only anion.

    Uses pymatgen's ``oxi_state_guesses`` (ICSD oxidation-state statistics); ``None`` if no guess fits.

    Example:
        >>> from pymatgen.core import Composition
        >>> ionic_oxidation_states(Composition("Fe2O3")), ionic_oxidation_states(Composition("NaCl2"))
        ({'Fe': 3.0, 'O': -2.0}, None)
    """
    anion = _anion(composition)
    if anion is None or len(composition) < 2:
        return None
    for guess in oxidation_state_guesses(composition):
        if guess[anion] < 0 and all(value > 0 for element, value in guess.items() if element != anion):
            return {element: float(value) for element, value in guess.items()}
    return None


def prototype_fits(material: Material) -> list[PrototypeFit]:
    """Every prototype and site assignment that fits the composition, lowest Ewald energy per atom first.

    Raises:
        SimulationFailed: when no prototype matches the stoichiometry, no ionic oxidation states balance, or a
            radius is unknown.
    """
    return [dataclasses.replace(fit, structure=fit.structure.copy()) for fit in _fits(material.formula, material.id)]


def best_prototype_structure(material: Material) -> tuple[str, Structure]:
    """The prototype name and oxidation-state-decorated structure with the lowest Ewald energy per atom.

    Raises:
        SimulationFailed: as ``prototype_fits``.
    """
    best = _fits(material.formula, material.id)[0]
    return best.prototype, best.structure.copy()


def bond_valence_misfit(structure: Structure) -> float | None:
    """Global instability index (GII) in valence units, at the isotropic scale that minimises it.

    GII is the RMS over sites of (bond-valence sum - oxidation state). Bonds are each cation's first shell of
    anions, valued with pymatgen's ``calculate_bv_sum`` (Brese and O'Keeffe 1991 parameters) and counted for both
    ends, so a perovskite's oxygen gets its bonds to A as well as to B. Minimising over a uniform scale factor
    removes the arbitrariness of the radius-based cell size; what is left is the mismatch between sites: zero for a
    binary with one cation site, growing as a perovskite's tolerance factor leaves 1. Below about 0.1 v.u. a
    structure is unstrained; above about 0.2 it is unlikely to be stable.

    Returns ``None`` when a bond-valence parameter is missing, an anion is not one of the electronegative elements
    the parameters cover (H B C Si N P As Sb O S Se Te F Cl Br I), or a site has no bonds.
    """
    from pymatgen.analysis.bond_valence import BV_PARAMS, ELECTRONEG, calculate_bv_sum
    from scipy.optimize import minimize_scalar

    elements = {site.specie.element for site in structure}
    anions = {site.specie.element for site in structure if site.specie.oxi_state < 0}
    if any(el not in BV_PARAMS for el in elements) or not anions or not anions <= set(ELECTRONEG):
        return None
    charges = np.array([site.specie.oxi_state for site in structure], dtype=float)
    bonds = []  # (cation index, anion index, cation site, anion neighbour)
    for index, site in enumerate(structure):
        if charges[index] > 0:
            counter = [n for n in structure.get_neighbors(site, 6.0) if charges[n.index] < 0]
            if not counter:
                return None
            nearest = min(n.nn_distance for n in counter)
            bonds += [(index, n.index, site, n) for n in counter if n.nn_distance <= nearest * _SHELL_TOLERANCE]
    if {j for _, j, _, _ in bonds} != {j for j, q in enumerate(charges) if q < 0}:
        return None  # an anion outside every cation's first shell

    def gii(scale: float) -> float:
        sums = np.zeros(len(structure))
        for i, j, site, neighbour in bonds:
            valence = abs(calculate_bv_sum(site, [neighbour], scale_factor=scale))
            sums[i] += valence
            sums[j] -= valence
        return float(np.sqrt(np.mean((sums - charges) ** 2)))

    best = minimize_scalar(gii, bounds=(0.5, 2.0), method="bounded", options={"xatol": 1e-6})
    return float(best.fun)


# ----------------------------------------------------------------------------------------------- the search
@lru_cache(maxsize=2048)
def _fits(formula: str, candidate_id: str) -> tuple[PrototypeFit, ...]:
    """Cached per process: the prototype and CHGNet rungs (and their cost models) ask for the same compositions."""
    with quiet_electronegativity():
        return _search(Material(formula=formula, id=candidate_id))


def _search(material: Material) -> tuple[PrototypeFit, ...]:
    composition = integer_composition(material)
    reduced = composition.reduced_formula
    anion = _anion(composition)
    matches = _stoichiometry_matches(composition, anion)
    if not matches:
        raise SimulationFailed(
            f"no prototype matches the stoichiometry of {reduced}; the prototype rung covers AX (rocksalt, CsCl, "
            "zincblende, wurtzite), AX2 (fluorite, rutile), A2X (antifluorite), A2X3 (corundum), ABX2 (layered "
            "rocksalt), ABX3 (perovskite) and AB2X4 (spinel) with one anion"
        )
    oxidation = ionic_oxidation_states(composition)
    if oxidation is None:
        raise SimulationFailed(
            f"{reduced} has no charge-balanced oxidation states with {anion} as the only anion (pymatgen "
            "oxi_state_guesses, ICSD states), so it cannot be placed in an ionic prototype"
        )
    fits = [_fit(template, assignment, oxidation) for template, assignment in matches]
    fits.sort(key=lambda f: (round(f.ewald_energy_per_atom_ev, 9), f.prototype_index, sorted(f.assignment.items())))
    return tuple(fits)


def _anion(composition: Composition) -> str | None:
    scored = [(_electronegativity(el), el.symbol) for el in composition.elements]
    scored = [(x, symbol) for x, symbol in scored if not math.isnan(x)]
    return max(scored)[1] if scored else None


def _electronegativity(element) -> float:
    with quiet_electronegativity():
        return float(element.X)


@contextmanager
def quiet_electronegativity() -> Iterator[None]:
    """Silence pymatgen's warning for He, Ne and Ar, which have no Pauling value (it reads them as NaN)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="No Pauling electronegativity", category=UserWarning)
        yield


def _stoichiometry_matches(composition: Composition, anion: str | None) -> list[tuple[_Template, dict[str, str]]]:
    if anion is None:
        return []
    counts = {el.symbol: int(round(amount)) for el, amount in composition.items()}
    cations = sorted(symbol for symbol in counts if symbol != anion)
    matches = []
    for name in PROTOTYPES:
        template = _template(name)
        cation_roles = [role for role in _CATION_ROLES if role in template.formula]
        if len(cation_roles) != len(cations) or template.formula["X"] != counts[anion]:
            continue
        for roles in permutations(cation_roles):
            if all(template.formula[role] == counts[el] for role, el in zip(roles, cations, strict=True)):
                matches.append((template, {"X": anion, **dict(zip(roles, cations, strict=True))}))
    return matches


def _fit(template: _Template, assignment: dict[str, str], oxidation: dict[str, float]) -> PrototypeFit:
    from pymatgen.core import Lattice, Species, Structure
    from pymatgen.core.ewald import EwaldSummation

    radius = {element: _shannon_radius(element, oxidation[element]) for element in assignment.values()}
    anion_radius = radius[assignment["X"]]
    ratios = [2 * anion_radius / template.anion_anion_distance]
    for role, distance in zip(template.roles, template.shell_distance, strict=True):
        if role != "X":
            ratios.append((radius[assignment[role]] + anion_radius) / distance)
    species = [Species(assignment[role], oxidation[assignment[role]]) for role in template.roles]
    structure = Structure(Lattice(template.matrix * max(ratios)), species, template.frac_coords)
    energy = EwaldSummation(structure).total_energy / len(structure)
    return PrototypeFit(template.name, dict(assignment), dict(oxidation), structure, float(energy))


PAULING_ANION_RADII_A = {"P": 2.12, "As": 2.22, "Sb": 2.45}
"""Pauling's radii (Å) of the trivalent pnictide anions, which pymatgen's Shannon table lacks (it lists P, As and Sb
only as cations). L. Pauling, *The Nature of the Chemical Bond*, 3rd ed. (1960), table 13-3."""


def _shannon_radius(symbol: str, oxidation_state: float, coordination: int = 6) -> float:
    """Shannon ionic radius (Å) at the nearest tabulated oxidation state of the same sign and nearest CN.

    Falls back to pymatgen's average radius of that sign, then to ``PAULING_ANION_RADII_A`` for P³⁻, As³⁻ and Sb³⁻.
    """
    from pymatgen.core import Element

    element = Element(symbol)
    table = element.data.get("Shannon radii") or {}
    sign = 1 if oxidation_state > 0 else -1
    # pymatgen's table has keys that are not charges (Eu has an empty one): skip them.
    states = [int(key) for key in table if key.lstrip("+-").isdigit() and int(key) * sign > 0]
    if not states:
        fallback = element.average_cationic_radius if sign > 0 else element.average_anionic_radius
        if fallback and float(fallback) > 0:
            return float(fallback)
        if sign < 0 and symbol in PAULING_ANION_RADII_A:
            return PAULING_ANION_RADII_A[symbol]
        raise SimulationFailed(f"no ionic radius is tabulated for {symbol} with oxidation state {oxidation_state:+g}")
    state = min(states, key=lambda s: (abs(s - oxidation_state), -abs(s)))
    by_cn = table[str(state)]
    cn_key = min(by_cn, key=lambda key: (abs(_cn_number(key) - coordination), len(key), key))
    by_spin = by_cn[cn_key]
    spin = "High Spin" if "High Spin" in by_spin else ("" if "" in by_spin else sorted(by_spin)[0])
    return float(by_spin[spin]["ionic_radius"])


def _cn_number(key: str) -> int:
    return _ROMAN.get(key.removesuffix("SQ").removesuffix("PY"), 6)


# ----------------------------------------------------------------------------------------------- templates
@lru_cache(maxsize=None)
def _template(name: str) -> _Template:
    import spglib
    from pymatgen.core import Lattice, Structure

    spec = _SPECS[name]
    conventional = Lattice.from_parameters(*spec.abc_angles).matrix
    symmetry = spglib.get_symmetry_from_database(spec.hall_number)
    roles, coords = [], []
    for role, position in spec.sites:
        for frac in _orbit(np.asarray(position, float), symmetry["rotations"], symmetry["translations"]):
            roles.append(role)
            coords.append(frac)
    # conventional fractional -> Cartesian -> primitive fractional, keeping one copy of each site
    matrix = _CENTRING[spec.centring] @ conventional
    cartesian = np.asarray(coords) @ conventional
    primitive = np.linalg.solve(matrix.T, cartesian.T).T
    unique_roles, unique = [], []
    for role, frac in zip(roles, primitive % 1.0, strict=True):
        if not any(_same_position(frac, seen) for seen in unique):
            unique_roles.append(role)
            unique.append(frac)
    frac_coords = np.round(np.asarray(unique), 12) % 1.0
    placeholder = Structure(Lattice(matrix), ["H"] * len(unique), frac_coords)
    is_anion = [role == "X" for role in unique_roles]
    shell, anion_anion = [], math.inf
    for index, site in enumerate(placeholder):
        neighbours = placeholder.get_neighbors(site, 1.5)  # 1.5 a covers the first shells of every prototype
        shell.append(min(n.nn_distance for n in neighbours if is_anion[n.index] != is_anion[index]))
        if is_anion[index]:
            anion_anion = min([anion_anion] + [n.nn_distance for n in neighbours if is_anion[n.index]])
    counts = {role: unique_roles.count(role) for role in sorted(set(unique_roles))}
    divisor = math.gcd(*counts.values())
    return _Template(
        name=name,
        matrix=matrix,
        roles=tuple(unique_roles),
        frac_coords=frac_coords,
        formula={role: count // divisor for role, count in counts.items()},
        shell_distance=tuple(shell),
        anion_anion_distance=anion_anion,
    )


def _orbit(position: np.ndarray, rotations: np.ndarray, translations: np.ndarray) -> list[np.ndarray]:
    images: list[np.ndarray] = []
    for rotation, translation in zip(rotations, translations, strict=True):
        image = (rotation @ position + translation) % 1.0
        if not any(_same_position(image, seen) for seen in images):
            images.append(image)
    return images


def _same_position(a: np.ndarray, b: np.ndarray, tol: float = 1e-5) -> bool:
    delta = (a - b + 0.5) % 1.0 - 0.5
    return bool(np.all(np.abs(delta) < tol))
