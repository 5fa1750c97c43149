"""Normalizers against HF ``tokenizers``: every code point, Unicode's conformance data, the
corpus, random strings, and the normalizer of every real fixture."""

from __future__ import annotations

import base64
import functools
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import TOKENIZER_NAMES, corpus_chunks, fixture_path, hf_tokenizer
from pymtok import normalizers
from pymtok.errors import FormatError

ALL_CODE_POINTS = [cp for cp in range(0x110000) if not 0xD800 <= cp < 0xE000]


@functools.lru_cache(maxsize=None)
def hf_normalizer(cfg_json: str):
    """HF's normalizer built from the same JSON config, inside a minimal tokenizer.json."""
    from tokenizers import Tokenizer

    doc = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
        "normalizer": json.loads(cfg_json), "pre_tokenizer": None, "post_processor": None,
        "decoder": None, "model": {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"},
    }
    return Tokenizer.from_str(json.dumps(doc)).normalizer


def pair(cfg: dict):
    """(ours, HF's) ``str -> str`` for one normalizer config."""
    cfg_json = json.dumps(cfg)
    return our_normalizer(cfg_json), hf_normalizer(cfg_json).normalize_str


@functools.lru_cache(maxsize=None)
def our_normalizer(cfg_json: str):
    return normalizers.from_config(json.loads(cfg_json))


@functools.lru_cache(maxsize=None)
def t5_config() -> dict:
    path = fixture_path("tokenizers", "t5-small", "tokenizer.json")
    return json.loads(path.read_text(encoding="utf-8"))["normalizer"]


SIMPLE_CONFIGS = [
    {"type": "NFC"}, {"type": "NFD"}, {"type": "NFKC"}, {"type": "NFKD"},
    {"type": "Lowercase"}, {"type": "StripAccents"},
]
SIMPLE_IDS = ["NFC", "NFD", "NFKC", "NFKD", "Lowercase", "StripAccents"]


# --- every code point ---------------------------------------------------------------------


def mismatches(ours, theirs, cps: list[int]) -> list[str]:
    # Separated by "\n", a starter that never composes and its own grapheme cluster, so one
    # call covers a whole block; only a failing block is redone per character to name culprits.
    bad: list[str] = []
    for i in range(0, len(cps), 8192):
        block = cps[i : i + 8192]
        text = "\n".join(map(chr, block))
        if ours(text) == theirs(text):
            continue
        bad += [
            f"U+{cp:04X}: ours {ours(chr(cp))!r} HF {theirs(chr(cp))!r}"
            for cp in block
            if ours(chr(cp)) != theirs(chr(cp))
        ]
    return bad


@pytest.mark.parametrize("cfg", SIMPLE_CONFIGS, ids=SIMPLE_IDS)
def test_every_code_point(cfg):
    ours, theirs = pair(cfg)
    assert mismatches(ours, theirs, ALL_CODE_POINTS)[:20] == []


def test_every_code_point_precompiled_t5():
    ours, theirs = pair(t5_config())
    assert mismatches(ours, theirs, ALL_CODE_POINTS)[:20] == []


def test_every_code_point_bert_parts():
    # Each step alone, so one step's table cannot hide behind another's.
    for clean, chinese, strip, lower in [
        (True, False, False, False), (False, True, False, False),
        (False, False, True, False), (False, False, False, True),
    ]:
        cfg = {"type": "BertNormalizer", "clean_text": clean, "handle_chinese_chars": chinese,
               "strip_accents": strip, "lowercase": lower}
        ours, theirs = pair(cfg)
        assert mismatches(ours, theirs, ALL_CODE_POINTS)[:20] == [], cfg


def test_strip_every_code_point():
    ours, theirs = pair({"type": "Strip", "strip_left": True, "strip_right": True})
    bad = [f"U+{cp:04X}" for cp in ALL_CODE_POINTS if ours(chr(cp)) != theirs(chr(cp))]
    assert bad[:20] == []


# --- Unicode's normalization conformance data ----------------------------------------------


def conformance_lines() -> list[list[str]]:
    lines = []
    text = fixture_path("golden", "NormalizationTest.txt").read_text(encoding="utf-8")
    for line in text.splitlines():
        line = line.split("#", 1)[0]
        if not line.strip() or line.startswith("@"):
            continue
        cols = line.split(";")[:5]
        lines.append(["".join(chr(int(h, 16)) for h in col.split()) for col in cols])
    return lines


@pytest.mark.parametrize("form", ["NFC", "NFD", "NFKC", "NFKD"])
def test_normalization_conformance_inputs_match_hf(form):
    ours, theirs = pair({"type": form})
    lines = conformance_lines()
    assert len(lines) > 19000
    sources = [col for cols in lines for col in cols]
    text = "\n".join(sources)
    if ours(text) != theirs(text):
        bad = [s for s in sources if ours(s) != theirs(s)]
        pytest.fail(f"{len(bad)} conformance strings differ, e.g. {bad[:5]!r}")


def test_hf_conformance_gaps_are_exactly_the_newer_characters():
    """Where HF misses Unicode 15's expected output, the line holds a character its tables lack.

    This is the measured Unicode-version gap: HF's normalization predates those characters,
    Python's does not, so normalizers._NEWER_THAN_HF_NORMALIZATION pins HF's behaviour.
    """
    newer = normalizers._HF_UNKNOWN_TO_NORMALIZATION
    theirs = {
        form: hf_normalizer(json.dumps({"type": form})).normalize_str
        for form in ("NFC", "NFD", "NFKC", "NFKD")
    }
    gaps = 0
    for c1, c2, c3, c4, c5 in conformance_lines():
        expected = {"NFC": c2, "NFD": c3, "NFKC": c4, "NFKD": c5}
        for form, want in expected.items():
            if theirs[form](c1) != want:
                gaps += 1
                assert newer.search(c1), (form, c1)
    assert gaps > 0


# --- corpus and random text ----------------------------------------------------------------

INTERESTING = (
    [chr(cp) for cp in range(0x00, 0x21)] + [chr(cp) for cp in range(0x7F, 0xA1)]
    + list("\u00ad\u034f\u061c\u180e\u200b\u200c\u200d\u200e\u200f\u2028\u2029\u202a\u202f"
           "\u205f\u2060\u2066\u3000\ufeff\ufffd\ufff9\u2581\u1680\x85")
    + list("ΣσςΑΩİIıßẞǅǈǋǲΐΰﬀﬁﬃ\u0130\u03a3")
    + [chr(cp) for cp in range(0x300, 0x370)]
    + list("\u0345\u0334\u0316\u0f71\u0f72\u0f80\u05b0\u05bc\u0e38\u0e48\u1dfa\u1ac1\u1dce")
    + [chr(cp) for cp in (0x1100, 0x1161, 0x11A8, 0xAC00, 0xAC01, 0xD7A3, 0x3131, 0xFFA1)]
    + list("ｶﾞｱﾟＡＺａｚ０９！～￥｡・①⑴⒜㋿㍻㌀ℌℍ℡™ǆ¼½¾²³¹ºª…‥")
    + list("क्षत्रि\u0915\u094d\u0937\u093f\u0951")
    + list("\U0001f468\u200d\U0001f469\u200d\U0001f467\U0001f1ef\U0001f1f5\U0001f3fb\ufe0f\u20e3"
           "\U0001f979\U0001faf6\U0001f44d\U0001f3fd")
    + list("中文字漢𠀀𪜀𫝀\U0002B820\U0002B920\uf900\u3400")
    + [chr(cp) for cp in (0x11935, 0x11930, 0x11938, 0x105D2, 0x0307, 0x16D67, 0x1611E)]
    + [chr(cp) for cp in (0xA7CB, 0xA7C0, 0x10570, 0x10D50, 0x16EA0, 0x1C89, 0x2C2F)]
    + list("``''\"' \t\n\r\n  ")
)

text_strategy = st.text(
    alphabet=st.one_of(
        st.sampled_from(INTERESTING),
        st.characters(codec="utf-8"),
        st.characters(min_codepoint=0x20, max_codepoint=0x7E),
    ),
    max_size=40,
)


@pytest.fixture(scope="module")
def chunks() -> list[str]:
    return corpus_chunks(300, seed=1)


TYPE_CONFIGS = SIMPLE_CONFIGS + [
    {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
     "strip_accents": None, "lowercase": True},
    {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
     "strip_accents": True, "lowercase": False},
    {"type": "Strip", "strip_left": True, "strip_right": True},
    {"type": "Strip", "strip_left": False, "strip_right": True},
    {"type": "Prepend", "prepend": "▁"},
    {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
    {"type": "Replace", "pattern": {"String": ""}, "content": "<>"},
    {"type": "Replace", "pattern": {"String": "''"}, "content": "\""},
    {"type": "Replace", "pattern": {"String": "a.b"}, "content": "\\1$0"},
    {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
    {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "},
    {"type": "Replace", "pattern": {"Regex": "\\s*"}, "content": "-"},
    {"type": "Replace", "pattern": {"Regex": "x*"}, "content": "-"},
    {"type": "Replace", "pattern": {"Regex": "^\\s|\\s$"}, "content": "#"},
    {"type": "Replace", "pattern": {"Regex": "\\p{Z}+|[\\t\\n]"}, "content": "|"},
    {"type": "Replace", "pattern": {"Regex": "(?=[aeiou])|[0-9]+"}, "content": "_"},
    {"type": "Replace", "pattern": {"Regex": "[0-9]+"}, "content": "\\0"},
    {"type": "BertNormalizer", "clean_text": False, "handle_chinese_chars": True,
     "strip_accents": None, "lowercase": True},
    {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": False,
     "strip_accents": False, "lowercase": True},
    {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
     "strip_accents": None, "lowercase": False},
    {"type": "Sequence", "normalizers": []},
    {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"},
                                         {"type": "Sequence", "normalizers": [{"type": "NFD"}]}]},
]


@pytest.mark.parametrize("cfg", TYPE_CONFIGS, ids=lambda c: json.dumps(c, ensure_ascii=False)[:60])
def test_types_on_corpus(cfg, chunks):
    ours, theirs = pair(cfg)
    bad = [c for c in chunks if ours(c) != theirs(c)]
    assert len(bad) == 0, f"{len(bad)}/{len(chunks)} differ, first: {bad[0][:200]!r}"


@pytest.mark.parametrize("cfg", TYPE_CONFIGS, ids=lambda c: json.dumps(c, ensure_ascii=False)[:60])
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=text_strategy)
def test_types_on_random_text(cfg, text):
    ours, theirs = pair(cfg)
    assert ours(text) == theirs(text)


# --- every real fixture's normalizer --------------------------------------------------------


@functools.lru_cache(maxsize=None)
def fixture_normalizer(name: str):
    doc = json.loads(fixture_path("tokenizers", name, "tokenizer.json").read_text(encoding="utf-8"))
    return normalizers.from_config(doc["normalizer"])


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_fixture_normalizer(name, chunks):
    ours = fixture_normalizer(name)
    if ours is None:
        pytest.skip(f"{name} has no normalizer")
    hf = hf_tokenizer(name).normalizer
    bad = [c for c in chunks if ours(c) != hf.normalize_str(c)]
    assert len(bad) == 0, f"{len(bad)}/{len(chunks)} differ, first: {bad[0][:200]!r}"


@pytest.mark.parametrize("name", ["t5-small", "albert-base-v2", "all-minilm-l6-v2", "clip-vit"])
@settings(max_examples=300, deadline=None)
@given(text=text_strategy)
def test_fixture_normalizer_random_text(name, text):
    assert fixture_normalizer(name)(text) == hf_tokenizer(name).normalizer.normalize_str(text)


# --- Precompiled's grapheme handling --------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "\r\n", "a\r\nb\r", "\r\n\u0301", "ｶﾞ", "ｶ\uff9e\u0301", "\U0001f5c8\u0301",
        "\U0001f1ef\U0001f1f5\U0001f1fa", "👨\u200d👩\u200d👧", "e\u0301\u0302\u0303",
        "①\u0301", "㍻\u20dd", "\u1100\u1161\u11a8", "क्षि", "\x00a\x00", "…\u0300", "ﬁ\u0308",
        "Ａ\u030a", "\t\u0301", "\u3000\u0301", "\ufeff", "\U000e0001\U000e0020",
    ],
)
def test_precompiled_clusters(text):
    ours, theirs = pair(t5_config())
    assert ours(text) == theirs(text)


def test_precompiled_cache_does_not_change_results(chunks):
    ours, theirs = pair(t5_config())
    for _ in range(2):
        assert [ours(c) for c in chunks[:50]] == [theirs(c) for c in chunks[:50]]


# --- from_config ----------------------------------------------------------------------------


def test_from_config_null_and_types():
    assert normalizers.from_config(None) is None
    assert isinstance(normalizers.from_config({"type": "NFKC"}), normalizers.NFKC)
    seq = normalizers.from_config({"type": "Sequence", "normalizers": [{"type": "Lowercase"}]})
    assert isinstance(seq, normalizers.Sequence)
    assert isinstance(seq.normalizers[0], normalizers.Lowercase)
    bert = normalizers.from_config({"type": "BertNormalizer", "clean_text": True,
                                    "handle_chinese_chars": True, "strip_accents": None,
                                    "lowercase": False})
    assert bert.strip_accents is None and bert.lowercase is False


@pytest.mark.parametrize(
    "cfg,words",
    [
        ({"type": "Nonexistent"}, ["Nonexistent"]),
        ({"no_type": 1}, ["type"]),
        ([], ["object"]),
        ({"type": "Prepend"}, ["Prepend", "prepend"]),
        ({"type": "Prepend", "prepend": 3}, ["Prepend", "prepend"]),
        ({"type": "Replace", "pattern": {"Glob": "*"}, "content": ""}, ["Replace", "Glob"]),
        ({"type": "Replace", "pattern": "x", "content": ""}, ["Replace", "pattern"]),
        ({"type": "Replace", "pattern": {"Regex": "("}, "content": ""}, ["Replace", "regex"]),
        ({"type": "Strip", "strip_left": "yes", "strip_right": True}, ["Strip", "strip_left"]),
        ({"type": "BertNormalizer", "lowercase": 1}, ["BertNormalizer", "lowercase"]),
        ({"type": "Precompiled", "precompiled_charsmap": "!!!"}, ["Precompiled", "base64"]),
        ({"type": "Precompiled", "precompiled_charsmap": ""}, ["Precompiled"]),
        ({"type": "Precompiled", "precompiled_charsmap": base64.b64encode(b"\xff\0\0\0").decode()},
         ["Precompiled", "trie"]),
        ({"type": "Sequence", "normalizers": [None]}, ["Sequence", "null"]),
        ({"type": "Sequence", "normalizers": {"type": "NFC"}}, ["Sequence", "list"]),
    ],
)
def test_from_config_errors(cfg, words):
    with pytest.raises(FormatError) as info:
        normalizers.from_config(cfg)
    for word in words:
        assert word.lower() in str(info.value).lower()


def test_docstring_examples():
    import doctest

    assert doctest.testmod(normalizers).failed == 0


def test_unknown_fields_are_ignored_like_hf():
    cfg = {"type": "Lowercase", "comment": "extra"}
    ours, theirs = pair(cfg)
    assert ours("ÀB") == theirs("ÀB") == "àb"
