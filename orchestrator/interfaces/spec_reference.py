"""The spec reference, docs/spec.md, rendered from the spec's own JSON Schema.

Every section and field of ``orchestrator.spec.CampaignSpec`` is read from ``CampaignSpec.model_json_schema()``:
its type, unit (the field's ``json_schema_extra["unit"]``), default, allowed values, range, description and example.
The registered simulators, lab drivers and planner arms come from their entry points, the simulated lab's
parameters from ``SimLabDriver``'s docstring and ``[lab.parameters.envelope]`` from ``instruments.envelope``.
``tests/orchestrator/test_spec_reference.py`` fails when docs/spec.md is not what this module renders.

Regenerate it with ``closedloop spec reference`` or ``python -m orchestrator.interfaces.spec_reference``.

Example:
    >>> text = render_reference()
    >>> "### `lab.driver`" in text and '<a id="lab-driver"></a>' in text
    True
"""

from __future__ import annotations

import inspect
import json
import re
import sys
from pathlib import Path
from typing import Any

from orchestrator.spec import REFERENCE, CampaignSpec

__all__ = ["DRIVER_NOTES", "render_reference", "spec_schema", "undocumented_fields", "write_reference"]

#: What each built-in driver is, in a line; a registered driver without a note is listed by its target only.
DRIVER_NOTES = {
    "simlab": "the simulated lab (the default): ground truth from `lab.oracle_column`, `lab.oracle` or "
              "`lab.oracle_simulator`, stations and durations from [Lab parameters](#lab-parameters)",
    "manual": "a person enters results: see `closedloop suggest` / `closedloop results add`; `closedloop run` "
              "dispatches the batch and returns with status `waiting for results`",
    "http": "a lab server over HTTP (`closedloop run --lab-url URL` sets it); the ground truth lives on the server",
    "recorded": "replays a recorded lab: each job is answered from stored results",
    "pylabrobot": "a PyLabRobot liquid handler (adapter)",
    "sila2": "a SiLA 2 server (adapter)",
    "madsci": "a MADSci workcell (adapter)",
}

#: ``SimLabDriver`` arguments the campaign sets itself (from the spec or the ledger); never given in [lab.parameters].
_SET_BY_CAMPAIGN = {"oracle", "noise_sd", "seed", "start_time_s"}

#: ``ParameterLimit``'s fields (instruments.envelope), which it documents in prose.
_LIMIT_FIELDS = {
    "low": "lowest allowed value, inclusive, in `unit` (leave out for no lower end)",
    "high": "highest allowed value, inclusive, in `unit` (leave out for no upper end)",
    "unit": "the setting's unit, as messages show it",
    "choices": "the allowed values of a categorical setting",
    "is_required": "refuse a job that does not state the setting",
}

_ENVELOPE_EXAMPLE = """\
[lab.parameters.envelope]
name = "furnace"
forbidden_hazards = ["pyrophoric", "H224"]
allowed_reagents = ["CCO", "O", "CS(C)=O"]
max_job_duration_s = 86400

[lab.parameters.envelope.parameters]
temperature_c = [25, 250, "°C"]            # low, high, unit
solvent = { choices = ["DMF", "THF"] }
stir_rpm = { low = 0, high = 1200, unit = "rpm", is_required = true }
"""

_MINIMAL_EXAMPLE = """\
[campaign]
name = "hydration"
kind = "molecule"

[objective]
property = "dg_hydration"
unit = "kcal/mol"
direction = "minimize"

[space]
pool = "freesolv.csv"          # relative to this file
column = "smiles"

[lab]
oracle_column = "expt"         # the simulated lab's ground truth

[budget]
lab_experiments = 24
"""

_INLINE_CONDITIONS_EXAMPLE = """\
[campaign]
name = "buchwald-by-hand"
kind = "conditions"

[objective]
property = "yield_pct"
unit = "%"
direction = "maximize"

[[space.inline]]
base = "K2CO3"
temperature_c = 60
yield_pct = 41.0               # lab.oracle_column: this row's ground truth, not a parameter

[[space.inline]]
base = "Cs2CO3"
temperature_c = 80
yield_pct = 67.5

[lab]
oracle_column = "yield_pct"

[budget]
lab_experiments = 2
"""

_EXAMPLES = {"minimal": _MINIMAL_EXAMPLE, "inline_conditions": _INLINE_CONDITIONS_EXAMPLE,
             "envelope": _ENVELOPE_EXAMPLE}


def spec_schema() -> dict[str, Any]:
    """The campaign spec's JSON Schema (pydantic's ``model_json_schema`` of ``CampaignSpec``)."""
    return CampaignSpec.model_json_schema()


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref") or next((item["$ref"] for item in node.get("allOf", []) if "$ref" in item), None)
    return schema["$defs"][ref.rsplit("/", 1)[-1]] if ref else node


def _sections(schema: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any] | None]]:
    """(name, the section's property, the section's model schema or None for a top-level scalar) in spec order."""
    out = []
    for name, prop in schema["properties"].items():
        model = _resolve(schema, prop.get("items", prop)) if "$ref" in prop.get("items", prop) else None
        out.append((name, prop, model))
    return out


def undocumented_fields(schema: dict[str, Any] | None = None) -> list[str]:
    """Field paths of the spec with no description or no example (a default counts as one); empty when all are."""
    schema = schema or spec_schema()
    missing = []
    for name, prop, model in _sections(schema):
        if not prop.get("description"):
            missing.append(name)
        if model is None:
            continue
        for field, node in model["properties"].items():
            if not node.get("description"):
                missing.append(f"{name}.{field} (description)")
            if not node.get("examples") and node.get("default") in (None, "", [], {}):
                missing.append(f"{name}.{field} (example)")
    return missing


def _type(schema: dict[str, Any], node: dict[str, Any]) -> str:
    if "anyOf" in node:
        kinds = [_type(schema, option) for option in node["anyOf"] if option.get("type") != "null"]
        optional = any(option.get("type") == "null" for option in node["anyOf"])
        return " or ".join(kinds) + (" (optional)" if optional else "")
    if "const" in node:
        return json.dumps(node["const"], ensure_ascii=False)
    if "enum" in node:
        return "one of " + ", ".join(json.dumps(v, ensure_ascii=False) for v in node["enum"])
    if "$ref" in node:
        return "table"
    kind = node.get("type")
    if kind == "array":
        return f"list of {_type(schema, node.get('items', {})) or 'values'}"
    if kind == "object":
        values = node.get("additionalProperties")
        return f"table of {_type(schema, values)}" if isinstance(values, dict) and values else "table"
    return {"string": "string", "integer": "integer", "number": "number", "boolean": "boolean"}.get(kind, kind or "")


def _range(node: dict[str, Any]) -> str:
    options = [node, *node.get("anyOf", [])]
    bounds = []
    for option in options:
        for key, sign in (("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"), ("exclusiveMaximum", "<")):
            if key in option:
                value = option[key]
                bounds.append(f"{sign} {value}" if abs(value) != 2**63 else f"{sign} {'-' if value < 0 else ''}2**63")
        if "minLength" in option:
            bounds.append(f"at least {option['minLength']} character(s)")
    return ", ".join(bounds)


def toml_value(value: Any) -> str:
    """A value as TOML writes it inline.

    Example:
        >>> toml_value({"low": 25, "choices": ["DMF"], "is_required": True})
        '{ low = 25, choices = ["DMF"], is_required = true }'
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        key = lambda k: k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k)  # noqa: E731
        return "{ " + ", ".join(f"{key(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


def _field_block(schema: dict[str, Any], section: str, field: str, node: dict[str, Any], required: bool) -> list[str]:
    facts = [f"type: {_type(schema, node)}"]
    if required:
        facts.append("**required**")
    elif "default" not in node:  # a default_factory: an empty table or list
        facts.append("default: empty")
    else:
        facts.append("default: none" if node["default"] is None else f"default: `{toml_value(node['default'])}`")
    unit = node.get("unit")
    if unit:
        facts.append(f"unit: {unit}")
    bounds = _range(node)
    if bounds:
        facts.append(f"range: {bounds}")
    anchor, title = (f"{section}-{field}", f"{section}.{field}") if section else (field, field)
    lines = [f'<a id="{anchor}"></a>', f"### `{title}`", "", " · ".join(facts), "",
             _sentence(node.get("description", ""))]
    examples = node.get("examples") or ([node["default"]] if node.get("default") not in (None, "", [], {}) else [])
    if examples:
        lines += ["", f"Example: `{field} = {toml_value(examples[0])}`"]
    return [*lines, ""]


def _sentence(text: str) -> str:
    """A description as a sentence: capitalised, with one final full stop."""
    text = text.strip().rstrip(".")
    return (text[:1].upper() + text[1:] + ".") if text else ""


def _docstring_args(obj: Any) -> dict[str, str]:
    """``name: text`` entries of a Google-style docstring's ``Args:`` block, continuation lines joined."""
    doc = inspect.getdoc(obj) or ""
    block = doc.split("Args:", 1)[1] if "Args:" in doc else ""
    args: dict[str, str] = {}
    last = None
    for line in block.splitlines()[1:]:
        if line and not line.startswith(" "):
            break  # the next docstring section
        match = re.match(r"^    (\w+): (.*)$", line)
        if match:
            last = match.group(1)
            args[last] = match.group(2).strip()
        elif last and line.strip():
            args[last] += " " + line.strip()
    return args


def _registered() -> tuple[dict[str, str], dict[str, str], list[str]]:
    from instruments.registry import available_drivers
    from orchestrator.planner_registry import installed_planner_names
    from simulators.registry import available_simulators

    # installed plug-ins only: an arm a test or a notebook registered in this process is not part of the reference
    simulators = {name: ep.value for name, ep in sorted(available_simulators().items())}
    return simulators, available_drivers(), list(installed_planner_names())


def _plug_in_sections() -> list[str]:
    from instruments.envelope import SafetyEnvelope
    from instruments.simlab import SimLabDriver

    simulators, drivers, arms = _registered()
    lines = ['<a id="simulators"></a>', "## Simulators", "",
             "Names for `ladder.simulator` and `lab.oracle_simulator` (entry points `closedloop.simulators`; a "
             "plug-in adds its own the same way).", "", "| name | implemented by |", "| --- | --- |"]
    lines += [f"| `{name}` | `{target}` |" for name, target in simulators.items()]
    lines += ["", '<a id="lab-drivers"></a>', "## Lab drivers", "",
              "Names for `lab.driver` (entry points `closedloop.instruments`).", "",
              "| name | what it is | implemented by |", "| --- | --- | --- |"]
    names = sorted(set(drivers) | {"manual"})  # the manual driver is documented whether or not it is installed yet
    lines += [f"| `{name}` | {DRIVER_NOTES.get(name, '')} | `{drivers.get(name, 'instruments.manual')}` |"
              for name in names]
    lines += ["", '<a id="planner-arms"></a>', "## Planner arms", "",
              "Names for `planner.main` and `planner.control` (entry points `closedloop.planners`): "
              + ", ".join(f"`{arm}`" for arm in arms) + ".", ""]
    args = _docstring_args(SimLabDriver)
    lines += ['<a id="lab-parameters"></a>', "## Lab parameters (`[lab.parameters]` for `driver = \"simlab\"`)", "",
              "Keyword arguments of the simulated lab (`instruments.simlab.SimLabDriver`). The campaign sets "
              + ", ".join(f"`{name}`" for name in sorted(_SET_BY_CAMPAIGN))
              + " itself (from `[lab]`, `[campaign] seed` and the ledger).", ""]
    lines += [f"- `{name}`: {text}" for name, text in args.items() if name not in _SET_BY_CAMPAIGN]
    envelope = SafetyEnvelope.model_json_schema()
    described = _docstring_args(SafetyEnvelope)
    lines += ["", '<a id="lab-parameters-envelope"></a>', "## `[lab.parameters.envelope]`: the safety envelope", "",
              "What the lab agrees to run (`instruments.envelope.SafetyEnvelope`). Every job is checked against it "
              "before it is submitted; a job outside it is recorded as rejected and never runs. A `Conditions` "
              "candidate's values are settings, so the envelope limits the design space's parameters too.", ""]
    for field, node in envelope["properties"].items():
        if field in ("type", "schema_version"):
            continue
        default = node.get("default")
        lines.append(f"- `{field}` ({_type(envelope, node)}, default `{toml_value(default)}`): "
                     f"{described.get(field, '')}" if default is not None else
                     f"- `{field}` ({_type(envelope, node)}, default none): {described.get(field, '')}")
    lines += ["", "Each entry of `[lab.parameters.envelope.parameters]` is a setting's limit: `[low, high]` or "
              "`[low, high, unit]`, or a table with:", ""]
    lines += [f"- `{field}`: {text}" for field, text in _LIMIT_FIELDS.items()]
    lines += ["", "```toml", _ENVELOPE_EXAMPLE.rstrip(), "```", ""]
    return lines


def render_reference(schema: dict[str, Any] | None = None) -> str:
    """docs/spec.md as Markdown: the sections and fields, then the simulators, drivers, arms and lab envelope."""
    schema = schema or spec_schema()
    sections = _sections(schema)
    lines = ["# Campaign spec reference", "",
             "<!-- Generated from orchestrator/spec.py by `closedloop spec reference`; do not edit by hand. -->", "",
             schema.get("description", "").strip(), "",
             "`closedloop spec schema` prints the spec's JSON Schema; an invalid spec names each wrong field with a "
             "link to its entry here. Units are the field's own; \"objective unit\" is `[objective] unit`.", "", "```toml", _MINIMAL_EXAMPLE.rstrip(), "```", "", "Sections:", ""]
    for name, prop, model in sections:
        heading = f"[[{name}]]" if prop.get("type") == "array" else (f"[{name}]" if model else name)
        lines.append(f"- [`{heading}`](#{name}): {prop.get('description', '').split(': ', 1)[-1]}")
    lines += ["- [Simulators](#simulators), [Lab drivers](#lab-drivers), [Planner arms](#planner-arms), "
              "[Lab parameters](#lab-parameters), [`[lab.parameters.envelope]`](#lab-parameters-envelope)", ""]
    required_sections = set(schema.get("required", []))
    for name, prop, model in sections:
        if model is None:
            lines += ['<a id="top-level"></a>', "## Top level", ""]
            lines += _field_block(schema, "", name, prop, name in required_sections)
            continue
        heading = f"[[{name}]]" if prop.get("type") == "array" else f"[{name}]"
        presence = "required" if name in required_sections else "optional"
        lines += [f'<a id="{name}"></a>', f"## `{heading}` ({presence})", "", model.get("description", "").strip(),
                  ""]
        if name == "space":
            lines += ["Inline conditions with their ground truth (each `[[space.inline]]` table is one row; the key "
                      "`lab.oracle_column` names is the row's measured value):", "", "```toml",
                      _INLINE_CONDITIONS_EXAMPLE.rstrip(), "```", ""]
        required = set(model.get("required", []))
        for field, node in model["properties"].items():
            lines += _field_block(schema, name, field, node, field in required)
    lines += _plug_in_sections()
    return "\n".join(lines).replace("``", "`").rstrip() + "\n"  # docstrings' reST literals as Markdown


def reference_path() -> Path:
    """The repository's docs/spec.md (beside the orchestrator package)."""
    return Path(__file__).resolve().parents[2] / REFERENCE


def write_reference(path: Path | None = None) -> Path:
    """Render the reference into ``path`` (default the repository's docs/spec.md); returns the path written."""
    path = path or reference_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_reference(), encoding="utf-8")
    return path


if __name__ == "__main__":  # pragma: no cover
    print(write_reference(Path(sys.argv[1]) if len(sys.argv) > 1 else None))
