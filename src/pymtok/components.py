"""Building a pipeline component from its ``tokenizer.json`` config, the same way for every stage.

``type`` picks the class; the config's fields are the constructor's keyword arguments (fields the
class does not take are ignored, as HF's loader ignores them); a ``Sequence`` builds its children
with the stage's own ``from_config``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from .errors import FormatError

T = TypeVar("T")


@functools.cache
def _parameters(cls: Callable[..., Any]) -> Mapping[str, inspect.Parameter]:
    # A class without its own __init__ takes no fields; inspect would parse object's text
    # signature, whose first use compiles tokenize's regexes (a large part of a first load).
    if isinstance(cls, type) and cls.__init__ is object.__init__:
        return {}
    return inspect.signature(cls).parameters


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
    missing = [name for name, p in params.items() if p.default is p.empty and name not in cfg]
    if missing:
        raise FormatError(f"{stage} {kind}: missing field(s) {', '.join(missing)}")
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
