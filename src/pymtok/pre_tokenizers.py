"""Pre-tokenizers: cut a normalized segment into the pieces the model sees, exactly as HF does.

Every class takes and returns ``list[PreToken]``: ``(piece, offset of its first character)``.
The offsets count from 0 at the text's first character, except that the first segment's may
start elsewhere (``normalizers.normalize_first``): Metaspace's ``"first"`` prepends to the pieces
at offset 0 or less, those that come from the text's start.
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

import functools
import re
from collections.abc import Callable, Iterator
from itertools import accumulate
from typing import Any, Protocol

import regex

from .backtracking import timeout_for, too_slow
from .byte_level import PIECE_CHARS
from .components import build_component
from .errors import FormatError
from .onig import FLAGS, hex_class, onig_regex, onig_spans, unicode_16_set, unicode_17_set
from .ucd_scripts import SCRIPT_CLASSES

PreToken = tuple[str, int]


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
        if kind not in ("String", "Regex"):
            raise FormatError(f'Split.pattern: expected key "String" or "Regex", got {kind!r}')
        self._pattern = (kind, value)
        self._timeout = timeout_for(value) if kind == "Regex" else None
        self.behavior = _check_behavior("Split", behavior)
        self.invert = invert
        from .native import SCANNERS, engine_takes  # native imports this module

        # Translating and compiling a Unicode-class pattern is most of a first load; the native
        # core has its own scanner for the patterns in SCANNERS and runs the ones its regex
        # engine takes (which refuses any it does not understand), so those are compiled only
        # when the pure path runs. Any other pattern is compiled now: a bad one fails the load.
        if kind != "Regex" or not (value in SCANNERS or engine_takes(value)):
            self._compiled

    @functools.cached_property
    def _compiled(self) -> regex.Pattern[str]:
        kind, value = self._pattern
        return regex.compile(regex.escape(value), FLAGS) if kind == "String" else onig_regex(value)

    def _find(self, text: str) -> Iterator[tuple[int, int]]:
        return onig_spans(self._compiled, text, self._timeout)

    @functools.cached_property
    def _findall(self) -> Callable[[str], list[str]] | None:
        # When the matches tile the text, these behaviours make each match one piece;
        # findall returns the matched strings only when the pattern has no capture groups.
        each_match_a_piece = self.behavior == "Isolated" or (self.behavior == "Removed" and self.invert)
        if not each_match_a_piece or self._compiled.groups:
            return None
        if self._timeout is None:
            return self._compiled.findall
        return functools.partial(self._compiled.findall, timeout=self._timeout)

    def __call__(self, pieces: list[PreToken]) -> list[PreToken]:
        try:
            return self._split(pieces)
        except TimeoutError:
            raise too_slow("Split", self._pattern[1]) from None

    def _split(self, pieces: list[PreToken]) -> list[PreToken]:
        if self._findall is None:
            return _split(pieces, self._find, self.behavior, self.invert)
        # The common case (Llama 3, Qwen, GPT-4o, ...): the pattern's matches tile the text,
        # so the pieces are the matches themselves. Without empty matches, ``regex`` and
        # Oniguruma find the same ones; any gap or empty match takes the general path.
        out: list[PreToken] = []
        for text, offset in pieces:
            matches = self._findall(text)
            if "" not in matches and sum(map(len, matches)) == len(text):
                out += zip(matches, accumulate(map(len, matches), initial=offset))
            elif not matches and self.behavior == "Isolated":
                out.append((text, offset))  # Isolated: nothing to cut ([0-9]{3} in most pieces)
            else:
                out += _split([(text, offset)], self._find, self.behavior, self.invert)
        return out


def _char_finder(char_class: Callable[[], str]) -> Finder:
    # Character predicates yield one span per matching character (not per run): for
    # Contiguous / MergedWith* behaviours a run of delimiters is several matches.
    # Built and compiled on first use, like the patterns below: a tokenizer needs few of them.
    compiled = functools.cache(lambda: regex.compile(char_class(), FLAGS))
    return lambda text: [m.span() for m in compiled().finditer(text)]


class _CharRuns:
    """Cutting pieces at the characters of a class in one ``findall`` per piece, for the two
    behaviours whose pieces are regular: Isolated (each such character alone, the runs between
    whole) and Contiguous (runs of such characters, runs of others)."""

    BEHAVIORS = ("Isolated", "Contiguous")

    def __init__(self, char_class: Callable[[], str]) -> None:
        self._class = char_class

    @functools.cached_property
    def _patterns(self) -> dict[str, Callable[[str], list[str]]]:
        members = self._class()
        others = f"[^{members}]+"
        return {
            "Isolated": regex.compile(f"{members}|{others}", FLAGS).findall,
            "Contiguous": regex.compile(f"{members}+|{others}", FLAGS).findall,
        }

    def split(self, pieces: list[PreToken], behavior: str) -> list[PreToken]:
        findall = self._patterns[behavior]
        out: list[PreToken] = []
        for text, offset in pieces:
            matches = findall(text)
            out += zip(matches, accumulate(map(len, matches), initial=offset))
        return out


_PUNCTUATION_9_CLASS = functools.cache(lambda: hex_class(_PUNCTUATION_9))
_PUNCTUATION = _char_finder(_PUNCTUATION_9_CLASS)
_PUNCTUATION_RUNS = _CharRuns(_PUNCTUATION_9_CLASS)
# Rust's char::is_numeric: Unicode 17.0, whatever the ``regex`` module's version.
_NUMERIC_RUNS = _CharRuns(lambda: unicode_17_set(r"\p{N}"))


def _matches(compiled: re.Pattern[str] | regex.Pattern[str], pieces: list[PreToken]) -> list[PreToken]:
    """Each match of ``compiled`` in each piece becomes a piece; the text between is dropped."""
    return [(m.group(), offset + m.start()) for text, offset in pieces for m in compiled.finditer(text)]


# Rust's char::is_whitespace: the White_Space property, unchanged since Unicode 4.1.
_WHITESPACE_RANGES = "9-D 20 85 A0 1680 2000-200A 2028-2029 202F 205F 3000"
# What WhitespaceSplit and BertPreTokenizer keep, as one pattern each: runs of non-space
# characters; for BERT, runs without punctuation and each punctuation character alone (the
# two sets are disjoint). Plain code point classes: the standard ``re`` runs them fastest.
@functools.cache
def _non_space_runs() -> re.Pattern[str]:
    return re.compile(hex_class(_WHITESPACE_RANGES, negate=True) + "+")


@functools.cache
def _bert_words() -> re.Pattern[str]:
    return re.compile(
        hex_class(f"{_WHITESPACE_RANGES} {_PUNCTUATION_9}", negate=True) + "+|" + hex_class(_PUNCTUATION_9)
    )


class Punctuation:
    """Split on every punctuation character (ASCII or Unicode 9.0 P*)."""

    def __init__(self, *, behavior: str = "Isolated") -> None:
        self.behavior = _check_behavior("Punctuation", behavior)

    def __call__(self, pieces: list[PreToken]) -> list[PreToken]:
        if self.behavior in _CharRuns.BEHAVIORS:
            return _PUNCTUATION_RUNS.split(pieces, self.behavior)
        return _split(pieces, _PUNCTUATION, self.behavior, False)


class Digits:
    """Separate numeric characters: runs of them, or each one alone with ``individual_digits``."""

    def __init__(self, *, individual_digits: bool = False) -> None:
        self.individual_digits = individual_digits

    def __call__(self, pieces: list[PreToken]) -> list[PreToken]:
        return _NUMERIC_RUNS.split(pieces, "Isolated" if self.individual_digits else "Contiguous")


class WhitespaceSplit:
    """Split on whitespace, dropping it."""

    def __call__(self, pieces: list[PreToken]) -> list[PreToken]:
        return _matches(_non_space_runs(), pieces)


class BertPreTokenizer:
    """Split on whitespace (dropped), then isolate every punctuation character."""

    def __call__(self, pieces: list[PreToken]) -> list[PreToken]:
        return _matches(_bert_words(), pieces)


@functools.cache
def _words() -> regex.Pattern[str]:
    # HF uses the Rust ``regex`` crate here (Unicode 16.0 word characters, joiners included).
    word = unicode_16_set(r"[\w]")
    return regex.compile(f"{word}+|[^{word}\\s]+", FLAGS)


class Whitespace:
    """Keep runs of word characters and runs of other non-space characters; drop the spaces."""

    def __call__(self, pieces: list[PreToken]) -> list[PreToken]:
        return _matches(_words(), pieces)


@functools.cache
def _script_runs() -> regex.Pattern[str]:
    """A run of one script class's characters, a named group a class (ucd_scripts: HF's own
    table, not today's Unicode or the installed regex's, which give scripts to characters HF's
    older table calls "Any" and move others); the "Any" characters match none."""
    return regex.compile("|".join(f"(?P<s{k}>{hex_class(ranges)}+)" for k, ranges in enumerate(SCRIPT_CLASSES)))


class UnicodeScripts:
    """Split where the script changes; "Any" characters join whatever surrounds them."""

    def __call__(self, pieces: list[PreToken]) -> list[PreToken]:
        out: list[PreToken] = []
        for text, offset in pieces:
            cuts: list[int] = []
            last_script = None
            for m in _script_runs().finditer(text):
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


class FixedLength:
    """Cut each piece into pieces of ``length`` characters (the last may be shorter)."""

    def __init__(self, *, length: int = 5) -> None:
        # HF reads a usize, loads a length of 0 and then panics on any text
        if type(length) is not int or not 1 <= length < 2**64:
            raise FormatError(f"FixedLength.length: expected an integer 1..2**64-1, got {length!r}")
        self.length = length

    def __call__(self, pieces: list[PreToken]) -> list[PreToken]:
        n = self.length
        return [(text[at:at + n], offset + at) for text, offset in pieces for at in range(0, len(text), n)]


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
        rep, scheme = self.replacement, self.prepend_scheme
        out: list[PreToken] = []
        for text, offset in pieces:
            if not text:
                continue
            text = text.replace(" ", rep)
            # the prepended character stands for the piece's first one, so indices shift by 1
            shift = 0
            if not text.startswith(rep) and (scheme == "always" or (scheme == "first" and offset <= 0)):
                text = rep + text
                shift = 1
            if not self.split or text.find(rep, 1) < 0:
                out.append((text, offset))  # one word (after a WhitespaceSplit, every piece)
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


@functools.cache
def _gpt2_regex() -> regex.Pattern[str]:
    # compiled on first use: the native core has its own GPT-2 scanner
    return onig_regex(_GPT2_PATTERN)


class ByteLevel:
    """Optionally prefix a space and split like GPT-2, then map UTF-8 bytes to GPT-2 chars."""

    def __init__(self, *, add_prefix_space: bool = True, trim_offsets: bool = True,
                 use_regex: bool = True) -> None:
        self.add_prefix_space = add_prefix_space
        # trim_offsets only edits token offsets after the model; kept so the config round-trips
        self.trim_offsets = trim_offsets
        self.use_regex = use_regex

    def __call__(self, pieces: list[PreToken]) -> list[PreToken]:
        chars = PIECE_CHARS
        if not self.use_regex and not self.add_prefix_space:
            # after a Split (Llama 3, Qwen, GPT-4o): only the mapping, piece by piece
            return [(chars[text], offset) for text, offset in pieces if text]
        out: list[PreToken] = []
        for text, offset in pieces:
            # a prefixed space stands for the piece's first character, so indices shift by 1
            shift = 0
            if self.add_prefix_space and text and not text.startswith(" "):
                text = " " + text
                shift = 1
            if self.use_regex:
                out.extend(
                    (chars[m.group()], offset + max(m.start() - shift, 0))
                    for m in _gpt2_regex().finditer(text)
                )
            elif text:
                out.append((chars[text], offset))
        return out


class Sequence:
    """Apply each pre-tokenizer in turn to the pieces of the previous one."""

    def __init__(self, *, pretokenizers: list[PreTokenizer]) -> None:
        self.pretokenizers = pretokenizers

    def __call__(self, pieces: list[PreToken]) -> list[PreToken]:
        for pretokenizer in self.pretokenizers:
            pieces = pretokenizer(pieces)
        return pieces


AlignedPreToken = tuple[str, int, list[tuple[int, int]]]
"""A ``PreToken`` with, per character of its piece, the span of the caller's text it comes from."""


def metaspace_first(pre: PreTokenizer | None) -> bool:
    """Whether ``pre`` has a Metaspace that prepends to the first piece only."""
    if isinstance(pre, Sequence):
        return any(metaspace_first(member) for member in pre.pretokenizers)
    return isinstance(pre, Metaspace) and pre.prepend_scheme == "first"


def pre_tokenize_aligned(pre: PreTokenizer, pieces: list[AlignedPreToken]) -> list[AlignedPreToken]:
    """``pre(pieces)``, each piece keeping the spans of its characters (HF's alignments).

    Splitters cut a piece's spans with it; ByteLevel gives every byte character the span of the
    character it encodes; Metaspace's prepended replacement shares the first character's span.
    """
    if isinstance(pre, Sequence):
        for member in pre.pretokenizers:
            pieces = pre_tokenize_aligned(member, pieces)
        return pieces
    out: list[AlignedPreToken] = []
    if isinstance(pre, ByteLevel):
        for text, offset, spans in pieces:
            if not text:
                continue
            shift = 0
            if pre.add_prefix_space and not text.startswith(" "):
                text, spans, shift = " " + text, spans[:1] + spans, 1
            bounds = [m.span() for m in _gpt2_regex().finditer(text)] if pre.use_regex else [(0, len(text))]
            for s, e in bounds:
                sub = text[s:e]
                byte_spans = [span for c, span in zip(sub, spans[s:e]) for _ in range(len(c.encode("utf-8")))]
                out.append((PIECE_CHARS[sub], offset + max(s - shift, 0), byte_spans))
        return out
    for text, offset, spans in pieces:
        produced = pre([(text, offset)])
        if isinstance(pre, Metaspace):
            # its pieces tile the text with spaces replaced, after the replacement it prepended
            extra = sum(len(piece) for piece, _ in produced) - len(text)
            spans = spans[:1] * extra + spans
            at = 0
            for piece, piece_offset in produced:
                out.append((piece, piece_offset, spans[at : at + len(piece)]))
                at += len(piece)
            continue
        for piece, piece_offset in produced:
            at = piece_offset - offset
            out.append((piece, piece_offset, spans[at : at + len(piece)]))
    return out


_TYPES: dict[str, Callable[..., PreTokenizer]] = {
    "ByteLevel": ByteLevel, "Split": Split, "Metaspace": Metaspace, "Digits": Digits,
    "BertPreTokenizer": BertPreTokenizer, "Whitespace": Whitespace,
    "WhitespaceSplit": WhitespaceSplit, "Punctuation": Punctuation,
    "CharDelimiterSplit": CharDelimiterSplit, "UnicodeScripts": UnicodeScripts,
    "FixedLength": FixedLength, "Sequence": Sequence,
}


def from_config(cfg: dict[str, Any] | None) -> PreTokenizer | None:
    """Build the pre-tokenizer a ``tokenizer.json`` ``"pre_tokenizer"`` entry describes."""
    return build_component("pre_tokenizer", cfg, _TYPES, "pretokenizers", from_config)

