"""A bound on the time a tokenizer file's own regex may take (Split, Replace).

HF runs these patterns with Oniguruma, whose retry limit makes a catastrophically backtracking
pattern (``(a|aa)+$`` on ``"a" * 40 + "b"``) fail within about a second. The ``regex`` module's
equivalent is a timeout, which costs a clock read per match: so only patterns that can backtrack
that way get one (:func:`timeout_for`), and every pattern real tokenizers ship runs unbounded, at
full speed.
"""

from __future__ import annotations

from .errors import FormatError

TIMEOUT = 1.0
"""Seconds (of process CPU time, the ``regex`` module's clock) one regex call may take."""

# Repeats up to this many times count as bounded (\p{N}{1,3} is everywhere)
_SMALL_REPEAT = 3


def timeout_for(pattern: str) -> float | None:
    """:data:`TIMEOUT` for an Oniguruma pattern that may backtrack catastrophically, else None."""
    return TIMEOUT if may_backtrack(pattern) else None


def too_slow(component: str, pattern: str) -> FormatError:
    return FormatError(
        f"{component} pattern {pattern!r:.200} backtracks catastrophically: a match took over "
        f"{TIMEOUT:g} s of CPU time (HF's Oniguruma gives up too), so this text cannot be tokenized"
    )


def may_backtrack(pattern: str) -> bool:
    """Whether an Oniguruma pattern can take exponential (or high polynomial) time to match.

    Conservative: yes for a repeated group holding an alternation or a repeat (``(a|aa)+``,
    ``(a+)*``), three unbounded repeats in one sequence (``a*a*a*b``), a backreference or
    subexpression call, the absent operator, extended syntax, and anything not understood.

    >>> may_backtrack(r"(a|aa)+$"), may_backtrack(r" ?\\p{L}+| ?\\p{N}+|\\s+(?!\\S)|\\s+")
    (True, False)
    """
    # one frame per open group: [holds an alternation or repeat, unbounded repeats in the
    # current alternative, most unbounded repeats of any alternative]
    frames: list[list[int]] = [[0, 0, 0]]
    closed: list[int] | None = None  # the group just closed, when it is the previous atom
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        atom: list[int] | None = None
        if c == "\\":
            nxt = pattern[i + 1 : i + 2]
            if nxt in ("", "k", "g") or nxt.isdigit() and nxt != "0":
                return True  # backreference, subexpression call, or a trailing backslash
            i += 2
            if nxt in "pPxo" and pattern[i : i + 1] == "{":
                end = pattern.find("}", i)
                if end < 0:
                    return True
                i = end + 1
        elif c == "[":
            end = class_end(pattern, i)
            if end < 0:
                return True
            i = end
        elif c == "(":
            i += 1
            if pattern.startswith("?", i):
                if pattern.startswith("?#", i):
                    end = pattern.find(")", i)
                    if end < 0:
                        return True
                    i = end + 1
                    closed = None
                    continue
                j = i + 1
                while j < n and (pattern[j].isalpha() or pattern[j] == "-"):
                    j += 1
                head = pattern[i + 1 : j]
                if "x" in head or pattern.startswith(("?~", "?("), i):
                    return True  # extended syntax, absent operator, conditional
                if pattern.startswith(("?<", "?'", "?P<"), i) and not pattern.startswith(("?<=", "?<!"), i):
                    close = ">" if pattern[i + 1 : i + 2] in ("<", "P") else "'"
                    end = pattern.find(close, i + 2)
                    if end < 0:
                        return True
                    i = end + 1
                elif j < n and pattern[j] == ")":
                    i = j + 1  # flags for the rest of the group: no group of its own
                    closed = None
                    continue
                else:
                    i = j + 1 if j < n and pattern[j] in ":=!>" else j + 2 if j + 1 < n else n
            frames.append([0, 0, 0])
            closed = None
            continue
        elif c == ")":
            if len(frames) == 1:
                return True
            group = frames.pop()
            group[2] = max(group[2], group[1])
            top = frames[-1]
            top[0] |= group[0]
            top[1] += group[2]
            if top[1] >= 3:
                return True
            atom = group
            i += 1
        elif c == "|":
            top = frames[-1]
            top[0] = 1
            top[2] = max(top[2], top[1])
            top[1] = 0
            i += 1
        elif c in "*+?{":
            repeat = _repeat(pattern, i)
            if repeat is None:  # a literal brace
                i += 1
            else:
                i, most = repeat
                if i < n and pattern[i] in "?+":
                    i += 1  # lazy or possessive
                top = frames[-1]
                top[0] = 1
                if most is None or most > 1:
                    if closed is not None and closed[0]:
                        return True
                if most is None or most > _SMALL_REPEAT:
                    top[1] += 1
                    if top[1] >= 3:
                        return True
                closed = None
                continue
        else:
            i += 1
        closed = atom
    return len(frames) != 1


def class_end(pattern: str, i: int) -> int:
    """The index after the character class opening at ``i`` (nested classes included), or -1."""
    depth = 0
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            depth += 1
            i += 1
            if pattern.startswith("^", i):
                i += 1
            if pattern.startswith("]", i):
                i += 1  # a leading ] is a literal
            continue
        if c == "]":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return -1


def _repeat(pattern: str, i: int) -> tuple[int, int | None] | None:
    """The quantifier at ``i``: (index after it, most repeats or None for unbounded), or None
    when a brace there is a literal."""
    c = pattern[i]
    if c == "*" or c == "+":
        return i + 1, None
    if c == "?":
        return i + 1, 1
    end = pattern.find("}", i)
    body = pattern[i + 1 : end] if end > 0 else ""
    low, comma, high = body.partition(",")
    if not body or not (low.isdigit() or (comma and not low)) or (high and not high.isdigit()):
        return None
    if not (low.isascii() and high.isascii()):
        return None
    if not comma:
        return end + 1, int(low)
    return end + 1, int(high) if high else None
