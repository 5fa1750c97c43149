"""Chat templates: render a conversation exactly like transformers' ``apply_chat_template``, safely.

A chat template is Jinja2 source shipped with a model, so it is untrusted code. We render it with
the same environment transformers 5.x builds (an ``ImmutableSandboxedEnvironment`` with
``trim_blocks``, ``lstrip_blocks``, ``loopcontrols``, a ``{% generation %}`` tag, a ``tojson`` that
keeps non-ASCII text, ``raise_exception``, ``strftime_now`` and restricted ``dict``/``namespace``)
and the same context (messages, tools, documents, ``add_generation_prompt``, the special-token
strings, extra keyword arguments), so the prompt is byte-identical.

On top of the sandbox, every render runs under a budget so that a hostile template raises
:class:`~pymtok.errors.TemplateError` instead of hanging or exhausting memory, without threads or
signals. The bounds are counted, so they trip the same way on any machine: the sandbox's hooks
(calls, attribute and item access, operators, filters, printing, and ``~``, comparisons and
every loop iteration, which we route through hooks by rewriting the parsed template) count
operations and loop steps; every operation that could build a big value in one step (``*``,
``**``, ``%``, ``~``, ``+``, widths and fill arguments, ``replace``, ``join``, ``tojson``, turning
containers into text) has its result size checked *before* it is built, and those whose time is
not bounded by their result (sorting, ``wordwrap``, comparing) have their work estimated first;
a template's source is measured (characters, tokens, nodes) before each stage of compiling it,
and its inputs' nesting and size before they are copied for it. A deadline in the rendering
thread's CPU time, checked in the same hooks, is only the backstop: other processes' load does
not bring it closer, as it would a wall-clock one.

>>> ChatTemplate("{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}").render(
...     [{"role": "user", "content": "hi"}], add_generation_prompt=False)
'<user>hi'
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import itertools
import json
import operator
import re
import sys
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from types import TracebackType
from typing import Any

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.filters import make_attrgetter
from jinja2.runtime import markup_join
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import Namespace, generate_lorem_ipsum
from jinja2.visitor import NodeTransformer

from .errors import TemplateError
# Finding a folder's template is part of reading the folder, which must not import jinja2; the
# finders are re-exported here, beside the renderer their results go to.
from .hf_json import find_chat_template, special_tokens_from_config, template_from_llm_config, token_text
from .tool_schema import get_json_schema

__all__ = [
    "MAX_CHARS", "MAX_DEPTH", "MAX_INPUT_VALUES", "MAX_INT_BITS", "MAX_ITEMS", "MAX_ITERATIONS", "MAX_STEPS",
    "MAX_TEMPLATE_CHARS", "MAX_TEMPLATE_NODES", "MAX_TEMPLATE_TOKENS", "MAX_WORK",
    "STEPS_PER_MESSAGE", "TIME_LIMIT", "TIME_PER_MESSAGE", "ChatTemplate", "get_json_schema", "find_chat_template", "special_tokens_from_config",
    "template_from_llm_config",
]

#: Seconds of CPU time (the rendering thread's) one compilation, or one render of a short chat,
#: may take. The clock is a backstop: the counted bounds below stop every hostile template we
#: know of first, whatever the machine's speed.
TIME_LIMIT = 1.0
#: Extra seconds a render may take per message, tool and document (real templates need 35-200 µs
#: per message).
TIME_PER_MESSAGE = 1e-3
#: Characters in any one string the template builds, and in the rendered prompt (~4M tokens).
MAX_CHARS = 1 << 24
#: Items in any one list or tuple the template builds.
MAX_ITEMS = 1 << 20
#: Characters and items built (or copied, sorted, compared) in one render, all values together;
#: bounds what a template can hold and do. Real templates build 2-4 times the text of the chat.
MAX_WORK = 1 << 27
#: Loop iterations in one render (a chat of N messages needs a small multiple of N).
MAX_ITERATIONS = 1 << 20
#: Sandbox operations (calls, attribute and item reads, operators, filters, loop steps) in one
#: render of a short chat; real templates take 10-20 per message.
MAX_STEPS = 1 << 18
#: Extra operations a render may take per message, tool and document it is given.
STEPS_PER_MESSAGE = 256
#: Bits of an integer the template builds; larger ones make arithmetic itself slow.
MAX_INT_BITS = 1 << 16
#: Characters and lexer tokens of a template's source, and nodes of its parsed form, checked
#: before the next (costlier) stage of compiling it. Real templates have a few thousand tokens.
MAX_TEMPLATE_CHARS = 1 << 20
MAX_TEMPLATE_TOKENS = 1 << 16
MAX_TEMPLATE_NODES = 1 << 16
#: Nesting depth of the messages, tools, documents and keyword values a template is given, and
#: their number of values in all (a value shared by several containers counts each time).
MAX_DEPTH = 200
MAX_INPUT_VALUES = 1 << 18

# Names a message's reasoning is passed under; transformers copies the first one found to
# "reasoning_content" (what templates read) and "thinking" (what gpt-oss templates read).
_REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")


# ---------------------------------------------------------------------------------------------
# The budget of one render


class _Budget:
    __slots__ = ("deadline", "iterations", "max_steps", "output", "seconds", "spans", "steps", "work")

    def __init__(self, seconds: float, max_steps: int) -> None:
        self.seconds = seconds
        self.deadline = time.thread_time() + seconds
        self.max_steps = max_steps
        self.work = 0
        self.iterations = 0
        self.steps = 0
        # characters of the prompt yielded so far, and where {% generation %} blocks put theirs
        self.output = 0
        self.spans: list[tuple[int, int]] = []


# A context variable rather than an attribute of the environment, so that renders running at the
# same time in several threads each keep their own budget.
_BUDGET: ContextVar[_Budget | None] = ContextVar("pymtok_chat_budget", default=None)


@contextmanager
def _budgeted(messages: int = 0) -> Iterator[None]:
    budget = _Budget(TIME_LIMIT + TIME_PER_MESSAGE * messages, MAX_STEPS + STEPS_PER_MESSAGE * messages)
    token = _BUDGET.set(budget)
    try:
        yield
    finally:
        _BUDGET.reset(token)


def _tick() -> None:
    budget = _BUDGET.get()
    if budget is not None:
        budget.steps += 1
        if budget.steps > budget.max_steps:
            raise TemplateError(f"ran more than {budget.max_steps} operations")
        # every operation is bounded by the counted limits; the clock (a system call, ~1 µs) need
        # not be read for each
        if not budget.steps % _STEPS_PER_CLOCK_READ and time.thread_time() > budget.deadline:
            raise TemplateError(f"ran longer than {budget.seconds:g} s of CPU time")


_STEPS_PER_CLOCK_READ = 64


def _check(size: int, what: str, limit: int = MAX_CHARS) -> None:
    """Refuse to build ``what`` when it would hold more than ``limit`` characters or items."""
    _tick()
    if size > limit:
        raise TemplateError(f"would build {what} of size {size} (limit {limit})")


def _spend(size: int) -> None:
    """Count a built value against the render's total work."""
    budget = _BUDGET.get()
    if budget is not None:
        budget.work += size
        if budget.work > MAX_WORK:
            raise TemplateError(f"built more than {MAX_WORK} characters and items in all")


def _size(value: Any) -> int:
    """Shallow size: characters of a string, items of a container, decimal digits of an integer."""
    if isinstance(value, int):
        return value.bit_length() // 3 + 1
    if isinstance(value, Collection):
        return len(value)
    return 1


_JSON_ESCAPED = (*map(chr, range(32)), '"', "\\")


def _json_string_size(s: str, ensure_ascii: bool) -> int:
    """An upper bound on the length of a string in JSON."""
    if ensure_ascii and not s.isascii():
        return 12 * len(s) + 2  # a surrogate pair (two \uXXXX) per character
    if len(s) <= 4096:  # cheaper to over-estimate than to count
        return 6 * len(s) + 2
    # only quotes, backslashes and control characters are escaped, to at most 6 characters
    return len(s) + 5 * sum(s.count(c) for c in _JSON_ESCAPED) + 2


def _text_size(
    value: Any, *, escape: int = 1, item: int = 4, indent: int = 0, json_ascii: bool | None = None
) -> int:
    """An upper bound on the length of ``str(value)``, or of its JSON, without building it.

    A string at the top level counts as itself times ``escape``; strings inside containers are
    printed with ``repr``, which writes an unprintable astral character as 10 characters. With
    ``json_ascii`` set (to json.dumps' ensure_ascii), strings are measured as JSON instead. Each
    item costs ``item`` plus ``indent`` per level of nesting. The walk stops as soon as the bound
    passes ``MAX_CHARS``, so it is cheap even for containers that hold the same big value many
    times (or themselves).
    """
    # flat values, the usual operands, measured as the walk below would, without it
    kind = type(value)
    if kind is str and json_ascii is None:
        return len(value) * escape + 2
    if kind is bool or kind is int:
        return value.bit_length() // 3 + 5
    if value is None or kind is float or kind is jinja2.Undefined:
        return 64
    total = 0
    steps = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack and total <= MAX_CHARS:
        obj, depth = stack.pop()
        if isinstance(obj, str):
            if json_ascii is not None:
                total += _json_string_size(obj, json_ascii)
            else:
                total += len(obj) * (escape if depth == 0 else 10) + 2
        elif isinstance(obj, int):  # bool included: "False" is 5 characters
            total += obj.bit_length() // 3 + 5
        elif isinstance(obj, Namespace):
            # its repr shows every attribute; jinja2 keeps them in this (name-mangled) dict
            stack.append((obj._Namespace__attrs, depth))
            total += 16
        elif isinstance(obj, Mapping):
            for key, val in obj.items():
                stack.append((key, depth + 1))
                stack.append((val, depth + 1))
                total += 2 * item + indent * (depth + 1)
            total += 2 + indent * depth
        elif isinstance(obj, Collection):
            for val in obj:
                stack.append((val, depth + 1))
                total += item + indent * (depth + 1)
            total += 2 + indent * depth
        else:  # None, floats, undefined values, jinja2 helper objects: short reprs
            total += 64
        steps += 1
        if steps % 4096 == 0:
            _tick()
    return total


def _json_size(value: Any, ensure_ascii: Any, indent: Any, separators: Any) -> int:
    """An upper bound on the length of ``json.dumps`` of ``value`` with these options."""
    width = len(indent) if isinstance(indent, str) else indent if isinstance(indent, int) else 0
    seps = _text_size(separators) if separators is not None else 4
    return _text_size(value, item=seps + 1, indent=width, json_ascii=bool(ensure_ascii))


_NUMBER = re.compile(r"[1-9][0-9]*")
_NESTED_FORMAT_SPEC = re.compile(r"\{[^{}]*:[^{}]*\{")
_REPR_CONVERSION = re.compile(r"%[^a-zA-Z%]*[ra]|![ra]")
_WORD = re.compile(r"\S+")


def _format_size(fmt: Any, args: Any) -> int:
    """An upper bound on the length of ``fmt % args`` or ``fmt.format(*args)``.

    Widths and precisions are the amplifiers: each can pad one field to that many characters,
    and ``%*d`` takes the width from an argument.
    """
    values = list(args.values()) if isinstance(args, Mapping) else list(args) if isinstance(args, tuple) else [args]
    # a field prints an argument's str(), or its repr() with %r or !r
    texts = sum(_text_size(v, escape=10 if isinstance(fmt, str) and _REPR_CONVERSION.search(fmt) else 1)
                for v in values)
    if not isinstance(fmt, str):
        return _text_size(fmt) + texts
    if _NESTED_FORMAT_SPEC.search(fmt):
        # '{:{}}'.format(x, '999999999') takes its width from an argument's text
        raise TemplateError("a format spec built from an argument is not allowed")
    widths = 0
    for match in _NUMBER.finditer(fmt):
        if len(match.group()) > len(str(MAX_CHARS)):
            raise TemplateError(f"a format width of {match.group()[:20]} is above the limit")
        widths += int(match.group())
    if "*" in fmt:
        widths += sum(abs(v) for v in values if isinstance(v, int) and abs(v) <= MAX_CHARS + 1)
        if any(isinstance(v, int) and abs(v) > MAX_CHARS for v in values):
            raise TemplateError("a format width is above the limit")
    return len(fmt) + texts + widths


def _int_or(value: Any, default: int) -> int:
    return value if isinstance(value, int) else default


# ---------------------------------------------------------------------------------------------
# Size estimates for the filters and str methods that can build a big value in one step


def _replace_size(s: Any, old: Any, new: Any, count: Any) -> int:
    text = _text_size(s)
    if isinstance(s, str) and isinstance(old, str):
        hits = s.count(old) if old else len(s) + 1
    else:
        hits = text + 1
    if isinstance(count, int) and count >= 0:
        hits = min(hits, count)
    return text + hits * _text_size(new)


def _join_size(sep: Any, items: Collection[Any]) -> int:
    return sum(_text_size(x) for x in items) + _text_size(sep) * max(len(items) - 1, 0)


def _materialize(arguments: dict[str, Any], name: str) -> Collection[Any]:
    """Turn a lazy iterable argument into a list so its size can be checked before it is used."""
    value: Collection[Any] = arguments[name]
    if not isinstance(value, Collection):
        value = arguments[name] = list(value)
    return value


def _sum_size(arguments: dict[str, Any]) -> int:
    items = _materialize(arguments, "iterable")
    start = arguments["start"]
    if arguments["attribute"] is not None:
        getter = make_attrgetter(arguments["environment"], arguments["attribute"])
        items = [getter(x) for x in items]
    # adding lists copies the running total each time: the cost is quadratic
    if isinstance(start, (list, tuple)) or any(isinstance(x, (list, tuple)) for x in items):
        return len(items) * (_size(start) + sum(_size(x) for x in items))
    return 1


def _indent_size(arguments: dict[str, Any]) -> int:
    s, width = arguments["s"], arguments["width"]
    lines = s.count("\n") + 1 if isinstance(s, str) else _text_size(s)
    return _text_size(s) + lines * (len(width) if isinstance(width, str) else _int_or(width, 0))


def _wordwrap_size(arguments: dict[str, Any]) -> int:
    text = _text_size(arguments["s"])
    wrap = arguments["wrapstring"]
    return text + (text + 1) * (len(wrap) if isinstance(wrap, str) else 1)


# textwrap cuts a word longer than the width one piece at a time, copying the rest each time, and
# handles every piece in Python: the work, not the result, is what grows out of bounds.
_PIECE_WORK = 64
_LONG_WORDS_SEEN = 4096


def _wordwrap_work(arguments: dict[str, Any]) -> int:
    s, width = arguments["s"], arguments["width"]
    if not isinstance(s, str) or not isinstance(width, int) or width < 1:
        return _text_size(s)  # textwrap refuses these itself
    pieces = 2 * sum(s.count(c) for c in " \t\n\r\f\v-") + 1
    work = len(s)
    if arguments["break_long_words"] and width < len(s):
        longest = 0
        long_words = re.finditer(rf"\S{{{width + 1},}}", s)
        for n, match in enumerate(itertools.islice(long_words, _LONG_WORDS_SEEN + 1)):
            longest = len(s) if n == _LONG_WORDS_SEEN else max(longest, match.end() - match.start())
        if longest:
            pieces += len(s) // width
            work += longest * (len(s) // width + 1)
    return work + _PIECE_WORK * pieces


def _ordering_work(arguments: dict[str, Any]) -> int:
    """Sorting, de-duplicating or finding the least or greatest item compares items about log2(n)
    times each (and without case_sensitive lower-cases a copy of each): text × log2(n)."""
    value = arguments["value"]
    if not isinstance(value, Collection):
        value = _materialize(arguments, "value")
    return _text_size(value) * (len(value).bit_length() + 1)


def _join_filter_size(arguments: dict[str, Any]) -> int:
    return _join_size(arguments["d"], _materialize(arguments, "value"))


def _tojson_size(arguments: dict[str, Any]) -> int:
    return _json_size(
        arguments["x"], arguments["ensure_ascii"], arguments["indent"], arguments["separators"]
    )


_FILTER_SIZES: dict[str, Callable[[dict[str, Any]], int]] = {
    "center": lambda a: max(_text_size(a["value"]), _int_or(a["width"], 0)),
    "indent": _indent_size,
    "join": _join_filter_size,
    "replace": lambda a: _replace_size(a["s"], a["old"], a["new"], a["count"]),
    "format": lambda a: _format_size(a["value"], a["kwargs"] or a["args"]),
    "wordwrap": _wordwrap_size,
    # pad the last batch / loop over the slices: the count alone decides the size
    "batch": lambda a: _int_or(a["linecount"], 0) if a["fill_with"] is not None else 1,
    "slice": lambda a: _int_or(a["slices"], 0),
    "list": lambda a: _size(a["value"]),
    "sum": _sum_size,
    "tojson": _tojson_size,
    "pprint": lambda a: _text_size(a["value"], indent=1),
}
_ITEM_FILTERS = frozenset({"batch", "slice", "list"})
# Filters whose running time is not bounded by the size of their result: their work, estimated
# before they run, counts against the render's MAX_WORK.
_FILTER_WORK: dict[str, Callable[[dict[str, Any]], int]] = {
    "wordwrap": _wordwrap_work,
    **dict.fromkeys(("sort", "unique", "min", "max", "dictsort", "groupby"), _ordering_work),
}
# Filters that write some characters as entities or %XX sequences: at most this many times longer.
_ESCAPING_FILTERS = {"escape": 6, "e": 6, "forceescape": 6, "urlencode": 9, "xmlattr": 6}
# Filters that look at a value's items or number rather than turning it into text.
_SHAPE_FILTERS = frozenset({
    "abs", "attr", "count", "d", "default", "dictsort", "first", "float", "groupby", "int",
    "items", "last", "length", "map", "max", "min", "random", "reject", "rejectattr",
    "reverse", "round", "select", "selectattr", "sort", "unique",
})


def _guard_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a filter so that its result size is checked before, and counted after, it runs."""
    # jinja2 gives async-capable filters that take no context a wrapper marked pass_eval_context,
    # so they receive one leading argument more than their (unwrapped) signature shows
    hidden = int(hasattr(func, "jinja_pass_arg") and not hasattr(inspect.unwrap(func), "jinja_pass_arg"))
    estimate = _FILTER_SIZES.get(name)
    work = _FILTER_WORK.get(name)
    signature = inspect.signature(func) if estimate is not None or work is not None else None
    limit = MAX_ITEMS if name in _ITEM_FILTERS else MAX_CHARS
    factor = 0 if name in _SHAPE_FILTERS else _ESCAPING_FILTERS.get(name, 1)

    # functools.wraps copies jinja2's pass_context/pass_environment marker, so jinja2 still
    # passes the same leading argument to the wrapper as it did to the filter.
    @functools.wraps(func)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        head, args = args[:hidden], args[hidden:]
        if signature is not None:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            if work is not None:
                cost = work(bound.arguments)
                _tick()
                if cost > MAX_WORK:
                    raise TemplateError(f"|{name} would take {cost} steps of work (limit {MAX_WORK})")
                _spend(cost)
            if estimate is not None:
                _check(estimate(bound.arguments), f"the result of |{name}", limit)
            args, kwargs = bound.args, bound.kwargs
        elif factor:
            texts = sum(map(_text_size, args)) + sum(map(_text_size, kwargs.values()))
            _check(factor * texts, f"the text |{name} works on")
        else:
            _tick()
        result = func(*head, *args, **kwargs)
        _spend(_size(result))
        return result

    return guarded


def _str_method_size(method: str, s: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    """An upper bound on the result of calling ``s.<method>(*args, **kwargs)``; 0 if unbounded."""
    if method in ("center", "ljust", "rjust", "zfill") and args:
        return max(len(s), _int_or(args[0], 0))
    if method == "expandtabs":
        size = _int_or(args[0] if args else kwargs.get("tabsize", 8), 8)
        return len(s) + s.count("\t") * max(size, 0)
    if method == "replace" and len(args) >= 2:
        return _replace_size(s, args[0], args[1], args[2] if len(args) > 2 else -1)
    if method in ("format", "format_map"):
        return _format_size(s, args[0] if method == "format_map" and args else (*args, *kwargs.values()))
    if method == "translate" and args and isinstance(args[0], Mapping):
        longest = max((_text_size(v) for v in args[0].values()), default=1)
        return len(s) * max(longest, 1)
    return 0


def _str_method_items(method: str, s: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    """How many items ``s.split``-like methods can return, counted without splitting."""
    if method in ("split", "rsplit"):
        sep = args[0] if args else kwargs.get("sep")
        maxsplit = args[1] if len(args) > 1 else kwargs.get("maxsplit", -1)
        if isinstance(sep, str) and sep:
            count = s.count(sep) + 1
        elif len(s) // 2 < MAX_ITEMS:
            count = (len(s) + 1) // 2
        else:  # count the words, but no further than the limit
            count = sum(1 for _ in itertools.islice(_WORD.finditer(s), MAX_ITEMS + 1))
        return min(count, maxsplit + 1) if isinstance(maxsplit, int) and maxsplit >= 0 else count
    if method == "splitlines":
        return sum(s.count(c) for c in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029") + 1
    return 0


def _guarded_loop(iterable: Iterable[Any]) -> Iterator[Any]:
    """Every ``{% for %}`` iterates through this, so even an empty loop body has a checkpoint."""
    for item in iterable:
        _tick()
        budget = _BUDGET.get()
        if budget is not None:
            budget.iterations += 1
            if budget.iterations > MAX_ITERATIONS:
                raise TemplateError(f"ran more than {MAX_ITERATIONS} loop iterations")
        yield item


def _guarded_concat(*parts: Any) -> str:
    """``a ~ b ~ c``: jinja2 joins the str() of each operand."""
    size = sum(map(_text_size, parts))
    _check(size, "a string with ~")
    _spend(size)
    return "".join([str(p) for p in parts])


def _guarded_markup_concat(*parts: Any) -> str:
    """``a ~ b`` under ``{% autoescape true %}``: jinja2 escapes the other operands once one is
    markup (a macro's output there is)."""
    size = sum(_text_size(p, escape=_ESCAPING_FILTERS["escape"]) for p in parts)
    _check(size, "a string with ~")
    _spend(size)
    return markup_join(parts)


_COMPARISONS: dict[str, Callable[[Any, Any], Any]] = {
    "eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "lteq": operator.le,
    "gt": operator.gt, "gteq": operator.ge,
    "in": lambda a, b: a in b, "notin": lambda a, b: a not in b,
}


def _compare_work(op: str, a: Any, b: Any) -> int:
    if isinstance(a, str) and isinstance(b, str):
        if op in ("eq", "ne"):  # strings of different lengths differ at once
            return len(a) if len(a) == len(b) else 1
        return len(b) if op in ("in", "notin") else min(len(a), len(b))
    if op in ("in", "notin") and type(b) is dict and type(a) is str:
        # a key looked up by its hash ('tool_calls' in message), not a walk of the dict; string
        # hashes are salted per process, so no template can build keys that collide with it
        return _text_size(a)
    size = max(_text_size(a), _text_size(b))
    if size > MAX_CHARS:
        raise TemplateError(f"would compare a value of size {size} (limit {MAX_CHARS})")
    return size


def _guarded_compare(left: Any, op: str, right: Any) -> Any:
    """``a == b``, ``a in b`` …: comparing nested values walks them all, which for values sharing
    parts (``[l, l]`` doubled 60 times) never ends, so an operand may be no bigger than a value the
    template may build, and the walk counts as work."""
    _tick()
    _spend(_compare_work(op, left, right))
    return _COMPARISONS[op](left, right)


def _guarded_comparand(value: Any) -> Any:
    """An operand of a chain ``a < b < c``, bounded on its own like the operands of one comparison:
    the chain itself stays jinja2's, which evaluates no operand after a false link."""
    size = _text_size(value)
    _check(size, "a value to compare")
    _spend(size)
    return value


def _hook_filter(hook: Callable[..., Any]) -> Callable[..., Any]:
    """``hook`` as a filter that jinja2 never calls while compiling (it folds filters of constant
    operands unless they take the context): a hook's checks belong to the render's budget."""

    @jinja2.pass_context
    def run(_context: Any, *args: Any) -> Any:
        return hook(*args)

    return run


def _finalize(value: Any) -> Any:
    """Called on every ``{{ … }}`` value before jinja2 prints it with str(); returns it unchanged."""
    size = _text_size(value)
    _check(size, "printed text")
    _spend(size)
    return value


class _RouteThroughHooks(NodeTransformer):
    """Rewrites a parsed template so that loops, ``~`` and comparisons go through the
    environment's hooks.

    A hook is written as a filter, which jinja2 calls directly, rather than as a call, which the
    sandbox checks on every evaluation: a loop over a message's characters compares thousands of
    times. Its name has a space, so no template can name it."""

    def __init__(self, environment: jinja2.Environment) -> None:
        self.environment = environment
        # {% autoescape %} as jinja2's compiler sees it: True or False, None when only known at
        # render time (jinja2 then joins ~ as plain text)
        self.autoescape: bool | None = environment.autoescape is True

    def _hook(self, name: str, args: Sequence[jinja2.nodes.Node], lineno: int) -> jinja2.nodes.Filter:
        hook = jinja2.nodes.Filter(args[0], name, list(args[1:]), [], None, None)
        hook.set_lineno(lineno)
        hook.set_environment(self.environment)
        return hook

    def visit_For(self, node: jinja2.nodes.For) -> jinja2.nodes.Node:
        self.generic_visit(node)
        node.iter = self._hook("pymtok loop", [node.iter], node.lineno)
        return node

    def visit_ScopedEvalContextModifier(self, node: jinja2.nodes.ScopedEvalContextModifier) -> jinja2.nodes.Node:
        outer = self.autoescape
        for option in node.options:
            if option.key == "autoescape":
                try:
                    self.autoescape = bool(option.value.as_const(jinja2.nodes.EvalContext(self.environment)))
                except jinja2.nodes.Impossible:
                    self.autoescape = None
        self.generic_visit(node)
        self.autoescape = outer
        return node

    def visit_Concat(self, node: jinja2.nodes.Concat) -> jinja2.nodes.Node:
        self.generic_visit(node)
        try:
            parts = [operand.as_const(jinja2.nodes.EvalContext(self.environment)) for operand in node.nodes]
        except jinja2.nodes.Impossible:
            name = "pymtok markup concat" if self.autoescape else "pymtok concat"
            return self._hook(name, node.nodes, node.lineno)
        if sum(map(_text_size, parts)) > MAX_CHARS:
            return self._hook("pymtok concat", node.nodes, node.lineno)  # refused when it runs
        # jinja2 joins constant operands while compiling, as plain text whatever the escaping
        return jinja2.nodes.Const("".join(map(str, parts)), lineno=node.lineno, environment=self.environment)

    def visit_Compare(self, node: jinja2.nodes.Compare) -> jinja2.nodes.Node:
        self.generic_visit(node)
        if len(node.ops) == 1:
            operand = node.ops[0]
            return self._hook("pymtok compare", [node.expr, jinja2.nodes.Const(operand.op), operand.expr], node.lineno)
        node.expr = self._hook("pymtok comparand", [node.expr], node.lineno)
        for operand in node.ops:
            operand.expr = self._hook("pymtok comparand", [operand.expr], node.lineno)
        return node


# ---------------------------------------------------------------------------------------------
# The environment: transformers' options and globals, plus the budget hooks


class _GenerationTag(jinja2.ext.Extension):
    """``{% generation %}…{% endgeneration %}`` marks assistant text for training masks.

    transformers only records where the block's output lands (for return_assistant_tokens_mask);
    the rendered text is the block's body either way.
    """

    tags = {"generation"}

    def parse(self, parser: jinja2.parser.Parser) -> jinja2.nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        call = self.call_method("_body")
        return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _body(self, caller: Callable[[], str]) -> str:
        text = caller()
        budget = _BUDGET.get()
        if budget is not None:
            budget.spans.append((budget.output, budget.output + len(text)))
        return text


def _raise_exception(message: Any) -> None:
    _check(_text_size(message), "an error message")
    raise TemplateError(str(message))


def _strftime_now(format: str) -> str:
    # a directive such as %c (24 characters) is at most 12 times longer than its two characters
    _check(12 * _text_size(format), "a date")
    return datetime.now().strftime(format)


_LIPSUM = inspect.signature(generate_lorem_ipsum)


def _lipsum(*args: Any, **kwargs: Any) -> str:
    bound = _LIPSUM.bind(*args, **kwargs)
    bound.apply_defaults()
    count, longest = bound.arguments["n"], bound.arguments["max"]
    _check(_int_or(count, 1) * (_int_or(longest, 100) * 16 + 32), "lorem ipsum")
    return generate_lorem_ipsum(*bound.args, **bound.kwargs)


class _TemplateDict:
    """The template's ``dict``: builds dicts, but is not the ``dict`` type itself.

    transformers exposes this instead of the type, so templates cannot reach type attributes.
    """

    def __call__(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        result = dict(*args, **kwargs)
        _spend(len(result))
        return result

    def fromkeys(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        result = dict.fromkeys(*args, **kwargs)
        _spend(len(result))
        return result


def _check_namespace_name(name: Any) -> None:
    if isinstance(name, str) and name.startswith("_"):
        raise jinja2.exceptions.SecurityError(
            f"chat templates cannot store underscore-prefixed attributes on a namespace: {name!r}"
        )


class _TemplateNamespace(Namespace):
    """jinja2's ``namespace`` refusing underscore names, which could shadow Python internals."""

    def __init__(*args: Any, **kwargs: Any) -> None:
        # like jinja2's Namespace, take self from args so that namespace(self=...) still works
        self, rest = args[0], args[1:]
        attrs = dict(*rest, **kwargs)
        for name in attrs:
            _check_namespace_name(name)
        Namespace.__init__(self, attrs)

    def __setitem__(self, name: str, value: Any) -> None:
        _check_namespace_name(name)
        Namespace.__setitem__(self, name, value)


def _tojson(
    x: Any, ensure_ascii: bool = False, indent: int | str | None = None,
    separators: tuple[str, str] | None = None, sort_keys: bool = False,
) -> str:
    """transformers' tojson: plain json.dumps (jinja2's own escapes HTML characters)."""
    return json.dumps(
        x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


_BINOP_ITEMS = (list, tuple)


def _binop_size(operator: str, left: Any, right: Any) -> tuple[int, int]:
    """(size, limit) of ``left <operator> right`` before computing it."""
    if operator == "%" and isinstance(left, str):
        return _format_size(left, right), MAX_CHARS
    ints = isinstance(left, int) and isinstance(right, int)
    if operator == "**" and ints and right > 0:
        return abs(left).bit_length() * right, MAX_INT_BITS
    if operator == "*":
        if ints:
            return abs(left).bit_length() + abs(right).bit_length(), MAX_INT_BITS
        seq, count = (left, right) if isinstance(right, int) else (right, left)
        if isinstance(seq, (str, *_BINOP_ITEMS)) and isinstance(count, int):
            return len(seq) * max(count, 0), MAX_ITEMS if isinstance(seq, _BINOP_ITEMS) else MAX_CHARS
    if operator == "+":
        if ints:
            return max(abs(left).bit_length(), abs(right).bit_length()) + 1, MAX_INT_BITS
        if isinstance(left, _BINOP_ITEMS) and isinstance(right, _BINOP_ITEMS):
            return len(left) + len(right), MAX_ITEMS
        if isinstance(left, str) and isinstance(right, str):
            return len(left) + len(right), MAX_CHARS
    return 1, MAX_CHARS


class _ChatEnvironment(ImmutableSandboxedEnvironment):
    """transformers' chat-template environment, with budget checks in every sandbox hook."""

    # intercepting every operator also stops jinja2 from evaluating them at compile time
    intercepted_binops = frozenset({"+", "-", "*", "/", "//", "%", "**"})
    intercepted_unops = frozenset({"+", "-"})

    def __init__(self) -> None:
        super().__init__(
            trim_blocks=True, lstrip_blocks=True,
            extensions=[_GenerationTag, jinja2.ext.loopcontrols],
            finalize=_finalize,
        )
        self.filters["tojson"] = _tojson
        self.filters = {name: _guard_filter(name, f) for name, f in self.filters.items()}
        self.globals.update(
            raise_exception=_raise_exception, strftime_now=_strftime_now, dict=_TemplateDict(),
            namespace=_TemplateNamespace, lipsum=_lipsum,
        )
        # the hooks _RouteThroughHooks writes into templates
        self.filters.update({
            "pymtok loop": _hook_filter(_guarded_loop), "pymtok concat": _hook_filter(_guarded_concat),
            "pymtok markup concat": _hook_filter(_guarded_markup_concat),
            "pymtok compare": _hook_filter(_guarded_compare), "pymtok comparand": _hook_filter(_guarded_comparand),
        })

    def concat(self, parts: Iterable[str]) -> str:
        """Joins the output of macros, ``{% set %}`` blocks and ``caller()``."""
        parts = list(parts)
        size = sum(map(len, parts))
        _check(size, "a block of text")
        _spend(size)
        return "".join(parts)

    def call(self, context: Any, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        _tick()
        # sandboxed str.format arrives wrapped; __wrapped__ is the bound str method
        method = getattr(obj, "__wrapped__", obj)
        s = getattr(method, "__self__", None)
        if isinstance(s, str):
            name = getattr(method, "__name__", "")
            if name == "join" and args and not isinstance(args[0], Collection):
                args = (list(args[0]), *args[1:])
            if name == "join" and args:
                _check(_join_size(s, args[0]), "the result of str.join")
            _check(_str_method_size(name, s, args, kwargs), f"the result of str.{name}")
            _check(_str_method_items(name, s, args, kwargs), f"the result of str.{name}", MAX_ITEMS)
            result = super().call(context, obj, *args, **kwargs)
            _spend(_size(result))
            return result
        return super().call(context, obj, *args, **kwargs)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        size, limit = _binop_size(operator, left, right)
        _check(size, f"the result of {operator!r}", limit)
        _spend(size)
        return super().call_binop(context, operator, left, right)

    def call_unop(self, context: Any, operator: str, arg: Any) -> Any:
        _tick()
        return super().call_unop(context, operator, arg)

    def getattr(self, obj: Any, attribute: str) -> Any:
        _tick()
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        _tick()
        result = super().getitem(obj, argument)
        if isinstance(argument, slice):  # a slice is a new value; an item is not
            _spend(_size(result))
        return result


# ---------------------------------------------------------------------------------------------
# The context transformers builds


class _Plain:
    """Rebuild a value out of plain JSON-like types, as transformers does for everything a
    template sees: rich objects carry methods the sandbox does not know are dangerous.

    Unlike transformers (which recurses until Python's stack runs out), the walk refuses values
    nested deeper than MAX_DEPTH (a value holding itself is one) and more than MAX_INPUT_VALUES
    values in all, counting a shared value each time it is reached, as the copy holds it each time.
    """

    def __init__(self) -> None:
        self.values = 0

    def count(self, depth: int) -> None:
        """One more value reached at ``depth``: TemplateError past the bounds."""
        self.values += 1
        if self.values > MAX_INPUT_VALUES:
            raise TemplateError(f"chat template inputs hold more than {MAX_INPUT_VALUES} values")
        if depth > MAX_DEPTH:
            raise TemplateError(
                f"chat template inputs are nested more than {MAX_DEPTH} deep (or hold themselves)"
            )

    def __call__(self, value: Any, depth: int = 0) -> Any:
        self.count(depth)
        if value is None or type(value) in (str, int, float, bool):
            return value
        if isinstance(value, str):  # subclasses (enums, ...) may carry extra methods
            return str.__str__(value)
        if isinstance(value, int):
            return int.__int__(value)
        if isinstance(value, float):
            return float.__float__(value)
        depth += 1
        if isinstance(value, Mapping):
            return {self(k, depth): self(v, depth) for k, v in value.items()}
        if isinstance(value, list):
            return [self(v, depth) for v in value]
        if isinstance(value, tuple):
            return tuple(self(v, depth) for v in value)
        numpy = sys.modules.get("numpy")
        if numpy is not None and isinstance(value, numpy.generic):  # np.bool_(False) stays falsy
            return self(value.item(), depth)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return {f.name: self(getattr(value, f.name), depth) for f in dataclasses.fields(value)}
        if callable(getattr(value, "model_dump", None)):  # pydantic models
            return self(value.model_dump(), depth)
        return f"<{type(value).__name__}>"


def _plain(value: Any) -> Any:
    return _Plain()(value)


def _message_dict(message: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(message) and not isinstance(message, type):
        message = {f.name: getattr(message, f.name) for f in dataclasses.fields(message)}
    elif callable(getattr(message, "model_dump", None)):
        message = message.model_dump()
    if not isinstance(message, Mapping):
        raise TemplateError(f"chat messages must be dicts, got {message!r:.80}")
    # APIs such as OpenAI's send content=None or tool_calls=None; templates handle a missing key
    # better than a None (which many print as "None"), so transformers drops those keys
    return {k: v for k, v in message.items() if v is not None}


def _with_reasoning_aliases(message: dict[str, Any]) -> dict[str, Any]:
    reasoning = next((message[k] for k in _REASONING_FIELDS if message.get(k) is not None), None)
    if reasoning is None:
        return message
    return {"thinking": reasoning, **message, "reasoning_content": reasoning}


def _list_of_dicts(values: Any, what: str) -> list[Any]:
    if isinstance(values, (str, Mapping)) or not isinstance(values, Iterable):
        raise TemplateError(f"chat template {what} must be a list of dicts, got {values!r:.80}")
    items: list[Any] = list(values)
    for value in items:
        if not isinstance(value, Mapping):
            raise TemplateError(f"chat template {what} must be dicts, got {value!r:.80}")
    return items


def _tool_schemas(tools: Any) -> list[Any]:
    """Tools as transformers takes them: JSON-schema dicts as they are, functions and methods
    turned into their schema."""
    if isinstance(tools, (str, Mapping)) or not isinstance(tools, Iterable):
        raise TemplateError(f"chat template tools must be a list, got {tools!r:.80}")
    schemas: list[Any] = []
    for tool in tools:
        if isinstance(tool, Mapping):
            schemas.append(tool)
        elif inspect.isfunction(tool) or inspect.ismethod(tool):
            schemas.append(get_json_schema(tool))
        else:
            raise TemplateError(
                "chat template tools must be JSON-schema dicts or functions with type hints and a "
                f"docstring, got {tool!r:.80}"
            )
    return schemas


# transformers appends this to the text to continue, renders, and cuts the prompt where it lands
_CONTINUE_TAG = "CONTINUE_FINAL_MESSAGE_TAG "


def _tag_final_message(chat: list[dict[str, Any]], field: bool | str, source: str) -> str:
    """Mark the end of the final message's text (``field``: True for "content") as transformers
    does for continue_final_message; returns the text that was marked."""
    name = field if isinstance(field, str) else "content"
    last = chat[-1]
    final = last.get(name)
    if final is None:
        raise TemplateError(f"continue_final_message is set but the final message has no {name!r} to continue")
    # reasoning is copied under several names: tag each copy, whichever the template reads
    fields = [f for f in _REASONING_FIELDS if last.get(f) == final] if name in _REASONING_FIELDS else [name]
    if not any(f in source for f in fields):
        raise TemplateError(f"continue_final_message is set to {name!r}, which the chat template never reads")
    if isinstance(final, (list, tuple)):
        for block in reversed(final):
            if not isinstance(block, Mapping):
                if isinstance(block, Collection) and "text" not in block:
                    continue
                raise TemplateError(f"continue_final_message: a content block is not a dict: {block!r:.80}")
            if "text" in block:
                # the last text block; the copies under several names are the same list
                text = block["text"]
                if not isinstance(text, str):
                    raise TemplateError(f"continue_final_message: the text to continue is not a string: {text!r:.80}")
                block["text"] = text + _CONTINUE_TAG
                return text
        raise TemplateError("continue_final_message is set but the final message has no text to continue")
    if not isinstance(final, str):
        raise TemplateError(f"continue_final_message: the final {name!r} is not a string: {final!r:.80}")
    for f in fields:
        last[f] = last[f] + _CONTINUE_TAG
    return final


def _cut_at_final_message(text: str, final: str) -> str:
    tag = _CONTINUE_TAG.strip()
    if final.strip() not in text or tag not in text:
        raise TemplateError(
            "continue_final_message is set but the final message does not appear in the prompt: "
            "the chat template drops part of it"
        )
    at = text.rindex(tag)
    if text[at : at + len(_CONTINUE_TAG)] == _CONTINUE_TAG:
        return text[:at]
    return text[:at].rstrip()  # the template trimmed the message's trailing space


# -- sanitize_control_tokens ----------------------------------------------------------------

# The private-use characters transformers wraps around each control token found in the caller's
# strings: the rendered prompt then tells those apart from the tokens the template writes itself.
_CONTROL_START = "\U000f0000"
_CONTROL_END = "\U000f0001"


def control_token_patterns(tokens: Iterable[str], added: Iterable[str]) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """(a pattern matching any of the control ``tokens``, a pattern matching any ``added`` token
    between the markers or a lone marker), as transformers builds them: longest first, so a token
    wins over the tokens inside it."""

    def alternatives(texts: Iterable[str]) -> str:
        return "|".join(map(re.escape, sorted(texts, key=len, reverse=True))) or "(?!)"

    markers = f"{_CONTROL_START}({alternatives(added)}){_CONTROL_END}|[{_CONTROL_START}{_CONTROL_END}]"
    return re.compile(alternatives(tokens)), re.compile(markers)


class _Marker(_Plain):
    """Wrap every control token in the caller's strings (dicts and lists of them) in the markers,
    dropping any marker already there so that none can be forged; dict keys and other objects stay
    as they are and tuples become lists, as in transformers. ``objects`` first turns message
    objects (dataclasses, pydantic models) nested anywhere into dicts, as transformers does for
    messages, so that their strings are marked too. Bounded like :class:`_Plain`."""

    def __init__(self, control: re.Pattern[str], objects: bool) -> None:
        super().__init__()
        self.control = control
        self.objects = objects

    def __call__(self, value: Any, depth: int = 0) -> Any:
        self.count(depth)
        if isinstance(value, str):
            value = value.replace(_CONTROL_START, "").replace(_CONTROL_END, "")
            return self.control.sub(f"{_CONTROL_START}\\g<0>{_CONTROL_END}", value)
        depth += 1
        if self.objects and not isinstance(value, (Mapping, list, tuple)):
            if dataclasses.is_dataclass(value) and not isinstance(value, type):
                value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
            elif callable(getattr(value, "model_dump", None)):
                value = value.model_dump()
        if isinstance(value, dict) or (self.objects and isinstance(value, Mapping)):
            return {key: self(item, depth) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [self(item, depth) for item in value]
        return value


def marked_pieces(prompt: str, markers: re.Pattern[str]) -> Iterator[tuple[str, bool]]:
    """The prompt rendered from marked inputs as (text, is_marked_token) pieces, markers removed,
    empty pieces skipped. A lone marker (a template method such as ``split()`` can cut a marked
    token apart) is dropped but still ends the piece, so text either side cannot join into a token."""
    pieces = markers.split(prompt)
    yield pieces[0], False
    for i, piece in enumerate(pieces[1:], start=1):
        if piece:
            yield piece, i % 2 == 1


def _template_line(tb: TracebackType | None) -> int | None:
    """The template line of the innermost template frame (jinja2 rewrites tracebacks so)."""
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


# compiled templates one ChatTemplate keeps (templates passed per call are compiled too)
_COMPILED_KEPT = 16


class ChatTemplate:
    """A model's chat template(s) with the special-token strings it is rendered with.

    ``source`` is one template, or named templates (``{"default": ..., "tool_use": ...}``) as
    :func:`find_chat_template` returns them. ``special_tokens`` maps names such as ``bos_token``
    to their text (AddedToken-style dicts give their ``"content"``); they become template
    variables, as in transformers. Templates are compiled on first use.
    """

    def __init__(
        self, source: str | Mapping[str, str], special_tokens: Mapping[str, Any] | None = None
    ) -> None:
        self.source: str | dict[str, str] = source if isinstance(source, str) else dict(source)
        self.special_tokens: dict[str, str] = {}
        for key, value in (special_tokens or {}).items():
            text = token_text(value)
            if text is not None:
                self.special_tokens[key] = text
        self._environment = _ChatEnvironment()
        self._compiled: dict[str, jinja2.Template] = {}
        self._literals: dict[str, str] = {}

    def _select(self, chat_template: str | None, tools: Any) -> tuple[str, str]:
        """(label, source) of the template to use, by transformers' get_chat_template rule: a
        ``chat_template`` naming one of several templates picks it; any other string is itself
        the template; ``None`` takes the model's ("tool_use" when tools are given and it has one)."""
        if chat_template is not None and not isinstance(chat_template, str):
            raise TypeError(f"chat_template must be a str, got {type(chat_template).__name__}")
        if isinstance(self.source, dict):
            if chat_template is not None and chat_template in self.source:
                return f" {chat_template!r}", self.source[chat_template]
            if chat_template is None:
                name = "tool_use" if tools is not None and "tool_use" in self.source else "default"
                if name not in self.source:
                    raise TemplateError(
                        "this model has several chat templates and no 'default': name one of "
                        f"{sorted(self.source)}, or pass a template"
                    )
                return f" {name!r}", self.source[name]
        elif chat_template is None:
            return "", self.source
        return " (given)", chat_template

    def _compile(self, label: str, source: str) -> jinja2.Template:
        template = self._compiled.get(source)
        if template is None:
            env = self._environment
            with self._errors(label), _budgeted():
                # each stage of compiling costs more per character than the one before, and
                # Python's compile() of the generated code is superlinear: refuse by size first
                if len(source) > MAX_TEMPLATE_CHARS:
                    raise TemplateError(f"source is {len(source)} characters (limit {MAX_TEMPLATE_CHARS})")
                tokens = sum(1 for _ in itertools.islice(env.lex(source), MAX_TEMPLATE_TOKENS + 1))
                if tokens > MAX_TEMPLATE_TOKENS:
                    raise TemplateError(f"source has more than {MAX_TEMPLATE_TOKENS} tokens")
                tree = env.parse(source)
                nodes = sum(1 for _ in itertools.islice(tree.find_all(jinja2.nodes.Node), MAX_TEMPLATE_NODES))
                if nodes >= MAX_TEMPLATE_NODES:
                    raise TemplateError(f"source parses to more than {MAX_TEMPLATE_NODES} nodes")
                template = env.from_string(_RouteThroughHooks(env).visit(tree))
            if len(self._compiled) >= _COMPILED_KEPT:  # templates passed per call must not pile up
                self._compiled.clear()
            self._compiled[source] = template
        return template

    @contextmanager
    def _errors(self, label: str) -> Iterator[None]:
        """Report every failure inside the template as a TemplateError naming template and line."""
        try:
            yield
        except Exception as exc:
            line = exc.lineno if isinstance(exc, jinja2.TemplateSyntaxError) else None
            line = line or _template_line(exc.__traceback__)
            where = f"chat template{label}" + (f", line {line}" if line else "")
            if isinstance(exc, (TemplateError, jinja2.TemplateError)):
                message = str(exc)
            else:
                message = f"{type(exc).__name__}: {exc}"
            raise TemplateError(f"{where}: {message}") from exc

    def render(
        self,
        messages: Any,
        *,
        tools: Sequence[Mapping[str, Any] | Callable[..., Any]] | None = None,
        documents: Sequence[Mapping[str, Any]] | None = None,
        add_generation_prompt: bool = True,
        continue_final_message: bool | str = False,
        chat_template: str | None = None,
        **kwargs: Any,
    ) -> str:
        """Render a conversation to the prompt text, byte-identical to transformers'
        ``apply_chat_template(messages, tokenize=False, ...)``.

        ``tools`` are JSON-schema dicts or Python functions (turned into their schema as
        transformers' ``get_json_schema`` does); ``documents`` dicts (usually "title" and "text");
        ``continue_final_message`` leaves the last message open for the model to continue (a
        string names the field to continue, e.g. "reasoning_content"); ``chat_template`` names one
        of several templates or is a template itself; ``kwargs`` become template variables (e.g.
        ``enable_thinking=False``) and override special tokens of the same name.
        """
        return self._render(
            messages, tools, documents, add_generation_prompt, continue_final_message, chat_template, kwargs
        )[0]

    def render_with_spans(
        self,
        messages: Any,
        *,
        tools: Sequence[Mapping[str, Any] | Callable[..., Any]] | None = None,
        documents: Sequence[Mapping[str, Any]] | None = None,
        add_generation_prompt: bool = True,
        chat_template: str | None = None,
        **kwargs: Any,
    ) -> tuple[str, list[tuple[int, int]]]:
        """``render``, and the (start, end) character span of each ``{% generation %}`` block's
        output in the prompt, as transformers records them for ``return_assistant_tokens_mask``
        (the position is the text yielded so far, so a block inside a macro is placed as
        transformers places it)."""
        return self._render(messages, tools, documents, add_generation_prompt, False, chat_template, kwargs)

    def render_marked(
        self,
        messages: Any,
        control: re.Pattern[str],
        *,
        tools: Sequence[Mapping[str, Any] | Callable[..., Any]] | None = None,
        documents: Sequence[Mapping[str, Any]] | None = None,
        add_generation_prompt: bool = True,
        continue_final_message: bool | str = False,
        chat_template: str | None = None,
        **kwargs: Any,
    ) -> str:
        """``render``, with each ``control`` match in the strings of the messages, tools,
        documents and ``kwargs`` wrapped in private-use markers (:func:`marked_pieces` finds them
        in the prompt), as transformers' ``apply_chat_template(..., sanitize_control_tokens=True)``
        marks them. Dict keys, and tools given as functions, are not marked, as there."""
        return self._render(
            messages, tools, documents, add_generation_prompt, continue_final_message, chat_template, kwargs,
            control,
        )[0]

    def literal_text(self, chat_template: str | None = None, tools: Any = None) -> str:
        """The literal strings of the template ``chat_template`` and ``tools`` select (its text
        outside tags, and every string constant), joined by NULs so that a search cannot match
        across two: transformers takes the added tokens found in it as control tokens."""
        label, source = self._select(chat_template, tools)
        text = self._literals.get(source)
        if text is None:
            self._compile(label, source)  # refuses a hostile source by size before parsing it
            tree = self._environment.parse(source)
            literals = {node.data for node in tree.find_all(jinja2.nodes.TemplateData)}
            literals |= {node.value for node in tree.find_all(jinja2.nodes.Const) if isinstance(node.value, str)}
            text = "\0".join(literals)
            if len(self._literals) >= _COMPILED_KEPT:
                self._literals.clear()
            self._literals[source] = text
        return text

    def _render(
        self,
        messages: Any,
        tools: Any,
        documents: Any,
        add_generation_prompt: bool,
        continue_final_message: bool | str,
        chat_template: str | None,
        kwargs: dict[str, Any],
        control: re.Pattern[str] | None = None,
    ) -> tuple[str, list[tuple[int, int]]]:
        if continue_final_message and add_generation_prompt:
            raise ValueError(
                "continue_final_message and add_generation_prompt are not compatible: the first "
                "continues the final message, the second starts a new assistant message"
            )
        label, source = self._select(chat_template, tools)
        chat = [_message_dict(m) for m in getattr(messages, "messages", messages)]
        # an empty conversation renders (in a batch, transformers renders it too); only a call
        # given no conversation at all is refused, by Tokenizer.apply_chat_template
        if not chat and continue_final_message:
            raise TemplateError("continue_final_message is set but the conversation is empty")
        if control is not None:
            chat = _Marker(control, objects=True)(chat)
            tools, documents, kwargs = _Marker(control, objects=False)((tools, documents, kwargs))
        chat = [_with_reasoning_aliases(m) for m in _plain(chat)]
        final = _tag_final_message(chat, continue_final_message, source) if continue_final_message else None
        context = _plain({**self.special_tokens, **kwargs})
        context.update(
            messages=chat,
            tools=None if tools is None else _plain(_tool_schemas(tools)),
            documents=None if documents is None else _plain(_list_of_dicts(documents, "documents")),
            add_generation_prompt=add_generation_prompt,
        )
        template = self._compile(label, source)
        pieces: list[str] = []
        inputs = len(chat) + len(context["tools"] or ()) + len(context["documents"] or ())
        with self._errors(label), _budgeted(inputs):
            budget = _BUDGET.get()
            assert budget is not None
            for piece in template.generate(context):
                budget.output += len(piece)
                _check(budget.output, "a prompt")
                pieces.append(piece)
            spans = budget.spans
        text = "".join(pieces)
        if final is not None:
            text = _cut_at_final_message(text, final)
        return text, spans
