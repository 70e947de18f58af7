"""Command-line options built from dataclass fields, so a configuration is written down once.

Each field becomes ``--field-name``, typed by its annotation: ``bool`` as ``--x/--no-x``, a tuple
as comma-separated numbers, a dict as a JSON object, ``T | None`` as ``T``, anything else by its
type. Values are checked by the dataclass itself when it is built from the parsed arguments.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import typing
from collections.abc import Callable, Container, Mapping
from typing import Any


def numbers(kind: type) -> Callable[[str], tuple[Any, ...]]:
    """A parser of comma-separated ``kind`` values, e.g. ``7,3,2``."""
    def parse(text: str) -> tuple[Any, ...]:
        try:
            return tuple(kind(n) for n in text.split(","))
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated {kind.__name__}s like "
                                             f"7,3,2, got {text!r}") from None
    return parse


def json_object(text: str) -> dict[str, Any]:
    """A JSON object given on the command line."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"not valid JSON ({err}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r}")
    return value


def field_defaults(config: type) -> dict[str, Any]:
    """``{field: default}`` of a dataclass, for the fields that have one."""
    return {f.name: f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
            for f in dataclasses.fields(config)
            if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING}


def _option(hint: Any) -> dict[str, Any]:
    if hint is bool:
        return {"action": argparse.BooleanOptionalAction}
    if typing.get_origin(hint) is tuple:
        return {"type": numbers(typing.get_args(hint)[0]), "metavar": "N,N,..."}
    if typing.get_origin(hint) is dict:
        return {"type": json_object}
    return {"type": ([a for a in typing.get_args(hint) if a is not type(None)] or [hint])[0]}


def add_options(group: argparse._ActionsContainer, config: type, defaults: Mapping[str, Any], *,
                skip: Container[str] = (), helps: Mapping[str, str] | None = None) -> None:
    """Add one option per field of the dataclass ``config`` (except ``skip``) to ``group``; a
    field without an entry in ``defaults`` is a required option."""
    for name, hint in typing.get_type_hints(config).items():
        if name not in skip:
            group.add_argument(f"--{name.replace('_', '-')}", **_option(hint),
                               required=name not in defaults, default=defaults.get(name),
                               help=(helps or {}).get(name, "default: %(default)s"))
