"""The native core (pymtok._native) against HF ``tokenizers``, the oracle.

Every model the native core accelerates is checked on corpus chunks, on generated strings
that stress the scanners (mixed scripts, odd whitespace, digits of many scripts, emoji,
combining marks) and its added tokens, and on 1 MB worst cases (with a generous time bound:
speed itself is measured by bench/bench.py, not asserted here). The native normalizers are
held against the pure ones and HF on every code point and on generated strings, and the
native grapheme clusters against the pure ones on every sequence of up to three grapheme
classes, and against HF's where its Precompiled output shows them.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pymtok
from conftest import corpus_chunks, corpus_dir, corpus_files, examples, fixture_path, hf_tokenizer, ours, slow_for
from pymtok import native, normalizers
from test_normalizers import (ALL_CODE_POINTS, grapheme_classes, grapheme_ends, hf_normalizer, marker_charsmap,
                              mismatches, short_members, t5_config)

pytestmark = pytest.mark.skipif(
    os.environ.get("PYMTOK_PURE", "") not in ("", "0"), reason="PYMTOK_PURE disables the native core"
)

# Every fixture whose configuration the native core reproduces, by kind of pipeline.
ACCELERATED = [
    "llama3",            # cl100k split + byte-level BPE, ignore_merges
    "qwen3",             # Qwen2 split + byte-level BPE, native NFC
    "gpt-4o",            # o200k split, Removed + invert
    "deepseek-v3",       # three Splits
    "roberta-base",      # ByteLevel with GPT-2's own pattern
    "gemma-v1",          # char-level BPE, byte fallback, no pre-tokenizer, newline added tokens
    "mistral-7b-v0.1",   # char-level BPE, byte fallback, fuse_unk
    "phi-3-mini",        # rstrip added tokens
    "all-minilm-l6-v2",  # WordPiece + BertPreTokenizer, native BertNormalizer
    "bert-base-chinese",
    "t5-small",          # Unigram + WhitespaceSplit + Metaspace, native Precompiled
    "albert-base-v2",
    "chatglm3-6b",       # char-level BPE behind a Split on the literal its normalizer replaces
    "clip-vit",          # CLIP's split, \s+ runs replaced, byte-level BPE with end_of_word_suffix
    "falcon",            # Punctuation, ByteLevel before Digits, a Split the regex engine runs ([0-9]{3})
]


def load(name: str) -> pymtok.Tokenizer:
    return ours(name)


def assert_same_ids(name: str, text: str) -> None:
    ours = load(name).encode(text, add_special_tokens=False)
    theirs = hf_tokenizer(name).encode(text, add_special_tokens=False).ids
    if ours != theirs:
        at = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
        pytest.fail(f"{name}: ids differ at {at} for {text[:200]!r}: ours {ours[at:at + 8]} "
                    f"HF {theirs[at:at + 8]}")


@pytest.mark.parametrize("name", ACCELERATED)
def test_native_is_used(name: str) -> None:
    tok = load(name)
    assert tok._native_segment is not None
    assert tok._native_text is not None
    if name in ("qwen3", "all-minilm-l6-v2", "bert-base-chinese", "t5-small", "clip-vit"):
        assert type(tok.normalizer).__module__ == "pymtok._native"


def test_split_pattern_without_a_scanner() -> None:
    """A Split pattern the native core cannot scan (here: llama3's, reworded with a script class
    the regex engine refuses) runs the pure split and the native byte-level BPE on its pieces:
    ids as HF's."""
    tokenizers = pytest.importorskip("tokenizers")
    config = json.loads(Path(fixture_path("tokenizers", "llama3", "tokenizer.json")).read_text(encoding="utf-8"))
    split = config["pre_tokenizer"]["pretokenizers"][0]
    split["pattern"]["Regex"] = r"\p{Greek}+|\p{L}+| ?\p{N}{1,2}|\s+|[^\s\p{L}\p{N}]+"
    tok = pymtok.Tokenizer.from_config(config)
    assert tok._native_segment is not None and tok._native_text is None
    hf = tokenizers.Tokenizer.from_str(json.dumps(config))
    for text in corpus_chunks(200, seed=11):
        assert tok.encode(text, add_special_tokens=False) == hf.encode(text, add_special_tokens=False).ids


@pytest.mark.parametrize("content", ["\u2581", "!", "x<", ""])
def test_split_on_a_literal_the_normalizer_may_give_back(content: str) -> None:
    """ChatGLM3's Split on "<!dummy-prefix!>" never cuts: its normalizer replaces the literal by
    "▁" and no later step makes it again. A content sharing a character with the literal
    (or none, which joins the text around a match) may make it again: then the Split runs (on
    the regex engine, the string escaped)."""
    tokenizers = pytest.importorskip("tokenizers")
    config = json.loads(Path(fixture_path("tokenizers", "chatglm3-6b", "tokenizer.json")).read_text(encoding="utf-8"))
    config["normalizer"]["normalizers"][0]["content"] = content
    tok = pymtok.Tokenizer.from_config(config)
    assert tok._native_text is not None
    splits = [step for step in native._program(tok) or () if step[0] == "split"]
    assert (splits == []) == (content == "\u2581"), (content, splits)
    hf = tokenizers.Tokenizer.from_str(json.dumps(config))
    texts = ["<!dummy-<!dummy-prefix!>prefix!> a", "<!dummy-prefix<!dummy-prefix!>!>b", "x<!dummy-prefix!>!dummy-prefix!>",
             "<<!dummy-prefix!>!dummy-prefix!>  <!dummy-prefix!>", *corpus_chunks(40, seed=3)]
    for text in texts:
        assert tok.encode(text, add_special_tokens=False) == hf.encode(text, add_special_tokens=False).ids, text


@pytest.mark.parametrize("name", ACCELERATED)
def test_corpus_chunks(name: str) -> None:
    for text in corpus_chunks(240, seed=7):
        assert_same_ids(name, text)


# Characters chosen to reach every branch of the scanners and models.
_PIECES = [
    *"abcXYZ", "Hello", "WORLD", "camelCase", "iPhone", "ǅ", "ʰ", "ſ", "K", "ß", "İ",
    "'s", "'S", "'ll", "'Re", "'ve", "'ſ", "'d", "'m", "'t", "'x",
    *"0123456789", "١٢٣", "०९", "０９", "²", "½", "Ⅻ", "〇", "𝟘",
    " ", "  ", "\t", "\n", "\r\n", "\r", "\u000b", "\u000c", "\u0085", "\u2028", "\u2029",
    "\u00a0", "\u3000", "\u2009", "\u200b", "\u200d", "\u2581", "\u1680", "\x1c",
    *".,;:!?-_/\\()[]{}<>\"'`~@#$%^&*+=|", "...", "--", "//", "/*", "->",
    "中文", "日本語", "ひらがな", "カタカナ", "한국어", "العربية", "हिन्दी", "русский", "ไทย",
    "e\u0301", "\u0301", "\u0308a", "a\u20dd", "\u094d",
    "😀", "👍🏽", "👨\u200d👩\u200d👧", "🇫🇷", "\U0001f9d1\u200d\U0001f4bb",
    "\x00", "\x7f", "\ufffd", "\ue000", "\U0010ffff", "\u0378", "<unk>", "[UNK]", "<0x41>",
]


texts = st.one_of(
    st.lists(st.sampled_from(_PIECES), max_size=40).map("".join),
    st.text(st.characters(exclude_categories=("Cs",)), max_size=60),
    st.lists(st.sampled_from(_PIECES) | st.text(max_size=3), max_size=30).map("".join),
)


@pytest.mark.parametrize("name", ACCELERATED)
@settings(max_examples=examples(250), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts)
def test_generated_strings(name: str, text: str) -> None:
    assert_same_ids(name, text)


_BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
_MAPPING = {**_BYTE_LEVEL, "use_regex": False}

# HF's character splitters and every split behavior, before ByteLevel and after it (where they
# cut the GPT-2 characters of the bytes, a character's bytes apart: "²" is byte 0xB2's)
NATIVE_PIPELINES = {
    "falcon_without_its_split": [{"type": "Punctuation", "behavior": "Contiguous"}, _BYTE_LEVEL,
                                 {"type": "Digits", "individual_digits": False}],
    "digits_each": [{"type": "Digits", "individual_digits": True}, _BYTE_LEVEL],
    "whitespace": [{"type": "Whitespace"}, _MAPPING],
    "scripts": [{"type": "UnicodeScripts"}, _BYTE_LEVEL],
    # a string pattern runs as the regex of the string escaped
    "string_merged": [{"type": "Split", "pattern": {"String": "e "}, "behavior": "MergedWithPrevious",
                       "invert": False}, _BYTE_LEVEL],
    "string_metacharacters": [{"type": "Split", "pattern": {"String": ".("}, "behavior": "Contiguous",
                               "invert": True}, _BYTE_LEVEL],
    "delimiter": [{"type": "CharDelimiterSplit", "delimiter": "e"}, _BYTE_LEVEL],
    "space_delimiter": [{"type": "CharDelimiterSplit", "delimiter": " "}, _MAPPING],
    **{f"punctuation_{b}": [{"type": "Punctuation", "behavior": b}, _MAPPING]
       for b in ("Isolated", "Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous")},
    **{f"digits_split_{b}_{invert}": [{"type": "Split", "pattern": {"Regex": r"\p{N}{1,3}"}, "behavior": b,
                                       "invert": invert}, _BYTE_LEVEL]
       for b in ("MergedWithPrevious", "MergedWithNext", "Contiguous") for invert in (False, True)},
    "mapped_then_cut": [_BYTE_LEVEL, {"type": "Punctuation", "behavior": "MergedWithNext"},
                        {"type": "Digits", "individual_digits": True}, {"type": "WhitespaceSplit"}],
    "mapped_then_split": [_MAPPING, {"type": "Split", "pattern": {"Regex": native._GPT2}, "behavior": "Isolated",
                                     "invert": False}, {"type": "Whitespace"}],
}


@functools.lru_cache(maxsize=None)
def native_pipeline(name: str) -> tuple[pymtok.Tokenizer, Any]:
    """Falcon's byte-level BPE behind the named pre-tokenizer: pymtok's tokenizer and HF's."""
    tokenizers = pytest.importorskip("tokenizers")
    config = json.loads(Path(fixture_path("tokenizers", "falcon", "tokenizer.json")).read_text(encoding="utf-8"))
    config["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": NATIVE_PIPELINES[name]}
    tok = pymtok.Tokenizer.from_config(config)
    assert tok._native_text is not None, "the native core does not run this pipeline"
    return tok, tokenizers.Tokenizer.from_str(json.dumps(config))


def assert_pipeline_as_hf(name: str, text: str) -> None:
    tok, hf = native_pipeline(name)
    encoding = hf.encode(text)
    assert tok.encode(text) == encoding.ids, f"{name}: {text!r}"
    assert tok(text, return_offsets_mapping=True)["offset_mapping"] == encoding.offsets, f"{name}: {text!r}"


@pytest.mark.parametrize("name", NATIVE_PIPELINES)
def test_native_pre_tokenizer_steps_corpus(name: str) -> None:
    for text in corpus_chunks(150, seed=5):
        assert_pipeline_as_hf(name, text)


@pytest.mark.parametrize("name", NATIVE_PIPELINES)
@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts)
def test_native_pre_tokenizer_steps_generated(name: str, text: str) -> None:
    assert_pipeline_as_hf(name, text)


def _split_of(name: str, behavior: str = "Isolated", invert: bool = False) -> dict[str, Any]:
    """The named fixture's own split pattern, with the behavior given."""
    config = json.loads(Path(fixture_path("tokenizers", name, "tokenizer.json")).read_text(encoding="utf-8"))
    split = config["pre_tokenizer"]["pretokenizers"][0]
    return {"type": "Split", "pattern": split["pattern"], "behavior": behavior, "invert": invert}


# Pre-tokenizers whose ASCII text the native core cuts as bytes (ascii_split: one step that cuts,
# a GPT-family split keeping its matches or BERT's or WhitespaceSplit's character split, and
# ByteLevel steps that add nothing), behind a BPE or a WordPiece model, and behind T5's Unigram
# with a Metaspace after the character split that prefixes every piece or none; beside them ones
# it must cut otherwise: a prefix space, a second cut, behaviors that join or drop pieces, GPT-2
# characters cut, another character split, a Metaspace that prefixes the first piece alone or
# whose replacement is ASCII, or in front of a BPE.
_BERT = {"type": "BertPreTokenizer"}
_WHITESPACE_SPLIT = {"type": "WhitespaceSplit"}


def _metaspace(prepend: str, replacement: str = "\u2581", split: bool = True) -> dict[str, Any]:
    return {"type": "Metaspace", "replacement": replacement, "prepend_scheme": prepend, "split": split}


ASCII_PIPELINES = {
    "cl100k": ("llama3", lambda: [_split_of("llama3"), _MAPPING]),
    "qwen2": ("llama3", lambda: [_split_of("qwen3"), _MAPPING]),
    "o200k_removed_inverted": ("llama3", lambda: [_split_of("gpt-4o", "Removed", True), _MAPPING]),
    "o200k_isolated_inverted": ("llama3", lambda: [_split_of("gpt-4o", "Isolated", True), _MAPPING]),
    "gpt2_byte_level": ("llama3", lambda: [_BYTE_LEVEL]),
    "gpt2_split": ("llama3", lambda: [{"type": "Split", "pattern": {"Regex": native._GPT2}, "behavior": "Isolated",
                                       "invert": False}]),
    "bert_then_mapping": ("llama3", lambda: [_BERT, _MAPPING]),
    "wordpiece_bert": ("all-minilm-l6-v2", lambda: [_BERT]),
    "wordpiece_whitespace_split": ("all-minilm-l6-v2", lambda: [{"type": "WhitespaceSplit"}]),
    "byte_level_prefix_space": ("llama3", lambda: [{**_BYTE_LEVEL, "add_prefix_space": True}]),
    "cl100k_prefix_space": ("llama3", lambda: [_split_of("llama3"), {**_MAPPING, "add_prefix_space": True}]),
    "cl100k_then_gpt2": ("llama3", lambda: [_split_of("llama3"), _BYTE_LEVEL]),
    "o200k_then_cl100k": ("llama3", lambda: [_split_of("gpt-4o", "Removed", True), _split_of("llama3"), _MAPPING]),
    "cl100k_contiguous": ("llama3", lambda: [_split_of("llama3", "Contiguous"), _MAPPING]),
    "cl100k_merged_with_next": ("llama3", lambda: [_split_of("llama3", "MergedWithNext"), _MAPPING]),
    "cl100k_removed": ("llama3", lambda: [_split_of("llama3", "Removed"), _MAPPING]),
    "mapped_then_cl100k": ("llama3", lambda: [_MAPPING, _split_of("llama3")]),
    "wordpiece_bert_then_digits": ("all-minilm-l6-v2", lambda: [_BERT, {"type": "Digits", "individual_digits": True}]),
    "wordpiece_whitespace": ("all-minilm-l6-v2", lambda: [{"type": "Whitespace"}]),
    "wordpiece_whitespace_split_then_bert": ("all-minilm-l6-v2", lambda: [{"type": "WhitespaceSplit"}, _BERT]),
    "unigram_whitespace_split_metaspace": ("t5-small", lambda: [_WHITESPACE_SPLIT, _metaspace("always")]),
    "unigram_bert_metaspace_unsplit": ("t5-small", lambda: [_BERT, _metaspace("always", split=False)]),
    "unigram_bert_metaspace_never": ("t5-small", lambda: [_BERT, _metaspace("never")]),
    "unigram_whitespace_split": ("t5-small", lambda: [_WHITESPACE_SPLIT]),
    "unigram_cl100k": ("t5-small", lambda: [_split_of("llama3")]),
    "unigram_metaspace_first": ("t5-small", lambda: [_WHITESPACE_SPLIT, _metaspace("first")]),
    "unigram_metaspace_ascii_replacement": ("t5-small", lambda: [_WHITESPACE_SPLIT, _metaspace("always", "e")]),
    "unigram_metaspace_twice": ("t5-small", lambda: [_WHITESPACE_SPLIT, _metaspace("always"), _metaspace("always")]),
    # without its normalizer, which would put U+2581 for every space before the pre-tokenizer
    "bpe_whitespace_split_metaspace": ("mistral-7b-v0.1", lambda: [_WHITESPACE_SPLIT, _metaspace("always")], None),
}

_ASCII_PIECES = [*"abcXYZ", "Hello", "WORLD", "camelCase", "iPhone", "'s", "'S", "'ll", "'Re", "'ve", "'d", "'m",
                 "'t", "'x", "'", *"0123456789", "12345", " ", "  ", "   ", "\t", "\n", "\r\n", "\r", "\x0b", "\x0c",
                 "\x1c", "\x00", "\x7f", *".,;:!?-_/\\()[]{}<>\"`~@#$%^&*+=|", "...", "//", "->", " \n ", "\n\n",
                 "b" * 101, " " + "z" * 150]

ascii_texts = st.one_of(
    st.lists(st.sampled_from(_ASCII_PIECES), max_size=60).map("".join),
    st.text(st.characters(max_codepoint=0x7F), max_size=80),
    # a text that is ASCII but for its last character takes the other path
    st.tuples(st.lists(st.sampled_from(_ASCII_PIECES), max_size=30).map("".join),
              st.sampled_from(["é", "\u2028", "中", "😀"])).map("".join),
)


@functools.lru_cache(maxsize=None)
def ascii_pipeline(name: str) -> tuple[pymtok.Tokenizer, Any]:
    """The named pre-tokenizer in front of Llama 3's byte-level BPE (ignore_merges), MiniLM's
    WordPiece (behind BertNormalizer), T5's Unigram or Mistral's BPE, behind the model's
    normalizer or the one given."""
    tokenizers = pytest.importorskip("tokenizers")
    model, steps, *normalizer = ASCII_PIPELINES[name]
    config = json.loads(Path(fixture_path("tokenizers", model, "tokenizer.json")).read_text(encoding="utf-8"))
    config["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": steps()}
    if normalizer:
        config["normalizer"] = normalizer[0]
    config["padding"] = config["truncation"] = None
    tok = pymtok.Tokenizer.from_config(config)
    assert tok._native_text is not None, "the native core does not run this pipeline"
    return tok, tokenizers.Tokenizer.from_str(json.dumps(config))


def assert_ascii_pipeline_as_hf(name: str, text: str) -> None:
    tok, hf = ascii_pipeline(name)
    encoding = hf.encode(text, add_special_tokens=False)
    assert tok.encode(text, add_special_tokens=False) == encoding.ids, f"{name}: {text!r}"
    offsets = tok(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    assert offsets == encoding.offsets, f"{name}: {text!r}"


@pytest.mark.parametrize("name", ASCII_PIPELINES)
@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=ascii_texts)
def test_ascii_text_cut_as_bytes(name: str, text: str) -> None:
    assert_ascii_pipeline_as_hf(name, text)


@pytest.mark.parametrize("name", ASCII_PIPELINES)
def test_ascii_corpus_cut_as_bytes(name: str) -> None:
    """ASCII corpus text, in chunks and joined into one text of many windows (the core encodes a
    long segment a window of about 8K characters at a time)."""
    chunks = [text for text in corpus_chunks(400, seed=11) if text.isascii()]
    assert len(chunks) >= 20
    for text in chunks[:60]:
        assert_ascii_pipeline_as_hf(name, text)
    assert_ascii_pipeline_as_hf(name, "\n".join(chunks))
    # other characters here and there: the ASCII stretches between them are cut as bytes, the
    # rest as code points, each window taken apart where the pre-tokenizer allows
    rng = random.Random(5)
    words = "\n".join(chunks).split(" ")
    for k in range(0, len(words), 97):
        words[k] += rng.choice(["é", " 中文", "\u2028", "😀x", " ſ", "'ſ"])
    assert_ascii_pipeline_as_hf(name, " ".join(words))
    # runs of spaces before punctuation where a stretch may be cut, at each place in the run: a
    # space after a space is no cut
    for k in range(4):
        assert_ascii_pipeline_as_hf(name, "word " * 60 + "é" * (k + 1) + "   !" * 150)
    # text of another script first: the ASCII text after it from the first cut where 256 ASCII
    # characters in a row begin (looked for 16 at a time), at each place against those 16
    text = " ".join(chunks)[:1500]
    for k in range(17):
        assert_ascii_pipeline_as_hf(name, "中文，" * 40 + "é" * k + text)


def _pieces_config(pre_tokenizer: dict[str, Any]) -> dict[str, Any]:
    """A tokenizer whose ids show the pre-tokenizer's pieces: a WordPiece model of the unknown token
    alone, one for each piece, with the piece's offsets."""
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
            "pre_tokenizer": pre_tokenizer, "post_processor": None, "decoder": None,
            "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                      "max_input_chars_per_word": 1, "vocab": {"[UNK]": 0}}}


# Where the pieces of a GPT-family pattern depend on more than the characters next to them, or
# a rule of the block cut is subtle: contractions, digits past three, runs of spaces with \r and
# \n, \r and \n after punctuation, o200k's slashes after them, a letter after one other character
_ASCII_TRICKS = ["'llama", "'dog", "'sand", "'Very", "'re'S", "don't", "it'sx", "x'dog", "x'Sand", "1234567", "  .",
                 " \n .", ".\n/-E", ".\n//-e", "./\n-x",
                 "\t.b", " .b", "..b", "a.b", "aBc", "ABc", "x \r\n y", "!\n\n  x", "\n    def", ".\n \n x",
                 "\t \t.", "x  ", " \n", "\r\n\r\n", " " * 70 + "x", "." + "\n" * 70 + " x", "\n" + " " * 70 + "\n x"]


@pytest.mark.parametrize("name", ["cl100k", "qwen2", "o200k_removed_inverted", "gpt2_byte_level"])
def test_ascii_tricks_across_blocks(name: str) -> None:
    """Each at the start of a text and around the ends of its first 64 and 128 characters, which
    the GPT-family cut of ASCII text takes a block at a time, and at its end."""
    for trick in _ASCII_TRICKS:
        for k in [*range(4), *range(56, 72), *range(122, 130)]:
            assert_ascii_pipeline_as_hf(name, ("ab. " * 40)[:k] + trick + " and 12 more.")
            assert_ascii_pipeline_as_hf(name, ("ab. " * 40)[:k] + trick)


@pytest.mark.parametrize("name", ["llama3", "qwen3", "gpt-4o", "gpt2"])
def test_ascii_pieces_across_blocks(name: str) -> None:
    """The pieces themselves (a WordPiece model's unknown token each, their offsets): where a BPE
    model would join two pieces into the tokens it gives them apart ("\n   " as "\n" "   "), the
    ids do not show a missing cut."""
    tokenizers = pytest.importorskip("tokenizers")
    split = ({"type": "Split", "pattern": {"Regex": native._GPT2}, "behavior": "Isolated", "invert": False}
             if name == "gpt2" else _split_of(name, "Removed", True) if name == "gpt-4o" else _split_of(name))
    config = _pieces_config(split)
    tok = pymtok.Tokenizer.from_config(config)
    hf = tokenizers.Tokenizer.from_str(json.dumps(config))
    for trick in _ASCII_TRICKS:
        for k in [*range(4), *range(56, 72), *range(122, 130)]:
            for text in [("ab. " * 40)[:k] + trick + " and 12 more.", ("ab. " * 40)[:k] + trick]:
                ours = tok(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
                assert ours == hf.encode(text, add_special_tokens=False).offsets, f"{name}: {text!r}"


@pytest.mark.parametrize("pre, separator", [
    ({"type": "Whitespace"}, " "), ({"type": "Whitespace"}, "!"), ({"type": "Whitespace"}, "a"),
    ({"type": "Punctuation", "behavior": "Isolated"}, "a"), ({"type": "Digits", "individual_digits": False}, "a"),
    ({"type": "UnicodeScripts"}, "a"), ({"type": "UnicodeScripts"}, "\u4e00"), ({"type": "UnicodeScripts"}, " "),
])
def test_native_splitter_classes_every_code_point(pre: dict[str, Any], separator: str) -> None:
    """Every code point between separators: the pieces (a WordPiece model's unknown token each,
    their offsets) show which class the splitter puts it in (with a separator of each class,
    Whitespace's three), as HF's Rust predicates, regex crate and script table say."""
    tokenizers = pytest.importorskip("tokenizers")
    config = _pieces_config(pre)
    tok = pymtok.Tokenizer.from_config(config)
    assert tok._native_text is not None
    text = separator.join(map(chr, ALL_CODE_POINTS))
    hf = tokenizers.Tokenizer.from_str(json.dumps(config))
    ours = tok(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    theirs = hf.encode(text, add_special_tokens=False).offsets
    if ours != theirs:
        differ = sorted(set(ours) ^ set(theirs))[:10]
        pytest.fail(f"pieces differ: {[text[s:e][:20] for s, e in differ]}")


@functools.lru_cache(maxsize=None)
def added_contents(name: str) -> list[str]:
    """A sample of the model's added tokens, with the spaces lstrip/rstrip would take."""
    contents = sorted(t.content for t in load(name).added.by_id.values())
    return random.Random(0).sample(contents, min(len(contents), 48)) + [" ", "  ", "\n\n", " \t"]


@pytest.mark.parametrize("name", ACCELERATED)
@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_generated_strings_with_added_tokens(name: str, data: st.DataObject) -> None:
    pieces = data.draw(st.lists(st.sampled_from(_PIECES + added_contents(name)), max_size=30))
    text = "".join(pieces)
    assert_same_ids(name, text)
    # the post-processor runs after the native text encoder too
    assert load(name).encode(text) == hf_tokenizer(name).encode(text).ids


@functools.lru_cache(maxsize=None)
def few_firsts_tokenizers(firsts: tuple[str, ...]) -> tuple[pymtok.Tokenizer, object]:
    """t5-small with added tokens of the given first characters besides its own '<' (ours, HF)."""
    from tokenizers import Tokenizer

    config = json.loads(fixture_path("tokenizers", "t5-small", "tokenizer.json").read_text(encoding="utf-8"))
    next_id = max(t["id"] for t in config["added_tokens"]) + 1
    for i, first in enumerate(firsts):
        config["added_tokens"].append({"id": next_id + i, "content": first + "!", "single_word": False,
                                       "lstrip": False, "rstrip": False, "normalized": False, "special": True})
    return pymtok.Tokenizer.from_config(config), Tokenizer.from_str(json.dumps(config))


# The added tokens' first characters, when there are at most four, are looked for a block of 16
# characters at a time (added.c skip_blocks): those under U+00FF among the characters packed
# into bytes, where every character from U+00FF up is 0xFF, the others among the code points
# where a block has such a character. Tokens start with ASCII, Latin-1 (0xFE the last packed
# exactly), U+00FF (the packed value itself), a BMP and an astral character; the text holds
# characters that pack to 0xFF, whose low bytes are a first character's ('<' 0x3C in U+013C and
# U+FF3C), and fillers that move each one across the blocks' ends.
@pytest.mark.parametrize("firsts", [("é", "ÿ", "中"), ("þ", "\U0001d518", "\u2581")])
@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_few_first_characters_found_in_blocks(firsts: tuple[str, ...], data: st.DataObject) -> None:
    ours, theirs = few_firsts_tokenizers(firsts)
    assert ours._native_text is not None
    parts = [f + "!" for f in firsts] + list(firsts) + ["<pad>", "</s>", "<", "\u013c", "\uff3c", "\u0100", "\u00e9",
                                                       "\u7fff", "\u8000", "\uffff", "\U00010000", "\u4e2d"]
    pieces = data.draw(st.lists(st.one_of(st.sampled_from(parts), st.text(alphabet="ab ", min_size=1, max_size=17)),
                                max_size=24))
    text = "".join(pieces)
    assert ours.encode(text, add_special_tokens=False) == theirs.encode(text, add_special_tokens=False).ids


def t5_with_added(extra: list[tuple[str, bool, bool, bool]], single_word: bool) -> tuple[pymtok.Tokenizer, object]:
    """t5-small with added tokens (content, lstrip, rstrip, normalized), special unless normalized
    (ours, HF)."""
    from tokenizers import Tokenizer

    config = json.loads(fixture_path("tokenizers", "t5-small", "tokenizer.json").read_text(encoding="utf-8"))
    next_id = max(t["id"] for t in config["added_tokens"]) + 1
    for i, (content, lstrip, rstrip, normalized) in enumerate(extra):
        config["added_tokens"].append({"id": next_id + i, "content": content, "single_word": single_word,
                                       "lstrip": lstrip, "rstrip": rstrip, "normalized": normalized,
                                       "special": not normalized})
    return pymtok.Tokenizer.from_config(config), Tokenizer.from_str(json.dumps(config))


@functools.lru_cache(maxsize=None)
def stripped_tokenizers() -> tuple[pymtok.Tokenizer, object]:
    """t5-small with added tokens that lstrip, rstrip, are normalized, or overlap (ours, HF)."""
    return t5_with_added([("<L>", True, False, False), ("<R>", False, True, False), ("<LR>", True, True, False),
                          ("ＮＯＲＭ", False, False, True), ("<R", False, False, False), ("  ", False, False, True),
                          ("<LR>x", False, True, True)], single_word=False)


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pieces=st.lists(st.sampled_from(["<L>", "<R>", "<LR>", "<LR>x", "ＮＯＲＭ", "NORM", "<R", " ", "  ",
                                        "\t", "\u3000", "a", "b c", "\n"]), max_size=16))
def test_lstrip_rstrip_normalized_added_tokens(pieces: list[str]) -> None:
    ours, theirs = stripped_tokenizers()
    assert ours._native_text is not None
    text = "".join(pieces)
    assert ours.encode(text, add_special_tokens=False) == theirs.encode(text, add_special_tokens=False).ids


@functools.lru_cache(maxsize=None)
def single_word_tokenizers() -> tuple[pymtok.Tokenizer, object]:
    """t5-small with single_word added tokens, raw and normalized, stripping or not (ours, HF)."""
    # " sw" starts with a space (a part of a long text may start with it, after a word
    # character), "in" is also inside words, "ｗｉｄｅ" matches as "wide" in the normalized text
    return t5_with_added([("<W>", False, False, False), ("in", False, False, False), ("<LW>", True, False, False),
                          ("<RW>", False, True, False), (" sw", False, False, False), ("ｗｉｄｅ", False, False, True),
                          ("<W>x", False, False, False)], single_word=True)


# Neighbours a single_word token is (not) matched beside: HF's \w is the Rust regex crate's
# (letters, marks, decimal digits, connector punctuation, joiners), whatever the script.
_SINGLE_WORD_PIECES = ["<W>", "in", "<LW>", "<RW>", " sw", "ｗｉｄｅ", "wide", "<W>x", " ", "  ", "\t", "a", "1", "_",
                       "\u0301", "\u200d", "\u00b2", "\u0663", "中", "!", "-", ".", "\u2581", "\n", "sw"]


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pieces=st.lists(st.sampled_from(_SINGLE_WORD_PIECES), max_size=16))
def test_single_word_added_tokens(pieces: list[str]) -> None:
    ours, theirs = single_word_tokenizers()
    assert ours._native_text is not None
    text = "".join(pieces)
    encoding = theirs.encode(text)
    assert ours.encode(text) == encoding.ids
    assert ours(text, return_offsets_mapping=True)["offset_mapping"] == encoding.offsets
    # a text long enough to be encoded a part at a time, cut before spaces
    long = " ".join([text, "abc"] * (20_000 // (len(text) + 5) + 1))
    assert ours.encode(long, add_special_tokens=False) == theirs.encode(long, add_special_tokens=False).ids


@pytest.mark.parametrize("long", ["x sw " * 5000, "<W>x " * 5000, "x <W> x" * 3000])
def test_single_word_tokens_where_a_long_text_is_cut(long: str) -> None:
    """A long text is cut before a space between ASCII letters: not where a part would start with
    a single_word token that a word character precedes in the whole."""
    ours, theirs = single_word_tokenizers()
    assert ours.encode(long, add_special_tokens=False) == theirs.encode(long, add_special_tokens=False).ids


# --- WordPiece pieces in place ------------------------------------------------------------
# A WordPiece piece of ASCII characters is looked up where a first pass put every character's
# low byte (models.c wordpiece_spans), within blocks of 16 characters all ASCII, unless the
# character after it has a low byte that reads as a UTF-8 continuation byte: greedy matching
# would step back over it from the piece's end. That character is in the next block, so the
# word is made to end on a block's end (the 32nd character, after a filler piece). The
# characters after it are split off by BertPreTokenizer (punctuation, spaces, CJK), with such
# low bytes (¿ 0xBF, ¡ 0xA1, « 0xAB, » 0xBB, · 0xB7, no-break space 0xA0, 二 0x8C) or not (、
# 0x01, ideographic space 0x00, 中 0x2D). Random words are mostly no token, so greedy matching
# runs, and new, so the piece cache does not answer.
_WORDPIECE_AFTER = ["¿", "¡", "«", "»", "·", "\u00a0", "二", "、", "\u3000", "中", " ", "."]


@pytest.mark.parametrize("name", ["all-minilm-l6-v2", "bert-base-chinese"])
@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(word=st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=16),
       after=st.sampled_from(_WORDPIECE_AFTER), tail=st.text(alphabet="abcdefghij ", max_size=20))
def test_wordpiece_pieces_beside_split_characters(name: str, word: str, after: str, tail: str) -> None:
    assert_same_ids(name, "q" * (31 - len(word)) + " " + word + after + tail)


def assert_model_as_hf(model: dict[str, Any], pre_tokenizer: dict[str, Any], via: str, text: str) -> None:
    """The model behind the pre-tokenizer alone, natively from its config or its .mtok: ids and
    offsets against HF's."""
    tokenizers = pytest.importorskip("tokenizers")
    from pymtok.mtok import dumps_mtok, loads_mtok

    config = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
              "pre_tokenizer": pre_tokenizer, "post_processor": None, "decoder": None, "model": model}
    ours = pymtok.Tokenizer.from_config(config)
    if via == "mtok":
        ours = loads_mtok(dumps_mtok(ours.config, ours.meta))
    assert ours._native_text is not None
    encoding = tokenizers.Tokenizer.from_str(json.dumps(config)).encode(text, add_special_tokens=False)
    assert ours.encode(text, add_special_tokens=False) == encoding.ids
    assert ours(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"] == encoding.offsets


# A piece of one character (behind BertPreTokenizer each CJK character and punctuation mark) is
# its token or the unknown one, read from a table of the vocabulary's one-character tokens
# (models.c wordpiece_char): characters with a token and without, of one to four UTF-8 bytes, a
# token of two characters and the continuing prefix's, and words of at most one or no character.
_ONE_CHAR_VOCAB = ["a", ".", "é", "[UNK]", "中", "😀", "ab", "##b", "##中", "中文", "é."]


@pytest.mark.parametrize("via", ["json", "mtok"])
@pytest.mark.parametrize("max_chars", [0, 1, 100])
@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(alphabet="abé.,中文😀🙂 ", max_size=30))
def test_wordpiece_one_character_pieces(via: str, max_chars: int, text: str) -> None:
    model = {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
             "max_input_chars_per_word": max_chars, "vocab": {token: i for i, token in enumerate(_ONE_CHAR_VOCAB)}}
    assert_model_as_hf(model, {"type": "BertPreTokenizer"}, via, text)


# Greedy matching starts at the longest token of those beginning with the piece's next
# character, of the vocabulary for a piece's first token and of the continuations after it
# (models.c wordpiece_parts): characters whose longest token is longer in one than in the
# other (x, y), of one to four UTF-8 bytes, and characters no token starts (c, ü).
_LONGEST_VOCAB = ["[UNK]", "a", "ab", "abcab", "b", "##a", "##b", "##ab", "x", "##x", "##xyxyx", "y", "yxyxy", "##y",
                  "é", "éa", "##é", "##éééé", "中", "中文中文", "##文", "##中文", "😀", "😀😀😀", "##😀"]


@pytest.mark.parametrize("via", ["json", "mtok"])
@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.lists(st.sampled_from(["a", "b", "ab", "abcab", "c", "x", "y", "xyxyx", "yxyxy", "é", "éa", "éééé", "ü",
                                        "中", "文", "中文中文", "😀", "😀😀😀", " "]), max_size=12).map("".join))
def test_wordpiece_greedy_from_the_first_characters_longest(via: str, text: str) -> None:
    model = {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
             "max_input_chars_per_word": 100, "vocab": {token: i for i, token in enumerate(_LONGEST_VOCAB)}}
    assert_model_as_hf(model, {"type": "WhitespaceSplit"}, via, text)


def test_wordpiece_token_longer_than_the_longest_kept() -> None:
    """A token of more bytes than the table of longest tokens counts (254) is still found."""
    model = {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
             "max_input_chars_per_word": 1000, "vocab": {"[UNK]": 0, "k": 1, "##k": 2, "k" * 300: 3}}
    assert_model_as_hf(model, {"type": "WhitespaceSplit"}, "json", "k" * 302 + " kk")


# Viterbi's walks down the Unigram trie, whose edges are placed by the bytes of their paths:
# pieces sharing long prefixes, longer than the table first made for so few (it grows while
# the pieces go in), of one to four UTF-8 bytes a character, and characters no piece covers.
_TRIE_PIECES = ["a", "b", "ab", "abc", "abcd" * 8, "abcd" * 8 + "x", "ba", "é", "éé", "中文", "中", "文", "😀",
                "😀a", "a" * 40, "b" * 33, "\u2581", "\u2581a", "\u2581ab" + "c" * 20]


@pytest.mark.parametrize("via", ["json", "mtok"])
@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.lists(st.sampled_from([*_TRIE_PIECES, "z", " ", "ü"]), max_size=12).map("".join))
def test_unigram_trie_walks(via: str, text: str) -> None:
    vocab = [["<unk>", 0.0]] + [[piece, -1.0 - (i % 7) * 0.75] for i, piece in enumerate(_TRIE_PIECES)]
    model = {"type": "Unigram", "unk_id": 0, "byte_fallback": False, "vocab": vocab}
    assert_model_as_hf(model, _metaspace("always"), via, text)


# --- BPE pieces cut where no merge joins --------------------------------------------------

# A char-level BPE whose merges chain (a b -> ab, ab c -> abc), join byte-fallback symbols to
# each other and to a letter (<0xA9> x), and cover a character outside the BMP. Characters
# side by side in no token ("ac", "x中") are where the native core cuts pieces before merging.
_PARTS_CHARS = ["\u2581", "a", "b", "c", "d", "x", "y", "中", "文", "😀"]
_PARTS_MERGES = [("a", "b"), ("ab", "c"), ("b", "c"), ("c", "d"), ("abc", "d"), ("\u2581", "a"), ("\u2581a", "b"),
                 ("中", "文"), ("y", "y"), ("yy", "y"), ("d", "😀"), ("😀", "😀"), ("<0xC3>", "<0xA9>"),
                 ("<0xA9>", "x")]


def parts_config(byte_fallback: bool, ignore_merges: bool = False) -> dict:
    vocab = {"<unk>": 0}
    # "xy" no merge makes: with ignore_merges a piece "xy" is that token, a part "xy" is not
    for token in _PARTS_CHARS + ["<0xC3>", "<0xA9>", "<0xBC>", "xy"] + ["".join(merge) for merge in _PARTS_MERGES]:
        vocab.setdefault(token, len(vocab))
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
        "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
        "pre_tokenizer": None, "post_processor": None, "decoder": None,
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": not byte_fallback, "byte_fallback": byte_fallback,
                  "ignore_merges": ignore_merges, "vocab": vocab, "merges": [list(m) for m in _PARTS_MERGES]},
    }


@functools.lru_cache(maxsize=None)
def parts_tokenizers(byte_fallback: bool, via: str, ignore_merges: bool = False) -> tuple[pymtok.Tokenizer, object]:
    """Ours (from the config, or from its .mtok, whose tables the native model reads in place)
    and HF's."""
    from tokenizers import Tokenizer

    from pymtok.mtok import dumps_mtok, loads_mtok

    config = parts_config(byte_fallback, ignore_merges)
    ours = pymtok.Tokenizer.from_config(config)
    if via == "mtok":
        ours = loads_mtok(dumps_mtok(ours.config, ours.meta))
    return ours, Tokenizer.from_str(json.dumps(config))


# "é" falls back to <0xC3><0xA9> (or is unknown, fused with its neighbours without byte
# fallback), "ü" only partly has byte tokens, "ß" none
_PARTS_PIECES = [*_PARTS_CHARS, " ", "abcd", "中文", "yyy", "é", "éx", "ü", "ß", "q", "😀😀", "xy"]


def _parts_match(ours: pymtok.Tokenizer, theirs: Any, pieces: list[str]) -> None:
    """Texts of the pieces, each one piece (no pre-tokenizer), against HF: the whole, then without
    spaces and repeated (too long for the cache: its parts are cached), then each piece alone,
    which the cache may hold as a part (with ignore_merges a part's ids are not the piece's)."""
    text = "".join(pieces)
    for t in (text, text.replace(" ", "") * 12, *dict.fromkeys(pieces)):
        expected = theirs.encode(t, add_special_tokens=False).ids
        # twice: first merged part by part, then from the cache
        assert ours.encode(t, add_special_tokens=False) == expected, t
        assert ours.encode(t, add_special_tokens=False) == expected, t


@pytest.mark.parametrize("via", ["json", "mtok"])
@pytest.mark.parametrize("ignore_merges", [False, True])
@pytest.mark.parametrize("byte_fallback", [True, False])
@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pieces=st.lists(st.sampled_from(_PARTS_PIECES), max_size=60))
def test_bpe_parts_as_whole_pieces(byte_fallback: bool, ignore_merges: bool, via: str, pieces: list[str]) -> None:
    ours, theirs = parts_tokenizers(byte_fallback, via, ignore_merges)
    assert ours._native_text is not None
    _parts_match(ours, theirs, pieces)


# A byte-level BPE (ByteLevel without its regex: the whole text is one piece) whose tokens hold
# characters whole ("中文", "ab中") and in part, merged before any character is whole: the end
# of one with the next (中's last byte with "a"), a character with the start of the next ("a"
# with 中's first byte), the ends of two (中's last byte with the first of 文, 日 and 本);
# "日本語" no merge makes; byte 0x1E has no token (dropped, its neighbours' symbols meet); "ńſ" is
# a token of characters past GPT-2's (U+0144, U+017F: no byte's), which no piece has. Where
# no token holds bytes of two neighbouring characters the native core cuts the piece: from the
# start on a tokenizer.json, on a .mtok once it has merged a sixteenth as many bytes as the
# vocabulary has tokens (models.c byte_joins).
_BYTE_PARTS_MERGES = [
    (b"\xad", b"\xe6"), (b"\xad", "a"), ("a", b"\xe4"), (b"\xb8", b"\xad"), (b"\xe4", b"\xb8\xad"), (b"\x96", b"\x87"),
    (b"\xe6", b"\x96\x87"), ("中", "文"), (b"\x97", b"\xa5"), (b"\xe6", b"\x97\xa5"), (b"\x9c", b"\xac"),
    (b"\xe6", b"\x9c\xac"), (b"\xaa", b"\x9e"), (b"\xe8", b"\xaa\x9e"), ("日", "本"), ("a", "b"), ("ab", "中"),
    (b"\xc3", b"\xa9"),
]
_BYTE_PARTS_PIECES = ["中", "文", "日", "本", "語", "日本語", "中文", "a", "b", "ab", "x", "é", "😀", " ", "\xad", "\x1e"]


def byte_parts_config(ignore_merges: bool) -> dict:
    from pymtok.byte_level import BYTE_TO_CHAR

    def chars(part: bytes | str) -> str:
        raw = part if isinstance(part, bytes) else part.encode("utf-8")
        return "".join(BYTE_TO_CHAR[b] for b in raw)

    merges = [(chars(a), chars(b)) for a, b in _BYTE_PARTS_MERGES]
    vocab: dict[str, int] = {}
    for token in ([BYTE_TO_CHAR[b] for b in range(256) if b != 0x1E] + [a + b for a, b in merges] + [chars("日本語")]
                  + ["\u0144\u017f"]):
        vocab.setdefault(token, len(vocab))
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        "post_processor": None, "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                                            "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": ignore_merges, "vocab": vocab, "merges": [list(m) for m in merges]},
    }


@functools.lru_cache(maxsize=None)
def byte_parts_tokenizers(via: str, ignore_merges: bool) -> tuple[pymtok.Tokenizer, object]:
    from tokenizers import Tokenizer

    from pymtok.mtok import dumps_mtok, loads_mtok

    config = byte_parts_config(ignore_merges)
    ours = pymtok.Tokenizer.from_config(config)
    if via == "mtok":
        ours = loads_mtok(dumps_mtok(ours.config, ours.meta))
    theirs = Tokenizer.from_str(json.dumps(config))
    # one piece of more bytes than the vocabulary has tokens, merged whole: the cuts are due after it
    warm = "中文日本語éa中" * 60
    assert ours.encode(warm, add_special_tokens=False) == theirs.encode(warm, add_special_tokens=False).ids
    return ours, theirs


@pytest.mark.parametrize("via", ["json", "mtok"])
@pytest.mark.parametrize("ignore_merges", [False, True])
@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pieces=st.lists(st.sampled_from(_BYTE_PARTS_PIECES), max_size=60))
def test_byte_level_parts_as_whole_pieces(ignore_merges: bool, via: str, pieces: list[str]) -> None:
    ours, theirs = byte_parts_tokenizers(via, ignore_merges)
    assert ours._native_text is not None
    _parts_match(ours, theirs, pieces)


@pytest.mark.parametrize("via", ["json", "mtok"])
@pytest.mark.parametrize("name", slow_for(["qwen3", "llama3", "gpt-4o", "deepseek-v3", "roberta-base"],
                                          "gpt-4o", "deepseek-v3", "roberta-base"))
def test_byte_level_cuts_on_real_vocabularies(name: str, via: str, exported_mtok: Any) -> None:
    """A fresh tokenizer on 200,000 characters of Japanese in documents, then on chunks of every
    corpus file, against HF: a .mtok's cuts start some way in (once it has merged a sixteenth as
    many bytes as it has tokens), found by one of the batch's threads while the others go on uncut."""
    tok = pymtok.load(fixture_path("tokenizers", name) if via == "json" else exported_mtok(name))
    hf = hf_tokenizer(name)
    ja = dict(corpus_files())["ja_wagahaiwa_nekodearu.txt"][:200_000]
    texts = [ja[i:i + 2000] for i in range(0, len(ja), 2000)] + corpus_chunks(600, seed=11)
    expected = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
    for got in (tok.encode_batch(texts, add_special_tokens=False, num_threads=2),
                [tok.encode(t, add_special_tokens=False) for t in texts]):
        bad = [t for t, ids, want in zip(texts, got, expected) if ids != want]
        assert not bad, f"{len(bad)}/{len(texts)} differ; first: {bad[0]!r}"


# end_of_word_suffix: a piece's last character starts as its token + "</w>" (unknown when there
# is none: "x", "😀" at the end). Char-level with no pre-tokenizer, the whole text is one piece,
# which the native core must then neither cut where no token joins two characters nor before
# U+2581; byte-level behind ByteLevel's regex.
_SUFFIX_CHARS = ["\u2581", "a", "b", "c", "d", "x", "中", "文", "😀"]
_SUFFIX_ENDS = ["\u2581", "a", "b", "c", "d", "中", "文"]
_SUFFIX_MERGES = [("a", "b"), ("ab", "c</w>"), ("b", "c</w>"), ("a", "b</w>"), ("c", "d</w>"), ("\u2581", "a"),
                  ("\u2581a", "b</w>"), ("中", "文</w>"), ("d", "😀"), ("c", "d"), ("x", "x")]
_SUFFIX_BYTE_MERGES = [("h", "e"), ("he", "l"), ("l", "o</w>"), ("hel", "lo</w>"), ("Ġ", "w"), ("Ġw", "o"),
                       ("r", "d</w>"), ("Ġwo", "rd</w>"), ("ä", "¸"), ("ä¸", "Ń</w>"), ("1", "2</w>")]


def suffix_config(byte_level: bool, fuse_unk: bool) -> dict:
    from pymtok.byte_level import BYTE_TO_CHAR

    chars = [BYTE_TO_CHAR[b] for b in range(256)] if byte_level else _SUFFIX_CHARS
    ends = [c for c in chars if c not in "xyz"] if byte_level else _SUFFIX_ENDS
    merges = _SUFFIX_BYTE_MERGES if byte_level else _SUFFIX_MERGES
    vocab = {"<unk>": 0}
    for token in chars + [c + "</w>" for c in ends] + ["".join(merge) for merge in merges]:
        vocab.setdefault(token, len(vocab))
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
        "normalizer": None if byte_level else {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
        if byte_level else None,
        "post_processor": None, "decoder": None,
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": "</w>", "fuse_unk": fuse_unk, "byte_fallback": False,
                  "ignore_merges": False, "vocab": vocab, "merges": [list(m) for m in merges]},
    }


@functools.lru_cache(maxsize=None)
def suffix_tokenizers(byte_level: bool, fuse_unk: bool, via: str) -> tuple[pymtok.Tokenizer, object]:
    from tokenizers import Tokenizer

    from pymtok.mtok import dumps_mtok, loads_mtok

    config = suffix_config(byte_level, fuse_unk)
    ours = pymtok.Tokenizer.from_config(config)
    if via == "mtok":
        ours = loads_mtok(dumps_mtok(ours.config, ours.meta))
    return ours, Tokenizer.from_str(json.dumps(config))


_SUFFIX_PIECES = [*_SUFFIX_CHARS, " ", "abc", "ab", "cd", "中文", "xx", "hello", " world", " word", "12", "中", "é",
                  "x😀", "d😀"]


@pytest.mark.parametrize("via", ["json", "mtok"])
@pytest.mark.parametrize("fuse_unk", [True, False])
@pytest.mark.parametrize("byte_level", [True, False])
@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pieces=st.lists(st.sampled_from(_SUFFIX_PIECES), max_size=40))
def test_bpe_end_of_word_suffix(byte_level: bool, fuse_unk: bool, via: str, pieces: list[str]) -> None:
    ours, theirs = suffix_tokenizers(byte_level, fuse_unk, via)
    assert ours._native_text is not None
    text = "".join(pieces)
    for t in (text, text.replace(" ", "") * 12, text[-1:]):
        expected = theirs.encode(t, add_special_tokens=False).ids
        # twice: first merged, then from the cache
        assert ours.encode(t, add_special_tokens=False) == expected
        assert ours.encode(t, add_special_tokens=False) == expected


_CJK_RUNS = st.lists(
    st.sampled_from(["中文", "日本語", "ひらがな", "カタカナ", "한국어", "吾輩", "は", "猫", "である", "。", "《", "》", "｜",
                     "𠀀", "𪚥", "😀", "\ue000", "ǅ", "x", "1"]),
    min_size=1, max_size=150,
).map("".join)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_CJK_RUNS)
def test_gemma_long_cjk_pieces(text: str) -> None:
    # Gemma's CJK lines are single pieces, often too long for the cache; rare characters fall
    # back to bytes beside characters that have tokens
    assert_same_ids("gemma-v1", text)
    assert_same_ids("gemma-v1", " " + text * 3)


# --- native normalizers -------------------------------------------------------------------

BERT_CONFIGS = [
    {"type": "BertNormalizer", "clean_text": clean, "handle_chinese_chars": chinese,
     "strip_accents": strip, "lowercase": lower}
    for clean, chinese, strip, lower in itertools.product((True, False), (True, False),
                                                        (None, True, False), (True, False))
]
BERT_IDS = ["clean{}-cjk{}-strip{}-lower{}".format(*(c[k] for k in list(c)[1:])) for c in BERT_CONFIGS]


@functools.lru_cache(maxsize=None)
def normalizer_trio(cfg_json: str):
    """(native, pure, HF) ``str -> str`` for one normalizer config."""
    pure = normalizers.from_config(json.loads(cfg_json))
    fast = native.accelerate_normalizer(pure)
    assert fast is not pure and fast.pure is pure
    return fast, pure, hf_normalizer(cfg_json).normalize_str


def trio(index: int):
    """The native, pure and HF normalizer of TRIO_IDS[index] (t5's charsmap is a fixture)."""
    configs = [*BERT_CONFIGS, {"type": "NFC"}, *TEXT_CONFIGS]
    return normalizer_trio(json.dumps(configs[index] if index < len(configs) else t5_config()))


# literal Replace (one and several characters, overlapping candidates), Prepend, and all-native
# Sequences, which become one native Normalizer (Gemma's, Mistral's)
TEXT_CONFIGS = [
    {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
    {"type": "Replace", "pattern": {"String": "aa"}, "content": "b"},
    {"type": "Replace", "pattern": {"String": "\u0301"}, "content": ""},
    {"type": "Prepend", "prepend": "\u2581"},
    {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                                         {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
    # the Replace maps what Prepend put before the text too (native: the two in one pass)
    {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": " "},
                                         {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
    {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Replace", "pattern": {"String": "e"},
                                                           "content": "\u00e9\u00e9"}]},
    {"type": "NFKD"},
    {"type": "NFKC"},
    {"type": "StripAccents"},
    {"type": "Lowercase"},
    {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
    {"type": "Replace", "pattern": {"Regex": " {3,}"}, "content": "\u2581\u2581"},
    {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "},
    # CLIP's
    {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Replace", "pattern": {"Regex": "\\s+"},
                                                           "content": " "}, {"type": "Lowercase"}]},
    # ALBERT's
    {"type": "Sequence", "normalizers": [
        {"type": "Replace", "pattern": {"String": "``"}, "content": "\""},
        {"type": "Replace", "pattern": {"String": "''"}, "content": "\""},
        {"type": "NFKD"}, {"type": "StripAccents"}, {"type": "Lowercase"},
        {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]},
]
TRIO_IDS = [*BERT_IDS, "NFC", "replace-space", "replace-aa", "replace-mark", "prepend", "prepend-replace",
            "prepend-space-replace", "nfc-replace", "NFKD", "NFKC", "strip-accents", "lowercase", "space-runs", "space-runs-3", "whitespace-runs", "clip", "albert",
            "t5-precompiled"]


# The fast tier runs every code point through the BERT configs that pair every strip_accents
# value with every lowercase value, clean_text and handle_chinese_chars each both ways; the
# other BERT configs there get the generated strings, the corpus and the long texts
EVERY_CODE_POINT_FAST = {(True, True, None, True), (False, False, None, False), (True, False, True, True),
                         (False, True, True, False), (False, True, False, True), (True, False, False, False)}
EVERY_CODE_POINT = [
    pytest.param(index, id=TRIO_IDS[index], marks=[] if index >= len(BERT_CONFIGS) or tuple(
        list(BERT_CONFIGS[index].values())[1:]) in EVERY_CODE_POINT_FAST else [pytest.mark.slow])
    for index in range(len(TRIO_IDS))
]


@pytest.mark.parametrize("index", EVERY_CODE_POINT)
def test_native_normalizer_every_code_point(index: int) -> None:
    fast, pure, hf = trio(index)
    assert mismatches(fast, pure, ALL_CODE_POINTS)[:20] == []
    assert mismatches(fast, hf, ALL_CODE_POINTS)[:20] == []


# Characters that reach each branch: controls, White_Space, ideographs (compatibility ones
# decompose), marks in and out of canonical order, composition exclusions, letters that lowercase to two characters,
# Hangul jamo and syllables, emoji sequences, flags, Indic conjuncts, SentencePiece's rules.
_NORMALIZER_PIECES = [
    *"aZ é", "É", "e\u0301", "\u0301", "\u0316\u0301", "\u0301\u0316", "\u0345", "\u0344",
    "\U0001d165\U0001d16d", "\u05b0\u05b1", "İ", "Σ", "ΣΑΣ", "ẞ", "\u2c2f", "\ua7cb", "\U00010570",
    "\x00", "\x07", "\x0b", "\x85", "\xad", "\ufeff", "\ufffd", "\ue000", "\U000f0000", "\t", "\n",
    "\r", "\r\n", "\u00a0", "\u3000", "\u2028", "中", "\uf900", "\U00020000", "\u3400", "가", "각",
    "\u1100\u1161\u11a8", "\u1100", "\u11a8", "😀", "👍🏽", "👨\u200d👩\u200d👧", "🇫🇷", "🇫🇷🇩", "\u200d",
    "क्ष", "\u0915\u094d\u200d\u0937", "\u0600a", "ﬁ", "Ａ", "①", "½", "\u3099", "が", "か\u3099",
    "\u0e33", "\u0f77", "\u1e9b\u0323", "\u0958", "\U0001f1e6", "\u0897", "\U000105c9",
    "\u0b47\u0b3e", "\u0b47\u0300\u0b3e", "\u1100\u1161", "\uac00\u11a8", "\u2126", "\u0340", "\u0f73",
    "a\u0328\u0301", "a\u0301\u0328", "\U0001d15e", "\u05d9\u05b4", "\u0627\u0651\u064e",
]
normalizer_texts = st.one_of(
    st.lists(st.sampled_from(_NORMALIZER_PIECES), max_size=30).map("".join),
    st.text(st.characters(exclude_categories=("Cs",)), max_size=40),
    st.lists(st.sampled_from(_NORMALIZER_PIECES) | st.text(max_size=2), max_size=20).map("".join),
)


@pytest.mark.parametrize("index", range(len(TRIO_IDS)), ids=TRIO_IDS)
@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=normalizer_texts)
def test_native_normalizer_strings(index: int, text: str) -> None:
    fast, pure, hf = trio(index)
    assert fast(text) == pure(text) == hf(text)


def test_native_normalizer_corpus() -> None:
    for index in range(len(TRIO_IDS)):
        fast, pure, hf = trio(index)
        for text in corpus_chunks(40, seed=index):
            assert fast(text) == pure(text) == hf(text), TRIO_IDS[index]


@pytest.mark.parametrize("index", range(len(TRIO_IDS)), ids=TRIO_IDS)
def test_native_normalizer_long_texts(index: int) -> None:
    # long enough to grow every buffer, with characters that expand (İ lowercases to two,
    # ideographs gain spaces, Hangul decomposes to three) and ones that vanish
    fast, pure, hf = trio(index)
    for text in ["İ" * 700 + "A" * 700, "中" * 500 + "x" * 900, "각" * 600 + "\x00" * 600 + "é" * 300,
                 "e\u0301" * 400 + "\u0f73" * 300, "🇫🇷" * 300 + "👨\u200d👩" * 200]:
        assert fast(text) == pure(text) == hf(text)


@pytest.mark.parametrize("index", range(len(TRIO_IDS)), ids=TRIO_IDS)
def test_native_normalizer_orders_kept_non_starters(index: int) -> None:
    """Non-starters out of canonical order that strip_accents keeps (spacing marks, not Mn), alone,
    after an ideograph that gains spaces and after a character that decomposes; a run broken by a
    control clean_text drops, a run followed by each way the native pass takes a character (an
    untouched one, one it lowercases, an ideograph, a decomposition, ASCII), a long run."""
    fast, pure, hf = trio(index)
    run = "\U0001d16d\U0001d165"
    for text in ["a" + run, "中" + run + "x", "é" + run, run, "a\U0001d16d\x01\U0001d165b", "é" + run + "ж",
                 "é" + run + "Ж", "a" + run + "中", "a" + run + "é" + run, "ế\U0001d16d\U0001d165.", "a" + run * 40 + "b",
                 "\u0915\u094d\u093c\u0915"]:
        assert fast(text) == pure(text) == hf(text)


def test_native_normalizer_inside_sequence() -> None:
    seq = normalizers.Sequence([normalizers.NFD(), normalizers.BertNormalizer(lowercase=False)])
    fast = native.accelerate_normalizer(seq)
    assert isinstance(fast, normalizers.Sequence) and fast is not seq
    assert fast("ÀB\t中\x00ﬁ") == seq("ÀB\t中\x00ﬁ")
    untouched = normalizers.NFD()
    assert native.accelerate_normalizer(untouched) is untouched
    for regex in (" +", " {0,}", "  {2,}", "x{2,}", " {2,3}"):
        assert native.accelerate_normalizer(normalizers.Replace({"Regex": regex}, "_")).__module__ == "pymtok.normalizers"
    both = normalizers.Sequence([normalizers.NFC(), normalizers.Replace({"String": " "}, "_")])
    fast = native.accelerate_normalizer(both)
    assert type(fast).__module__ == "pymtok._native" and fast.pure is both
    for text in ["", "a b", "  ", "e\u0301 x"]:
        assert fast(text) == both(text)


# --- batches ----------------------------------------------------------------------------------


def batch_texts(name: str) -> list[str]:
    """Corpus chunks, empty texts, texts of added tokens only and cut by them."""
    added = added_contents(name)[:8] or ["x"]
    texts = corpus_chunks(40, seed=11)
    texts += ["", " ", "".join(added), added[0] + " a\n\n b " + added[-1] + "\n", "\n\n\t x  y"]
    return texts


@pytest.mark.parametrize("name", ACCELERATED)
def test_native_batch(name: str) -> None:
    tok = load(name)
    assert tok._native_batch is not None
    texts = batch_texts(name)
    hf = hf_tokenizer(name)
    for special in (False, True):
        theirs = [e.ids for e in hf.encode_batch(texts, add_special_tokens=special)]
        assert [tok.encode(t, add_special_tokens=special) for t in texts] == theirs
        for threads in (1, 2, 3):
            assert tok.encode_batch(texts, add_special_tokens=special, num_threads=threads) == theirs, (special, threads)


# the tests naming a model below run with its group (conftest.py), which has loaded it
@pytest.mark.parametrize("name", ["gemma-v1"])
def test_native_batch_threads_share_the_encoder(name: str) -> None:
    # many threads through one encoder (its piece cache is shared): results as one by one
    from concurrent.futures import ThreadPoolExecutor

    tok = load(name)
    texts = corpus_chunks(60, seed=3)
    expected = [tok.encode(t, add_special_tokens=False) for t in texts]
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda k: tok.encode_batch(texts[k:] + texts[:k], add_special_tokens=False, num_threads=2), range(8)))
    for k, result in enumerate(results):
        assert result == expected[k:] + expected[:k]


@pytest.mark.parametrize("name", ["llama3"])
def test_native_batch_errors_as_encode(name: str) -> None:
    tok = load(name)
    for bad in (["ok", "a\ud800b", 5], ["ok", 5, "a\ud800b"]):
        with pytest.raises((TypeError, ValueError)) as one:
            [tok.encode(t) for t in bad]  # type: ignore[arg-type]
        for threads in (1, 2):
            with pytest.raises(one.type) as batch:
                tok.encode_batch(bad, num_threads=threads)  # type: ignore[arg-type]
            assert str(batch.value) == str(one.value)
    assert tok.encode_batch(("a", "b"), num_threads=2) == [tok.encode("a"), tok.encode("b")]


# --- grapheme clusters --------------------------------------------------------------------

def pure_ends(text: str) -> list[int]:
    return grapheme_ends(normalizers._graphemes(text))


def test_grapheme_clusters_match_pure() -> None:
    from pymtok import _native

    classes = grapheme_classes()
    assert len(classes) >= 15
    for n in (1, 2, 3):
        for combo in itertools.product(classes, repeat=n):
            text = "".join(members[0] for members in combo)
            assert _native.grapheme_ends(text) == pure_ends(text), [hex(ord(c)) for c in text]
    rng = random.Random(0)
    for _ in range(20000):
        text = "".join(rng.choice(rng.choice(classes)) for _ in range(rng.randrange(1, 10)))
        assert _native.grapheme_ends(text) == pure_ends(text), [hex(ord(c)) for c in text]


def test_grapheme_clusters_match_hf() -> None:
    fast, _pure, hf = normalizer_trio(json.dumps({"type": "Precompiled", "precompiled_charsmap": marker_charsmap()}))
    members = short_members()
    rng = random.Random(1)
    texts = ["".join(rng.choices(members, k=rng.randrange(1, 12))) for _ in range(5000)]
    assert [t for t in texts if fast(t) != hf(t)][:10] == []


@functools.lru_cache(maxsize=None)
def worst_cases() -> dict[str, str]:
    """The benchmark's own worst-case inputs: the strings it times are the ones checked here."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    try:
        import bench
    finally:
        sys.path.pop(0)
    return bench.worst_cases()


@pytest.mark.slow
@pytest.mark.parametrize("case", ["1MB no spaces", "1MB one char", "random code points", "1MB of marks"])
@pytest.mark.parametrize("name", ["llama3", "qwen3", "gpt-4o", "gemma-v1", "all-minilm-l6-v2", "t5-small"])
def test_worst_cases(name: str, case: str) -> None:
    text = worst_cases()[case]
    tok = load(name)
    start = time.perf_counter()
    ours = tok.encode(text, add_special_tokens=False)
    elapsed = time.perf_counter() - start
    assert ours == hf_tokenizer(name).encode(text, add_special_tokens=False).ids
    # generous (a loaded machine, the pure path): both take seconds; quadratic behaviour, hours
    assert elapsed < 300, f"{name} {case}: {elapsed:.1f}s"


@pytest.mark.parametrize("generator, header", [("gen_unicode", "unicode_data.h"), ("gen_normalize", "normalize_data.h")])
def test_checked_in_tables_match_their_generators(generator: str, header: str) -> None:
    """The C tables are generated from the pure path's own (HF-pinned) predicates; a change there,
    or a different `regex` release, must not leave the native core on stale data."""
    import importlib
    import sys
    from pathlib import Path

    folder = Path(__file__).resolve().parent.parent / "src" / "pymtok" / "_native"
    sys.path.insert(0, str(folder))
    try:
        module = importlib.import_module(generator)
    finally:
        sys.path.remove(str(folder))
    assert module.render() == (folder / header).read_text(encoding="ascii")


@pytest.mark.parametrize("name", ["gemma-v1"])
def test_native_batch_many_chunks(name: str) -> None:
    # enough text for many native chunks on several threads: as encode one by one, HF alike,
    # post-processor ids (Gemma's BOS) added by the native core; a refused text far into the
    # batch raises encode()'s error while other threads are still encoding
    tok, hf = load(name), hf_tokenizer(name)
    added = added_contents(name)[:4]
    texts = [t * 3 for t in corpus_chunks(120, seed=5)] + ["", added[0] + "\n\n x " + added[-1]] * 3
    for special in (False, True):
        theirs = [e.ids for e in hf.encode_batch(texts, add_special_tokens=special)]
        for threads in (1, 2, 4):
            assert tok.encode_batch(texts, add_special_tokens=special, num_threads=threads) == theirs, (special, threads)
    for bad in ("a\ud800b", 5):
        with pytest.raises((TypeError, ValueError)) as one:
            tok.encode(bad)  # type: ignore[arg-type]
        for threads in (1, 2, 4):
            with pytest.raises(one.type) as batch:
                tok.encode_batch(texts[:90] + [bad] + texts[90:], num_threads=threads)  # type: ignore[list-item]
            assert str(batch.value) == str(one.value)
    assert native._affixes(tok.post_processor) == ([2], [])


_TWO_REBUILDS = r'''
import json, random, sys
from tokenizers import Tokenizer
import pymtok
cfg = json.loads(open(sys.argv[1], encoding="utf-8").read())
cfg["normalizer"] = None
cfg["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
    {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "never", "split": False},
    {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}]}
hf = Tokenizer.from_str(json.dumps(cfg))
tok = pymtok.Tokenizer.from_config(cfg)
assert tok._native_text is not None, "the native core does not run this pipeline"
text = open(sys.argv[2], encoding="utf-8").read()
r = random.Random(0)
for _ in range(3000):
    start = r.randrange(len(text))
    piece = text[start:start + r.randrange(r.choice([2, 30, 300, 3000]))]
    assert tok.encode(piece) == hf.encode(piece).ids, piece
print("ok")
'''


def test_two_rebuilding_steps_keep_the_buffer_room_right() -> None:
    """Metaspace then ByteLevel with its prefix space: each step rebuilds the pieces' buffer, and
    the second one's block may be the one the first freed, where the reused buffer was. Its room
    was then inferred from the pointer, unchanged, so a long room was kept for a short block and
    the next longer text was copied past its end (glibc aborted within a few hundred calls of
    varied lengths). In a child process: such a bug kills the process that has it."""
    if native._core() is None:
        pytest.skip("the pure path rebuilds no native buffer")
    english = corpus_dir() / "en_prose_botchan.txt"
    proc = subprocess.run(
        [sys.executable, "-c", _TWO_REBUILDS, str(fixture_path("tokenizers", "qwen3", "tokenizer.json")), str(english)],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]
