"""Oniguruma patterns (HF's regex engine) run with the ``regex`` module, character for character.

HF compiles tokenizer.json patterns with Oniguruma (Unicode 16.0, Ruby syntax). :func:`onig_regex`
rewrites a pattern into ``regex`` V1 syntax with the same meaning, pinning the Unicode version to
16.0 whatever the installed ``regex`` release has (:func:`unicode_set`, from ``pymtok.ucd``'s
categories), and :func:`onig_spans` / :func:`onig_sub` iterate matches with Oniguruma's rule for
empty matches. Split pre-tokenizers and Replace normalizers/decoders all go through here.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import regex

from .errors import FormatError, PymtokError
from .ucd import CATEGORIES_16, CHANGES_17

FLAGS = regex.V1 | regex.MULTILINE

# The oldest regex release with Unicode 17.0 tables (pyproject.toml declares the same).
_NEEDS = "regex>=2025.10.22"


def code_point_ranges(ranges: str) -> list[tuple[int, int]]:
    out = []
    for item in ranges.split():
        lo, _, hi = item.partition("-")
        out.append((int(lo, 16), int(hi or lo, 16)))
    return out


def hex_class(ranges: str, negate: bool = False) -> str:
    """A character class of code point ranges ("21-2F 3A"), valid in ``re`` and ``regex``."""
    return ("[^" if negate else "[") + "".join(
        f"\\U{lo:08X}-\\U{hi:08X}" for lo, hi in code_point_ranges(ranges)) + "]"


def _escape_chars(chars: list[str]) -> str:
    runs: list[list[int]] = []
    for code in sorted(map(ord, chars)):
        if runs and runs[-1][1] == code - 1:
            runs[-1][1] = code
        else:
            runs.append([code, code])
    return "".join(f"\\U{lo:08X}-\\U{hi:08X}" for lo, hi in runs)


class UnicodeVersionError(PymtokError):
    """The installed ``regex`` has Unicode tables older than a version HF uses."""


def _categories(version: str) -> tuple[list[str], bytearray, list[int]]:
    """The category names; per code point, the index of its category in ``version``; and the
    code points where the category may change (the starts of the tables' ranges)."""
    names = sorted(CATEGORIES_16)
    category = bytearray([len(names)]) * 0x110000
    names.append("Cn")
    starts = {0}
    for table in [CATEGORIES_16] + ([CHANGES_17] if version == "17.0" else []):
        for name, ranges in table.items():
            index = names.index(name)
            for lo, hi in code_point_ranges(ranges):
                category[lo : hi + 1] = bytes([index]) * (hi - lo + 1)
                starts.update((lo, hi + 1))
    return names, category, sorted(starts - {0x110000})


def _every_code_point() -> str:
    """chr(0) ... chr(0x10FFFF), surrogates included, built from its UTF-32 bytes a byte lane
    at a time (``"".join(map(chr, ...))`` takes ten times as long)."""
    utf32 = bytearray(4 * 0x110000)
    utf32[0::4] = bytes(range(256)) * 0x1100
    utf32[1::4] = b"".join(bytes([k]) * 256 for k in range(256)) * 0x11
    utf32[2::4] = b"".join(bytes([k]) * 0x10000 for k in range(0x11))
    return utf32.decode("utf-32-le", "surrogatepass")


@functools.cache
def _special(version: str) -> dict[str, str]:
    """Each character the installed ``regex`` gives another general category than Unicode
    ``version`` does, mapped to a stand-in that has its ``version`` properties in ``regex``.

    Each borrows the nearest character that has, in both, the category it has in ``version``
    (for one unassigned there, an unassigned one). Only the general category is compared: other
    properties (script, White_Space) of assigned characters change with it or not at all, as from
    16.0 to 17.0 (U+0295: Ll to Lo). Computed on first use, which scans every code point once.
    Raises UnicodeVersionError when ``regex`` is older than ``version``: then no stand-in exists.
    """
    names, category, starts = _categories(version)
    every = _every_code_point()
    members: list[list[str]] = [[] for _ in names]
    for lo, hi in zip(starts, starts[1:] + [0x110000]):
        members[category[lo]].append(every[lo:hi])
    changed: dict[int, int] = {}
    for index, name in enumerate(names):
        if name == "Cs":  # surrogates cannot be in text
            continue
        for match in regex.finditer(rf"\P{{{name}}}+", "".join(members[index])):
            changed.update((ord(char), index) for char in match.group())
    out: dict[str, str] = {}
    codes = sorted(changed)
    first = 0
    for k, code in enumerate(codes):
        if names[changed[code]] != "Cn" and regex.fullmatch(r"\p{Cn}", chr(code)):
            raise UnicodeVersionError(
                f"regex {regex.__version__} has Unicode tables older than {version} (U+{code:04X} "
                f"is unassigned there), which HF uses: install {_NEEDS}"
            )
        if k + 1 == len(codes) or codes[k + 1] != code + 1 or changed[codes[k + 1]] != changed[code]:
            _stand_ins(category, changed, codes[first : k + 1], out)
            first = k + 1
    return out


def _stand_ins(category: bytearray, changed: dict[int, int], run: list[int], out: dict[str, str]) -> None:
    """For a run of consecutive code points of one category that ``regex`` sees changed, each
    one's nearest code point of that category that it does not: for an unassigned one, that
    keeps it in its block (reserved emoji code points are Extended_Pictographic)."""
    wanted = category[run[0]]

    def nearest(near: int, step: int) -> int | None:
        while 0 <= near < 0x110000:
            if near not in changed and category[near] == wanted:
                return near
            near += step
        return None

    options = [near for near in (nearest(run[0] - 1, -1), nearest(run[-1] + 1, 1)) if near is not None]
    if not options:
        raise UnicodeVersionError(f"no character keeps the category of U+{run[0]:04X}")
    for code in run:
        out[chr(code)] = chr(min(options, key=lambda near: abs(near - code)))


def regex_has_unicode(version: str) -> bool:
    """Whether the installed ``regex`` gives every code point its general category in ``version``."""
    return not _special(version)


def unicode_16_set(base: str) -> str:
    """A V1 set item matching what ``base`` (a set item) matches with Unicode 16.0 properties:
    Oniguruma's and the Rust ``regex`` crate's."""
    return unicode_set(base, "16.0")


def unicode_17_set(base: str) -> str:
    """A V1 set item matching what ``base`` matches with Unicode 17.0 properties: those of
    Rust's ``char`` methods (``is_numeric``, ``is_alphabetic``, ...)."""
    return unicode_set(base, "17.0")


def unicode_set(base: str, version: str) -> str:
    """``base`` (a V1 set item), corrected to match the characters it matches in Unicode
    ``version``: by what each changed character's stand-in matches."""
    special = _special(version)
    if not special:
        return base
    compiled = regex.compile(base, FLAGS)
    now = set(compiled.findall("".join(special)))
    then = {stand_in: compiled.fullmatch(stand_in) is not None for stand_in in set(special.values())}
    exclude, include = [], []
    for char, stand_in in special.items():
        if char in now and not then[stand_in]:
            exclude.append(char)
        elif then[stand_in] and char not in now:
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


# Escapes Oniguruma takes for the letter itself, out of brackets and in them (HF's behaviour,
# letter by letter); the others of these letters are read before.
_LETTERS = frozenset("gijklmoqEFIJLQTUV")
_CLASS_LETTERS = frozenset("gijklmoqyzABEFGIJKLNOPQRTUVXYZ89")
# Escapes of anchors, which Oniguruma does not repeat.
_ANCHORS = frozenset("bBAzZGK")
_TURKIC = ("i", "I", "\u0130", "\u0131")


class _OnigTranslator:
    """Rewrites one Oniguruma (Ruby syntax) pattern into ``regex`` V1 syntax, same meaning."""

    def __init__(self, pattern: str) -> None:
        self.src = pattern
        self.pos = 0
        # for each open group: whether it sets (?i), whether it has alternatives (see _outside),
        # and whether the pattern folds case outside it
        self.groups: list[list[bool]] = []
        self.folding = False

    def __call__(self) -> str:
        # Quantifiers are read here, as Ruby's syntax has them (see _quantifier), on the atom the
        # output holds from index ``atom`` on (None: nothing a quantifier may take)
        out: list[str] = []
        opened: list[int | None] = []  # per open group: where it starts, None for a lookaround
        atom: int | None = None
        quantified = False
        src = self.src
        while self.pos < len(src):
            start = self.pos
            quantifier = self._quantifier()
            if quantifier is not None:
                if atom is None:
                    raise FormatError(f"Split pattern {src!r}: a quantifier at {start} has no target "
                                      "(Oniguruma repeats no anchor, lookaround or empty place)")
                if quantified:
                    # a quantifier of a quantifier repeats the repeat: a** is (?:a*)*
                    out[atom:] = ["(?:" + "".join(out[atom:]) + ")"]
                out.append(quantifier)
                quantified = True
                continue
            c = src[start]
            depth = len(self.groups)
            out.append(self._outside())
            quantified = False
            if c == "(" and len(self.groups) > depth:
                lookaround = src.startswith(("(?=", "(?!", "(?<=", "(?<!"), start)
                opened.append(None if lookaround else len(out) - 1)
                atom = None
            elif c == ")":
                atom = opened.pop() if opened else None
            elif c in "(|^$" or (c == "\\" and src[start + 1 : start + 2] in _ANCHORS):
                atom = None
            else:
                atom = len(out) - 1
        return "".join(out)

    def _quantifier(self) -> str | None:
        """The quantifier at pos in ``regex`` syntax, consumed, or None. Ruby's differ from Perl's
        after an interval: x{2}? is (?:x{2})? and x{2,3}+ is (?:x{2,3})+ (the next quantifier, a
        repeat of this one), x{3,2} is the possessive x{2,3}; {,} and other braces that are no
        interval are themselves."""
        src, at = self.src, self.pos
        c = src[at : at + 1]
        if c and c in "*+?":
            self.pos += 1
            if src[self.pos : self.pos + 1] in ("?", "+"):
                self.pos += 1
                return c + src[self.pos - 1]
            return c
        interval = regex.match(r"\{(\d*)(,?)(\d*)\}", src[at:]) if c == "{" else None
        if interval is None or not interval[1] + interval[3] or (interval[3] and not interval[2]):
            return None
        lo, comma, hi = interval.groups()
        if max(int(lo or 0), int(hi or 0)) > 100_000:
            raise FormatError(f"Split pattern {src!r}: a repeat count over 100000 (Oniguruma's limit)")
        self.pos += interval.end()
        if not comma:
            return f"{{{int(lo)}}}"
        if lo and hi and int(hi) < int(lo):
            return f"{{{int(hi)},{int(lo)}}}+"
        text = f"{{{int(lo or 0)},{int(hi) if hi else ''}}}"
        if src.startswith("?", self.pos):
            self.pos += 1
            text += "?"
        return text

    def _outside(self) -> str:
        c = self.src[self.pos]
        if c == "\\":
            kind = self.src[self.pos + 1 : self.pos + 2]
            if self.folding and (kind.isdigit() and kind != "0" or kind == "k"):
                # the regex module compares a backreference by its own folding (see _folded_literal)
                raise FormatError(f"Split pattern {self.src!r}: a backreference under (?i) is not supported")
            is_literal, text = self._escape(in_class=False)
            if not self.folding:
                return text
            if is_literal:
                return self._folded_literal(text)
            if kind and kind in "pPwWdDsShHNO":
                # Oniguruma folds no class escape or property outside brackets: (?i)\p{Lu} is
                # upper case only, where the regex module folds it to every cased letter
                return f"(?-i:{text})"
            return text
        if c == "[":
            return self._folded_class(self._class()) if self.folding else self._class()
        self.pos += 1
        if c == "(":
            if not self.src.startswith("?", self.pos):
                self.groups.append([False, False, self.folding])
                return c
            flags = self._group_flags()
            on, _, off = flags.partition("-")
            folds = "i" in on
            outer = self.folding
            if "i" in on or "i" in off:
                self.folding = folds
            if self.src.startswith(")", self.pos):
                # (?i) alone: to the end of the enclosing group, as V1 takes it
                self.pos += 1
                if folds and self.groups:
                    self.groups[-1][0] = True
                return f"(?{flags})"
            self.groups.append([folds, False, outer])
            return "(?" + flags
        if c == "|" and self.groups:
            self.groups[-1][1] = True
        if c == ")" and self.groups:
            folds, alternatives, self.folding = self.groups.pop()
            if folds and not alternatives:
                # Oniguruma folds fully under (?i) ("ss" matches U+00DF, "st" U+FB06), as V1
                # does, but V1 misses full foldings in such a group of one branch ((?i:ß) does
                # not match ß): a second branch that never matches mends it
                return "|(?!))"
        if self.folding and c in _TURKIC:
            return self._folded_literal(c)
        if c == "{":
            # a brace that is no interval (see _quantifier) is itself, as the regex module may not take it
            return r"\{"
        return c

    def _folded_literal(self, text: str) -> str:
        """A literal under (?i). The regex module pairs the dotted and dotless i with i and I by
        their simple case mappings; Oniguruma folds by CaseFolding.txt without its Turkic lines,
        where U+0130 folds to "i" + U+0307 and U+0131 to nothing else, so neither is an i."""
        c = next((t for t in _TURKIC if regex.fullmatch(text, t, FLAGS)), "")
        if c in ("i", "I"):
            # a lookbehind, not a class: "fi" must still match U+FB01 by its full folding
            return f"(?:{text}(?<!(?-i:[\u0130\u0131])))"
        if c == "\u0130":
            return "(?-i:\u0130|[iI]\u0307)"
        if c == "\u0131":
            return "(?-i:\u0131)"
        return text

    @staticmethod
    def _folded_class(text: str) -> str:
        """A class under (?i) with i, I, U+0130 and U+0131 taken as Oniguruma folds them (see
        _folded_literal): i and I by either of the two, the dotted and dotless i by themselves.
        Oniguruma folds a negated class's items before negating it ((?i)[^i] takes neither i)."""
        exact = regex.compile(text, FLAGS)
        negated = text.startswith("[^")
        i_member = (all if negated else any)(exact.fullmatch(c) for c in "iI")
        members = "".join(c for c in _TURKIC if (i_member if c in "iI" else exact.fullmatch(c)))
        out = f"(?:(?!(?-i:[iI\u0130\u0131])){text}"
        if members:
            out += f"|(?-i:[{members}])"
        if "\u0130" in members and not negated:
            out += "|(?-i:[iI]\u0307)"
        return out + ")"

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
            if self.folding:
                self._refuse_folded_item()
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

    def _refuse_folded_item(self) -> None:
        """Under (?i) the regex module folds a class's sets where Oniguruma does otherwise: it
        folds a set's complement before negating it ((?i)[\\P{Lu}] takes no A), takes the
        Unicode 17 case pairs out of the sets pinned to 16.0 (U+0277 with U+A7DD) and matches
        members against several characters ((?i)[\\H] takes "i" of "fi"); such items are refused."""
        src, at = self.src, self.pos
        item = None
        if src.startswith("\\", at) and src[at + 1 : at + 2] in ("p", "P", "w", "W", "H"):
            item = src[at : at + 2]
        elif src.startswith("[", at):
            item = "a POSIX bracket" if src.startswith("[:", at) else "a nested class"
        elif src.startswith("&&", at):
            item = "a class intersection"
        if item:
            raise FormatError(f"Split pattern {src!r}: {item} in a class under (?i) is not supported")

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
                # Ruby's syntax has no \pL: the letter itself, as HF matches "\pL" on "pL"
                return True, kind
            if not regex.fullmatch(r"\^?[A-Za-z0-9 _-]*", name):
                # Oniguruma's names are letters, digits, spaces, '-' and '_' (HF refuses others);
                # the regex module takes property=value forms, L&, and a name with a NUL or '|'
                # in it (one that matches nothing)
                raise FormatError(f"Split pattern {src!r}: \\{kind}{{{name}}} is no Oniguruma property")
            # Oniguruma ignores case, spaces, '-' and '_' in property names
            plain = regex.sub(r"[\s_-]", "", name).lower()
            if plain == "word":
                # Oniguruma's Word is its \w, in brackets or not; the regex module's has the joiners
                return self._shorthand("w" if kind == "p" else "W", in_class)
            if plain == "xdigit":
                # ASCII only in Oniguruma; the regex module's takes the fullwidth ones too
                return False, "[0-9A-Fa-f]" if kind == "p" else "[^0-9A-Fa-f]"
            return False, unicode_16_set(f"[\\{kind}{{{name}}}]")
        if kind in ("w", "W"):
            return self._shorthand(kind, in_class)
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
            if kind == "N":
                # Oniguruma's \N is any character but a line feed; the regex module's needs a {name}
                return False, r"[^\n]"
            if kind == "Z":
                return False, r"(?=\n?\Z)"
        digits = {"x": 2, "u": 4}.get(kind, 0)
        hexes = regex.match(f"[0-9A-Fa-f]{{1,{digits}}}", src[self.pos : self.pos + digits]) if digits else None
        if hexes and (kind == "x" or len(hexes.group()) == 4):
            # read whole, so that the literal is known as one character (see _folded_literal)
            self.pos += len(hexes.group())
            return True, f"\\U{int(hexes.group(), 16):08X}"
        if kind in "xu0":
            return True, "\\" + kind
        if kind == "e":
            return True, r"\x1b"
        if kind == "c" and self.pos < len(src):
            # a control character: \cJ is a line feed, \c? DEL
            code = ord(src[self.pos])
            self.pos += 1
            return True, f"\\x{0x7F if code == 0x3F else code & 0x1F:02x}"
        if kind == "X" and not in_class:
            # the regex module's clusters follow Unicode 15.1's conjunct rule (GB9c), Oniguruma's
            # do not: Devanagari "त्या" is one cluster there, two in HF's
            raise FormatError(f"Split pattern {src!r}: \\X (Oniguruma's grapheme clusters) is not supported")
        if kind == "O" and not in_class:
            return False, r"[\s\S]"
        if kind in ("C", "M"):
            # Ruby's meta and control prefixes, which HF's Oniguruma refuses
            raise FormatError(f"Split pattern {src!r}: \\{kind} is no escape Oniguruma takes")
        if kind in ("k", "g") and not in_class and src[self.pos : self.pos + 1] in ("<", "'"):
            raise FormatError(f"Split pattern {src!r}: \\{kind}<...> (a named backreference or "
                              "subexpression call) is not supported")
        if kind in (_CLASS_LETTERS if in_class else _LETTERS):
            # Oniguruma takes an escape it does not know for the letter itself; the regex module
            # gives some a meaning (\m a word start) and refuses others
            return True, kind
        if kind.isalnum():
            return kind in "tnrfva", "\\" + kind
        return True, regex.escape(kind, literal_spaces=True)

    def _shorthand(self, kind: str, in_class: bool) -> tuple[bool, str]:
        """\\w or \\W: in brackets Oniguruma's \\w is Unicode's Word, the Latin-1 extras of \\w alone out."""
        if in_class:
            word = _ONIG_POSIX["word"]
            return False, unicode_16_set(word if kind == "w" else f"[^{word}]")
        return False, unicode_16_set(_ONIG_SHORTHANDS[kind])


_COMPILED: dict[str, regex.Pattern[str]] = {}


def onig_regex(pattern: str) -> regex.Pattern[str]:
    """Compile an Oniguruma pattern (as found in tokenizer.json) so it matches like HF's."""
    compiled = _COMPILED.get(pattern)
    if compiled is None:
        try:
            compiled = regex.compile(_OnigTranslator(pattern)(), FLAGS)
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

