"""The native regex engine (regex.c) against HF ``tokenizers``' Oniguruma, the oracle.

Split patterns real tokenizers ship, and the hand scanners' own, cut corpus chunks and generated
strings into the pieces HF's ``Split`` makes; on the hand scanners' patterns the engine gives
their pieces too. Patterns the engine refuses keep the tokenizer on the pure path, with HF's ids;
one it takes puts a byte-level BPE tokenizer on the native path, with HF's ids.
"""

from __future__ import annotations

import functools
import json
import os
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pymtok
from conftest import corpus_chunks, examples, fixture_path, full_tier, slow_for
from pymtok import native
from pymtok.backtracking import may_backtrack

pytestmark = pytest.mark.skipif(
    os.environ.get("PYMTOK_PURE", "") not in ("", "0"), reason="PYMTOK_PURE disables the native core"
)
tokenizers = pytest.importorskip("tokenizers")
_native: Any = pytest.importorskip("pymtok._native")

TEKKEN = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|"
    r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
BLOOM = " ?[^(\\s|[.,!?…。，、।۔،])]+"
# DeepSeek-Coder v1 / DeepSeek LLM's letters, with the three range ends as the model's file has them
# (copies that went through NFC have U+03CE, U+0390, U+038A there: reversed ranges, which
# Oniguruma rejects)
DEEPSEEK_LETTERS = (
    "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗ"
    "ὙὛὝὟ-\u1f7dᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-\u1fd3ῖ-\u1fdbῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭ"
    "Ꚁ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+"
)

# Patterns without a hand scanner that the engine takes
NEW_PATTERNS = [
    "[0-9][0-9][0-9]",  # Falcon
    BLOOM,
    TEKKEN,
    "[\r\n]", DEEPSEEK_LETTERS, "\\s?[!-/:-~！-／：-～‘-‟　-。]+", "\\s+$", "[一-龥ࠀ-一가-퟿]+",  # DeepSeek-Coder
    r"\p{N}{1,3}", r"\d+", r" ?\p{L}+", r"\w+|[^\w\s]+", r"\p{N}+", r"\s?\p{P}+",
    # the constructs one by one: anchors, lookaheads, folding, intervals, POSIX brackets, escapes
    r"^\s+|\s+$", r"\A\s|\s\z|\n\Z|.\Z", r"\n^.|a$", r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|(?i:k)\w*|(?i:hello|world)",
    r"(?:ab|a)(?:c|bc)|(?:ab)+c|(?:a\d){2,3}|(?=\p{Lu})\p{L}{2,4}|(?!\d)\w+|x\p{L}{,2}",
    r"[[:alpha:]]+|[[:punct:]]|[[:^space:]][[:digit:]]?",
    r"\h+|\H|[\x41-\x{5A}\u00e0-\u00ff]+|\t|\x0b|\x{1F600}|\a|\e|\v|\f|\x412|[\a\e]",
    r"[\w-]+|[^\w\s]{2,}|.", r"\'|\`|]|}|[a-]|[-b]|[\]]|[\[]+|\/|a\ b|#", r"\p{Lu}\p{Ll}*|\P{L}",
    r"[\p{Zs}\p{Cc}\p{Cf}]+|[\p{Sm}\p{Sc}\p{Sk}\p{So}]|\p{Letter}{1,2}",
    # llama.cpp's bailingmoe: an ASCII class under (?i), possessive quantifiers
    r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+",
    r"(?i:[a-z]+)|(?i:[^s0-9])|(?i:[K-M]x)|a?+a|\d*+1|[ab]++b|.",
    # a long alternation, as of many literals
    "|".join(f"<w{i}>|the{i}" for i in range(600)) + r"|<w\d*|the|\w+|\s+|[^\w\s]",
]
PATTERNS = NEW_PATTERNS + list(native.SCANNERS)

# Patterns the engine refuses, and why: each keeps its tokenizer on the pure path
REFUSED = [
    r"\s*",                                   # matches the empty string
    r"\p{L}+|(?:\s\d?)*x",                    # a repeat of what matches the empty string
    r"(?:a|ab)+c|\s+|[^\sa-c]+",              # may backtrack catastrophically (pymtok.backtracking)
    r"\p{Greek}+|\p{L}+|\s+|[^\s\p{L}]+",     # a property that is no general category
    r"(?<=\s)\p{L}+|\p{L}+|\s+|[^\s\p{L}]+",  # lookbehind
    r"\p{L}+?|\s+|[^\s\p{L}]+",               # a lazy quantifier
    r"(?i:é)|\p{L}+|\s+|[^\s\p{L}]+",         # folding beyond ASCII
    r"(?i:ß)|\p{L}+", r"(?i:ss)|\p{L}+", r"(?i:s(?:t))", r"(?i:s)+",  # full case folding may apply
    r"(?i:[\w])", r"(?:ab)?+c", r"a{1,2}+",  # a class escape under (?i), possessive groups, repeats of repeats
    r"[\p{L}&&[^a-z]]+|\s+", r"[a[^b]]+", r"\bx", r"\p{L}+|[]a]", r"x{",  # intersections, ...
    r"\xe9",                                 # a byte beyond ASCII: Oniguruma fails on it
]

# Characters that stress the classes: ASCII, Latin-1 (whose digits and fractions Oniguruma's \w
# takes), CJK, marks, digits of other scripts, odd spaces and line ends, the characters that
# fold onto ASCII letters, ligatures that fold to several.
STRESS = (
    " \t\n\r\x0b\x0c\x1c\x85\xa0\u1680\u2000\u2028\u2029\u202f\u3000\u200b\u200c\u200d\ufeff"
    "aAbzZsSkKlLtTfFiIeE'’`\"!?.,;:-_/\\|~^$+<=>@#%&*()[]{}0123456789"
    "ſ\u212aßẞﬁﬆİı\u01c5\u02b0ªµºÀÖ×Øöø÷ÿ\u00b2\u00b3\u00b9\u00bc\u00bd\u00be"
    "\u0301\u0308\u093f\u0e31\u20dd٣४৫๓①Ⅻ"
    "日本語ひらがなカタカナー한국어中文龥ࠀ。，、।۔،…！／：～‘‟"
    "ΑαΩωὝ\u1f7dПривет😀👍🏽\U0001e900\U00010400\ue000\u0378\U0010ffff"
)
text_strategy = st.one_of(
    st.text(alphabet=st.sampled_from(STRESS), max_size=40),
    st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=30),
)
HYPOTHESIS = settings(max_examples=examples(100, 25), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@functools.cache
def texts() -> list[str]:
    return corpus_chunks(200, seed=23) + [STRESS, STRESS[::-1], "a\n", "\n", "x\n\n", " ", "ab c\r\n d  ",
                                           "<w1><w59>the599 <w600> the42x<w"]


@functools.cache
def oracle(pattern: str, behavior: str = "isolated", invert: bool = False) -> Any:
    return tokenizers.pre_tokenizers.Split(tokenizers.Regex(pattern), behavior=behavior, invert=invert)


def hf_spans(pattern: str, text: str, behavior: str = "isolated", invert: bool = False) -> list[tuple[int, int]]:
    return [span for _, span in oracle(pattern, behavior, invert).pre_tokenize_str(text)]


def engine_spans(pattern: str, text: str, behavior: str = "Isolated", invert: bool = False) -> list[tuple[int, int]]:
    return _native.pretokenize((("split", "regex", behavior, invert, pattern),), text)


def scanner_spans(scanner: str, text: str) -> list[tuple[int, int]]:
    return _native.pretokenize((("split", scanner, "Isolated", False),), text)


# HF's behavior names, pymtok's
BEHAVIORS = {"isolated": "Isolated", "removed": "Removed", "merged_with_previous": "MergedWithPrevious",
             "merged_with_next": "MergedWithNext", "contiguous": "Contiguous"}


def first_difference(pattern: str, candidates: list[str], behavior: str = "isolated",
                     invert: bool = False) -> str | None:
    return next((t for t in candidates if engine_spans(pattern, t, BEHAVIORS[behavior], invert)
                 != hf_spans(pattern, t, behavior, invert)), None)


def test_the_engine_takes_every_pattern_here() -> None:
    assert [p for p in PATTERNS if _native.regex_refusal(p) is not None or may_backtrack(p)] == []


@pytest.mark.parametrize("pattern", PATTERNS)
def test_pieces_match_hf(pattern: str) -> None:
    assert first_difference(pattern, texts()) is None


@pytest.mark.parametrize("pattern", PATTERNS)
@HYPOTHESIS
@given(text=text_strategy)
def test_pieces_match_hf_hypothesis(pattern: str, text: str) -> None:
    assert engine_spans(pattern, text) == hf_spans(pattern, text)


@pytest.mark.parametrize("pattern", [TEKKEN, BLOOM, r"\p{N}{1,3}", r"\s+$"])
@pytest.mark.parametrize("behavior", list(BEHAVIORS))
@pytest.mark.parametrize("invert", [False, True])
def test_every_behavior_matches_hf(pattern: str, behavior: str, invert: bool) -> None:
    assert first_difference(pattern, texts()[:40], behavior, invert) is None


# Every code point up to the last one assigned, plus the private-use planes' edges
EVERY_CHAR = "".join(
    chr(c) for c in [*range(0x33480), 0xE0001, 0xE0100, 0xF0000, 0x10FFFD, 0x10FFFF] if not 0xD800 <= c <= 0xDFFF
)


# the general categories one by one in the full tier: the groups cover them in the fast one
CLASS_PATTERNS = slow_for([
    r"\w", r"[\w]", r"[^\w]", r"\W", r"[\W]", r"\d", r"[^\d]", r"\s", r"[\S]", r"\h", r"\H", ".",
    r"[[:alpha:]]", r"[[:alnum:]]", r"[[:punct:]]", r"[[:space:]]", r"[[:upper:]]", r"[[:lower:]]",
    r"[[:xdigit:]]", r"[[:word:]]", r"[[:digit:]]", r"[[:ascii:]]", r"[[:^alpha:]]",
    r"\p{L}", r"\p{Lu}", r"\p{Ll}", r"\p{Lt}", r"\p{Lm}", r"\p{Lo}", r"\p{LC}", r"\p{M}", r"\p{Mn}", r"\p{Mc}",
    r"\p{Me}", r"\p{N}", r"\p{Nd}", r"\p{Nl}", r"\p{No}", r"\p{P}", r"\p{Pc}", r"\p{Pd}", r"\p{Ps}", r"\p{Pe}",
    r"\p{Pi}", r"\p{Pf}", r"\p{Po}", r"\p{S}", r"\p{Sm}", r"\p{Sc}", r"\p{Sk}", r"\p{So}", r"\p{Z}", r"\p{Zs}",
    r"\p{Zl}", r"\p{Zp}", r"\p{C}", r"\p{Cc}", r"\p{Cf}", r"\p{Co}", r"\p{Cn}", r"\P{L}", r"\p{^N}",
    r"\p{Uppercase_Letter}", r"\p{ lu }", r"(?i:k)", r"(?i:s)", r"(?i:i)",
], *[rf"\p{{{gc}}}" for gc in ("Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nl", "No", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf",
                              "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Co")])


@pytest.mark.parametrize("pattern", CLASS_PATTERNS)
def test_classes_match_oniguruma_on_every_code_point(pattern: str) -> None:
    """Oniguruma's \\w alone takes U+00B2 U+00B3 U+00B9 U+00BC-U+00BE, inside brackets not."""
    assert engine_spans(pattern, EVERY_CHAR, "Removed", True) == hf_spans(pattern, EVERY_CHAR, "removed", True)


@pytest.mark.parametrize("pattern", list(native.SCANNERS))
def test_engine_gives_the_hand_scanners_pieces(pattern: str) -> None:
    scanner = native.SCANNERS[pattern]
    for text in texts():
        assert engine_spans(pattern, text) == scanner_spans(scanner, text), (scanner, text[:200])


@pytest.mark.parametrize("pattern", list(native.SCANNERS))
@HYPOTHESIS
@given(text=text_strategy)
def test_engine_gives_the_hand_scanners_pieces_hypothesis(pattern: str, text: str) -> None:
    assert engine_spans(pattern, text) == scanner_spans(native.SCANNERS[pattern], text)


@functools.cache
def roberta_config() -> str:
    return fixture_path("tokenizers", "roberta-base", "tokenizer.json").read_text(encoding="utf-8")


def with_split(pattern: str) -> tuple[pymtok.Tokenizer, Any]:
    """RoBERTa's byte-level BPE behind a Split on ``pattern`` (then ByteLevel without its own
    regex, as Llama 3 has it): pymtok's and HF's."""
    config = json.loads(roberta_config())
    config["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
    ]}
    return pymtok.Tokenizer.from_config(config), tokenizers.Tokenizer.from_str(json.dumps(config))


def assert_same_ids(ours: pymtok.Tokenizer, hf: Any, chunks: list[str]) -> None:
    for text in chunks:
        assert ours.encode(text, add_special_tokens=False) == hf.encode(text, add_special_tokens=False).ids, text[:200]


@pytest.mark.parametrize("pattern", REFUSED)
def test_refused_patterns_stay_on_the_pure_path(pattern: str) -> None:
    assert may_backtrack(pattern) or _native.regex_refusal(pattern) is not None
    assert not native.engine_takes(pattern)


@pytest.mark.parametrize("pattern", [REFUSED[1], REFUSED[2], REFUSED[3], REFUSED[4], REFUSED[6]])
def test_refused_patterns_keep_hf_ids(pattern: str) -> None:
    ours, hf = with_split(pattern)
    assert ours._native_text is None
    assert_same_ids(ours, hf, corpus_chunks(40, seed=29)[::4])


@pytest.mark.parametrize("pattern", [TEKKEN, BLOOM, DEEPSEEK_LETTERS])
def test_tokenizer_with_a_new_pattern_is_native_with_hf_ids(pattern: str) -> None:
    ours, hf = with_split(pattern)
    assert ours._native_text is not None
    steps = native._steps(ours.pre_tokenizer, ours.config["pre_tokenizer"])
    assert steps is not None and steps[0] == ("split", "regex", "Isolated", False, pattern)
    assert_same_ids(ours, hf, corpus_chunks(160, seed=31))
    offsets = ours("Hello wörld 12345 日本語\r\n  x", add_special_tokens=False, return_offsets_mapping=True)
    theirs = hf.encode("Hello wörld 12345 日本語\r\n  x", add_special_tokens=False)
    assert offsets["input_ids"] == theirs.ids
    assert [tuple(o) for o in offsets["offset_mapping"]] == theirs.offsets


class RandomPatterns:
    """Patterns drawn from the constructs the engine takes, nested two deep."""

    ATOMS = ["a", "b", " ", r"\n", ".", "[ab]", r"[^a\s]", r"\p{L}", r"\d", r"\w", r"\s", r"\S", "[[:alpha:]]",
             "(?i:ab)", "(?i:k)", "A", "1", r"\p{Lu}", r"[\w-]", r"\h", "é", "(?i:[a-c])", "(?i:[^k])", "(?i:s)"]
    ANCHORS = ["^", "$", r"\z", r"\Z", r"\A"]
    QUANTIFIERS = ["", "", "", "?", "*", "+", "{1,2}", "{2}", "{0,3}", "{2,}", "?+", "*+", "++"]

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def atom(self, depth: int) -> str:
        r = self.rng.random()
        if depth and r < 0.15:
            group = "|".join(self.sequence(depth - 1) for _ in range(self.rng.randint(1, 3)))
            return f"(?:{group})" + self.rng.choice(self.QUANTIFIERS)
        if depth and r < 0.22:
            return self.rng.choice(["(?=", "(?!"]) + self.sequence(depth - 1) + ")"
        if r < 0.28:
            return self.rng.choice(self.ANCHORS)
        return self.rng.choice(self.ATOMS) + self.rng.choice(self.QUANTIFIERS)

    def sequence(self, depth: int) -> str:
        return "".join(self.atom(depth) for _ in range(self.rng.randint(1, 3)))

    def pattern(self) -> str:
        return "|".join(self.sequence(2) for _ in range(self.rng.randint(1, 3)))


def test_random_patterns_match_hf() -> None:
    """Random patterns the engine takes (and HF compiles) on random strings of the characters
    they tell apart."""
    draw = RandomPatterns(37)
    rng = random.Random(41)
    alphabet = "ab \n\tA1ſK½é日Bk-sSßﬁ\u212a"
    checked = 0
    while checked < (1500 if full_tier() else 150):
        pattern = draw.pattern()
        if may_backtrack(pattern) or _native.regex_refusal(pattern) is not None:
            continue
        checked += 1
        for _ in range(20):
            text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
            assert engine_spans(pattern, text) == hf_spans(pattern, text), (pattern, text)


@pytest.mark.parametrize("name", ["L\x00", "L\x00G", "N\x00\x00", "L|x", "L1", "Lé"])
def test_property_names_with_other_characters_name_nothing(name: str) -> None:
    # a NUL ended the name where the engine looked it up ("L\0G" was "l"): it took a pattern
    # Oniguruma refuses (fuzz/mtok_fuzz.py found it in a .mtok's pattern, the pure reader refusing)
    pattern = "\\p{" + name + "}+"
    with pytest.raises(Exception):
        tokenizers.Regex(pattern)
    assert _native.regex_refusal(pattern) is not None
    assert not native.engine_takes(pattern)


def test_compile_errors_are_value_errors() -> None:
    with pytest.raises(ValueError, match="refuses"):
        _native.pretokenize((("split", "regex", "Isolated", False, r"\p{Greek}"),), "x")
    with pytest.raises(ValueError):
        _native.pretokenize((("split", "regex", "Isolated", False),), "x")
    with pytest.raises(ValueError):
        _native.pretokenize((("split", "gpt2", "Isolated", False, "x"),), "x")


def test_long_texts_and_deep_backtracking() -> None:
    """Long pieces; a repeated group that pushes a frame per repeat (and, failing, retries from
    every start: quadratic, so a few thousand characters)."""
    long = roberta_config()[:200_000]
    for pattern, text in [(TEKKEN, long), (TEKKEN, "x" * 300_000), (r"\s+(?!\S)|\S+", " " * 300_000 + "x"),
                          (r"(?:ab)+c|\s+$", "ab" * 3000 + "c"), (r"(?:ab)+c|\s+$", "ab" * 3000 + " ")]:
        assert engine_spans(pattern, text) == hf_spans(pattern, text), (pattern, text[:50])
