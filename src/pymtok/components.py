"""Building a pipeline component from its ``tokenizer.json`` config, the same way for every stage.

``type`` picks the class; the config's fields are the constructor's keyword arguments (fields the
class does not take are ignored, as HF's loader ignores them); a ``Sequence`` builds its children
with the stage's own ``from_config``.
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from types import UnionType
from typing import Any, TypeVar, Union

from .errors import FormatError

T = TypeVar("T")


# Every stage class is pymtok's own, with a plain ``__init__`` (keywords, defaults, no ``*args``)
# or none, so its parameters and annotations are read from the function itself: in a process's
# first load inspect.signature and typing.get_type_hints cost as much as the rest of building the
# pipeline (1 ms for Llama 3's five classes). tests/test_components.py holds every class to
# what inspect and typing say.


@functools.cache
def _parameters(cls: Callable[..., Any]) -> Mapping[str, bool]:
    """The constructor's parameters, each with whether it is required."""
    init = cls.__init__  # type: ignore[misc]
    if init is object.__init__:
        return {}
    code = init.__code__
    positional = code.co_argcount - 1  # after self
    required = positional - len(init.__defaults__ or ())
    keyword_defaults = init.__kwdefaults__ or {}
    names = code.co_varnames[1 : code.co_argcount + code.co_kwonlyargcount]
    return {name: i < required if i < positional else name not in keyword_defaults for i, name in enumerate(names)}


@functools.cache
def _compiled(text: str) -> types.CodeType:
    return compile(text, "<annotation>", "eval")


@functools.cache
def _hints(cls: Callable[..., Any]) -> dict[str, Any]:
    """The constructor's annotations, evaluated; none where one does not resolve (the
    constructor then checks its fields itself)."""
    init = cls.__init__  # type: ignore[misc]
    hints = {}
    try:
        for name, hint in getattr(init, "__annotations__", {}).items():
            value = eval(_compiled(hint), init.__globals__) if isinstance(hint, str) else hint
            hints[name] = type(None) if value is None else value
    except (NameError, TypeError, AttributeError, SyntaxError):
        return {}
    return hints


def _conforms(value: Any, hint: Any) -> bool:
    """Whether a JSON value fits a constructor annotation (only the shapes JSON can take)."""
    origin = typing.get_origin(hint)
    if origin in (Union, UnionType):
        return any(_conforms(value, arg) for arg in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    args = typing.get_args(hint)
    if origin in (list, Sequence):
        return isinstance(value, list) and (not args or all(_conforms(v, args[0]) for v in value))
    if origin in (dict, Mapping):
        return isinstance(value, Mapping) and (
            len(args) != 2 or all(_conforms(k, args[0]) and _conforms(v, args[1]) for k, v in value.items())
        )
    return True  # anything richer is the constructor's to check


def build_component(
    stage: str,
    cfg: Any,
    types: Mapping[str, Callable[..., T]],
    children_field: str,
    build_child: Callable[[Any], T | None],
) -> T | None:
    """The component ``cfg`` describes (``None`` for a JSON null), or ``FormatError``."""
    if cfg is None:
        return None
    if not isinstance(cfg, Mapping):
        raise FormatError(f"{stage}: expected an object or null, got {type(cfg).__name__}")
    kind = cfg.get("type")
    cls = types.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise FormatError(f"{stage}: unknown type {kind!r} (expected one of {', '.join(sorted(types))})")
    params = _parameters(cls)
    fields = {name: cfg[name] for name in params if name in cfg}
    missing = [name for name, required in params.items() if required and name not in cfg]
    if missing:
        raise FormatError(f"{stage} {kind}: missing field(s) {', '.join(missing)}")
    hints = _hints(cls)
    for name, value in fields.items():
        if name != children_field and name in hints and not _conforms(value, hints[name]):
            raise FormatError(f"{stage} {kind}: field {name!r} cannot be {value!r}")
    if children_field in fields:
        children = fields[children_field]
        if not isinstance(children, list):
            raise FormatError(f"{stage} {kind}: '{children_field}' must be a list")
        built = [build_child(child) for child in children]
        if any(child is None for child in built):
            raise FormatError(f"{stage} {kind}: '{children_field}' entries must be objects, got null")
        fields[children_field] = built
    try:
        return cls(**fields)
    except TypeError as exc:
        raise FormatError(f"{stage} {kind}: bad field value ({exc})") from None
