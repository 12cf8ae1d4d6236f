"""schemathesis hooks and checks for the lab server's contract; ``schemathesis.toml`` loads them (``hooks``).

So the command-line run and ``tests/instruments/test_server_contract.py`` test the same thing.

- **A workaround (schemathesis 4.32).** A response schema holding an OpenAPI 3.1 tuple (``prefixItems``, here
  ``LabResult.station_log``'s ``(station, start_s, end_s)`` rows) is rewritten by schemathesis into Draft 4's
  ``items: [...]`` and then refused as an invalid Draft 2020-12 schema, so ``response_schema_conformance`` errors on
  every finished result (the same family as schemathesis issues #3842 and #4099). ``before_load_schema`` turns each
  tuple into an array of any of its positions' schemas, which schemathesis can read, and keeps the schema as published;
  the check ``responses_match_the_published_tuples`` then validates every JSON response against the published schema,
  tuples included, with jsonschema-rs's Draft 2020-12 validator. Nothing the server publishes goes unchecked.
- **A narrower positive-data check.** ``schemathesis.toml`` lets a schema-valid ``POST /jobs`` be refused with
  400 or 422, because some refusals depend on chemistry and on the lab (see there).
  ``valid_jobs_are_refused_only_for_lab_reasons`` requires such a refusal to name one of those reasons.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonschema_rs
import schemathesis

#: The ``error`` of a refusal a job that is valid under the published schema may still get (``ErrorBody.error``).
LAB_REASONS = frozenset({"invalid_candidate", "envelope_violation", "setup_error"})

# The schema as published rides along in the loaded schema under this key rather than in a module global, so a check
# always reads the schema of the run it checks, whichever import of this file registered it.
PUBLISHED_KEY = "x-closedloop-published"
_validators: dict[tuple[int, str, str, str], Any] = {}


def _untuple(node: Any) -> None:
    if isinstance(node, dict):
        if isinstance(node.get("prefixItems"), list):
            positions = node.pop("prefixItems")
            node["items"] = {"anyOf": positions} if "items" not in node else {"anyOf": [*positions, node["items"]]}
        for value in node.values():
            _untuple(value)
    elif isinstance(node, list):
        for value in node:
            _untuple(value)


@schemathesis.hook
def before_load_schema(context: schemathesis.HookContext, raw_schema: dict[str, Any]) -> None:
    """Keep the published schema, then replace its tuples by something schemathesis 4.32 can validate against."""
    if PUBLISHED_KEY in raw_schema:  # already done by another import of this file
        return
    published = copy.deepcopy(raw_schema)
    _untuple(raw_schema.get("paths", {}))
    _untuple(raw_schema.get("components", {}))
    raw_schema[PUBLISHED_KEY] = published


def _published_validator(published: dict[str, Any], path: str, method: str, status: str) -> Any:
    key = (id(published), path, method, status)
    if key not in _validators:
        response = published.get("paths", {}).get(path, {}).get(method, {}).get("responses", {}).get(status, {})
        schema = response.get("content", {}).get("application/json", {}).get("schema")
        _validators[key] = None if schema is None else jsonschema_rs.Draft202012Validator(
            {**schema, "components": published.get("components", {})}
        )
    return _validators[key]


@schemathesis.check
def responses_match_the_published_tuples(ctx: Any, response: Any, case: Any) -> None:
    """A JSON response is valid under the schema as published, tuples (``prefixItems``) included."""
    published = case.operation.schema.raw_schema.get(PUBLISHED_KEY)
    if published is None:
        raise AssertionError(f"the schema was loaded without {__name__}'s before_load_schema hook; load it with the "
                             "repository's schemathesis.toml")
    status, operation = str(response.status_code), case.operation
    validator = _published_validator(published, operation.path, operation.method.lower(), status)
    if validator is None or "json" not in (response.headers.get("content-type") or [""])[0]:
        return
    errors = [str(error).split("\n", 1)[0] for error in validator.iter_errors(response.json())]
    if errors:
        raise AssertionError(
            f"{operation.label} answered {status} with a body that is not valid under the published schema: "
            f"{'; '.join(errors[:3])}"
        )


@schemathesis.check
def valid_jobs_are_refused_only_for_lab_reasons(ctx: Any, response: Any, case: Any) -> None:
    """A schema-valid job refused with 400 or 422 names a lab reason, never ``invalid_job``."""
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive or response.status_code not in (400, 422):
        return
    try:
        kind = response.json().get("error")
    except (ValueError, AttributeError):
        kind = None
    if kind not in LAB_REASONS:
        raise AssertionError(
            f"{case.operation.label} refused a request that is valid under the published schema as {kind!r} "
            f"({response.status_code}); only {sorted(LAB_REASONS)} may refuse one, so the schema says less than the "
            "server requires: make the schema say it, or accept the request"
        )
