"""A Python function as a chat-template tool: its JSON schema, exactly as transformers derives it.

transformers' ``apply_chat_template(tools=[f])`` turns each function into
``{"type": "function", "function": {"name", "description", "parameters"[, "return"]}}`` from its
type hints and its Google-style docstring (``get_json_schema`` in
``transformers.utils.chat_template_utils``). The template prints that dict (usually with
``tojson``), so every key, its order and every stripped space decides the prompt; this module
follows transformers 5.x to the character.

>>> def multiply(x: float, y: float = 1.0):
...     '''Multiply two numbers.
...
...     Args:
...         x: The first number
...         y: The second number
...     '''
>>> get_json_schema(multiply)["function"]["parameters"]["required"]
['x']
"""

from __future__ import annotations

import inspect
import json
import re
import types
import typing
from collections.abc import Callable
from enum import Enum
from typing import Any

from .errors import TemplateError

__all__ = ["get_json_schema"]

# The docstring's sections. A section header is the first "Args:", "Returns:" or "Raises:"
# anywhere (transformers does not ask for it at a line start for the description's end).
_DESCRIPTION = re.compile(r"^(.*?)[\n\s]*(?:Args:|Returns:|Raises:|\Z)", re.DOTALL)
_ARGS = re.compile(r"\n\s*Args:\n(.*?)[\n\s]*(?:Returns:|Raises:|\Z)", re.DOTALL)
_RETURNS = re.compile(r"\n\s*Returns:\n\s*(.*?)[\n\s]*(?:Raises:|\Z)", re.DOTALL)
# One argument: "name:" or "name (type):" at some indentation, its text running on (over lines
# indented deeper) up to the next "name:" at the same or a shallower indentation.
_ARG = re.compile(
    r"(?:^|\n)([ \t]*)(\w+)(?:[ \t]*\([^()\n]*\))?:\s*(.*?)\s*"
    r"(?=\n(?!\1[ \t])[ \t]*\w+(?:[ \t]*\([^()\n]*\))?:|\Z)",
    re.DOTALL,
)
_LINE_BREAKS = re.compile(r"\s*\n+\s*")
_CHOICES = re.compile(r"\(choices:\s*(.*?)\)\s*$", re.IGNORECASE)

# Python types a JSON schema "enum" can list, by the name of their JSON type
_JSON_SCALARS: dict[type, str] = {int: "integer", float: "number", str: "string", bool: "boolean", type(None): "null"}
_PLAIN_TYPES: dict[Any, dict[str, str]] = {
    int: {"type": "integer"}, float: {"type": "number"}, str: {"type": "string"},
    bool: {"type": "boolean"}, type(None): {"type": "null"}, list: {"type": "array"},
    tuple: {"type": "array"}, dict: {"type": "object"}, Any: {},
}
# transformers maps these when PIL / torch are installed; a hint can only name them when they are
_MEDIA_TYPES = {("PIL.Image", "Image"): "image", ("torch", "Tensor"): "audio"}


def _fail(function: str, why: str) -> TemplateError:
    return TemplateError(f"cannot make a tool schema of {function}: {why}")


def _enum(values: list[Any]) -> dict[str, Any]:
    kinds = list(dict.fromkeys(_JSON_SCALARS[type(v)] for v in values))
    return {"type": kinds[0] if len(kinds) == 1 else kinds, "enum": values}


def _hint_schema(hint: Any, function: str) -> dict[str, Any]:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is None:
        if isinstance(hint, type) and issubclass(hint, Enum):
            values = [member.value for member in hint]
            if not values:
                raise _fail(function, f"the Enum {hint.__name__} has no members")
            if any(type(v) not in _JSON_SCALARS for v in values):
                raise _fail(function, f"the Enum {hint.__name__} has values that are not JSON scalars: {values}")
            return _enum(values)
        media = _MEDIA_TYPES.get((getattr(hint, "__module__", None), getattr(hint, "__qualname__", None)))
        if media is not None:
            return {"type": media}
        schema = _PLAIN_TYPES.get(hint)
        if schema is None:
            raise _fail(function, f"the type hint {hint!r} has no JSON schema (a custom class?)")
        return dict(schema)
    if origin is typing.Union or origin is types.UnionType:
        subtypes = [_hint_schema(t, function) for t in args if t is not type(None)]
        if len(subtypes) == 1:
            schema = subtypes[0]
        elif all(s.keys() == {"type"} and isinstance(s["type"], str) for s in subtypes):
            # plain types become a list of names; anything with more keys needs anyOf to keep them
            names = sorted({s["type"] for s in subtypes})
            schema = {"type": names[0] if len(names) == 1 else names}
        else:
            schema = {"anyOf": subtypes}
        if type(None) in args:
            schema["nullable"] = True
        return schema
    if origin is typing.Literal and args:
        if any(type(a) not in _JSON_SCALARS for a in args):
            raise _fail(function, f"a Literal may only list JSON scalars: {hint!r}")
        return _enum(list(args))
    if origin is list:
        return {"type": "array", "items": _hint_schema(args[0], function)} if args else {"type": "array"}
    if origin is tuple:
        if not args:
            return {"type": "array"}
        if len(args) == 1:
            raise _fail(function, f"a tuple of one element ({hint!r}) is not converted; use list[] or the element")
        if ... in args:
            raise _fail(function, f"'...' in a tuple hint ({hint!r}) is not converted; use list[]")
        return {"type": "array", "prefixItems": [_hint_schema(t, function) for t in args]}
    if origin is dict:
        schema = {"type": "object"}
        if len(args) == 2:
            schema["additionalProperties"] = _hint_schema(args[1], function)
        return schema
    raise _fail(function, f"the type hint {hint!r} has no JSON schema")


def _parameters(func: Callable[..., Any], function: str) -> dict[str, Any]:
    hints = typing.get_type_hints(func)
    parameters = inspect.signature(func).parameters
    first = next(iter(parameters), None)
    # a method's receiver, when it is unannotated
    receiver = first if first in ("self", "cls") and parameters[first].annotation is inspect.Parameter.empty else None
    required = []
    for name, parameter in parameters.items():
        if name == receiver:
            continue
        if parameter.annotation is inspect.Parameter.empty:
            raise _fail(function, f"argument {name} has no type hint")
        if parameter.default is inspect.Parameter.empty:
            required.append(name)
    properties: dict[str, Any] = {}
    for name, hint in hints.items():
        if name == receiver:
            continue
        if name == "return":
            # the model never writes the return value: a return hint without a schema is left out
            try:
                properties[name] = _hint_schema(hint, function)
            except TemplateError:
                pass
        else:
            properties[name] = _hint_schema(hint, function)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def _docstring(doc: str) -> tuple[str | None, dict[str, str], str | None]:
    """(description, argument descriptions, returns description) of a Google-style docstring."""
    description = _DESCRIPTION.search(doc)
    args = _ARGS.search(doc)
    returns = _RETURNS.search(doc)
    arguments: dict[str, str] = {}
    if args is not None:
        block = "\n".join(line for line in args.group(1).split("\n") if line.strip())
        for _indent, name, text in _ARG.findall(block):
            arguments[name] = _LINE_BREAKS.sub(" ", text.strip())
    return (
        description.group(1).strip() if description else None,
        arguments,
        returns.group(1).strip() if returns else None,
    )


def get_json_schema(func: Callable[..., Any]) -> dict[str, Any]:
    """The tool schema transformers' ``get_json_schema`` makes of ``func``.

    ``func`` needs a docstring describing every argument under ``Args:`` and a type hint on each
    (a method's unannotated ``self``/``cls`` excepted); an argument's description may end in
    ``(choices: [...])``, a JSON list that becomes the schema's ``enum``. Anything else raises
    :class:`~pymtok.errors.TemplateError`.
    """
    function = getattr(func, "__name__", "operation")
    doc = inspect.getdoc(func)
    if not doc:
        raise _fail(function, "it has no docstring")
    description, arguments, returns = _docstring(doc.strip())
    parameters = _parameters(func, function)
    return_schema = parameters["properties"].pop("return", None)
    if return_schema is not None and returns is not None:
        return_schema["description"] = returns
    for name, schema in parameters["properties"].items():
        if name not in arguments:
            raise _fail(function, f"the docstring does not describe the argument {name!r}")
        text = arguments[name]
        choices = _CHOICES.search(text)
        if choices:
            try:
                values = json.loads(choices.group(1))
                schema["enum"] = [c.strip() if isinstance(c, str) else c for c in values]
            except (ValueError, TypeError) as exc:
                raise _fail(function, f"the choices of {name!r} are not a JSON list ({exc})") from None
            text = text[: choices.start()].strip()
        schema["description"] = text
    output: dict[str, Any] = {"name": function, "description": description, "parameters": parameters}
    if return_schema is not None:
        output["return"] = return_schema
    return {"type": "function", "function": output}
