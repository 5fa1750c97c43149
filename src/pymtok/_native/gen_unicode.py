"""Generate ``unicode_data.h``: the character classes the native scanners test.

Run from the repository root: ``python3 src/pymtok/_native/gen_unicode.py``.

The classes are taken from the pure-Python pre-tokenizers (``pymtok.pre_tokenizers``), not from
``unicodedata``: those patterns are pinned to the Unicode version HF's Oniguruma and Rust use
(16.0), while Python's ``unicodedata`` follows the interpreter's (14.0 on 3.11). Deriving the
table from the very predicates of the pure path makes both paths agree by construction.
"""

from __future__ import annotations

import importlib
import re
import sys
import types
from pathlib import Path

import regex

HERE = Path(__file__).resolve().parent
PACKAGE = HERE.parent

# One bit per class, in the order the C header names them.
CLASSES = [
    ("L", r"\p{L}"), ("LU", r"\p{Lu}"), ("LL", r"\p{Ll}"), ("LT", r"\p{Lt}"), ("LM", r"\p{Lm}"),
    ("LO", r"\p{Lo}"), ("M", r"\p{M}"), ("N", r"\p{N}"), ("P", r"\p{P}"), ("S", r"\p{S}"),
    ("WS", r"\s"),
]
# The classes only the regex engine (regex.c) tests, after the others: Oniguruma's \w and the
# POSIX brackets it takes, each as the pure path spells it.
ENGINE_CLASSES = [
    ("ONIG_WORD", r"\w"), ("ALPHA", "[[:alpha:]]"), ("ALNUM", "[[:alnum:]]"), ("PUNCT", "[[:punct:]]"),
    ("SPACE", "[[:space:]]"), ("UPPER", "[[:upper:]]"), ("LOWER", "[[:lower:]]"), ("XDIGIT", "[[:xdigit:]]"),
    ("POSIX_WORD", "[[:word:]]"),
]
# Each code point's general category (as the pure path's \p{..} has it) in the top bits of its
# word, as an index: unassigned (Cn, and code points beyond the table) 0, then these in order.
CATEGORIES = [
    "Cc", "Cf", "Co", "Cs", "Ll", "Lm", "Lo", "Lt", "Lu", "Mc", "Me", "Mn", "Nd", "Nl", "No", "Pc",
    "Pd", "Pe", "Pf", "Pi", "Po", "Ps", "Sc", "Sk", "Sm", "So", "Zl", "Zp", "Zs",
]
GC_SHIFT = 27
BLOCK = 128


def pymtok_module(name: str) -> types.ModuleType:
    """``pymtok.<name>`` from the source tree, without running pymtok/__init__ (which needs the
    built extension this generator is an input to)."""
    if "pymtok" not in sys.modules:
        pkg = types.ModuleType("pymtok")
        pkg.__path__ = [str(PACKAGE)]
        sys.modules["pymtok"] = pkg
    return importlib.import_module(f"pymtok.{name}")


def class_bits() -> list[int]:
    pt = pymtok_module("pre_tokenizers")
    # Surrogates cannot occur in encodable text; they are given no class.
    text = "".join(chr(c) if not 0xD800 <= c < 0xE000 else "\0" for c in range(0x110000))
    bits = [0] * 0x110000
    predicates = [
        (name, lambda t, c=pt.onig_regex(pattern): [m.span() for m in c.finditer(t)])
        for name, pattern in CLASSES
    ]
    # HF's BertPreTokenizer / WhitespaceSplit use Rust's char predicates, which the pure path
    # spells as its own code point lists.
    predicates.append(("BERT_PUNCT", pt._PUNCTUATION))
    rust_ws = re.compile(pt.hex_class(pt._WHITESPACE_RANGES))
    predicates.append(("RUST_WS", lambda t: [m.span() for m in rust_ws.finditer(t)]))
    # Digits: Rust's char::is_numeric (Unicode 17.0); Whitespace: the Rust regex crate's \w
    # (Unicode 16.0), as the pure path spells them.
    numeric = regex.compile(pt.unicode_17_set(r"\p{N}"), pt.FLAGS)
    predicates.append(("NUMERIC", lambda t: [m.span() for m in numeric.finditer(t)]))
    word = regex.compile(pt.unicode_16_set(r"[\w]"), pt.FLAGS)
    predicates.append(("WORD", lambda t: [m.span() for m in word.finditer(t)]))
    predicates += [
        (name, lambda t, c=pt.onig_regex(pattern): [m.span() for m in c.finditer(t)])
        for name, pattern in ENGINE_CLASSES
    ]
    assert len(predicates) <= GC_SHIFT
    for bit, (_name, spans) in enumerate(predicates):
        for start, end in spans(text):
            for c in range(start, end):
                if not 0xD800 <= c < 0xE000:
                    bits[c] |= 1 << bit
    for index, name in enumerate(CATEGORIES, 1):
        members = pt.onig_regex(rf"\p{{{name}}}")
        for start, end in ([(0xD800, 0xE000)] if name == "Cs" else [m.span() for m in members.finditer(text)]):
            for c in range(start, end):
                if name != "Cs" and 0xD800 <= c < 0xE000:
                    continue
                assert bits[c] >> GC_SHIFT == 0, f"U+{c:04X} in two categories"
                bits[c] |= index << GC_SHIFT
    return bits


def script_classes() -> list[int]:
    """Each code point's UnicodeScripts class (pymtok.ucd_scripts, HF's own table): k + 1 for
    class k, 0 for "Any"."""
    scripts = pymtok_module("ucd_scripts")
    onig = pymtok_module("onig")
    classes = [0] * 0x110000
    for k, ranges in enumerate(scripts.SCRIPT_CLASSES):
        for lo, hi in onig.code_point_ranges(ranges):
            classes[lo : hi + 1] = [k + 1] * (hi - lo + 1)
    assert len(scripts.SCRIPT_CLASSES) < 256
    return classes


def compressed(values: list[int]) -> tuple[list[int], list[tuple[int, ...]]]:
    """values in blocks of BLOCK code points, each distinct block stored once, in order of first
    use (pretok.c reads ASCII straight from the first)."""
    blocks: dict[tuple[int, ...], int] = {}
    index: list[int] = []
    for start in range(0, 0x110000, BLOCK):
        block = tuple(values[start : start + BLOCK])
        index.append(blocks.setdefault(block, len(blocks)))
    assert index[0] == 0
    return index, list(blocks)


def table(lines: list[str], ctype: str, name: str, values: list[int], width: int) -> None:
    lines.append(f"static const {ctype} {name}[{len(values)}] = {{")
    for i in range(0, len(values), width):
        lines.append("  " + ",".join(str(x) for x in values[i : i + width]) + ",")
    lines.append("};")


def render() -> str:
    """The text of unicode_data.h."""
    bits = class_bits()
    names = [n for n, _ in CLASSES] + ["BERT_PUNCT", "RUST_WS", "NUMERIC", "WORD"] + [n for n, _ in ENGINE_CLASSES]
    index, blocks = compressed(bits)
    script_index, script_blocks = compressed(script_classes())
    lines = [
        "/* Generated by gen_unicode.py from pymtok.pre_tokenizers; do not edit. */",
        "#ifndef PYMTOK_UNICODE_DATA_H",
        "#define PYMTOK_UNICODE_DATA_H",
        "#include <stdint.h>",
    ]
    lines += [f"#define U_{name} 0x{1 << i:08X}u" for i, name in enumerate(names)]
    lines.append(f"#define U_GC_SHIFT {GC_SHIFT}")
    lines += [f"#define U_GC_{name} {i}" for i, name in enumerate(["Cn"] + CATEGORIES)]
    lines.append(f"#define U_BLOCK_SHIFT {BLOCK.bit_length() - 1}")
    # regex.c takes the names only, and reads the classes through pretok.c
    lines.append("#ifndef U_NAMES_ONLY")
    table(lines, "uint16_t", "u_block_index", index, 24)
    table(lines, "uint32_t", "u_blocks", [x for block in blocks for x in block], 32)
    # UnicodeScripts' classes, the same way
    table(lines, "uint16_t", "u_script_index", script_index, 24)
    table(lines, "uint8_t", "u_script_blocks", [x for block in script_blocks for x in block], 32)
    lines.append("#endif")
    lines.append("#endif")
    return "\n".join(lines) + "\n"


def main() -> None:
    (HERE / "unicode_data.h").write_text(render(), encoding="ascii")


if __name__ == "__main__":
    main()
