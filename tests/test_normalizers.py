"""Normalizers against HF ``tokenizers``: every code point, Unicode's conformance data, the
corpus, random strings, and the normalizer of every real fixture."""

from __future__ import annotations

import base64
import functools
import itertools
import json
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import TOKENIZER_NAMES, corpus_chunks, examples, fixture_path, hf_tokenizer
from pymtok import normalizers, onig, ucd
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
    {"type": "Lowercase"}, {"type": "StripAccents"}, {"type": "Nmt"}, {"type": "ByteLevel"},
]
SIMPLE_IDS = ["NFC", "NFD", "NFKC", "NFKD", "Lowercase", "StripAccents", "Nmt", "ByteLevel"]


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
    {"type": "Sequence", "normalizers": [{"type": "Nmt"}, {"type": "NFKC"}, {"type": "ByteLevel"}]},
]


@pytest.mark.parametrize("cfg", TYPE_CONFIGS, ids=lambda c: json.dumps(c, ensure_ascii=False)[:60])
def test_types_on_corpus(cfg, chunks):
    ours, theirs = pair(cfg)
    bad = [c for c in chunks if ours(c) != theirs(c)]
    assert len(bad) == 0, f"{len(bad)}/{len(chunks)} differ, first: {bad[0][:200]!r}"


@pytest.mark.parametrize("cfg", TYPE_CONFIGS, ids=lambda c: json.dumps(c, ensure_ascii=False)[:60])
@settings(
    max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
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
@settings(max_examples=examples(300), deadline=None)
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


@functools.lru_cache(maxsize=None)
def grapheme_classes() -> list[list[str]]:
    """The code points grouped by their combination of the properties UAX #29 reads (as
    pymtok.ucd lists them: only the choice of test characters rests on it)."""
    keys = dict.fromkeys(ALL_CODE_POINTS, 0)
    for bit, ranges in enumerate(ucd.GRAPHEME_17.values()):
        for lo, hi in onig.code_point_ranges(ranges):
            for cp in range(lo, hi + 1):
                keys[cp] |= 1 << bit
    classes: dict[int, list[str]] = {}
    for cp, key in keys.items():
        classes.setdefault(key, []).append(chr(cp))
    return list(classes.values())


def grapheme_ends(clusters: list[str]) -> list[int]:
    return list(itertools.accumulate(map(len, clusters)))


def short_members() -> list[str]:
    """Of each grapheme class, the two members with the shortest UTF-8 (NUL, which ends a trie
    key, left out)."""
    return [c for members in grapheme_classes()
            for c in sorted((m for m in members if m != "\0"), key=lambda c: len(c.encode()))[:2]]


@functools.lru_cache(maxsize=None)
def marker_charsmap() -> str:
    """A charsmap sentencepiece's trainer compiles from rules mapping each of short_members() to
    its own ideograph. HF's Precompiled looks a cluster of under 6 bytes up whole, and a key
    that starts it replaces all of it: the output shows where HF's clusters end."""
    import io
    import tempfile

    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as model_pb2

    with tempfile.TemporaryDirectory() as folder:
        rules = Path(folder) / "rules.tsv"
        rules.write_text("".join(f"{ord(c):X}\t{0x4E00 + i:X}\n" for i, c in enumerate(short_members())))
        model = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(["a b c"] * 20), model_writer=model, vocab_size=8,
            normalization_rule_tsv=str(rules), minloglevel=3, hard_vocab_limit=False,
        )
    proto = model_pb2.ModelProto()
    proto.ParseFromString(model.getvalue())
    return base64.b64encode(proto.normalizer_spec.precompiled_charsmap).decode()


def test_grapheme_clusters_match_hf() -> None:
    """Every sequence of up to three short class members whose clusters HF's output shows."""
    ours, theirs = pair({"type": "Precompiled", "precompiled_charsmap": marker_charsmap()})
    members = short_members()
    texts = ["".join(combo) for n in (1, 2, 3) for combo in itertools.product(members, repeat=n)
             if n < 3 or len("".join(combo).encode()) < 6]
    rng = random.Random(0)
    texts += ["".join(rng.choices(members, k=rng.randrange(2, 12))) for _ in range(3000)]
    assert [t for t in texts if ours(t) != theirs(t)][:10] == []


def test_grapheme_clusters_official_cases() -> None:
    """UAX #29's own examples of the rules, HF's output compared where it shows the clusters."""
    ours, theirs = pair({"type": "Precompiled", "precompiled_charsmap": marker_charsmap()})
    examples = {
        "\r\n": ["\r\n"], "\u0915\u094d\u0937": ["\u0915\u094d\u0937"],
        "\u0915\u094d\u200d\u0937": ["\u0915\u094d\u200d\u0937"], "\u0915\u0300\u0937": ["\u0915\u0300", "\u0937"],
        "\U0001f1e6\U0001f1e7\U0001f1e8": ["\U0001f1e6\U0001f1e7", "\U0001f1e8"],
        "\U0001f476\U0001f3ff\u200d\U0001f6d1": ["\U0001f476\U0001f3ff\u200d\U0001f6d1"],
        "a\u200d\U0001f6d1": ["a\u200d", "\U0001f6d1"], "\u1100\u1161\u11a8": ["\u1100\u1161\u11a8"],
        "\uac00\u11a8\u1100": ["\uac00\u11a8", "\u1100"], "\u0600\u0661": ["\u0600\u0661"],
        "\u0600\n": ["\u0600", "\n"], "a\u0903\u0300": ["a\u0903\u0300"],
    }
    for text, clusters in examples.items():
        assert normalizers._graphemes(text) == clusters
        assert ours(text) == theirs(text)


def test_grapheme_clusters_match_regex_of_the_same_unicode() -> None:
    """regex's \\X is another implementation of the rules; its releases with Unicode 17.0 tables
    (2025.10.22 to 2026.8.31, the oldest CI runs on) have the crate's properties."""
    import regex

    from pymtok.onig import regex_has_unicode

    if not regex_has_unicode("17.0"):
        pytest.skip(f"regex {regex.__version__} does not have Unicode 17.0 tables")
    classes = grapheme_classes()

    def theirs(text: str) -> list[int]:
        return [m.end() for m in regex.finditer(r"\X", text)]

    for n in (1, 2, 3):
        for combo in itertools.product(classes, repeat=n):
            text = "".join(members[0] for members in combo)
            assert grapheme_ends(normalizers._graphemes(text)) == theirs(text), [hex(ord(c)) for c in text]
    rng = random.Random(0)
    for _ in range(20000):
        text = "".join(rng.choice(rng.choice(classes)) for _ in range(rng.randrange(1, 10)))
        assert grapheme_ends(normalizers._graphemes(text)) == theirs(text), [hex(ord(c)) for c in text]


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
