"""``closedloop spec schema|reference``: the campaign spec's JSON Schema and its Markdown reference (docs/spec.md).

Registered at the end of ``orchestrator.interfaces.cli``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from orchestrator.interfaces.cli_common import emit_json, fail, out

__all__ = ["spec_app"]

spec_app = typer.Typer(help="The campaign spec: its JSON Schema and its reference (docs/spec.md).",
                       no_args_is_help=True)


@spec_app.command("schema")
def schema() -> None:
    """Print the campaign spec's JSON Schema on stdout (pydantic's model_json_schema of CampaignSpec)."""
    from orchestrator.interfaces.spec_reference import spec_schema

    emit_json(spec_schema())


@spec_app.command("reference")
def reference(
    out_file: Annotated[Path | None, typer.Option("--out", help="where to write the Markdown; '-' for stdout "
                                                  "(default: the repository's docs/spec.md)")] = None,
    check: Annotated[bool, typer.Option("--check", help="write nothing; exit 1 when the file is not current")] = False,
) -> None:
    """Render the spec reference (every section and field, simulators, lab drivers, the lab envelope) from the
    spec's own models."""
    import sys

    from orchestrator.interfaces.spec_reference import reference_path, render_reference

    text = render_reference()
    if out_file is not None and str(out_file) == "-":
        sys.stdout.write(text)
        return
    path = out_file or reference_path()
    if check:
        current = path.read_text(encoding="utf-8") if path.is_file() else None
        if current != text:
            fail(f"{path} is not current; regenerate it with `closedloop spec reference --out {path}`", code=1)
        out.print(f"{path} is current")
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    out.print(f"wrote {path}")
