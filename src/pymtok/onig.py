"""Oniguruma patterns (HF's regex engine) run with the ``regex`` module, character for character.

HF compiles tokenizer.json patterns with Oniguruma (Unicode 16.0, Ruby syntax). :func:`onig_regex`
rewrites a pattern into ``regex`` V1 syntax with the same meaning, pinning the Unicode version with
the tables below, and :func:`onig_spans` / :func:`onig_sub` iterate matches with Oniguruma's rule
for empty matches. Split pre-tokenizers and Replace normalizers/decoders all go through here.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import regex

from .errors import FormatError

# Code points assigned in Unicode 17.0 but not 16.0: Oniguruma (16.0) sees them as unassigned
# (Cn) while the ``regex`` module (17.0) gives them real properties.
_UNICODE_17_NEW = (
    "88F C5C CDC 1ACF-1ADD 1AE0-1AEB 20C1 2B96 A7CE-A7CF A7D2 A7D4 A7F1 FBC3-FBD2 FD90-FD91 "
    "FDC8-FDCE 10940-10959 10EC5-10EC7 10ED0-10ED8 10EFA-10EFB 11B60-11B67 11DB0-11DDB "
    "11DE0-11DE9 16EA0-16EB8 16EBB-16ED3 16FF2-16FF6 187F8-187FF 18D09-18D1E 18D80-18DF2 "
    "1CCFA-1CCFC 1CEBA-1CED0 1CEE0-1CEF0 1E6C0-1E6DE 1E6E0-1E6F5 1E6FE-1E6FF 1F6D8 1F777-1F77A "
    "1F8D0-1F8D8 1FA54-1FA57 1FA8A 1FA8E 1FAC8 1FACD 1FAEA 1FAEF 1FBFA 2B73A-2B73F 2CEA2-2CEAD "
    "323B0-33479"
)
# Characters whose properties changed between 16.0 and 17.0, each with a stand-in that has
# every 16.0 property of the original (U+0295 went from Ll to Lo; U+0296 is still Ll).
_UNICODE_16_STAND_IN = {"\u0295": "\u0296"}
_UNASSIGNED = "\u0378"

FLAGS = regex.V1 | regex.MULTILINE

def _code_point_ranges(ranges: str) -> list[tuple[int, int]]:
    out = []
    for item in ranges.split():
        lo, _, hi = item.partition("-")
        out.append((int(lo, 16), int(hi or lo, 16)))
    return out


def hex_class(ranges: str, negate: bool = False) -> str:
    """A character class of code point ranges ("21-2F 3A"), valid in ``re`` and ``regex``."""
    return ("[^" if negate else "[") + "".join(
        f"\\U{lo:08X}-\\U{hi:08X}" for lo, hi in _code_point_ranges(ranges)) + "]"


def _escape_chars(chars: list[str]) -> str:
    runs: list[list[int]] = []
    for code in sorted(map(ord, chars)):
        if runs and runs[-1][1] == code - 1:
            runs[-1][1] = code
        else:
            runs.append([code, code])
    return "".join(f"\\U{lo:08X}-\\U{hi:08X}" for lo, hi in runs)


@functools.cache
def _special() -> str:
    # thousands of characters, needed only when a pattern is translated
    return "".join(
        chr(c) for lo, hi in _code_point_ranges(_UNICODE_17_NEW) for c in range(lo, hi + 1)
    ) + "".join(_UNICODE_16_STAND_IN)


def unicode_16_set(base: str) -> str:
    """A V1 set item matching what ``base`` (a set item) matches with Unicode 16.0 properties."""
    compiled = regex.compile(base, FLAGS)
    special = _special()
    now = set(compiled.findall(special))
    unassigned = compiled.fullmatch(_UNASSIGNED) is not None
    exclude, include = [], []
    for char in special:
        stand_in = _UNICODE_16_STAND_IN.get(char)
        then = unassigned if stand_in is None else compiled.fullmatch(stand_in) is not None
        if char in now and not then:
            exclude.append(char)
        elif then and char not in now:
            include.append(char)
    out = base
    if exclude:
        out = f"[{out}--[{_escape_chars(exclude)}]]"
    if include:
        out = f"[{out}{_escape_chars(include)}]"
    return out


# Oniguruma's word characters: the Latin-1 superscripts and fractions are in, the joiners out.
_ONIG_WORD = r"[[\w\xb2\xb3\xb9\xbc-\xbe]--[\u200c\u200d]]"
_ONIG_SHORTHANDS = {
    "d": r"\p{Nd}", "D": r"\P{Nd}", "w": _ONIG_WORD, "W": f"[^{_ONIG_WORD}]",
    "h": "[0-9A-Fa-f]", "H": "[^0-9A-Fa-f]",
}
# POSIX brackets whose Oniguruma (Unicode) meaning differs from the ``regex`` module's.
_ONIG_POSIX = {
    "digit": r"\p{Nd}", "alnum": r"[\p{Alpha}\p{Nd}]", "punct": r"[\p{P}\p{S}]",
    "word": r"[\w--[\u200c\u200d]]",
}


def _posix_class(name: str) -> str:
    negated = name.startswith("^")
    base = _ONIG_POSIX.get(name.lstrip("^"), f"[[:{name.lstrip('^')}:]]")
    return unicode_16_set(f"[^{base}]" if negated else base)


class _OnigTranslator:
    """Rewrites one Oniguruma (Ruby syntax) pattern into ``regex`` V1 syntax, same meaning."""

    def __init__(self, pattern: str) -> None:
        self.src = pattern
        self.pos = 0

    def __call__(self) -> str:
        out = []
        while self.pos < len(self.src):
            out.append(self._outside())
        return "".join(out)

    def _outside(self) -> str:
        c = self.src[self.pos]
        if c == "\\":
            return self._escape(in_class=False)[1]
        if c == "[":
            return self._class()
        self.pos += 1
        if c == "(" and self.src.startswith("?", self.pos):
            return "(?" + self._group_flags()
        return c

    def _group_flags(self) -> str:
        # Ruby's (?m) is dot-all; its multi-line anchors are always on (compiled with MULTILINE).
        self.pos += 1
        start = self.pos
        while self.pos < len(self.src) and self.src[self.pos] in "imx-":
            self.pos += 1
        return self.src[start : self.pos].replace("m", "s")

    def _class(self) -> str:
        self.pos += 1
        out = ["["]
        if self.src.startswith("^", self.pos):
            out.append("^")
            self.pos += 1
        first = True
        prev_literal = False
        while self.pos < len(self.src):
            c = self.src[self.pos]
            if c == "]" and not first:
                self.pos += 1
                out.append("]")
                return "".join(out)
            first = False
            if c == "\\":
                is_literal, text = self._escape(in_class=True)
            elif self.src.startswith("[:", self.pos):
                end = self.src.find(":]", self.pos + 2)
                if end < 0:
                    raise FormatError(f"Split pattern {self.src!r}: unterminated [: class")
                is_literal, text = False, _posix_class(self.src[self.pos + 2 : end])
                self.pos = end + 2
            elif c == "[":
                is_literal, text = False, self._class()
            elif self.src.startswith("&&", self.pos):
                self.pos += 2
                is_literal, text = False, "&&"
            elif c == "-" and prev_literal and self._literal_follows():
                self.pos += 1
                out.append("-")
                prev_literal = False
                continue
            else:
                self.pos += 1
                is_literal, text = True, regex.escape(c, literal_spaces=True)
            out.append(text)
            prev_literal = is_literal
        raise FormatError(f"Split pattern {self.src!r}: unterminated character class")

    def _literal_follows(self) -> bool:
        nxt = self.src[self.pos + 1 : self.pos + 2]
        if nxt in ("", "]", "["):
            return False
        if nxt == "\\":
            return self.src[self.pos + 2 : self.pos + 3] not in ("p", "P", "d", "D", "w", "W",
                                                                 "s", "S", "h", "H")
        return True

    def _escape(self, in_class: bool) -> tuple[bool, str]:
        """(is it a single literal character, its ``regex`` spelling); consumes the escape."""
        src = self.src
        kind = src[self.pos + 1 : self.pos + 2]
        if not kind:
            raise FormatError(f"Split pattern {src!r}: pattern ends with a backslash")
        self.pos += 2
        if kind in ("p", "P"):
            if src.startswith("{", self.pos):
                end = src.find("}", self.pos)
                if end < 0:
                    raise FormatError(f"Split pattern {src!r}: unterminated \\{kind}{{")
                name = src[self.pos + 1 : end]
                self.pos = end + 1
            else:
                name = src[self.pos : self.pos + 1]
                self.pos += 1
            return False, unicode_16_set(f"[\\{kind}{{{name}}}]")
        if kind in _ONIG_SHORTHANDS:
            return False, unicode_16_set(_ONIG_SHORTHANDS[kind])
        if kind == "x" and src.startswith("{", self.pos):
            end = src.find("}", self.pos)
            if end < 0:
                raise FormatError(f"Split pattern {src!r}: unterminated \\x{{")
            code = int(src[self.pos + 1 : end], 16)
            self.pos = end + 1
            return True, f"\\U{code:08X}"
        if not in_class:
            if kind in ("b", "B"):
                word = unicode_16_set(_ONIG_WORD)
                edge = f"(?:(?<={word})(?!{word})|(?<!{word})(?={word}))"
                return False, edge if kind == "b" else f"(?!{edge})"
            if kind == "z":
                return False, r"\Z"
            if kind == "Z":
                return False, r"(?=\n?\Z)"
        if kind in "xu0":
            return True, "\\" + kind
        if kind.isalnum():
            return kind in "tnrfvae", "\\" + kind
        return True, regex.escape(kind, literal_spaces=True)


_COMPILED: dict[str, regex.Pattern[str]] = {}


def onig_regex(pattern: str) -> regex.Pattern[str]:
    """Compile an Oniguruma pattern (as found in tokenizer.json) so it matches like HF's."""
    compiled = _COMPILED.get(pattern)
    if compiled is None:
        try:
            # (?-f): Oniguruma's (?i) folds one character to one; V1 would fold ß to ss
            compiled = regex.compile("(?-f)" + _OnigTranslator(pattern)(), FLAGS)
        except regex.error as exc:
            raise FormatError(f"regex {pattern!r} does not compile: {exc}") from exc
        _COMPILED[pattern] = compiled
    return compiled


def onig_spans(compiled: regex.Pattern[str], text: str, timeout: float | None = None) -> Iterator[tuple[int, int]]:
    # Oniguruma's find_iter (rust-onig) refuses an empty match right where the previous match
    # ended and then resumes one character later; Python allows some of those, so empty
    # matches are replayed with Oniguruma's rule.
    # a timeout only when asked: any keyword costs the regex module microseconds per call
    matches = compiled.finditer(text) if timeout is None else compiled.finditer(text, timeout=timeout)
    spans = [m.span() for m in matches]
    if all(s != e for s, e in spans):
        yield from spans
        return
    pos, last_end = 0, -1
    while pos <= len(text):
        m = compiled.search(text, pos) if timeout is None else compiled.search(text, pos, timeout=timeout)
        if m is None:
            return
        s, e = m.span()
        if s == e == last_end:
            pos = s + 1
            continue
        yield s, e
        pos = last_end = e


def onig_sub(compiled: regex.Pattern[str], text: str, content: str, timeout: float | None = None) -> str:
    """Replace every Oniguruma match of ``compiled`` in ``text`` by ``content`` (no group refs)."""
    pieces: list[str] = []
    kept_from = 0
    for start, end in onig_spans(compiled, text, timeout):
        pieces += (text[kept_from:start], content)
        kept_from = end
    pieces.append(text[kept_from:])
    return "".join(pieces)

