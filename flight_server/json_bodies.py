"""Action bodies as JSON, for generic Flight clients that do not have our ``.proto``.

A JSON request gets a JSON answer (:func:`encode_json_result`); a protobuf one, protobuf.

``{"dataset": "ds", "filter": "id < 10"}`` is the same request as the protobuf ``ActionRequest``
with those fields. Keys are the field names of :class:`~flight_server.requests.ActionRequest`
(``filter`` is accepted for ``filter_sql``); bytes fields (``filter_substrait``, ``fragments``) are
base64 strings. A protobuf body never starts with ``{`` (0x7b would be a group tag, which our
messages do not use), so the two forms cannot be confused.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
from typing import Any

from flight_server.requests import ActionRequest, ActionResult
from lance_format.core.errors import InvalidInputError

__all__ = ["decode_json_action", "encode_json_result", "is_json_body"]

_FIELDS = {f.name: f for f in dataclasses.fields(ActionRequest)}
_ALIASES = {"filter": "filter_sql"}
_MODES = ("auto", "create", "append", "overwrite", "stage")


def is_json_body(body: bytes) -> bool:
    """Whether an action body is JSON (an object) rather than protobuf."""
    return body.lstrip()[:1] == b"{"


def _b64(value: Any, key: str) -> bytes:
    if not isinstance(value, str):
        raise InvalidInputError(f"{key}: a base64 string is expected")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInputError(f"{key}: not valid base64") from None


def _convert(key: str, value: Any) -> Any:
    if value is None:
        return None
    if key in ("version", "read_version", "target_rows_per_fragment"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidInputError(f"{key}: an integer is expected")
        return value
    if key == "older_than_seconds":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidInputError(f"{key}: a number is expected")
        return float(value)
    if key in ("delete_unverified", "enable_stable_row_ids", "if_exists"):
        if not isinstance(value, bool):
            raise InvalidInputError(f"{key}: true or false is expected")
        return value
    if key == "columns":
        if not isinstance(value, list) or not all(isinstance(c, str) for c in value):
            raise InvalidInputError("columns: a list of names is expected")
        return tuple(value)
    if key == "transforms":
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise InvalidInputError("transforms: an object of {name: SQL expression} is expected")
        return {str(k): v for k, v in value.items()}
    if key == "fragments":
        if not isinstance(value, list):
            raise InvalidInputError("fragments: a list of base64 strings is expected")
        return tuple(_b64(v, key) for v in value)
    if key == "filter_substrait":
        return _b64(value, key)
    if key == "mode" and value not in _MODES:
        raise InvalidInputError(f"mode: one of {', '.join(_MODES)}")
    if not isinstance(value, str):
        raise InvalidInputError(f"{key}: a string is expected")
    return value


def decode_json_action(body: bytes) -> ActionRequest:
    """The :class:`ActionRequest` a JSON action body describes."""
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInputError(f"action body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidInputError("a JSON action body is an object")
    values: dict[str, Any] = {}
    for raw_key, value in data.items():
        key = _ALIASES.get(raw_key, raw_key)
        if key not in _FIELDS or key == "schema":
            known = sorted((set(_FIELDS) - {"schema"}) | set(_ALIASES))
            raise InvalidInputError(f"unknown action field {raw_key!r}; fields are {', '.join(known)}")
        converted = _convert(key, value)
        if converted is not None:
            values[key] = converted
    return ActionRequest(**values)


def encode_json_result(result: ActionResult) -> bytes:
    """An action's answer as a JSON object (the schema, when there is one, as base64 Arrow IPC)."""
    body: dict[str, Any] = {
        **result.to_dict(),
        "versions": [dataclasses.asdict(v) for v in result.versions],
        "tags": [dataclasses.asdict(t) for t in result.tags],
        "datasets": list(result.datasets),
    }
    if result.schema is not None:
        body["schema"] = base64.b64encode(result.schema.serialize().to_pybytes()).decode("ascii")
    return json.dumps(body, separators=(",", ":")).encode()
