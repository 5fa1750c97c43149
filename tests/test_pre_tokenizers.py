"""Pre-tokenizers against HF ``tokenizers`` (the oracle): real configs, every option, hypothesis."""

from __future__ import annotations

import functools
import json

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import AddedToken, Regex
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import models as hf_models
from tokenizers import normalizers as hf_norm
from tokenizers import pre_tokenizers as hf

import pymtok
from conftest import TOKENIZER_NAMES, corpus_chunks, examples, fixture_path, golden_cases, hf_tokenizer
from pymtok import pre_tokenizers as pt
from pymtok.errors import FormatError
from pymtok.export import export

# Characters where Oniguruma, Rust and Python disagree most easily: odd whitespace, separators,
# marks, numerals of many scripts, letters changed or added in recent Unicode versions.
TRICKY = (
    " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2028\u2029\u202f\u205f\u3000"
    "\u200b\u200c\u200d\ufeff\u00ad'’`\"!?.,;:-_/\\|~^$+<=>@#%&*()[]{}"
    "aZßẞſKİı\u0295\u01c5\u02b0\u00aa\u00b2\u00b3\u00b9\u00bc\u00bd\u2160\u216b\u2460"
    "0١٢۳߄४৫੬૭୮௯౦೧൨๓໔༥၆៧᠘᥆᧐٫٬"
    "\u0301\u0308\u0336\u093f\u0e31\u20dd\u0640"
    "日本語ひらがなカタカナーｱｲ한국어中文龥"
    "Привет Γειά עברית العربية हिन्दी ไทย"
    "😀👍🏽🇯🇵👨‍👩‍👧\ufe0f\u2764"
    "\U00016ea0\U00011de0\u088f\u20c1\U000323b0\U0001e6e3"
    "\U0010ffff\ue000\u0378"
)

text_strategy = st.one_of(
    st.text(alphabet=st.sampled_from(TRICKY), max_size=40),
    st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=40),
    st.text(alphabet=st.sampled_from(TRICKY + "abcde 0123 xyz\n"), max_size=60),
)
HYPOTHESIS = settings(max_examples=examples(80), deadline=None,
                      suppress_health_check=[HealthCheck.too_slow])



# Drawn when a test first needs them: without fixtures, collection must not touch the corpus.
@functools.cache
def samples() -> list[str]:
    return corpus_chunks(300, seed=7)


@functools.cache
def few() -> list[str]:
    return corpus_chunks(60, seed=11) + [TRICKY, TRICKY[::-1], "", " ", "  a  b  ", "a\n\n b\r\n"]


def hf_pieces(pre, text: str) -> list[str]:
    return [piece for piece, _ in pre.pre_tokenize_str(text)]


def our_pieces(pre, text: str) -> list[str]:
    return [piece for piece, _ in pre([(text, 0)])]


def assert_same(ours, oracle, texts) -> None:
    for text in texts:
        assert our_pieces(ours, text) == hf_pieces(oracle, text), repr(text)


@functools.lru_cache(maxsize=None)
def load_config(name: str):
    data = json.loads(fixture_path("tokenizers", name, "tokenizer.json").read_text("utf-8"))
    return data.get("pre_tokenizer")


@functools.lru_cache(maxsize=None)
def ours_for(name: str):
    return pt.from_config(load_config(name))


# ---- real configs ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_fixture_pre_tokenizer_matches_hf(name: str) -> None:
    cfg = load_config(name)
    ours = pt.from_config(cfg)
    if cfg is None:
        assert ours is None
        return
    oracle = hf_tokenizer(name).pre_tokenizer
    texts = samples() + [text for text, _ in golden_cases(name)] + [TRICKY]
    mismatches = [t for t in texts if our_pieces(ours, t) != hf_pieces(oracle, t)]
    assert not mismatches, f"{len(mismatches)}/{len(texts)} differ, first {mismatches[0]!r}"


@pytest.mark.parametrize("name", [n for n in TOKENIZER_NAMES if n not in
                                  ("gemma-v1", "mistral-7b-v0.1", "phi-3-mini")])
@HYPOTHESIS
@given(text=text_strategy)
def test_fixture_pre_tokenizer_hypothesis(name: str, text: str) -> None:
    assert our_pieces(ours_for(name), text) == hf_pieces(hf_tokenizer(name).pre_tokenizer, text)


# ---- Oniguruma pattern translation ----------------------------------------------------------

# Every code point up to the last one assigned (Unicode 17), plus the private-use planes' edges.
EVERY_CHAR = "".join(
    chr(c) for c in [*range(0x33480), 0xE0001, 0xE0100, 0xF0000, 0x10FFFD, 0x10FFFF]
    if not 0xD800 <= c <= 0xDFFF
)


@pytest.mark.parametrize("pattern", [
    r"\s", r"\d", r"\w", r"\p{L}", r"\p{N}", r"\p{Lu}", r"\p{Ll}", r"\p{Lo}", r"\p{M}",
    r"[\p{P}\p{S}[:^alnum:]]", r"\b.",
    # in brackets \w is Unicode's Word: "²" and "½" are \w alone, not [\w]
    r"[\w]", r"[\W]", r"[^\w\s]", r"[^\W]",
    # \p{Word} is \w (not the regex module's, which takes the joiners), \p{XDigit} ASCII
    r"\p{Word}", r"[\p{Word}]", r"\P{Word}", r"[^\p{ word }]", r"\p{XDigit}", r"[\P{XDigit}]", r"\N",
])
def test_character_classes_match_oniguruma_everywhere(pattern: str) -> None:
    oracle = hf.Split(Regex(pattern), behavior="removed", invert=True)
    expected = set("".join(hf_pieces(oracle, EVERY_CHAR)))
    got = set("".join(m.group() for m in pt.onig_regex(pattern).finditer(EVERY_CHAR)))
    assert sorted(got ^ expected)[:10] == []


PATTERNS = [
    r"\s+", r"\p{N}{1,3}", r"(?i:'s|'t|'re|'ve|'m|'ll|'d)", r"(?i:k|s)", r"[a-c&&b-d]+",
    r"^\w+|\w+$", r"\bx", r"x*", r"(?=a)", r"\s*", r"a|", r"(?m:.)+", r"\Z", r"[|~-]+",
    r"\x{41}+", r"[\-.]", r"(?<=\s)\S",
    # full case folding: "ss" matches U+00DF, "st" U+FB06, in a group of one branch too
    r"(?i:ß)", r"(?i:st)|x", r"a(?:(?i)ss)", r"(?i)ﬀ|(?i:ǆ)",
    r"\cJ|\e|\a|[\ca-\cz]|\O",  # control escapes; \O is any character
]
BEHAVIORS = ["Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"]
HF_BEHAVIOR = {"Removed": "removed", "Isolated": "isolated",
               "MergedWithPrevious": "merged_with_previous", "MergedWithNext": "merged_with_next",
               "Contiguous": "contiguous"}


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("behavior", BEHAVIORS)
@pytest.mark.parametrize("invert", [False, True])
def test_split_regex_every_behavior(pattern: str, behavior: str, invert: bool) -> None:
    ours = pt.Split(pattern={"Regex": pattern}, behavior=behavior, invert=invert)
    oracle = hf.Split(Regex(pattern), behavior=HF_BEHAVIOR[behavior], invert=invert)
    texts = few()[:25] + ["xxaxx", "ab\nab\n", "aa", "Straße STRASSE ﬆ ẞ ſs aSS ﬀ FF Ǆ", "a b\u00a0c\u3000d"]
    assert_same(ours, oracle, texts)


@pytest.mark.parametrize("pattern", [r"\p{L&}", r"[\P{sc=Latn}]", r"\p{Script=Latin}", r"\p{gc:L}",
                                     # names with characters no Oniguruma name has (the regex module
                                     # took some, matching nothing)
                                     "\\p{L\x00G}+", r"\p{L|x}", "\\p{L\tu}", r"[\p{Lé}]"])
def test_property_forms_oniguruma_refuses_are_refused(pattern: str) -> None:
    with pytest.raises(Exception):
        hf.Split(Regex(pattern), behavior="isolated")
    with pytest.raises(FormatError, match="no Oniguruma property"):
        pt.Split(pattern={"Regex": pattern}, behavior="Isolated", invert=False)


LETTER_ESCAPES = [f"\\{k}" for k in "gijklmoqEFIJLQTUV"] + [f"[\\{k}]" for k in "gijklmoqyzABEFGIJKLNOPQRTUVXYZ89"]


@pytest.mark.parametrize("pattern", [*LETTER_ESCAPES, r"\pL", r"\PL+", r"[\pN]", r"a\p|b", r"\pLu", r"\m+"])
def test_escapes_oniguruma_takes_for_the_letter(pattern: str) -> None:
    # \pL is no property in Ruby's syntax, \m no word start (the regex module's meanings)
    ours = pt.Split(pattern={"Regex": pattern}, behavior="Isolated", invert=False)
    text = " ".join("gijklmoqyzABEFGIJKLMNOPQRTUVXYZ89") + " pL pLu pN pmm Lp 12 é"
    assert_same(ours, hf.Split(Regex(pattern), behavior="isolated"), [text])


@pytest.mark.parametrize("pattern", [r"\M", r"[\C]", r"(?<n>a)\k<n>", r"(a)\k'1'", r"(?<n>a)\g<n>"])
def test_escapes_refused(pattern: str) -> None:
    # \M and \C as HF refuses them; named backreferences and calls, which HF takes, loudly
    with pytest.raises(FormatError):
        pt.Split(pattern={"Regex": pattern}, behavior="Isolated", invert=False)


RUBY_QUANTIFIERS = [
    # after an interval, ? and + are a second quantifier (x{2}? is (?:x{2})?), not lazy or
    # possessive as in Perl; a reversed interval is possessive; quantifiers of quantifiers nest
    r"a{2}?", r"a{2}+", r"a{,2}+", r"a{2,}+", r"\p{N}{1,3}+", r"(ab){2}+", r"a{1}{2}?", r"a{2,1}",
    r"a{3,1}", r"a{2,1}?", r"a{2}{3}", r"a**", r"a+*", r"a{2}*", r"a*{2}", r"a??*", r"a*?+",
    r"a{1,2}{2}", r"(?:ab){1,2}?", r"a{2,}?", r"a{,2}?", r"a?+", r"a++", r"a{0}", r"a{01}",
    # braces that are no interval are themselves
    r"a{,}", r"x{,}", r"x{", r"a{ 2}", r"a{2}{", r"^{", r"}a", r"(^)*", r"a{100000}",
]
ORACLE_REFUSES = [r"\b+", r"^*", r"$?", r"\K*", r"\A{2}", r"(?=a)*", r"(?<!a){2}", r"*a", r"a|*b",
                  r"(?i)*", r"a(?i)+", r"a{100001}", r"a{1,100001}"]


@pytest.mark.parametrize("pattern", RUBY_QUANTIFIERS)
def test_quantifiers_read_as_ruby_syntax(pattern: str) -> None:
    ours = pt.Split(pattern={"Regex": pattern}, behavior="Isolated", invert=False)
    text = "aaaa b aaaaaaa c a {,} a{,} a{ 2} x{ ab abab ababab 12345 a{2}{"
    assert_same(ours, hf.Split(Regex(pattern), behavior="isolated"), [text, "", "aaaaa"])


@pytest.mark.parametrize("pattern", ORACLE_REFUSES)
def test_quantifiers_oniguruma_refuses_are_refused(pattern: str) -> None:
    with pytest.raises(Exception):
        hf.Split(Regex(pattern), behavior="isolated")
    with pytest.raises(FormatError):
        pt.Split(pattern={"Regex": pattern}, behavior="Isolated", invert=False)


def test_grapheme_clusters_are_refused() -> None:
    # Oniguruma's \X has no conjunct rule (Unicode 15.1's GB9c); the regex module's has
    assert hf_pieces(hf.Split(Regex(r"\X"), behavior="isolated"), "त्या") == ["त्", "या"]
    with pytest.raises(FormatError, match=r"\\X"):
        pt.Split(pattern={"Regex": r"a|\X"}, behavior="Isolated", invert=False)


@pytest.mark.parametrize("string", ["-", "ab", " ", "", ".*", "<!dummy-prefix!>"])
@pytest.mark.parametrize("behavior", BEHAVIORS)
def test_split_string_every_behavior(string: str, behavior: str) -> None:
    ours = pt.Split(pattern={"String": string}, behavior=behavior, invert=False)
    oracle = hf.Split(string, behavior=HF_BEHAVIOR[behavior], invert=False)
    assert_same(ours, oracle, few()[:20] + ["The-final--countdown", "abab.*ab", " a  b "])


@HYPOTHESIS
@given(text=text_strategy, pattern=st.sampled_from(PATTERNS), behavior=st.sampled_from(BEHAVIORS),
       invert=st.booleans())
def test_split_hypothesis(text: str, pattern: str, behavior: str, invert: bool) -> None:
    ours = pt.Split(pattern={"Regex": pattern}, behavior=behavior, invert=invert)
    oracle = hf.Split(Regex(pattern), behavior=HF_BEHAVIOR[behavior], invert=invert)
    assert our_pieces(ours, text) == hf_pieces(oracle, text)


# ---- the other components, every option ------------------------------------------------------

def component_pairs():
    pairs = [
        ("Digits", pt.Digits(individual_digits=False), hf.Digits(individual_digits=False)),
        ("Digits-individual", pt.Digits(individual_digits=True), hf.Digits(individual_digits=True)),
        ("Bert", pt.BertPreTokenizer(), hf.BertPreTokenizer()),
        ("Whitespace", pt.Whitespace(), hf.Whitespace()),
        ("WhitespaceSplit", pt.WhitespaceSplit(), hf.WhitespaceSplit()),
        ("CharDelimiterSplit", pt.CharDelimiterSplit(delimiter="a"), hf.CharDelimiterSplit("a")),
        ("CharDelimiterSplit-space", pt.CharDelimiterSplit(delimiter=" "),
         hf.CharDelimiterSplit(" ")),
        ("FixedLength-1", pt.FixedLength(length=1), hf.FixedLength(length=1)),
        ("FixedLength-5", pt.FixedLength(), hf.FixedLength()),
        ("FixedLength-7", pt.FixedLength(length=7), hf.FixedLength(length=7)),
    ]
    for behavior in BEHAVIORS:
        pairs.append((f"Punctuation-{behavior}", pt.Punctuation(behavior=behavior),
                      hf.Punctuation(HF_BEHAVIOR[behavior])))
    for prefix in (False, True):
        for use_regex in (False, True):
            pairs.append((f"ByteLevel-{prefix}-{use_regex}",
                          pt.ByteLevel(add_prefix_space=prefix, trim_offsets=True,
                                       use_regex=use_regex),
                          hf.ByteLevel(add_prefix_space=prefix, use_regex=use_regex)))
    for scheme in ("always", "first", "never"):
        for split in (False, True):
            for rep in ("\u2581", "_"):
                pairs.append((f"Metaspace-{scheme}-{split}-{rep}",
                              pt.Metaspace(replacement=rep, prepend_scheme=scheme, split=split),
                              hf.Metaspace(replacement=rep, prepend_scheme=scheme, split=split)))
    return pairs


PAIRS = component_pairs()


@pytest.mark.parametrize("label,ours,oracle", PAIRS, ids=[p[0] for p in PAIRS])
def test_component_matches_hf(label: str, ours, oracle) -> None:
    assert_same(ours, oracle, few() + ["\u2581a\u2581 b", "a1b22c333", "x__y", "ab", "b"])


@HYPOTHESIS
@given(text=text_strategy, index=st.integers(0, len(PAIRS) - 1))
def test_component_hypothesis(text: str, index: int) -> None:
    _, ours, oracle = PAIRS[index]
    assert our_pieces(ours, text) == hf_pieces(oracle, text)


def test_unicode_scripts_matches_hf() -> None:
    texts = few() + ["Hello世界ひらがなカタカナーabc  123 Привет", "  abc", "a ー b", "!!", " ", "a\u088fb",
                     " \U0001fa77", "\U0001fa77", "a\U0001fa77b \U0001fa77"]
    assert_same(pt.UnicodeScripts(), hf.UnicodeScripts(), texts)


def test_unicode_scripts_every_code_point_matches_hf() -> None:
    """HF's script table is its own (SentencePiece's, of an old Unicode): a character assigned
    since is "Any" there (it starts no piece, and alone makes none: HF drops it) and some have
    moved script since. Every code point in order (a piece where the script changes), and each
    between two Latin letters (its own piece where its script is another, none where it is "Any"
    or Latin), splits as HF splits it."""
    ours, oracle = pt.UnicodeScripts(), hf.UnicodeScripts()
    points = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    for start in range(0, len(points), 4096):
        chunk = points[start:start + 4096]
        for text in ("".join(chunk), "a" + "a".join(chunk) + "a"):
            assert our_pieces(ours, text) == hf_pieces(oracle, text), f"U+{ord(chunk[0]):04X}.."


@pytest.mark.parametrize("pattern", ["(?i:ss)", "(?i:ß)", "(?i)st"])
def test_multi_character_case_folding(pattern: str) -> None:
    ours = pt.Split(pattern={"Regex": pattern}, behavior="Isolated", invert=False)
    assert_same(ours, hf.Split(Regex(pattern), behavior="isolated"), ["aßb", "ẞ SS ſs", "ﬆ ﬅ sT"])


@functools.cache
def cased_chars() -> str:
    """Every character with a case mapping or folding, each between two NULs so that a
    one-character match shows as its own piece, then the strings that fold to one character."""
    cased = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF
             and (chr(c).lower() != chr(c) or chr(c).upper() != chr(c) or chr(c).casefold() != chr(c)
                  or regex.match(r"\p{Cased}", chr(c)))]
    return "\0".join(cased + ["fi", "ffi", "ss", "i\u0307", "I\u0307", ""])


@pytest.mark.parametrize("pattern", [
    # the dotted and dotless i fold to no i in Oniguruma (the regex module pairs them with i, I)
    r"(?i)i", r"(?i)I", r"(?i)İ", r"(?i)ı", r"(?i)\x{130}", r"(?i)\u0130", r"(?i)\x69", r"(?i)fi",
    r"(?i)i+", r"(?i:i)i", r"(?i)(?-i:i)I", r"(?i:[ı]|İ)", r"(?i)[i]", r"(?i)[^i]", r"(?i)[^I]",
    r"(?i)[a-z]", r"(?i)[^a-z]", r"(?i)[hij]+", r"(?i)[\x{130}]+", r"(?i)[^\x{131}]",
    # nor a property or class escape out of brackets
    r"(?i)\p{Lu}", r"(?i)\P{Lu}", r"(?i)\p{Ll}", r"(?i)\p{Lt}", r"(?i)\p{L}", r"(?i)\w", r"(?i)\W",
    r"(?i)[\d\s]", r"(?i)[a\D]", r"(?i)[\S]", r"(?i)[\h]", r"(?i)k|ſ",
])
def test_case_folding_matches_oniguruma(pattern: str) -> None:
    ours = pt.Split(pattern={"Regex": pattern}, behavior="Isolated", invert=False)
    assert_same(ours, hf.Split(Regex(pattern), behavior="isolated"), [cased_chars()])


@pytest.mark.parametrize("pattern", [r"(?i)[\w]", r"(?i:[\P{Lu}])", r"(?i)[[:lower:]]", r"(?i)[[^a]]",
                                     r"(?i)[a&&b]", r"(?i)(i)\1"])
def test_folded_sets_and_backreferences_are_refused(pattern: str) -> None:
    # the regex module folds these where Oniguruma does otherwise (see onig._OnigTranslator)
    with pytest.raises(FormatError, match="under \\(\\?i\\)"):
        pt.Split(pattern={"Regex": pattern}, behavior="Isolated", invert=False)


@functools.cache
def unicode_changes() -> str:
    """Every character whose general category differs between Unicode 16.0 (Oniguruma), 17.0
    (Rust's char) and the installed ``regex``: where pymtok's corrections do their work."""
    from pymtok import onig, ucd

    codes = {ord(c) for version in ("16.0", "17.0") for c in onig._special(version)}
    codes.update(c for ranges in ucd.CHANGES_17.values()
                 for lo, hi in onig.code_point_ranges(ranges) for c in range(lo, hi + 1))
    return "".join(chr(c) for c in sorted(codes))


@pytest.mark.parametrize("char_class", [
    r"\p{L}", r"\p{Lu}", r"\p{Ll}", r"\p{Lm}", r"\p{Lo}", r"\p{M}", r"\p{N}", r"\p{Nd}", r"\p{P}",
    r"\p{S}", r"\p{Cn}", r"\s", r"\w", r"\d", r"[[:alpha:]]", r"[[:punct:]]", r"[^\p{L}\p{N}]",
])
def test_classes_keep_oniguruma_unicode_whatever_the_regex_release(char_class: str) -> None:
    pattern = f"{char_class}+"
    ours = pt.Split(pattern={"Regex": pattern}, behavior="Isolated", invert=False)
    text = unicode_changes()
    assert_same(ours, hf.Split(Regex(pattern), behavior="isolated"), [text, f"a{text}1 "])


def test_digits_keep_rust_unicode_whatever_the_regex_release() -> None:
    text = unicode_changes() + "0١٢۳߄४৫੬૭୮௯౦೧൨๓໔༥၆៧᠘᥆᧐"
    for individual in (False, True):
        assert_same(pt.Digits(individual_digits=individual), hf.Digits(individual_digits=individual),
                    [text, f"a{text}b"])


@pytest.mark.parametrize("punctuation_char", ["\u166d", "\U000111c9", "\u2e43", "\u061d", "$"])
def test_punctuation_uses_hf_unicode_9_table(punctuation_char: str) -> None:
    text = f"a{punctuation_char}b"
    assert our_pieces(pt.Punctuation(), text) == hf_pieces(hf.Punctuation(), text)


def test_sequence_matches_hf() -> None:
    ours = pt.Sequence(pretokenizers=[pt.WhitespaceSplit(), pt.Digits(individual_digits=True),
                                      pt.Metaspace(prepend_scheme="first", split=True)])
    oracle = hf.Sequence([hf.WhitespaceSplit(), hf.Digits(individual_digits=True),
                          hf.Metaspace(prepend_scheme="first", split=True)])
    assert_same(ours, oracle, few())


# ---- offsets ----------------------------------------------------------------------------------

def test_metaspace_first_prefixes_only_offset_zero() -> None:
    meta = pt.Metaspace(prepend_scheme="first", split=False)
    assert meta([("a b", 0), ("c d", 4)]) == [("\u2581a\u2581b", 0), ("c\u2581d", 4)]
    assert meta([("c d", 3)]) == [("c\u2581d", 3)]


def test_offsets_follow_the_original_text() -> None:
    text = "Hello  wörld 123!"
    for label, ours, oracle in PAIRS:
        if "Metaspace" in label or "ByteLevel" in label:
            continue
        got = ours([(text, 5)])
        want = [(piece, start + 5) for piece, (start, _end) in oracle.pre_tokenize_str(text)]
        assert got == want, label
    split = pt.Metaspace(prepend_scheme="always", split=True)([("a b", 5)])
    assert split == [("\u2581a", 5), ("\u2581b", 6)]


def test_metaspace_first_after_split_in_sequence_matches_hf() -> None:
    ours = pt.from_config({"type": "Sequence", "pretokenizers": [
        {"type": "WhitespaceSplit"},
        {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": True}]})
    oracle = hf.Sequence([hf.WhitespaceSplit(),
                          hf.Metaspace(prepend_scheme="first", split=True)])
    assert_same(ours, oracle, ["a b c", "  a b", "x"])


# ---- configs ----------------------------------------------------------------------------------

def test_from_config_null_and_errors() -> None:
    assert pt.from_config(None) is None
    with pytest.raises(FormatError, match="Nope"):
        pt.from_config({"type": "Nope"})
    # HF loads a length of 0 and panics on the first text
    for length in (0, 2**64):
        with pytest.raises(FormatError, match="FixedLength.length"):
            pt.from_config({"type": "FixedLength", "length": length})
    with pytest.raises(FormatError, match="behavior"):
        pt.from_config({"type": "Split", "pattern": {"String": "a"}, "behavior": "Bogus",
                        "invert": False})
    with pytest.raises(FormatError, match="pattern"):
        pt.from_config({"type": "Split", "pattern": {"Glob": "a"}, "behavior": "Isolated",
                        "invert": False})
    with pytest.raises(FormatError, match="does not compile"):
        pt.from_config({"type": "Split", "pattern": {"Regex": "(a"}, "behavior": "Isolated",
                        "invert": False})
    with pytest.raises(FormatError, match="prepend_scheme"):
        pt.from_config({"type": "Metaspace", "replacement": "_", "add_prefix_space": False,
                        "prepend_scheme": "always"})
    # like HF's loader: unknown fields are ignored, malformed ones are errors
    assert pt.from_config({"type": "Digits", "individual_digits": True, "digits": 1}) is not None
    with pytest.raises(FormatError, match="unknown type"):
        pt.from_config({"type": ["Digits"]})
    with pytest.raises(FormatError, match="entries must be objects"):
        pt.from_config({"type": "Sequence", "pretokenizers": [None]})


def test_legacy_metaspace_fields() -> None:
    legacy = pt.from_config({"type": "Metaspace", "replacement": "\u2581", "str_rep": "\u2581",
                             "add_prefix_space": True})
    assert our_pieces(legacy, "a b") == ["\u2581a", "\u2581b"]
    never = pt.from_config({"type": "Metaspace", "replacement": "\u2581",
                            "add_prefix_space": False, "prepend_scheme": "never"})
    assert our_pieces(never, "a b") == ["a", "\u2581b"]


# ---- Metaspace "first" after a normalizer that deletes or inserts at the start -----------------
# HF prepends to the piece whose *original* offset is 0 (metaspace.rs: offsets_original().0 == 0):
# none when the normalizer deleted the text's first characters, every piece from them when it
# put characters before the first one. Whole tokenizers, so that the text paths (native and, with
# PYMTOK_PURE=1, pure), .mtok, batches and encode_words all answer.

START_TEXTS = [
    "\u064e\u062a", "\u064e", "\u064e\u064e \u062a\u064e", "\ufeffhello world", "\ufeff", "\ufeff \ufeffa",
    "  abc  d", "\x01\x7fab c", "\u0301e b", "\u0130i a", "\u4e2d\u6587 b", " \u4e2d x", "xab c", "x",
    "ab c", "\u064eab", "\ufeffxab",
    "\u064e<s>x", "<s>\u064ex", "x<s>\u064ey", "\ufeff<s> a", "<s>", "\ufeff\u064e\u062a<s>\u064e",
]

DELETING = {
    "StripAccents": hf_norm.StripAccents(),
    "NFD+StripAccents": hf_norm.Sequence([hf_norm.NFD(), hf_norm.StripAccents()]),
    "Bert": hf_norm.BertNormalizer(clean_text=True, strip_accents=True, lowercase=False),
    "Bert+Lowercase": hf_norm.Sequence([hf_norm.BertNormalizer(strip_accents=True), hf_norm.Lowercase()]),
    "Strip": hf_norm.Strip(left=True, right=False),
    "Replace-empty": hf_norm.Sequence([hf_norm.Replace("\ufeff", ""), hf_norm.NFKC()]),
}
INSERTING = {
    "Prepend": hf_norm.Prepend("x"),
    "Bert-CJK": hf_norm.BertNormalizer(handle_chinese_chars=True, strip_accents=False),
    "Lowercase": hf_norm.Lowercase(),
    "NFD": hf_norm.NFD(),
}


def _start_vocab() -> list[tuple[str, float]]:
    chars = sorted({c for text in START_TEXTS for c in text} - {" ", "<", ">"} | set("abcdehlorwx"))
    words = ["▁a", "▁b", "▁x", "▁hello", "▁world", "ab", "▁\u062a", "\u062a\u064e"]
    return [("<unk>", 0.0), ("<s>", 0.0), ("▁", -2.0)] + [(w, -2.5) for w in words] + [(c, -3.0) for c in chars]


def _meta_tokenizer(normalizer, pre, model: str = "unigram") -> HFTokenizer:
    vocab = _start_vocab()
    if model == "unigram":
        tok = HFTokenizer(hf_models.Unigram(vocab, unk_id=0, byte_fallback=False))
    else:
        ids = {piece: i for i, (piece, _) in enumerate(vocab) if len(piece) == 1 or piece in ("<unk>", "<s>")}
        tok = HFTokenizer(hf_models.BPE(ids, [], unk_token="<unk>"))
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre
    tok.add_special_tokens(["<s>"])
    # matched in the normalized text: what follows it may still come from the text's start
    tok.add_tokens([AddedToken("ab", normalized=True)])
    return tok


def _assert_meta_matches(oracle: HFTokenizer, texts: list[str], tmp_path, batch_words: bool = True) -> None:
    tmp_path.mkdir(parents=True, exist_ok=True)
    oracle.save(str(tmp_path / "tokenizer.json"))
    encodings = oracle.encode_batch(texts, add_special_tokens=False)
    want = [e.ids for e in encodings]
    for label, tok in (("json", pymtok.load(tmp_path / "tokenizer.json")),
                       ("mtok", pymtok.load(export(tmp_path, tmp_path / "mtok")))):
        for text, ids in zip(texts, want):
            assert tok.encode(text, add_special_tokens=False) == ids, (label, text[:20])
        if batch_words:
            for text, e in zip(texts, encodings):
                got = tok(text, add_special_tokens=False, return_offsets_mapping=True)
                assert (got["input_ids"], [tuple(o) for o in got["offset_mapping"]]) == (e.ids, e.offsets), (
                    label, "offsets", text[:20])
            assert tok.encode_batch(texts, add_special_tokens=False) == want, label
            for text, ids in zip(texts, want):
                assert [w[0] for w in tok.encode_words(text)] == ids, (label, "words", text[:20])


@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("scheme", ["first", "always", "never"])
@pytest.mark.parametrize("norm", sorted(DELETING))
def test_metaspace_after_deleting_normalizer_matches_hf(norm: str, scheme: str, split: bool, tmp_path) -> None:
    pre = hf.Metaspace(prepend_scheme=scheme, split=split)
    for model in ("unigram", "bpe"):
        _assert_meta_matches(_meta_tokenizer(DELETING[norm], pre, model), START_TEXTS, tmp_path / model)


@pytest.mark.parametrize("norm", sorted(DELETING) + sorted(INSERTING))
def test_metaspace_first_in_sequence_after_split_matches_hf(norm: str, tmp_path) -> None:
    normalizer = DELETING.get(norm) or INSERTING[norm]
    first = hf.Metaspace(prepend_scheme="first", split=True)
    for i, pre in enumerate([hf.Sequence([hf.WhitespaceSplit(), first]),
                             hf.Sequence([hf.Split("x", "isolated"), first]),
                             hf.Sequence([hf.Split(Regex(r"\p{M}"), "isolated"), first])]):
        _assert_meta_matches(_meta_tokenizer(normalizer, pre), START_TEXTS, tmp_path / str(i))


def test_metaspace_first_bom_corpus_chunks_match_hf(tmp_path) -> None:
    # long enough for the native path's parts (a long text read a part at a time)
    texts = ["\ufeff" + chunk for chunk in corpus_chunks(40, seed=5)]
    texts.append("\ufeff" + ("\n".join(samples()) * 4)[:200_000])
    pre = hf.Metaspace(prepend_scheme="first", split=False)
    for norm in ("Bert", "Replace-empty", "NFD+StripAccents"):
        _assert_meta_matches(_meta_tokenizer(DELETING[norm], pre), texts, tmp_path / norm, batch_words=False)


def test_metaspace_first_after_precompiled_deleting_matches_hf(tmp_path) -> None:
    # sentencepiece's nmt_nfkc maps control characters to nothing
    t5 = hf_tokenizer("t5-small")
    tok = _meta_tokenizer(t5.normalizer, hf.Metaspace(prepend_scheme="first", split=True))
    _assert_meta_matches(tok, START_TEXTS, tmp_path)
