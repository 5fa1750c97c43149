"""Generate ``normalize_data.h``: the tables of the native BertNormalizer, NFC, NFKD, StripAccents,
Lowercase and Precompiled.

Run from the repository root: ``python3 src/pymtok/_native/gen_normalize.py``.

Like ``gen_unicode.py``, every table is read off the pure-Python path rather than off
``unicodedata``: ``pymtok.normalizers`` pins HF's older Unicode tables (its BertNormalizer
classes, NFD, Lowercase), and the grapheme properties are ``pymtok.ucd``'s (Unicode 17.0, HF's
``unicode-segmentation`` crate's), which the pure Precompiled cuts clusters with. Both paths then
agree on every code point by construction; ``tests/test_native.py`` checks it.
"""

from __future__ import annotations

import types
import unicodedata
from pathlib import Path

from gen_unicode import pymtok_module  # this script runs from its own folder, beside gen_unicode.py

HERE = Path(__file__).resolve().parent
BLOCK = 128

# Grapheme_Cluster_Break values, numbered as normalize.c's enum Gcb names them.
GCB = ["Other", "CR", "LF", "Control", "Extend", "ZWJ", "Regional_Indicator", "Prepend",
       "SpacingMark", "L", "V", "T", "LV", "LVT"]
INCB = ["None", "Consonant", "Extend", "Linker"]
# Property bits above the 4-bit GCB value.
FLAGS = {
    "EXTPICT": 1 << 4,
    # bits 5-6: Indic_Conjunct_Break
    "BERT_CONTROL": 1 << 7,   # dropped by clean_text
    "BERT_SPACE": 1 << 8,     # turned into " " by clean_text
    "BERT_CJK": 1 << 9,       # padded with spaces by handle_chinese_chars
    "BERT_MARK": 1 << 10,     # dropped after NFD by strip_accents
    "NFD": 1 << 11,           # has a decomposition (n_nfd)
    "LOWER": 1 << 12,         # lowercases to something else (n_lower)
    "NONSTARTER": 1 << 13,    # non-zero canonical combining class (n_ccc)
    "COMPOSES": 1 << 14,      # second character of a canonical composition (n_compose)
    "NFKD": 1 << 15,          # decomposes for NFKD otherwise than for NFD (n_nfkd)
}
INCB_SHIFT = 5


def _code_points() -> list[int]:
    return [c for c in range(0x110000) if not 0xD800 <= c < 0xE000]


def compositions(nz: types.ModuleType) -> dict[tuple[int, int], int]:
    """The pairs NFC composes, as the pure NFC does: a character's two-character canonical
    decomposition, kept when NFC puts the character back together (composition exclusions,
    singletons and characters HF's tables lack drop out). Hangul is composed by formula."""
    nfc = nz.NFC()
    pairs = {}
    for c in _code_points():
        fields = unicodedata.decomposition(chr(c)).split()
        if len(fields) == 2 and not fields[0].startswith("<"):
            a, b = (int(f, 16) for f in fields)
            if nfc(chr(a) + chr(b)) == chr(c):
                pairs[a, b] = c
    return pairs


def tables() -> tuple[list[int], dict[int, str], dict[int, str], dict[int, int], dict[int, str]]:
    """Per code point: property bits, NFD decompositions, lowercase mappings, combining classes,
    NFKD decompositions that are not the NFD ones."""
    nz = pymtok_module("normalizers")
    onig, grapheme = pymtok_module("onig"), pymtok_module("ucd").GRAPHEME_17
    cps = _code_points()
    # Surrogates stand in as NUL so that indices stay code points; they get no property.
    text = "".join(chr(c) if not 0xD800 <= c < 0xE000 else "\0" for c in range(0x110000))
    props = [0] * 0x110000

    def members(name: str) -> list[int]:
        return [c for lo, hi in onig.code_point_ranges(grapheme[name]) for c in range(lo, hi + 1)]

    for value, name in enumerate(GCB[1:], 1):
        for c in members(f"Grapheme_Cluster_Break={name}"):
            props[c] |= value
    for value, name in enumerate(INCB[1:], 1):
        for c in members(f"Indic_Conjunct_Break={name}"):
            props[c] |= value << INCB_SHIFT
    for c in members("Extended_Pictographic"):
        props[c] |= FLAGS["EXTPICT"]
    bert_sets = {
        "BERT_CONTROL": nz._BERT_CONTROL.runs, "BERT_SPACE": nz._BERT_WHITESPACE,
        "BERT_CJK": nz._CJK_IDEOGRAPH, "BERT_MARK": nz._BERT_NONSPACING_MARK.runs,
    }
    for flag, pattern in bert_sets.items():
        for m in pattern.finditer(text):
            for c in range(*m.span()):
                props[c] |= FLAGS[flag]
    nfd, lower, ccc, nfkd = {}, {}, {}, {}
    lowercase, compat = nz.Lowercase(), nz.NFKD()
    unknown = nz._HF_UNKNOWN_TO_NORMALIZATION.runs
    for c in cps:
        ch = chr(c)
        decomposed = nz._NFD(ch)
        if decomposed != ch:
            nfd[c] = decomposed
            props[c] |= FLAGS["NFD"]
        if compat(ch) != decomposed:
            nfkd[c] = compat(ch)
            props[c] |= FLAGS["NFKD"]
        lowered = lowercase(ch)
        if lowered != ch:
            lower[c] = lowered
            props[c] |= FLAGS["LOWER"]
        # Characters HF's tables do not know are starters there (the pure path cuts NFD at them)
        cls = unicodedata.combining(ch) if not unknown.fullmatch(ch) else 0
        if cls:
            ccc[c] = cls
            props[c] |= FLAGS["NONSTARTER"]
    props[0xD800:0xE000] = [0] * 0x800
    # bert_normalize's one pass maps a run of non-starters by dropping marks only
    assert not lower.keys() & ccc.keys(), "a non-starter lowercases to another character"
    for _a, b in compositions(nz):
        props[b] |= FLAGS["COMPOSES"]
    for b in [*range(0x1161, 0x1176), *range(0x11A8, 0x11C3)]:  # Hangul V and T jamo
        props[b] |= FLAGS["COMPOSES"]
    return props, nfd, lower, ccc, nfkd


def mark_ranges() -> list[tuple[int, int]]:
    """The combining marks HF's StripAccents drops, as (first, last) code point ranges."""
    nz = pymtok_module("normalizers")
    text = "".join(chr(c) if not 0xD800 <= c < 0xE000 else "\0" for c in range(0x110000))
    return [(m.start(), m.end() - 1) for m in nz._COMBINING_MARK.runs.finditer(text)]


def _two_stage(name: str, values: list[int]) -> list[str]:
    blocks: dict[tuple[int, ...], int] = {}
    index = [blocks.setdefault(tuple(values[s : s + BLOCK]), len(blocks)) for s in range(0, len(values), BLOCK)]
    lines = [f"static const uint16_t {name}_index[{len(index)}] = {{"]
    lines += ["  " + ",".join(map(str, index[i : i + 24])) + "," for i in range(0, len(index), 24)]
    lines += ["};", f"static const uint16_t {name}_blocks[{len(blocks) * BLOCK}] = {{"]
    for block in blocks:
        lines += ["  " + ",".join(map(str, block[i : i + 32])) + "," for i in range(0, BLOCK, 32)]
    lines.append("};")
    return lines


def _mapping(name: str, table: dict[int, str]) -> list[str]:
    """Sorted keys, and offsets into a pool of code points (entry i is pool[off[i]:off[i+1]])."""
    keys = sorted(table)
    offsets, pool = [0], []
    for k in keys:
        pool += [ord(ch) for ch in table[k]]
        offsets.append(len(pool))

    def array(kind: str, suffix: str, values: list[int]) -> list[str]:
        out = [f"static const {kind} {name}_{suffix}[{len(values)}] = {{"]
        out += ["  " + ",".join(map(str, values[i : i + 16])) + "," for i in range(0, len(values), 16)]
        return out + ["};"]

    return [f"#define {name.upper()}_COUNT {len(keys)}"] + array("uint32_t", "keys", keys) + \
        array("uint32_t", "offsets", offsets) + array("uint32_t", "pool", pool)


def render() -> str:
    """The text of normalize_data.h."""
    props, nfd, lower, ccc, nfkd = tables()
    pairs = compositions(pymtok_module("normalizers"))
    marks = mark_ranges()
    lines = [
        "/* Generated by gen_normalize.py from pymtok.normalizers and pymtok.ucd; do not edit. */",
        "#ifndef PYMTOK_NORMALIZE_DATA_H",
        "#define PYMTOK_NORMALIZE_DATA_H",
        "#include <stdint.h>",
        *(f"#define N_{name} 0x{bit:04X}u" for name, bit in FLAGS.items()),
        f"#define N_INCB_SHIFT {INCB_SHIFT}",
        f"#define N_BLOCK_SHIFT {BLOCK.bit_length() - 1}",
        *_two_stage("n_props", props),
        *_mapping("n_nfd", nfd),
        *_mapping("n_lower", lower),
        *_mapping("n_nfkd", nfkd),
        f"#define N_MARK_COUNT {len(marks)}",
        "/* StripAccents' marks: first, last of each range, sorted */",
        f"static const uint32_t n_mark_ranges[{2 * len(marks)}] = {{",
        *("  " + ",".join(f"{a},{b}" for a, b in marks[i : i + 8]) + "," for i in range(0, len(marks), 8)),
        "};",
        f"#define N_CCC_COUNT {len(ccc)}",
        f"static const uint32_t n_ccc_keys[{len(ccc)}] = {{",
        *("  " + ",".join(map(str, sorted(ccc)[i : i + 16])) + "," for i in range(0, len(ccc), 16)),
        "};",
        f"static const uint8_t n_ccc_values[{len(ccc)}] = {{",
        *("  " + ",".join(str(ccc[k]) for k in sorted(ccc)[i : i + 16]) + "," for i in range(0, len(ccc), 16)),
        "};",
        f"#define N_COMPOSE_COUNT {len(pairs)}",
        "/* (first << 21 | second) -> composite, sorted */",
        f"static const uint64_t n_compose_keys[{len(pairs)}] = {{",
        *("  " + ",".join(f"{a << 21 | b}u" for a, b in sorted(pairs)[i : i + 8]) + ","
          for i in range(0, len(pairs), 8)),
        "};",
        f"static const uint32_t n_compose_values[{len(pairs)}] = {{",
        *("  " + ",".join(str(pairs[k]) for k in sorted(pairs)[i : i + 16]) + ","
          for i in range(0, len(pairs), 16)),
        "};",
        "#endif",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    (HERE / "normalize_data.h").write_text(render(), encoding="ascii")


if __name__ == "__main__":
    main()
