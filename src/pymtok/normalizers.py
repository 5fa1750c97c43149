"""Normalizers: ``text -> text`` before pre-tokenization, exactly as HF ``tokenizers`` does it.

Each class is built from its ``tokenizer.json`` config (keyword arguments are the JSON field
names) and does one thing in ``__call__``::

    >>> Sequence(normalizers=[NFKD(), StripAccents(), Lowercase()])("Ça Va")
    'ca va'

HF's Rust crates carry their own Unicode tables, none of them the version of Python's
``unicodedata``: normalization is Unicode 9-era (``unicode-normalization-alignments``), the
character classes of ``BertNormalizer`` are Unicode 8 (``unicode_categories``), and lowercasing
is the Rust standard library's (Unicode 17). Where those differ from Python, the tables below
pin HF's behaviour; ``tests/test_normalizers.py`` checks them against the oracle on every code
point.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
import string
import struct
import unicodedata
from collections.abc import Callable, Iterable
from typing import Any, Protocol

import regex

from .backtracking import timeout_for, too_slow
from .byte_level import text_to_chars
from .components import build_component
from .errors import FormatError, PymtokError
from .onig import code_point_ranges, onig_regex, onig_spans, onig_sub
from .ucd import GRAPHEME_17


class Normalizer(Protocol):
    def __call__(self, text: str) -> str: ...


Spans = list[tuple[int, int]]
"""Per character of a normalized text, the span of the caller's text it comes from (HF's
alignments, kept per character: every byte of a character carries the same one)."""


def _transform(spans: Spans, dest: Iterable[tuple[str, int]], initial_offset: int = 0) -> tuple[str, Spans]:
    """HF's ``NormalizedString::transform``: each new character with its change (0 replaces the
    next old character, 1 is inserted and shares the previous old character's span, -n also
    removes the n old characters after the one it replaces)."""
    chars: list[str] = []
    out: Spans = []
    offset = initial_offset
    for c, change in dest:
        if change > 0:
            out.append(spans[offset - 1] if offset >= 1 else (0, 0))
        else:
            out.append(spans[offset])
            offset += 1 - change
        chars.append(c)
    return "".join(chars), out


def _per_char(text: str, spans: Spans, mapping: Callable[[str], str]) -> tuple[str, Spans]:
    """Each character replaced by ``mapping(c)`` (any length), every new character on its span."""
    chars: list[str] = []
    out: Spans = []
    for c, span in zip(text, spans):
        new = mapping(c)
        chars.append(new)
        out.extend([span] * len(new))
    return "".join(chars), out


def normalize_aligned(normalizer: Normalizer | None, text: str) -> tuple[str, Spans]:
    """``normalizer(text)`` and, per character of it, the span of ``text`` it comes from."""
    spans = [(i, i + 1) for i in range(len(text))]
    if normalizer is None:
        return text, spans
    return aligned(normalizer, text, spans)


def normalize_first(normalizer: Normalizer, text: str) -> tuple[str, int]:
    """``normalizer(text)`` for a text's first segment, and the offset its first character counts
    from, so that Metaspace's ``"first"`` sees offset 0 or less exactly where HF prepends.

    HF prepends to a piece that comes from the text's start (``offsets_original().0 == 0``), not
    to the one that is first after normalizing: none does when the normalizer deleted the text's
    first characters (a BOM, a leading mark or space), several may when it inserted some before
    it (Prepend, the spaces around a CJK character). The ``k`` characters from the start count
    from ``1 - k`` to 0, the others from 1 on.
    """
    normalized, spans = normalize_aligned(normalizer, text)
    return normalized, first_offset(spans)


def first_offset(spans: Spans) -> int:
    """The offset a text's first segment counts from, given its characters' spans (see
    ``normalize_first``)."""
    return 1 - next((i for i, (start, _) in enumerate(spans) if start), len(spans))


def aligned(normalizer: Normalizer, text: str, spans: Spans) -> tuple[str, Spans]:
    align = getattr(normalizer, "aligned", None)
    if align is None:
        # a native twin: its pure-Python original tracks alignments
        align = getattr(getattr(normalizer, "pure", None), "aligned", None)
    if align is None:
        raise PymtokError(
            f"normalizer {getattr(normalizer, '__name__', type(normalizer).__name__)} keeps no alignment: "
            "offsets, word ids and token strings cannot be given through it"
        )
    result: tuple[str, Spans] = align(text, spans)
    return result


def _class(ranges: list[tuple[int, int]]) -> str:
    return "".join(f"\\U{lo:08X}-\\U{hi:08X}" for lo, hi in ranges)


class _CodePoints:
    """A code point set written as hex ranges (``"0300-036F 0483"``), matched with ``re``.

    ``re`` compiles a class of BMP ranges into a bitmap but tests astral ranges one by one for
    every character, so the astral part is only tried on text that has astral characters.
    Building the bitmap is slow, so each pattern is compiled on first use, not at import.
    """

    def __init__(self, ranges: str) -> None:
        self._bmp_ranges: list[tuple[int, int]] = []
        self._astral_ranges: list[tuple[int, int]] = []
        for item in ranges.split():
            lo, _, hi = item.partition("-")
            first = int(lo, 16)
            last = int(hi, 16) if hi else first
            if first <= 0xFFFF:
                self._bmp_ranges.append((first, min(last, 0xFFFF)))
            if last > 0xFFFF:
                self._astral_ranges.append((max(first, 0x10000), last))

    @functools.cached_property
    def _bmp(self) -> re.Pattern[str]:
        return re.compile(f"[{_class(self._bmp_ranges)}]+")

    @functools.cached_property
    def _astral(self) -> re.Pattern[str]:
        return re.compile(f"[{_class(self._astral_ranges)}]+")

    @functools.cached_property
    def runs(self) -> re.Pattern[str]:
        return re.compile(f"([{_class(self._bmp_ranges + self._astral_ranges)}]+)")

    def search(self, text: str) -> bool:
        if self._bmp.search(text):
            return True
        return _ASTRAL.search(text) is not None and self._astral.search(text) is not None

    def sub(self, repl: str, text: str) -> str:
        text = self._bmp.sub(repl, text)
        if _ASTRAL.search(text):
            text = self._astral.sub(repl, text)
        return text


_ASTRAL = re.compile("[\U00010000-\U0010FFFF]")


# Code points that HF's normalization tables do not know (so they are stable starters with no
# decomposition there) but that a newer Unicode gives a decomposition, a non-zero combining
# class or a part in a composition: Python's `unicodedata` would move or merge them. Computed
# against Unicode 18, so it covers every Python version.
_NEWER_THAN_HF_NORMALIZATION = """
0558 058B-058C 05C8-05C9 07FD 0897-089F 08CA-08D3 09FE 0C3C 0D3B-0D3C 0EBA 1715 1ABF-1AF0
1DF6-1DFA 209D-209F 32FF A7F1-A7F4 A82C AB69 105C9 105D2 105DA 105E4 10781-10785 10787-107B0
107B2-107BF 10D24-10D27 10D69-10D6D 10EAB-10EAC 10ECB-10ECF 10EF0-10EFB 10EFD-10EFF 10F46-10F50
10F82-10F85 11070 1133B 11382-11385 1138B 1138E 11390-11391 113B8 113BB 113C2 113C5 113C7-113C9
113CE-113D0 1145E 11839-1183A 11930 11935 11938 1193D-1193E 11943 119E0 11A34 11A47 11A99 11D42
11D44-11D45 11D97 11F41-11F42 1611E-16129 1612F 16D63 16D67-16D6A 16FF0-16FF1 1B123-1B126
1CCD6-1CCF9 1D127-1D128 1D250-1D252 1D25B-1D25C 1D25F 1D280-1D281 1D6A6 1DF95 1DFCD-1DFFF
1E030-1E06D 1E08F 1E130-1E136 1E2AE 1E2EC-1E2EF 1E4EC-1E4EF 1E5EE-1E5EF 1E6E3 1E6E6 1E6EE-1E6EF
1E6F5 1F16C 1FBF0-1FBF9
"""

# HF `StripAccents` removes `unicode-normalization-alignments`' combining marks (Mn, Mc, Me of
# its Unicode version), without decomposing first.
_HF_COMBINING_MARKS = """
0300-036F 0483-0489 0591-05BD 05BF 05C1-05C2 05C4-05C5 05C7 0610-061A 064B-065F 0670 06D6-06DC
06DF-06E4 06E7-06E8 06EA-06ED 0711 0730-074A 07A6-07B0 07EB-07F3 0816-0819 081B-0823 0825-0827
0829-082D 0859-085B 08D4-08E1 08E3-0903 093A-093C 093E-094F 0951-0957 0962-0963 0981-0983 09BC
09BE-09C4 09C7-09C8 09CB-09CD 09D7 09E2-09E3 0A01-0A03 0A3C 0A3E-0A42 0A47-0A48 0A4B-0A4D 0A51
0A70-0A71 0A75 0A81-0A83 0ABC 0ABE-0AC5 0AC7-0AC9 0ACB-0ACD 0AE2-0AE3 0B01-0B03 0B3C 0B3E-0B44
0B47-0B48 0B4B-0B4D 0B56-0B57 0B62-0B63 0B82 0BBE-0BC2 0BC6-0BC8 0BCA-0BCD 0BD7 0C00-0C03
0C3E-0C44 0C46-0C48 0C4A-0C4D 0C55-0C56 0C62-0C63 0C81-0C83 0CBC 0CBE-0CC4 0CC6-0CC8 0CCA-0CCD
0CD5-0CD6 0CE2-0CE3 0D01-0D03 0D3E-0D44 0D46-0D48 0D4A-0D4D 0D57 0D62-0D63 0D82-0D83 0DCA
0DCF-0DD4 0DD6 0DD8-0DDF 0DF2-0DF3 0E31 0E34-0E3A 0E47-0E4E 0EB1 0EB4-0EB9 0EBB-0EBC 0EC8-0ECD
0F18-0F19 0F35 0F37 0F39 0F3E-0F3F 0F71-0F84 0F86-0F87 0F8D-0F97 0F99-0FBC 0FC6 102B-103E
1056-1059 105E-1060 1062-1064 1067-106D 1071-1074 1082-108D 108F 109A-109D 135D-135F 1712-1714
1732-1734 1752-1753 1772-1773 17B4-17D3 17DD 180B-180D 1885-1886 18A9 1920-192B 1930-193B
1A17-1A1B 1A55-1A5E 1A60-1A7C 1A7F 1AB0-1ABE 1B00-1B04 1B34-1B44 1B6B-1B73 1B80-1B82 1BA1-1BAD
1BE6-1BF3 1C24-1C37 1CD0-1CD2 1CD4-1CE8 1CED 1CF2-1CF4 1CF8-1CF9 1DC0-1DF5 1DFB-1DFF 20D0-20F0
2CEF-2CF1 2D7F 2DE0-2DFF 302A-302F 3099-309A A66F-A672 A674-A67D A69E-A69F A6F0-A6F1 A802 A806
A80B A823-A827 A880-A881 A8B4-A8C5 A8E0-A8F1 A926-A92D A947-A953 A980-A983 A9B3-A9C0 A9E5
AA29-AA36 AA43 AA4C-AA4D AA7B-AA7D AAB0 AAB2-AAB4 AAB7-AAB8 AABE-AABF AAC1 AAEB-AAEF AAF5-AAF6
ABE3-ABEA ABEC-ABED FB1E FE00-FE0F FE20-FE2F 101FD 102E0 10376-1037A 10A01-10A03 10A05-10A06
10A0C-10A0F 10A38-10A3A 10A3F 10AE5-10AE6 11000-11002 11038-11046 1107F-11082 110B0-110BA
11100-11102 11127-11134 11173 11180-11182 111B3-111C0 111CA-111CC 1122C-11237 1123E 112DF-112EA
11300-11303 1133C 1133E-11344 11347-11348 1134B-1134D 11357 11362-11363 11366-1136C 11370-11374
11435-11446 114B0-114C3 115AF-115B5 115B8-115C0 115DC-115DD 11630-11640 116AB-116B7 1171D-1172B
11C2F-11C36 11C38-11C3F 11C92-11CA7 11CA9-11CB6 16AF0-16AF4 16B30-16B36 16F51-16F7E 16F8F-16F92
1BC9D-1BC9E 1D165-1D169 1D16D-1D172 1D17B-1D182 1D185-1D18B 1D1AA-1D1AD 1D242-1D244 1DA00-1DA36
1DA3B-1DA6C 1DA75 1DA84 1DA9B-1DA9F 1DAA1-1DAAF 1E000-1E006 1E008-1E018 1E01B-1E021 1E023-1E024
1E026-1E02A 1E8D0-1E8D6 1E944-1E94A E0100-E01EF
"""

# `BertNormalizer(strip_accents)` removes general category Mn as `unicode_categories` (Unicode
# 8) has it, after NFD; characters that NFD always decomposes are left out (they never remain).
_HF_BERT_NONSPACING_MARKS = """
0300-033F 0342 0345-036F 0483-0487 0591-05BD 05BF 05C1-05C2 05C4-05C5 05C7 0610-061A 064B-065F
0670 06D6-06DC 06DF-06E4 06E7-06E8 06EA-06ED 0711 0730-074A 07A6-07B0 07EB-07F3 0816-0819
081B-0823 0825-0827 0829-082D 0859-085B 08E3-0902 093A 093C 0941-0948 094D 0951-0957 0962-0963
0981 09BC 09C1-09C4 09CD 09E2-09E3 0A01-0A02 0A3C 0A41-0A42 0A47-0A48 0A4B-0A4D 0A51 0A70-0A71
0A75 0A81-0A82 0ABC 0AC1-0AC5 0AC7-0AC8 0ACD 0AE2-0AE3 0B01 0B3C 0B3F 0B41-0B44 0B4D 0B56
0B62-0B63 0B82 0BC0 0BCD 0C00 0C3E-0C40 0C46-0C47 0C4A-0C4D 0C55-0C56 0C62-0C63 0C81 0CBC 0CBF
0CC6 0CCC-0CCD 0CE2-0CE3 0D01 0D41-0D44 0D4D 0D62-0D63 0DCA 0DD2-0DD4 0DD6 0E31 0E34-0E3A
0E47-0E4E 0EB1 0EB4-0EB9 0EBB-0EBC 0EC8-0ECD 0F18-0F19 0F35 0F37 0F39 0F71-0F72 0F74 0F77
0F79-0F7E 0F80 0F82-0F84 0F86-0F87 0F8D-0F92 0F94-0F97 0F99-0F9C 0F9E-0FA1 0FA3-0FA6 0FA8-0FAB
0FAD-0FB8 0FBA-0FBC 0FC6 102D-1030 1032-1037 1039-103A 103D-103E 1058-1059 105E-1060 1071-1074
1082 1085-1086 108D 109D 135D-135F 1712-1714 1732-1734 1752-1753 1772-1773 17B4-17B5 17B7-17BD
17C6 17C9-17D3 17DD 180B-180D 18A9 1920-1922 1927-1928 1932 1939-193B 1A17-1A18 1A1B 1A56
1A58-1A5E 1A60 1A62 1A65-1A6C 1A73-1A7C 1A7F 1AB0-1ABD 1B00-1B03 1B34 1B36-1B3A 1B3C 1B42
1B6B-1B73 1B80-1B81 1BA2-1BA5 1BA8-1BA9 1BAB-1BAD 1BE6 1BE8-1BE9 1BED 1BEF-1BF1 1C2C-1C33
1C36-1C37 1CD0-1CD2 1CD4-1CE0 1CE2-1CE8 1CED 1CF4 1CF8-1CF9 1DC0-1DF5 1DFC-1DFF 20D0-20DC 20E1
20E5-20F0 2CEF-2CF1 2D7F 2DE0-2DFF 302A-302D 3099-309A A66F A674-A67D A69E-A69F A6F0-A6F1 A802
A806 A80B A825-A826 A8C4 A8E0-A8F1 A926-A92D A947-A951 A980-A982 A9B3 A9B6-A9B9 A9BC A9E5
AA29-AA2E AA31-AA32 AA35-AA36 AA43 AA4C AA7C AAB0 AAB2-AAB4 AAB7-AAB8 AABE-AABF AAC1 AAEC-AAED
AAF6 ABE5 ABE8 ABED FB1E FE00-FE0F FE20-FE2F 101FD 102E0 10376-1037A 10A01-10A03 10A05-10A06
10A0C-10A0F 10A38-10A3A 10A3F 10AE5-10AE6 11001 11038-11046 1107F-11081 110B3-110B6 110B9-110BA
11100-11102 11127-1112B 1112D 11130-11134 11173 11180-11181 111B6-111BE 111CA-111CC 1122F-11231
11234 11236-11237 112DF 112E3-112EA 11300-11301 1133C 11340 11366-1136C 11370-11374 114B3-114B8
114BA 114BF-114C0 114C2-114C3 115B2-115B5 115BC-115BD 115BF-115C0 115DC-115DD 11633-1163A 1163D
1163F-11640 116AB 116AD 116B0-116B5 116B7 1171D-1171F 11722-11725 11727-1172B 16AF0-16AF4
16B30-16B36 16F8F-16F92 1BC9D-1BC9E 1D167-1D169 1D17B-1D182 1D185-1D18B 1D1AA-1D1AD 1D242-1D244
1DA00-1DA36 1DA3B-1DA6C 1DA75 1DA84 1DA9B-1DA9F 1DAA1-1DAAF 1E8D0-1E8D6 E0100-E01EF
"""

# `BertNormalizer(clean_text)` drops NUL, U+FFFD and Unicode 8's Cc, Cf and Co (not Cn).
_HF_BERT_CONTROLS = """
0000-0008 000B-000C 000E-001F 007F-009F 00AD 0600-0605 061C 06DD 070F 180E 200B-200F 202A-202E
2060-2064 2066-206F E000-F8FF FEFF FFF9-FFFB FFFD 110BD 1BCA0-1BCA3 1D173-1D17A E0001
E0020-E007F F0000-FFFFD 100000-10FFFD
"""

# Rust's `char::is_whitespace` (the White_Space property); Python's `str.isspace` differs.
_RUST_WHITESPACE = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000"
)

# Rust's `to_lowercase` (Unicode 17) for letters that Python 3.10-3.13 do not lowercase yet.
_RUST_ONLY_LOWERCASE: dict[int, str] = {
    cp: chr(cp + delta)
    for first, last, delta in (
        (0x1C89, 0x1C89, 1), (0x2C2F, 0x2C2F, 48), (0xA7C0, 0xA7C0, 1), (0xA7CB, 0xA7CB, -42343),
        (0xA7CC, 0xA7CC, 1), (0xA7CE, 0xA7CE, 1), (0xA7D0, 0xA7D0, 1), (0xA7D2, 0xA7D2, 1),
        (0xA7D4, 0xA7D4, 1), (0xA7D6, 0xA7D6, 1), (0xA7D8, 0xA7D8, 1), (0xA7DA, 0xA7DA, 1),
        (0xA7DC, 0xA7DC, -42561), (0x10570, 0x1057A, 39), (0x1057C, 0x1058A, 39),
        (0x1058C, 0x10592, 39), (0x10594, 0x10595, 39), (0x10D50, 0x10D65, 32),
        (0x16EA0, 0x16EB8, 27),
    )
    for cp in range(first, last + 1)
}

_HF_UNKNOWN_TO_NORMALIZATION = _CodePoints(_NEWER_THAN_HF_NORMALIZATION)
_COMBINING_MARK = _CodePoints(_HF_COMBINING_MARKS)
_BERT_NONSPACING_MARK = _CodePoints(_HF_BERT_NONSPACING_MARKS)
_BERT_CONTROL = _CodePoints(_HF_BERT_CONTROLS)
_BERT_WHITESPACE = re.compile(f"[{re.escape(_RUST_WHITESPACE)}]")
# Few ranges, so one class is fast; each ideograph is padded on its own, as HF does.
_CJK_IDEOGRAPH = re.compile(
    "[\u3400-\u4DBF\u4E00-\u9FFF\uF900-\uFAFF\U00020000-\U0002A6DF\U0002A700-\U0002B81F"
    "\U0002B920-\U0002CEAF\U0002F800-\U0002FA1F]"
)
# Coarse net for the letters of _RUST_ONLY_LOWERCASE, cheap enough to run on every text.
_RUST_ONLY_UPPERCASE_BLOCKS = re.compile(
    "[\u1C89\u2C2F\uA7C0-\uA7DC\U00010570-\U00010595\U00010D50-\U00010D65"
    "\U00016EA0-\U00016EB8]"
)


@functools.cache
def _grapheme_rules() -> tuple[dict[int, str], re.Pattern[str]]:
    """Extended grapheme clusters (UAX #29) as HF's ``unicode-segmentation`` 1.13 cuts them.

    The rules are UAX #29's own expression (Table 1b, with GB9c's conjunct clusters) over the
    crate's Unicode 17.0 properties from ``pymtok.ucd``, not ``regex``'s ``\\X``: the installed
    ``regex`` release has whatever Unicode version it has. For speed the expression runs on a
    stand-in text: each character with any grapheme property becomes one ASCII letter naming
    its combination of them (ASCII without any, one more), the rest stay as they are.
    """
    combos: dict[int, frozenset[str]] = {}
    for name, ranges in GRAPHEME_17.items():
        for lo, hi in code_point_ranges(ranges):
            for code in range(lo, hi + 1):
                combos[code] = combos.get(code, frozenset()) | {name}
    for code in range(0x80):
        combos.setdefault(code, frozenset())
    kinds = sorted(set(combos.values()), key=sorted)
    # Unicode 17.0 has 18 combinations: the 52 letters leave room for new ones
    letters = {kind: string.ascii_letters[index] for index, kind in enumerate(kinds)}
    table = {code: letters[kind] for code, kind in combos.items()}

    def cls(*names: str, negate: bool = False) -> str:
        chosen = "".join(letters[kind] for kind in kinds if kind & set(names))
        return f"[{'^' if negate else ''}{chosen}]"

    def gcb(*values: str) -> list[str]:
        return [f"Grapheme_Cluster_Break={value}" for value in values]

    lead, vowel, trail, lv, lvt = (cls(*gcb(value)) for value in ("L", "V", "T", "LV", "LVT"))
    ri, extend, zwj = cls(*gcb("Regional_Indicator")), cls(*gcb("Extend")), cls(*gcb("ZWJ"))
    pictographic = cls("Extended_Pictographic")
    consonant = cls("Indic_Conjunct_Break=Consonant")
    linker = cls("Indic_Conjunct_Break=Linker")
    joiner = cls("Indic_Conjunct_Break=Extend", "Indic_Conjunct_Break=Linker")
    core = "|".join([
        f"{lead}*(?:{vowel}+|{lv}{vowel}*|{lvt}){trail}*|{lead}+|{trail}+",  # Hangul syllable (GB6-GB8)
        f"{ri}{ri}",                                                          # flag (GB12, GB13)
        f"{pictographic}(?:{extend}*{zwj}{pictographic})*",                    # emoji ZWJ sequence (GB11)
        f"{consonant}(?:{joiner}*{linker}{joiner}*{consonant})+",              # conjunct (GB9c)
        cls(*gcb("Control", "CR", "LF"), negate=True),
    ])
    postcore = cls(*gcb("Extend", "ZWJ", "SpacingMark"))
    # First, for speed: a character that starts none of the sequences above nor a Prepend run
    # joins only what follows any character (the same clusters as the full expression).
    plain = cls(*gcb("CR", "LF", "Control", "Prepend", "L", "V", "T", "LV", "LVT", "Regional_Indicator"),
                "Extended_Pictographic", "Indic_Conjunct_Break=Consonant", negate=True)
    pattern = (f"{plain}{postcore}*|{cls(*gcb('CR'))}{cls(*gcb('LF'))}|{cls(*gcb('Control', 'CR', 'LF'))}"
               f"|{cls(*gcb('Prepend'))}*(?:{core}){postcore}*")
    return table, re.compile(pattern)


def _graphemes(text: str) -> list[str]:
    """``text`` cut into extended grapheme clusters, as HF's Precompiled cuts it."""
    table, rules = _grapheme_rules()
    clusters, start = [], 0
    for stand_in in rules.findall(text.translate(table)):
        end = start + len(stand_in)
        clusters.append(text[start:end])
        start = end
    return clusters


class _UnicodeForm:
    """Unicode normalization as HF's older tables do it."""

    form = ""

    def __call__(self, text: str) -> str:
        # Text already normalized by Python's tables needs nothing from HF's either: every
        # substring of a normalized text is normalized, so each part cut out below stays as
        # it is. `is_normalized` is a quick check in C, far cheaper than the search below.
        if text.isascii() or unicodedata.is_normalized(self.form, text):
            return text
        if not _HF_UNKNOWN_TO_NORMALIZATION.search(text):
            return unicodedata.normalize(self.form, text)
        parts = _HF_UNKNOWN_TO_NORMALIZATION.runs.split(text)
        # Unknown to HF's tables, those characters are starters that never combine: each side
        # of them normalizes on its own, and they stay as they are.
        parts[::2] = [unicodedata.normalize(self.form, part) for part in parts[::2]]
        return "".join(parts)

    def aligned(self, text: str, spans: Spans) -> tuple[str, Spans]:
        if self(text) == text:
            return text, spans
        return _transform(spans, self._changes(text))

    def _changes(self, text: str) -> list[tuple[str, int]]:
        """HF's (character, change) stream (unicode-normalization-alignments): each character
        decomposed, its first part replacing it (0) and the others inserted (1); each run of marks
        put in canonical order between starters (stably, each mark keeping its change); then, for
        the composing forms, each character composed onto the last starter it is not blocked
        from, the composite charging the mark's change - 1. Characters HF's tables do not know
        stay as they are and never combine."""
        decomposing = "NFKD" if self.form.startswith("NFK") else "NFD"
        unknown = _HF_UNKNOWN_TO_NORMALIZATION.search
        stream: list[tuple[int, str, int]] = []  # (combining class, character, change)
        pending = 0
        for c in text:
            for i, d in enumerate(c if unknown(c) else unicodedata.normalize(decomposing, c)):
                ccc = 0 if unknown(d) else unicodedata.combining(d)
                if ccc == 0:
                    stream[pending:] = sorted(stream[pending:], key=lambda item: item[0])
                    pending = len(stream)
                stream.append((ccc, d, int(i > 0)))
        stream[pending:] = sorted(stream[pending:], key=lambda item: item[0])
        if self.form in ("NFD", "NFKD"):
            return [(d, change) for _, d, change in stream]
        return _recompose(stream, unknown)


def _compose(a: str, b: str, unknown: Callable[[str], Any]) -> str | None:
    """The primary composite of ``a`` then ``b``, if there is one."""
    if unknown(a) or unknown(b):
        return None
    composed = unicodedata.normalize("NFC", a + b)
    return composed if len(composed) == 1 else None


def _recompose(stream: list[tuple[int, str, int]], unknown: Callable[[str], Any]) -> list[tuple[str, int]]:
    """Canonical composition over a decomposed (class, character, change) stream, as the crate's
    ``Recompositions`` emits it: a starter with everything composed onto it, then the marks that
    did not compose, in order."""
    out: list[tuple[str, int]] = []
    starter: tuple[str, int] | None = None
    held: list[tuple[str, int]] = []  # marks after the starter that did not compose
    last_ccc: int | None = None
    for ccc, c, change in stream:
        if starter is None:
            if ccc != 0:
                out.append((c, change))
            else:
                starter = (c, change)
            continue
        blocked = last_ccc is not None and last_ccc >= ccc
        composed = None if blocked else _compose(starter[0], c, unknown)
        if composed is not None:
            starter = (composed, starter[1] + change - 1)
        elif ccc == 0:
            out.append(starter)
            out += held
            starter, held, last_ccc = (c, change), [], None
        else:
            held.append((c, change))
            last_ccc = ccc
    if starter is not None:
        out.append(starter)
    return out + held


class NFC(_UnicodeForm):
    form = "NFC"


class NFD(_UnicodeForm):
    form = "NFD"


class NFKC(_UnicodeForm):
    form = "NFKC"


class NFKD(_UnicodeForm):
    form = "NFKD"


class Lowercase:
    """Per-character full lowercase mapping (no final-sigma context), like Rust's ``to_lowercase``.

    >>> Lowercase()("ΟΔΟΣ İ")
    'οδοσ i̇'
    """

    def __call__(self, text: str) -> str:
        if text.isascii():
            return text.lower()
        # Capital sigma maps to plain sigma wherever it stands: no final-sigma context.
        text = text.replace("\u03a3", "\u03c3").lower()
        if _RUST_ONLY_UPPERCASE_BLOCKS.search(text):
            text = text.translate(_RUST_ONLY_LOWERCASE)
        return text

    def aligned(self, text: str, spans: Spans) -> tuple[str, Spans]:
        lowered = self(text)
        if len(lowered) == len(text):
            return lowered, spans  # every character lowercased to one
        return _per_char(text, spans, self)


class Strip:
    """Remove leading and/or trailing Unicode White_Space."""

    def __init__(self, strip_left: bool = True, strip_right: bool = True) -> None:
        self.strip_left = _flag("Strip", "strip_left", strip_left)
        self.strip_right = _flag("Strip", "strip_right", strip_right)

    def __call__(self, text: str) -> str:
        if self.strip_left and self.strip_right:
            return text.strip(_RUST_WHITESPACE)
        if self.strip_left:
            return text.lstrip(_RUST_WHITESPACE)
        if self.strip_right:
            return text.rstrip(_RUST_WHITESPACE)
        return text

    def aligned(self, text: str, spans: Spans) -> tuple[str, Spans]:
        start = len(text) - len(text.lstrip(_RUST_WHITESPACE)) if self.strip_left else 0
        end = len(text.rstrip(_RUST_WHITESPACE)) if self.strip_right else len(text)
        end = max(start, end)
        return text[start:end], spans[start:end]


class StripAccents:
    """Drop combining marks as they stand; pair with ``NFD``/``NFKD`` to strip accents."""

    def __call__(self, text: str) -> str:
        if text.isascii():
            return text
        return _COMBINING_MARK.sub("", text)

    def aligned(self, text: str, spans: Spans) -> tuple[str, Spans]:
        return _per_char(text, spans, self)


# HF's Nmt: ASCII and C1 controls out, other line and space separators (and U+2581, U+FEFF,
# U+FFFD) to a space
_NMT = str.maketrans(
    {**dict.fromkeys([*range(0x01, 0x09), 0x0B, *range(0x0E, 0x20), 0x7F, 0x8F, 0x9F]),
     **dict.fromkeys([0x09, 0x0A, 0x0C, 0x0D, 0x1680, *range(0x200B, 0x2010), 0x2028, 0x2029, 0x2581, 0xFEFF,
                      0xFFFD], " ")}
)


class Nmt:
    """SentencePiece's NMT cleanup: control characters removed, odd spaces made spaces."""

    def __call__(self, text: str) -> str:
        return text.translate(_NMT)

    def aligned(self, text: str, spans: Spans) -> tuple[str, Spans]:
        return _per_char(text, spans, self)


class ByteLevel:
    """Each character as GPT-2's stand-ins for its UTF-8 bytes (the ByteLevel pre-tokenizer's
    mapping, without its split)."""

    def __call__(self, text: str) -> str:
        return text_to_chars(text)

    def aligned(self, text: str, spans: Spans) -> tuple[str, Spans]:
        return _per_char(text, spans, text_to_chars)


class Prepend:
    """Put ``prepend`` in front of non-empty text."""

    def __init__(self, prepend: str) -> None:
        self.prepend = _text("Prepend", "prepend", prepend)

    def __call__(self, text: str) -> str:
        return self.prepend + text if text else text

    def aligned(self, text: str, spans: Spans) -> tuple[str, Spans]:
        if not text:
            return text, spans
        if not self.prepend:
            # HF still prepends, the first character as the inserted one: it covers nothing, at the
            # start of its segment (where the first character is, unless a step before removed some)
            return text, [(spans[0][0], spans[0][0]), *spans[1:]]
        # HF puts the prepended characters on the first character's span
        return self.prepend + text, [spans[0]] * len(self.prepend) + spans


class Replace:
    """Replace every match of ``pattern`` (``{"String": s}`` or ``{"Regex": r}``) by ``content``.

    >>> Replace(pattern={"Regex": " {2,}"}, content=" ")("a   b")
    'a b'
    """

    def __init__(self, pattern: dict[str, str], content: str) -> None:
        self.pattern = pattern
        self.content = _text("Replace", "content", content)
        if not isinstance(pattern, dict) or len(pattern) != 1:
            raise FormatError(
                "normalizer Replace: pattern must be {'String': ...} or {'Regex': ...}, "
                f"got {pattern!r}"
            )
        [(kind, value)] = pattern.items()
        self._literal = _text("Replace", f"pattern.{kind}", value)
        self._regex: regex.Pattern[str] | None = None
        self._timeout = timeout_for(value) if kind == "Regex" else None
        if kind == "Regex":
            try:
                self._regex = onig_regex(value)
            except FormatError as exc:
                raise FormatError(f"normalizer Replace: {exc}") from None
        elif kind != "String":
            raise FormatError(
                f"normalizer Replace: pattern kind must be String or Regex, got {kind!r}"
            )

    def __call__(self, text: str) -> str:
        # HF finds no match at all in empty text, not even an empty one.
        if not text:
            return text
        if self._regex is None:
            return text.replace(self._literal, self.content)
        try:
            return onig_sub(self._regex, text, self.content, self._timeout)
        except TimeoutError:
            raise too_slow("normalizer Replace", self._literal) from None

    def aligned(self, text: str, spans: Spans) -> tuple[str, Spans]:
        if not text:
            return text, spans
        if self._regex is None:
            matches: Iterable[tuple[int, int]] = _literal_spans(text, self._literal)
        else:
            try:
                matches = list(onig_spans(self._regex, text, self._timeout))
            except TimeoutError:
                raise too_slow("normalizer Replace", self._literal) from None
        chars: list[str] = []
        out: Spans = []
        done = 0
        for start, end in matches:
            chars.append(text[done:start])
            out += spans[done:start]
            # the replacement shares the span of the match's last character (HF)
            chars.append(self.content)
            out += [spans[end - 1] if end >= 1 else (0, 0)] * len(self.content)
            done = end
        chars.append(text[done:])
        out += spans[done:]
        return "".join(chars), out


class BertNormalizer:
    """BERT's cleanup: controls out, whitespace to spaces, CJK ideographs spaced, accents, case.

    >>> BertNormalizer()("Héllo\\t世界")
    'hello  世  界 '
    """

    def __init__(
        self,
        clean_text: bool = True,
        handle_chinese_chars: bool = True,
        strip_accents: bool | None = None,
        lowercase: bool = True,
    ) -> None:
        self.clean_text = _flag("BertNormalizer", "clean_text", clean_text)
        self.handle_chinese_chars = _flag(
            "BertNormalizer", "handle_chinese_chars", handle_chinese_chars
        )
        if strip_accents is not None:
            _flag("BertNormalizer", "strip_accents", strip_accents)
        self.strip_accents = strip_accents
        self.lowercase = _flag("BertNormalizer", "lowercase", lowercase)
        self._strip = lowercase if strip_accents is None else strip_accents

    def __call__(self, text: str) -> str:
        if self.clean_text:
            text = _BERT_WHITESPACE.sub(" ", _BERT_CONTROL.sub("", text))
        if self.handle_chinese_chars and not text.isascii():
            text = _CJK_IDEOGRAPH.sub(r" \g<0> ", text)
        if self._strip and not text.isascii():
            text = _BERT_NONSPACING_MARK.sub("", _NFD(text))
        if self.lowercase:
            text = _LOWERCASE(text)
        return text

    def aligned(self, text: str, spans: Spans) -> tuple[str, Spans]:
        if self.clean_text:
            text, spans = _per_char(text, spans, lambda c: _BERT_WHITESPACE.sub(" ", _BERT_CONTROL.sub("", c)))
        if self.handle_chinese_chars and not text.isascii():
            text, spans = _per_char(text, spans, lambda c: _CJK_IDEOGRAPH.sub(r" \g<0> ", c))
        if self._strip and not text.isascii():
            text, spans = _NFD.aligned(text, spans)
            text, spans = _per_char(text, spans, lambda c: _BERT_NONSPACING_MARK.sub("", c))
        if self.lowercase:
            text, spans = _LOWERCASE.aligned(text, spans)
        return text, spans


_NFD = NFD()
_LOWERCASE = Lowercase()


class Precompiled:
    """SentencePiece's compiled normalization rules (``precompiled_charsmap``, base64).

    The blob is ``u32 trie_size`` (bytes), a darts-clone double-array trie of ``trie_size / 4``
    little-endian ``u32`` units keyed by UTF-8 bytes, then NUL-terminated UTF-8 replacements the
    trie's values point into. As in HF's ``spm_precompiled``, text is cut into extended grapheme
    clusters; a cluster shorter than 6 bytes whose bytes start with a key is replaced whole by
    the shortest such key's replacement, otherwise each of its characters is looked up alone.
    """

    _CACHE_LIMIT = 1 << 16

    def __init__(self, precompiled_charsmap: str) -> None:
        self.precompiled_charsmap = _text(
            "Precompiled", "precompiled_charsmap", precompiled_charsmap
        )
        try:
            raw = base64.b64decode(precompiled_charsmap, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise FormatError(
                f"normalizer Precompiled: precompiled_charsmap is not base64 ({exc})"
            ) from None
        if len(raw) < 4:
            raise FormatError(
                "normalizer Precompiled: precompiled_charsmap is shorter than its 4-byte trie size"
            )
        (trie_size,) = struct.unpack_from("<I", raw)
        unit_count = trie_size // 4
        if unit_count == 0 or 4 + 4 * unit_count > len(raw):
            raise FormatError(
                f"normalizer Precompiled: trie of {trie_size} bytes does not fit in a "
                f"{len(raw)}-byte precompiled_charsmap"
            )
        self._units = struct.unpack_from(f"<{unit_count}I", raw, 4)
        self._replacements = raw[4 + 4 * unit_count :]
        try:
            self._replacements.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FormatError(
                f"normalizer Precompiled: replacement strings are not UTF-8 ({exc})"
            ) from None
        self._cache = _Memo(self._cluster)
        ascii_map = {cp: self._cluster(chr(cp)) for cp in range(128)}
        self._ascii_table = {cp: out for cp, out in ascii_map.items() if out != chr(cp)}
        self._crlf = self._cluster("\r\n")

    def __call__(self, text: str) -> str:
        if text.isascii():
            # Every ASCII character is its own grapheme cluster except CR LF.
            if not self._ascii_table and self._crlf == "\r\n":
                return text
            table = self._ascii_table
            return self._crlf.join(part.translate(table) for part in text.split("\r\n"))
        if len(self._cache) > self._CACHE_LIMIT:
            self._cache.clear()
        return "".join(map(self._cache.__getitem__, _graphemes(text)))

    def aligned(self, text: str, spans: Spans) -> tuple[str, Spans]:
        if self(text) == text:
            return text, spans
        # HF's changes, quirks kept: a part replaced by fewer characters charges the difference
        # to the last character emitted so far, which may belong to an earlier cluster
        dest: list[list[Any]] = []

        def replace(old: str, new: str) -> None:
            dest.extend([c, 0] for c in new)
            diff = len(new) - len(old)
            if diff > 0:
                for item in dest[len(dest) - diff :]:
                    item[1] = 1
            elif diff < 0 and dest:
                dest[-1][1] += diff

        for cluster in _graphemes(text):
            if len(cluster.encode("utf-8")) < 6:
                whole = self._lookup(cluster.encode("utf-8"))
                if whole is not None:
                    replace(cluster, whole)
                    continue
            for c in cluster:
                one = self._lookup(c.encode("utf-8"))
                if one is not None:
                    replace(c, one)
                else:
                    dest.append([c, 0])
        return _transform(spans, ((c, change) for c, change in dest))

    def _cluster(self, cluster: str) -> str:
        encoded = cluster.encode("utf-8")
        if len(encoded) < 6:
            whole = self._lookup(encoded)
            if whole is not None:
                return whole
            if len(cluster) == 1:
                return cluster
        return "".join(self._char(c) for c in cluster)

    def _char(self, char: str) -> str:
        normalized = self._lookup(char.encode("utf-8"))
        return char if normalized is None else normalized

    def _lookup(self, key: bytes) -> str | None:
        """The replacement for the shortest trie key that ``key`` starts with, if any."""
        units = self._units
        node = _unit_offset(units[0])
        for byte in key:
            if byte == 0:
                return None
            node ^= byte
            if node >= len(units):
                return None
            unit = units[node]
            if unit & 0x800000FF != byte:
                return None
            node ^= _unit_offset(unit)
            if unit & 0x100:
                if node >= len(units):
                    return None
                start = units[node] & 0x7FFFFFFF
                end = self._replacements.find(b"\0", start)
                if end < 0:
                    end = len(self._replacements)
                try:
                    return self._replacements[start:end].decode("utf-8")
                except UnicodeDecodeError:
                    raise FormatError(
                        f"normalizer Precompiled: replacement at byte {start} does not start "
                        "on a UTF-8 character boundary"
                    ) from None
        return None


class SentencePiece:
    """sentencepiece's own normalizer (``normalizer.cc``), configured by its ``NormalizerSpec``.

    At each position, in this order: the longest user-defined piece passes through unchanged;
    else the longest key of the precompiled charsmap is replaced (keys are byte strings, so this
    is not HF's ``Precompiled``, which works on grapheme clusters and takes the shortest key);
    else one character is copied. Then ``remove_extra_whitespaces`` drops leading spaces,
    collapses runs and drops trailing ones, ``add_dummy_prefix`` puts one space before (or, with
    ``treat_whitespace_as_suffix``, after) the text, and ``escape_whitespaces`` writes each space
    as ``▁``.

    >>> SentencePiece(precompiled_charsmap=None, add_dummy_prefix=True, remove_extra_whitespaces=True,
    ...               escape_whitespaces=True)("  Hello   world ")
    '▁Hello▁world'
    """

    _SPACE = "\u2581".encode()

    def __init__(
        self,
        *,
        precompiled_charsmap: str | None,
        add_dummy_prefix: bool,
        remove_extra_whitespaces: bool,
        escape_whitespaces: bool,
        treat_whitespace_as_suffix: bool = False,
        user_defined_symbols: list[str] | None = None,
    ) -> None:
        self.precompiled_charsmap = precompiled_charsmap
        self.add_dummy_prefix = _flag("SentencePiece", "add_dummy_prefix", add_dummy_prefix)
        self.remove_extra_whitespaces = _flag("SentencePiece", "remove_extra_whitespaces", remove_extra_whitespaces)
        self.escape_whitespaces = _flag("SentencePiece", "escape_whitespaces", escape_whitespaces)
        self.treat_whitespace_as_suffix = _flag("SentencePiece", "treat_whitespace_as_suffix", treat_whitespace_as_suffix)
        symbols = user_defined_symbols or []
        if not all(isinstance(s, str) and s for s in symbols):
            raise FormatError("normalizer SentencePiece: user_defined_symbols must be non-empty strings")
        self.user_defined_symbols = list(symbols)
        self._user = {s.encode("utf-8") for s in symbols}
        self._user_lengths = sorted({len(s) for s in self._user}, reverse=True)
        self._units: tuple[int, ...] = ()
        self._replacements = b""
        if precompiled_charsmap is not None:
            self._units, self._replacements = _charsmap_tables(
                "SentencePiece", _text("SentencePiece", "precompiled_charsmap", precompiled_charsmap)
            )
        # per first character: (longest key length within it, its value, trie node after it or -1)
        self._walks: dict[bytes, tuple[int, int, int]] = {}

    def __call__(self, text: str) -> str:
        if not text:
            return text
        if not self._units and not self._user:
            return self._plain(text)
        return self._normalize(text.encode("utf-8"), None)

    def aligned(self, text: str, spans: Spans) -> tuple[str, Spans]:
        """``self(text)`` and, per character of it, the span of ``text`` it stands for, as the
        library's ``norm_to_orig`` gives them.

        The library maps each normalized byte to the start of the input unit (user piece,
        charsmap key, character) that wrote it, and a piece covering normalized bytes
        ``[b, e)`` to the input ``[norm_to_orig[b], norm_to_orig[e])``. So a character's span
        runs from its unit's start to the start of the next character's unit: input inside the
        text that wrote nothing (a collapsed space, a character the charsmap deletes) belongs to
        the character before, the spaces the ends lose to none, the dummy ``▁`` covers nothing,
        and the characters one unit wrote (``ﬁ`` -> ``fi``) all start there, only the last
        reaching its end. Pieces over whole characters then get the library's spans from their
        first character's start and their last one's end.
        """
        data = text.encode("utf-8")
        origins: list[int] = []
        normalized = self._normalize(data, origins)
        if not normalized:
            return normalized, []
        char_at = _char_indices(text, data)
        last = spans[-1][1]

        def caller(byte: int) -> int:
            index = char_at[byte]
            if index < 0:
                raise FormatError(
                    f"normalizer SentencePiece: a charsmap key ends inside a character (byte {byte} of the "
                    "text): its offsets cannot be given in characters"
                )
            return spans[index][0] if index < len(spans) else last

        out: Spans = []
        at = 0
        for c in normalized:
            after = at + len(c.encode("utf-8"))
            out.append((caller(origins[at]), caller(origins[after])))
            at = after
        return normalized, out

    def _normalize(self, data: bytes, origins: list[int] | None) -> str:
        """``Normalize`` on UTF-8 bytes; into ``origins``, if given, its ``norm_to_orig``: per
        output byte the offset of ``data`` where the unit that wrote it starts, then the end."""
        n, pos = len(data), 0
        space = self._SPACE if self.escape_whitespaces else b" "
        if self.remove_extra_whitespaces:
            while pos < n:
                piece, used = self._prefix(data, pos)
                if piece != b" ":
                    break
                pos += used
        if pos == n:
            return ""
        out = bytearray()
        if self.add_dummy_prefix and not self.treat_whitespace_as_suffix:
            out += space
            if origins is not None:
                origins += [pos] * len(space)
        previous_space = self.remove_extra_whitespaces
        while pos < n:
            piece, used = self._prefix(data, pos)
            if previous_space:
                piece = piece.lstrip(b" ")
            if piece:
                written = piece.replace(b" ", self._SPACE) if self.escape_whitespaces else piece
                out += written
                if origins is not None:
                    origins += [pos] * len(written)
                previous_space = piece.endswith(b" ")
            pos += used
            if not self.remove_extra_whitespaces:
                previous_space = False
        if self.remove_extra_whitespaces:
            while out.endswith(space):
                kept = len(out) - len(space)
                del out[kept:]
                if origins is not None:
                    # the end moves back to where the first of the dropped spaces came from
                    pos = origins[kept]
                    del origins[kept:]
        if self.add_dummy_prefix and self.treat_whitespace_as_suffix:
            out += space
            if origins is not None:
                origins += [pos] * len(space)
        if origins is not None:
            origins.append(pos)
        try:
            return out.decode("utf-8")
        except UnicodeDecodeError:
            raise FormatError("normalizer SentencePiece: the charsmap produced text that is not UTF-8") from None

    def _plain(self, text: str) -> str:
        """The same steps when every character maps to itself (no charsmap, no user pieces)."""
        if self.remove_extra_whitespaces:
            text = _SPACE_RUNS.sub(" ", text.lstrip(" "))
            if not text:
                return text
        space = "\u2581" if self.escape_whitespaces else " "
        if self.escape_whitespaces:
            text = text.replace(" ", space)
        if self.add_dummy_prefix and not self.treat_whitespace_as_suffix:
            text = space + text
        if self.remove_extra_whitespaces:
            text = text.rstrip(space)
        if self.add_dummy_prefix and self.treat_whitespace_as_suffix:
            text += space
        return text

    def _prefix(self, data: bytes, pos: int) -> tuple[bytes, int]:
        """``NormalizePrefix``: the normalized text of the input's next unit and its length in bytes."""
        for length in self._user_lengths:
            # near the end the slice is shorter than asked for: its own length is what it takes
            candidate = data[pos : pos + length]
            if candidate in self._user:
                return candidate, len(candidate)
        lead = data[pos]
        size = 1 if lead < 0xC0 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
        if self._units:
            first = data[pos : pos + size]
            walk = self._walks.get(first)
            if walk is None:
                walk = self._walks[first] = self._walk(first, 0, len(first), _unit_offset(self._units[0]))
            best, value, node = walk
            if node >= 0 and pos + len(first) < len(data):
                # a key runs on past this character (a sequence such as a letter and its accent)
                more, more_value, _ = self._walk(data, pos + len(first), len(data), node)
                if more:
                    best, value = len(first) + more, more_value
            if best:
                stop = self._replacements.find(b"\0", value)
                return self._replacements[value : stop if stop >= 0 else len(self._replacements)], best
        char = data[pos : pos + size]
        if _sp_valid_utf8(data, pos) != size:
            return b"\xef\xbf\xbd", 1  # malformed: U+FFFD for one byte, as sentencepiece does
        return char, size

    def _walk(self, data: bytes, start: int, end: int, node: int) -> tuple[int, int, int]:
        """darts-clone's common-prefix search over ``data[start:end]`` from ``node``: the longest
        key's length and value, and the node reached after all of it (-1 if the walk ended).

        The library searches by the text's length, so a NUL byte is a label like any other: no
        trainer's trie has a unit it matches, but one made by hand can (an empty unit)."""
        units, count = self._units, len(self._units)
        best = value = 0
        for i in range(start, end):
            byte = data[i]
            node ^= byte
            if node >= count or units[node] & 0x800000FF != byte:
                return best, value, -1
            unit = units[node]
            node ^= _unit_offset(unit)
            if unit & 0x100:
                if node >= count or units[node] & 0x7FFFFFFF >= len(self._replacements):
                    raise FormatError("normalizer SentencePiece: a charsmap value points outside its replacements")
                best, value = i + 1 - start, units[node] & 0x7FFFFFFF
        return best, value, node


_SPACE_RUNS = re.compile(" {2,}")


def _char_indices(text: str, data: bytes) -> list[int]:
    """Per byte offset of ``data`` (``text`` in UTF-8, its end included), the index of the
    character starting there, or -1 inside one."""
    if len(data) == len(text):
        return list(range(len(text) + 1))
    out = [-1] * (len(data) + 1)
    at = 0
    for i, c in enumerate(text):
        out[at] = i
        at += len(c.encode("utf-8"))
    out[at] = len(text)
    return out


def _sp_valid_utf8(data: bytes, pos: int) -> int:
    """The length of the valid UTF-8 character at ``pos`` by sentencepiece's ``DecodeUTF8``, or 0."""
    lead = data[pos]
    if lead < 0x80:
        return 1
    size = 2 if lead & 0xE0 == 0xC0 else 3 if lead & 0xF0 == 0xE0 else 4 if lead & 0xF8 == 0xF0 else 0
    if not size or pos + size > len(data):
        return 0
    char = data[pos : pos + size]
    try:
        decoded = char.decode("utf-8")
    except UnicodeDecodeError:
        return 0
    return size if len(decoded) == 1 else 0


def _charsmap_tables(component: str, charsmap: str) -> tuple[tuple[int, ...], bytes]:
    """A base64 ``precompiled_charsmap``'s trie units and replacement bytes, bounds-checked."""
    try:
        raw = base64.b64decode(charsmap, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise FormatError(f"normalizer {component}: precompiled_charsmap is not base64 ({exc})") from None
    if len(raw) <= 4:
        raise FormatError(f"normalizer {component}: precompiled_charsmap is shorter than its 4-byte trie size")
    (trie_size,) = struct.unpack_from("<I", raw)
    unit_count = trie_size // 4
    if unit_count == 0 or trie_size >= len(raw) or 4 + 4 * unit_count > len(raw):
        raise FormatError(
            f"normalizer {component}: trie of {trie_size} bytes does not fit in a {len(raw)}-byte precompiled_charsmap"
        )
    return struct.unpack_from(f"<{unit_count}I", raw, 4), raw[4 + trie_size :]


class _Memo(dict[str, str]):
    """Results of a ``str -> str`` function, computed on first lookup."""

    def __init__(self, compute: Callable[[str], str]) -> None:
        super().__init__()
        self._compute = compute

    def __missing__(self, key: str) -> str:
        value = self[key] = self._compute(key)
        return value


def _unit_offset(unit: int) -> int:
    return (unit >> 10) << ((unit & 0x200) >> 6)


class Sequence:
    """Apply ``normalizers`` in order."""

    def __init__(self, normalizers: list[Normalizer]) -> None:
        if not isinstance(normalizers, list) or not all(callable(n) for n in normalizers):
            raise FormatError(
                f"normalizer Sequence: normalizers must be a list of normalizers, "
                f"got {normalizers!r}"
            )
        self.normalizers = normalizers

    def __call__(self, text: str) -> str:
        for normalizer in self.normalizers:
            text = normalizer(text)
        return text

    def aligned(self, text: str, spans: Spans) -> tuple[str, Spans]:
        for normalizer in self.normalizers:
            text, spans = aligned(normalizer, text, spans)
        return text, spans


def _literal_spans(text: str, literal: str) -> list[tuple[int, int]]:
    """Non-overlapping occurrences of ``literal``, left to right (``str.replace``'s)."""
    out: list[tuple[int, int]] = []
    if not literal:
        return [(i, i) for i in range(len(text) + 1)]
    at = text.find(literal)
    while at >= 0:
        out.append((at, at + len(literal)))
        at = text.find(literal, at + len(literal))
    return out


def _flag(component: str, field: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise FormatError(f"normalizer {component}: {field} must be true or false, got {value!r}")
    return value


def _text(component: str, field: str, value: Any) -> str:
    if not isinstance(value, str):
        raise FormatError(f"normalizer {component}: {field} must be a string, got {value!r}")
    return value


_TYPES: dict[str, Callable[..., Normalizer]] = {
    "NFC": NFC, "NFD": NFD, "NFKC": NFKC, "NFKD": NFKD, "Lowercase": Lowercase, "Strip": Strip,
    "StripAccents": StripAccents, "Replace": Replace, "Prepend": Prepend,
    "BertNormalizer": BertNormalizer, "Precompiled": Precompiled, "Sequence": Sequence,
    "SentencePiece": SentencePiece, "Nmt": Nmt, "ByteLevel": ByteLevel,
}


def from_config(cfg: dict[str, Any] | None) -> Normalizer | None:
    """The normalizer a ``tokenizer.json`` ``"normalizer"`` value describes (``null`` -> None)."""
    return build_component("normalizer", cfg, _TYPES, "normalizers", from_config)

