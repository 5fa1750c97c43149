"""Pre-tokenizers: cut a normalized segment into the pieces the model sees, exactly as HF does.

Every class takes and returns ``list[PreToken]``: ``(piece, offset of its first character)``.
Empty pieces are dropped, like HF's ``PreTokenizedString.split``.

>>> Split(pattern={"Regex": r"\\s+"}, behavior="Removed")([("Hello  world", 0)])
[('Hello', 0), ('world', 7)]

HF compiles its patterns with Oniguruma (Unicode 16.0, Ruby syntax) and its character
predicates come from Rust's std (``is_whitespace``, ``is_numeric``), the ``regex`` crate
(``Whitespace``'s ``\\w``) and the ``unicode_categories`` crate (punctuation, Unicode 9.0).
:func:`onig_regex` rewrites an Oniguruma pattern for the ``regex`` module so that both agree
character for character; the tables below pin the Unicode versions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol

import regex

from .byte_level import text_to_chars
from .errors import FormatError

PreToken = tuple[str, int]

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

# ASCII punctuation plus General_Category P* as of Unicode 9.0 (HF's ``is_punctuation``).
_PUNCTUATION_9 = (
    "21-2F 3A-40 5B-60 7B-7E A1 A7 AB B6-B7 BB BF 37E 387 55A-55F 589-58A 5BE 5C0 5C3 5C6 "
    "5F3-5F4 609-60A 60C-60D 61B 61E-61F 66A-66D 6D4 700-70D 7F7-7F9 830-83E 85E 964-965 970 "
    "AF0 DF4 E4F E5A-E5B F04-F12 F14 F3A-F3D F85 FD0-FD4 FD9-FDA 104A-104F 10FB 1360-1368 1400 "
    "166D-166E 169B-169C 16EB-16ED 1735-1736 17D4-17D6 17D8-17DA 1800-180A 1944-1945 1A1E-1A1F "
    "1AA0-1AA6 1AA8-1AAD 1B5A-1B60 1BFC-1BFF 1C3B-1C3F 1C7E-1C7F 1CC0-1CC7 1CD3 2010-2027 "
    "2030-2043 2045-2051 2053-205E 207D-207E 208D-208E 2308-230B 2329-232A 2768-2775 "
    "27C5-27C6 27E6-27EF 2983-2998 29D8-29DB 29FC-29FD 2CF9-2CFC 2CFE-2CFF 2D70 2E00-2E2E 2E30-2E42 "
    "3001-3003 3008-3011 3014-301F 3030 303D 30A0 30FB A4FE-A4FF A60D-A60F A673 A67E A6F2-A6F7 "
    "A874-A877 A8CE-A8CF A8F8-A8FA A8FC A92E-A92F A95F A9C1-A9CD A9DE-A9DF AA5C-AA5F AADE-AADF "
    "AAF0-AAF1 ABEB FD3E-FD3F FE10-FE19 FE30-FE52 FE54-FE61 FE63 FE68 FE6A-FE6B FF01-FF03 "
    "FF05-FF0A FF0C-FF0F FF1A-FF1B FF1F-FF20 FF3B-FF3D FF3F FF5B FF5D FF5F-FF65 10100-10102 "
    "1039F 103D0 1056F 10857 1091F 1093F 10A50-10A58 10A7F 10AF0-10AF6 10B39-10B3F 10B99-10B9C "
    "11047-1104D 110BB-110BC 110BE-110C1 11140-11143 11174-11175 111C5-111C9 111CD 111DB "
    "111DD-111DF 11238-1123D 112A9 114C6 115C1-115D7 11641-11643 1173C-1173E 12470-12474 "
    "16A6E-16A6F 16AF5 16B37-16B3B 16B44 1BC9F 1DA87-1DA8B"
)

_FLAGS = regex.V1 | regex.MULTILINE


def _code_point_ranges(ranges: str) -> list[tuple[int, int]]:
    out = []
    for item in ranges.split():
        lo, _, hi = item.partition("-")
        out.append((int(lo, 16), int(hi or lo, 16)))
    return out


def _hex_class(ranges: str) -> str:
    return "[" + "".join(
        f"\\U{lo:08X}-\\U{hi:08X}" for lo, hi in _code_point_ranges(ranges)) + "]"


def _escape_chars(chars: list[str]) -> str:
    runs: list[list[int]] = []
    for code in sorted(map(ord, chars)):
        if runs and runs[-1][1] == code - 1:
            runs[-1][1] = code
        else:
            runs.append([code, code])
    return "".join(f"\\U{lo:08X}-\\U{hi:08X}" for lo, hi in runs)


_SPECIAL = "".join(
    chr(c) for lo, hi in _code_point_ranges(_UNICODE_17_NEW) for c in range(lo, hi + 1)
) + "".join(_UNICODE_16_STAND_IN)


def _unicode_16_set(base: str) -> str:
    """A V1 set item matching what ``base`` (a set item) matches with Unicode 16.0 properties."""
    compiled = regex.compile(base, _FLAGS)
    now = set(compiled.findall(_SPECIAL))
    unassigned = compiled.fullmatch(_UNASSIGNED) is not None
    exclude, include = [], []
    for char in _SPECIAL:
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
    return _unicode_16_set(f"[^{base}]" if negated else base)


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
            return False, _unicode_16_set(f"[\\{kind}{{{name}}}]")
        if kind in _ONIG_SHORTHANDS:
            return False, _unicode_16_set(_ONIG_SHORTHANDS[kind])
        if kind == "x" and src.startswith("{", self.pos):
            end = src.find("}", self.pos)
            if end < 0:
                raise FormatError(f"Split pattern {src!r}: unterminated \\x{{")
            code = int(src[self.pos + 1 : end], 16)
            self.pos = end + 1
            return True, f"\\U{code:08X}"
        if not in_class:
            if kind in ("b", "B"):
                word = _unicode_16_set(_ONIG_WORD)
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
            compiled = regex.compile("(?-f)" + _OnigTranslator(pattern)(), _FLAGS)
        except regex.error as exc:
            raise FormatError(f"Split pattern {pattern!r} does not compile: {exc}") from exc
        _COMPILED[pattern] = compiled
    return compiled


def _onig_spans(compiled: regex.Pattern[str], text: str) -> Iterator[tuple[int, int]]:
    # Oniguruma's find_iter (rust-onig) refuses an empty match right where the previous match
    # ended and then resumes one character later; Python allows some of those, so empty
    # matches are replayed with Oniguruma's rule.
    spans = [m.span() for m in compiled.finditer(text)]
    if all(s != e for s, e in spans):
        yield from spans
        return
    pos, last_end = 0, -1
    while pos <= len(text):
        m = compiled.search(text, pos)
        if m is None:
            return
        s, e = m.span()
        if s == e == last_end:
            pos = s + 1
            continue
        yield s, e
        pos = last_end = e


Finder = Callable[[str], "Iterator[tuple[int, int]] | list[tuple[int, int]]"]
_BEHAVIORS = ("Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous")


def _check_behavior(component: str, behavior: str) -> str:
    if behavior not in _BEHAVIORS:
        raise FormatError(f"{component}.behavior: expected one of {_BEHAVIORS}, got {behavior!r}")
    return behavior


def _split(pieces: list[PreToken], find: Finder, behavior: str, invert: bool) -> list[PreToken]:
    """HF's ``NormalizedString.split``: cut each piece at the spans ``find`` returns."""
    out: list[PreToken] = []
    append = out.append
    if behavior == "Isolated":
        # the hot path (every Llama-3/Qwen/DeepSeek pattern): matches and gaps all become pieces
        for text, offset in pieces:
            prev = 0
            for s, e in find(text):
                if prev != s:
                    append((text[prev:s], offset + prev))
                if s != e:
                    append((text[s:e], offset + s))
                prev = e
            if prev != len(text):
                append((text[prev:], offset + prev))
        return out
    for text, offset in pieces:
        # (start, end, is_match) covering the whole piece, as HF's Pattern::find_matches
        segments: list[tuple[int, int, bool]] = []
        prev = 0
        for s, e in find(text):
            if prev != s:
                segments.append((prev, s, invert))
            segments.append((s, e, not invert))
            prev = e
        if prev != len(text):
            segments.append((prev, len(text), invert))
        if behavior == "Removed":
            bounds = [(s, e) for s, e, is_match in segments if not is_match]
        else:
            bounds = _merge(segments, behavior)
        for s, e in bounds:
            if s != e:
                append((text[s:e], offset + s))
    return out


def _merge(segments: list[tuple[int, int, bool]], behavior: str) -> list[tuple[int, int]]:
    merged: list[list[int]] = []
    previous_match = False
    if behavior == "MergedWithNext":
        for s, e, is_match in reversed(segments):
            if is_match and not previous_match and merged:
                merged[-1][0] = s
            else:
                merged.append([s, e])
            previous_match = is_match
        merged.reverse()
    else:
        contiguous = behavior == "Contiguous"
        for s, e, is_match in segments:
            joins = is_match == previous_match if contiguous else is_match and not previous_match
            if joins and merged:
                merged[-1][1] = e
            else:
                merged.append([s, e])
            previous_match = is_match
    return [(s, e) for s, e in merged]


class PreTokenizer(Protocol):
    def __call__(self, pieces: list[PreToken]) -> list[PreToken]: ...


class Split:
    """Cut at every match of a string or Oniguruma regex; ``behavior`` says where matches go."""

    def __init__(self, *, pattern: dict[str, str], behavior: str, invert: bool = False) -> None:
        if not isinstance(pattern, dict) or len(pattern) != 1:
            raise FormatError(f'Split.pattern: expected {{"String": ...}} or {{"Regex": ...}}, '
                              f"got {pattern!r}")
        (kind, value), = pattern.items()
        if kind == "String":
            compiled = regex.compile(regex.escape(value), _FLAGS)
        elif kind == "Regex":
            compiled = onig_regex(value)
        else:
            raise FormatError(f'Split.pattern: expected key "String" or "Regex", got {kind!r}')
        self.behavior = _check_behavior("Split", behavior)
        self.invert = invert
        self._find: Finder = lambda text: _onig_spans(compiled, text)

    def __call__(self, pieces: list[PreToken]) -> list[PreToken]:
        return _split(pieces, self._find, self.behavior, self.invert)


def _char_finder(char_class: str) -> Finder:
    # Character predicates yield one span per matching character (not per run): for
    # Contiguous / MergedWith* behaviours a run of delimiters is several matches.
    compiled = regex.compile(char_class, _FLAGS)
    return lambda text: [m.span() for m in compiled.finditer(text)]


_PUNCTUATION = _char_finder(_hex_class(_PUNCTUATION_9))
# Rust's char::is_whitespace and char::is_numeric follow the ``regex`` module's Unicode version.
_WHITESPACE = _char_finder(r"\s")
_NUMERIC = _char_finder(r"\p{N}")


class Punctuation:
    """Split on every punctuation character (ASCII or Unicode 9.0 P*)."""

    def __init__(self, *, behavior: str = "Isolated") -> None:
        self.behavior = _check_behavior("Punctuation", behavior)

    def __call__(self, pieces: list[PreToken]) -> list[PreToken]:
        return _split(pieces, _PUNCTUATION, self.behavior, False)


class Digits:
    """Separate numeric characters: runs of them, or each one alone with ``individual_digits``."""

    def __init__(self, *, individual_digits: bool = False) -> None:
        self.individual_digits = individual_digits

    def __call__(self, pieces: list[PreToken]) -> list[PreToken]:
        behavior = "Isolated" if self.individual_digits else "Contiguous"
        return _split(pieces, _NUMERIC, behavior, False)


class WhitespaceSplit:
    """Split on whitespace, dropping it."""

    def __call__(self, pieces: list[PreToken]) -> list[PreToken]:
        return _split(pieces, _WHITESPACE, "Removed", False)


class BertPreTokenizer:
    """Split on whitespace (dropped), then isolate every punctuation character."""

    def __call__(self, pieces: list[PreToken]) -> list[PreToken]:
        return _split(_split(pieces, _WHITESPACE, "Removed", False), _PUNCTUATION, "Isolated",
                      False)


# HF uses the Rust ``regex`` crate here (Unicode 16.0 word characters, joiners included).
_RUST_WORD = _unicode_16_set(r"[\w]")
_WORDS = regex.compile(f"{_RUST_WORD}+|[^{_RUST_WORD}\\s]+", _FLAGS)


class Whitespace:
    """Keep runs of word characters and runs of other non-space characters; drop the spaces."""

    def __call__(self, pieces: list[PreToken]) -> list[PreToken]:
        return [
            (m.group(), offset + m.start())
            for text, offset in pieces
            for m in _WORDS.finditer(text)
        ]


# The scripts of HF's table (Unicode 9.0, from SentencePiece); a character of any other script,
# and the space, is "Any": it never starts a piece. Hiragana, Katakana and U+30FC count as Han.
_SCRIPTS_9 = (
    "Adlam Ahom AnatolianHieroglyphs Arabic Armenian Avestan Balinese Bamum BassaVah Batak "
    "Bengali Bhaiksuki Bopomofo Brahmi Braille Buginese Buhid CanadianAboriginal Carian "
    "CaucasianAlbanian Chakma Cham Cherokee Common Coptic Cuneiform Cypriot Cyrillic Deseret "
    "Devanagari Duployan EgyptianHieroglyphs Elbasan Ethiopic Georgian Glagolitic Gothic Grantha "
    "Greek Gujarati Gurmukhi Hangul Hanunoo Hatran Hebrew ImperialAramaic Inherited "
    "InscriptionalPahlavi InscriptionalParthian Javanese Kaithi Kannada KayahLi Kharoshthi Khmer "
    "Khojki Khudawadi Lao Latin Lepcha Limbu LinearA LinearB Lisu Lycian Lydian Mahajani "
    "Malayalam Mandaic Manichaean Marchen MeeteiMayek MendeKikakui MeroiticCursive "
    "MeroiticHieroglyphs Miao Modi Mongolian Mro Multani Myanmar Nabataean NewTaiLue Newa Nko "
    "Ogham OlChiki OldHungarian OldItalic OldNorthArabian OldPermic OldPersian OldSouthArabian "
    "OldTurkic Oriya Osage Osmanya PahawhHmong Palmyrene PauCinHau PhagsPa Phoenician "
    "PsalterPahlavi Rejang Runic Samaritan Saurashtra Sharada Shavian Siddham SignWriting "
    "Sinhala SoraSompeng Sundanese SylotiNagri Syriac Tagalog Tagbanwa TaiLe TaiTham TaiViet "
    "Takri Tamil Tangut Telugu Thaana Thai Tibetan Tifinagh Tirhuta Ugaritic Vai WarangCiti Yi"
).split()
_SCRIPT_RUNS = regex.compile(
    r"(?P<Han>[\p{sc=Han}\p{sc=Hiragana}\p{sc=Katakana}\u30fc]+)|"
    + "|".join(
        f"(?P<{name}>[\\p{{sc={name}}}--[ \\u30fc]]+)" for name in _SCRIPTS_9
    ),
    _FLAGS,
)


class UnicodeScripts:
    """Split where the script changes; "Any" characters join whatever surrounds them."""

    def __call__(self, pieces: list[PreToken]) -> list[PreToken]:
        out: list[PreToken] = []
        for text, offset in pieces:
            cuts: list[int] = []
            last_script = None
            for m in _SCRIPT_RUNS.finditer(text):
                if m.lastgroup != last_script:
                    cuts.append(m.start())
                    last_script = m.lastgroup
            cuts.append(len(text))
            out.extend((text[s:e], offset + s) for s, e in zip(cuts, cuts[1:]))
        return out


class CharDelimiterSplit:
    """Split on one character, dropping it."""

    def __init__(self, *, delimiter: str) -> None:
        if not isinstance(delimiter, str) or len(delimiter) != 1:
            raise FormatError(f"CharDelimiterSplit.delimiter: expected one character, "
                              f"got {delimiter!r}")
        self.delimiter = delimiter

    def __call__(self, pieces: list[PreToken]) -> list[PreToken]:
        out: list[PreToken] = []
        for text, offset in pieces:
            start = 0
            for part in text.split(self.delimiter):
                if part:
                    out.append((part, offset + start))
                start += len(part) + 1
        return out


_PREPEND_SCHEMES = ("always", "first", "never")


class Metaspace:
    """Spaces become ``replacement``, which is prepended per ``prepend_scheme`` and split before.

    ``add_prefix_space`` and ``str_rep`` are the fields of files written before
    ``prepend_scheme`` existed; ``add_prefix_space: false`` means ``"never"`` (it must be
    spelled so), ``true`` changes nothing, and ``str_rep`` is ignored, as in HF.
    """

    def __init__(self, *, replacement: str = "\u2581", prepend_scheme: str = "always",
                 split: bool = True, add_prefix_space: bool | None = None,
                 str_rep: str | None = None) -> None:
        if not isinstance(replacement, str) or len(replacement) != 1:
            raise FormatError(f"Metaspace.replacement: expected one character, got {replacement!r}")
        if prepend_scheme not in _PREPEND_SCHEMES:
            raise FormatError(f"Metaspace.prepend_scheme: expected one of {_PREPEND_SCHEMES}, "
                              f"got {prepend_scheme!r}")
        if add_prefix_space is False and prepend_scheme != "never":
            raise FormatError("Metaspace: add_prefix_space false contradicts prepend_scheme "
                              f"{prepend_scheme!r}")
        self.replacement = replacement
        self.prepend_scheme = prepend_scheme
        self.split = split

    def __call__(self, pieces: list[PreToken]) -> list[PreToken]:
        rep = self.replacement
        out: list[PreToken] = []
        for text, offset in pieces:
            if not text:
                continue
            text = text.replace(" ", rep)
            # the prepended character stands for the piece's first one, so indices shift by 1
            shift = 0
            if not text.startswith(rep) and (
                self.prepend_scheme == "always" or (self.prepend_scheme == "first" and offset == 0)
            ):
                text = rep + text
                shift = 1
            if not self.split:
                out.append((text, offset))
                continue
            start = 0
            for i, part in enumerate(text.split(rep)):
                # each part after the first regains the replacement that preceded it
                piece = part if i == 0 else rep + part
                if piece:
                    out.append((piece, offset + max(start - shift, 0)))
                start += len(piece)
        return out


# GPT-2's pre-tokenization pattern, which HF's ByteLevel hard-codes.
_GPT2_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"


class ByteLevel:
    """Optionally prefix a space and split like GPT-2, then map UTF-8 bytes to GPT-2 chars."""

    def __init__(self, *, add_prefix_space: bool = True, trim_offsets: bool = True,
                 use_regex: bool = True) -> None:
        self.add_prefix_space = add_prefix_space
        # trim_offsets only edits token offsets after the model; kept so the config round-trips
        self.trim_offsets = trim_offsets
        self.use_regex = use_regex
        self._gpt2 = onig_regex(_GPT2_PATTERN)

    def __call__(self, pieces: list[PreToken]) -> list[PreToken]:
        out: list[PreToken] = []
        for text, offset in pieces:
            # a prefixed space stands for the piece's first character, so indices shift by 1
            shift = 0
            if self.add_prefix_space and text and not text.startswith(" "):
                text = " " + text
                shift = 1
            if self.use_regex:
                out.extend(
                    (text_to_chars(m.group()), offset + max(m.start() - shift, 0))
                    for m in self._gpt2.finditer(text)
                )
            elif text:
                out.append((text_to_chars(text), offset))
        return out


class Sequence:
    """Apply each pre-tokenizer in turn to the pieces of the previous one."""

    def __init__(self, *, pretokenizers: list[PreTokenizer]) -> None:
        self.pretokenizers = pretokenizers

    def __call__(self, pieces: list[PreToken]) -> list[PreToken]:
        for pretokenizer in self.pretokenizers:
            pieces = pretokenizer(pieces)
        return pieces


_TYPES: dict[str, Callable[..., PreTokenizer]] = {
    "ByteLevel": ByteLevel, "Split": Split, "Metaspace": Metaspace, "Digits": Digits,
    "BertPreTokenizer": BertPreTokenizer, "Whitespace": Whitespace,
    "WhitespaceSplit": WhitespaceSplit, "Punctuation": Punctuation,
    "CharDelimiterSplit": CharDelimiterSplit, "UnicodeScripts": UnicodeScripts,
    "Sequence": Sequence,
}


def from_config(cfg: dict[str, Any] | None) -> PreTokenizer | None:
    """Build the pre-tokenizer a ``tokenizer.json`` "pre_tokenizer" entry describes."""
    if cfg is None:
        return None
    if not isinstance(cfg, dict) or "type" not in cfg:
        raise FormatError(f"pre_tokenizer: expected an object with a \"type\", got {cfg!r}")
    fields = {k: v for k, v in cfg.items() if k != "type"}
    kind = cfg["type"]
    if kind == "Sequence":
        children = fields.get("pretokenizers")
        if not isinstance(children, list):
            raise FormatError("pre_tokenizer Sequence.pretokenizers: expected a list")
        fields["pretokenizers"] = [from_config(child) for child in children]
    cls = _TYPES.get(kind)
    if cls is None:
        raise FormatError(f"pre_tokenizer: unknown type {kind!r}")
    try:
        return cls(**fields)
    except TypeError as exc:
        raise FormatError(f"pre_tokenizer {kind}: bad fields {sorted(fields)}: {exc}") from exc
