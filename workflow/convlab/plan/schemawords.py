"""A config schema's values in words, for the lines that refuse a value: where a key takes one of
several forms (anyOf, oneOf), jsonschema says only that the value "is not valid under any of the
given schemas"; the line says which forms are, e.g. "give all or a non-empty list of kernel names".
A subschema's `title` is its words where the generated ones would say too little."""

from __future__ import annotations

import json
from typing import Any

ALTERNATIVES = ("anyOf", "oneOf")
SINGULAR = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "true or false",
            "null": "null", "array": "a list", "object": "a mapping"}
PLURAL = {"string": "strings", "integer": "integers", "number": "numbers", "boolean": "booleans",
          "null": "nulls", "array": "lists", "object": "mappings"}


def _value(value: Any) -> str:
    """A value as the config file would spell it: all, 3, [1, 2], null."""
    return value if isinstance(value, str) else json.dumps(value)


def _bounds(schema: dict) -> str:
    low = schema.get("minimum")
    high = schema.get("maximum")
    above = schema.get("exclusiveMinimum")
    below = schema.get("exclusiveMaximum")
    if low is not None and high is not None:
        return f" from {low} to {high}"
    parts = [f"at least {low}" if low is not None else "", f"above {above}" if above is not None else "",
             f"at most {high}" if high is not None else "", f"below {below}" if below is not None else ""]
    words = " and ".join(part for part in parts if part)
    return f" {words}" if words else ""


def _list(schema: dict, plural: bool) -> str:
    least = schema.get("minItems", 0)
    noun = "lists" if plural else "a list"
    if least == 1:
        noun = "non-empty lists" if plural else "a non-empty list"
    items = schema.get("items")
    if items:
        noun += f" of {'distinct ' if schema.get('uniqueItems') else ''}{in_words(items, plural=True)}"
    if least > 1:
        noun += f" of at least {least} items"
    return noun


def _typed(kind: str, schema: dict, plural: bool) -> str:
    if kind == "array":
        return _list(schema, plural)
    noun = PLURAL[kind] if plural else SINGULAR[kind]
    return noun + (_bounds(schema) if kind in ("integer", "number") else "")


def in_words(schema: dict, plural: bool = False) -> str:
    """What ``schema`` accepts, as a noun phrase: "all", "one of warm, cold", "an integer from 0 to 64",
    "a non-empty list of distinct strings" (with ``plural``: "integers from 1 to 64")."""
    if "title" in schema:
        return schema["title"]
    if "const" in schema:
        return _value(schema["const"])
    if "enum" in schema:
        return "one of " + ", ".join(_value(value) for value in schema["enum"])
    for keyword in ALTERNATIVES:
        if keyword in schema:
            return " or ".join(in_words(sub, plural) for sub in schema[keyword])
    kinds = schema.get("type", [])
    kinds = kinds if isinstance(kinds, list) else [kinds]
    if not kinds:
        return "values" if plural else "a value"
    return " or ".join(_typed(kind, schema, plural) for kind in kinds)


def error_message(error: Any) -> str:  # a jsonschema.ValidationError
    """jsonschema's message, except for a value that matches none of a key's forms: it names them."""
    if error.validator in ALTERNATIVES and error.context:
        forms = " or ".join(in_words(sub) for sub in error.validator_value)
        return f"{error.instance!r} is not valid here; give {forms}"
    return error.message
