"""What the lab server publishes at ``/openapi.json`` beyond FastAPI's defaults, so the schema says what it does.

``tests/instruments/test_server_contract.py`` runs schemathesis against the server with every check; these pieces
are what keeps that run clean:

- ``error_responses(*codes)``: the ``ErrorBody`` responses a route really returns, for FastAPI's ``responses=``.
- ``job_examples()``: jobs this server accepts, shown in the docs and sent by schemathesis's examples phase.
- ``job_links(*operation_ids)``: OpenAPI links from a response's ``job_key`` to the job's other operations
  (submit -> status -> result, and cancel), so a client, and schemathesis's stateful phase, can follow a job.
- ``require_discriminators(spec)``: pydantic gives a candidate's ``type`` a default, so the published schema left it
  optional, yet the server cannot tell a molecule from a material without it. Every schema reached through a
  ``discriminator`` now requires the discriminating property, as OpenAPI asks.
- The ``job_key`` path convertor: a job key is any non-empty string, newlines included, and every key the server
  accepts must be reachable at ``/jobs/{job_key}`` (Starlette's ``path`` convertor stops at a newline).
- ``shadowed_key_problem(job_key)`` and ``forbid_shadowed_keys(spec)``: a key ending in ``/result`` would be
  unreachable, because ``GET /jobs/a/result`` is the result of job ``a``; the server refuses such keys and the
  schema says so.

Example:
    >>> choice = {"propertyName": "type", "mapping": {"a": "#/components/schemas/A"}}
    >>> spec = {"components": {"schemas": {"A": {"properties": {"type": {}}, "required": ["x"]}}},
    ...         "paths": {"/p": {"discriminator": choice}}}
    >>> require_discriminators(spec)["components"]["schemas"]["A"]["required"]
    ['x', 'type']
"""

from __future__ import annotations

import re
from http import HTTPStatus
from typing import Any

from starlette.convertors import Convertor, register_url_convertor

__all__ = [
    "JOB_KEY_CONVERTOR",
    "JobKeyConvertor",
    "error_responses",
    "forbid_shadowed_keys",
    "job_examples",
    "job_links",
    "require_discriminators",
    "shadowed_key_problem",
]

JOB_KEY_CONVERTOR = "job_key"
"""Name of the path convertor for job keys: ``/jobs/{job_key:job_key}``."""


class JobKeyConvertor(Convertor[str]):
    """Starlette's ``path`` convertor (a job key may contain ``/``), but matching every character, newlines too."""

    regex = r"(?s:.+)"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor(JOB_KEY_CONVERTOR, JobKeyConvertor())


def error_responses(*codes: int, model: Any) -> dict[int | str, dict[str, Any]]:
    """FastAPI ``responses=`` entries: each status in ``codes`` answers with ``model`` (the server's ``ErrorBody``)."""
    return {code: {"model": model, "description": HTTPStatus(code).phrase} for code in codes}


def job_examples() -> dict[str, dict[str, Any]]:
    """OpenAPI examples of ``POST /jobs`` bodies (FastAPI ``openapi_examples``), built by the project's own parsers."""
    from instruments.base import LabJob
    from vocabulary.domain import Conditions, Molecule

    conditions = LabJob(job_key="example/conditions", candidate=Conditions(values={"temperature_c": 60.0}, id="c-60"),
                        parameters={"priority": 1})
    molecule = LabJob(job_key="example/ethanol", candidate=Molecule.parse("CCO"))
    return {
        "conditions": {"summary": "process conditions", "value": conditions.model_dump(mode="json")},
        "molecule": {
            "summary": "a molecule, its id the InChIKey of its SMILES", "value": molecule.model_dump(mode="json")
        },
    }


def job_links(*operation_ids: str) -> dict[str, Any]:
    """OpenAPI links from a 200 response carrying ``job_key`` to the job operations named by ``operation_ids``."""
    return {
        operation_id: {
            "operationId": operation_id,
            "parameters": {"job_key": "$response.body#/job_key"},
            "description": f"the same job's {operation_id.removeprefix('job_')}",
        }
        for operation_id in operation_ids
    }


def require_discriminators(spec: dict[str, Any]) -> dict[str, Any]:
    """Mark the discriminating property required in every component schema a ``discriminator`` maps to; in place.

    A tagged union needs its tag in the payload (OpenAPI: "the discriminator property MUST be a required field" of
    each choice), whatever default the model gives it.
    """
    schemas = spec.get("components", {}).get("schemas", {})
    prefix = "#/components/schemas/"

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            discriminator = node.get("discriminator")
            if isinstance(discriminator, dict):
                refs = list(discriminator.get("mapping", {}).values())
                refs += [choice["$ref"] for choice in node.get("oneOf", []) if "$ref" in choice]
                for ref in refs:
                    target = schemas.get(ref.removeprefix(prefix)) if ref.startswith(prefix) else None
                    if target is not None and discriminator["propertyName"] not in target.setdefault("required", []):
                        target["required"].append(discriminator["propertyName"])
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(spec)
    return spec


# Starlette anchors a route with Python's '$', which also matches before a final newline, so 'a/result\n' is shadowed
# too. In the published pattern (ECMA-262, as JSON Schema reads it) '$' is the end of the string.
_SHADOWED_KEY = re.compile(r"/result\n?\Z")
_SHADOWED_KEY_PATTERN = "/result\\n?$"


def shadowed_key_problem(job_key: str) -> str | None:
    """Why ``job_key`` cannot be served (its status would be routed to another job's result), or None.

    Example:
        >>> shadowed_key_problem("campaign/c1") is None
        True
        >>> shadowed_key_problem("campaign/result")  # doctest: +ELLIPSIS
        "job key 'campaign/result' ends in '/result', so GET /jobs/campaign/result would be the result of ..."
    """
    if _SHADOWED_KEY.search(job_key) is None:
        return None
    shorter = job_key[: job_key.rindex("/result")]
    return (f"job key {job_key!r} ends in '/result', so GET /jobs/{job_key} would be the result of job {shorter!r}, "
            "not this job's status; choose a key that does not end in '/result'")


def forbid_shadowed_keys(spec: dict[str, Any]) -> dict[str, Any]:
    """Publish ``shadowed_key_problem``'s rule on ``LabJob.job_key``; in place."""
    job_key = spec.get("components", {}).get("schemas", {}).get("LabJob", {}).get("properties", {}).get("job_key")
    if job_key is not None:
        job_key["not"] = {"pattern": _SHADOWED_KEY_PATTERN}
    return spec
