"""Building a pipeline component from its ``tokenizer.json`` config, the same way for every stage.

``type`` picks the class; the config's fields are the constructor's keyword arguments (fields the
class does not take are ignored, as HF's loader ignores them); a ``Sequence`` builds its children
with the stage's own ``from_config``.
"""

from __future__ import annotations

import functools
import inspect
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from types import UnionType
from typing import Any, TypeVar, Union

from .errors import FormatError

T = TypeVar("T")


# Every stage's class is new in a process's first load: inspect.signature and get_type_hints
# then cost as much as the rest of building the pipeline (1 ms for Llama 3's five classes, most of
# it evaluating 18 annotation strings), so a plain constructor is read from its code object and
# each annotation text compiled once for every class.
_PLAIN_FLAGS = inspect.CO_VARARGS | inspect.CO_VARKEYWORDS


@functools.cache
def _parameters(cls: Callable[..., Any]) -> Mapping[str, bool]:
    """The constructor's keyword-passable parameters, each with whether it is required."""
    # A class without its own __init__ takes no fields; inspect would parse object's text
    # signature, whose first use compiles tokenize's regexes (a large part of a first load).
    init = getattr(cls, "__init__", None)
    if isinstance(cls, type) and init is object.__init__:
        return {}
    code = getattr(init, "__code__", None)
    if (
        not isinstance(cls, type) or type(init) is not types.FunctionType or code is None
        or code.co_flags & _PLAIN_FLAGS or code.co_posonlyargcount or hasattr(init, "__wrapped__")
        or type(cls).__call__ is not type.__call__ or cls.__new__ is not object.__new__
    ):
        return {name: p.default is p.empty for name, p in inspect.signature(cls).parameters.items()}
    names = code.co_varnames[1 : code.co_argcount + code.co_kwonlyargcount]  # after self
    positional = code.co_argcount - 1
    defaults = len(init.__defaults__ or ())
    keyword_defaults = init.__kwdefaults__ or {}
    return {
        name: (i < positional - defaults) if i < positional else name not in keyword_defaults
        for i, name in enumerate(names)
    }


@functools.cache
def _compiled(text: str) -> types.CodeType:
    return compile(text, "<annotation>", "eval")


@functools.cache
def _hints(cls: Callable[..., Any]) -> dict[str, Any]:
    init = cls.__init__  # type: ignore[misc]
    annotations = getattr(init, "__annotations__", None)
    namespace = getattr(init, "__globals__", None)
    if type(init) is not types.FunctionType or not isinstance(annotations, dict) or namespace is None:
        try:
            return typing.get_type_hints(init)
        except (NameError, TypeError):
            return {}
    hints = {}
    try:
        for name, hint in annotations.items():
            value = eval(_compiled(hint), namespace) if isinstance(hint, str) else hint
            hints[name] = type(None) if value is None else value
    except (NameError, TypeError, AttributeError, SyntaxError):
        return {}  # annotations that do not resolve: the constructor checks for itself
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
