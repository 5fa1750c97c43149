"""The native core's token offsets (``native.accelerate_offsets``) against HF ``tokenizers``.

``tok(text, return_offsets_mapping=True)`` takes them from the native core wherever it knows
them; these tests check that it does (no pure-Python detour on the tokenizers it covers) and
that the ids and offsets it gives equal HF's on any text, including the texts where the native
core hands over to the pure pipeline. On the pure path (``PYMTOK_PURE=1``) the same texts check
the pure pipeline.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

import pytest

import pymtok
from pymtok import encoding, native

from conftest import TOKENIZER_NAMES, corpus_chunks, examples, fixture_path, hf_tokenizer, ours

PURE = os.environ.get("PYMTOK_PURE", "") not in ("", "0")
# the tokenizers the native offsets are built for: byte-level BPE with no normalizer or NFC
# (aligned as HF aligns it), BERT's WordPiece behind its BertNormalizer, SentencePiece-style
# BPE with byte fallback behind Prepend and Replace (ChatGLM3 replacing a multi-character prefix
# its Split then never meets), Unigram behind Metaspace and Precompiled (T5) or NFKD,
# StripAccents, Lowercase and runs of spaces (ALBERT), and the native BPE on the pieces of a
# pre-tokenizer only the pure path runs (Falcon's Punctuation and Digits around ByteLevel); CLIP's
# NFC, whitespace runs and lower-casing before a byte-level BPE with an end-of-word suffix
COVERED = ["llama3", "qwen3", "gpt-4o", "deepseek-v3", "roberta-base", "all-minilm-l6-v2", "bert-base-chinese",
           "gemma-v1", "mistral-7b-v0.1", "phi-3-mini", "t5-small", "chatglm3-6b", "albert-base-v2", "falcon",
           "clip-vit"]

_PIECES = list("aAbZ\u0327\u0323\u0301\u0308é \t\n\r\u3000\u00a0\u2028ﬁ①½ΣİǅДж日本語のテ한\u200b\u00ad\x00\ufffd"
               "🤗👩\u200d👧'\",.!?-_0123456789") + [
    "  ", "   ", "\n\n", " \n ", "Hello", " world", "'s", "İstanbul", "ﬁne", "a\u0323\u0301",
    "👩\u200d👩\u200d👧", "\u1100\u1161\u11a8", "\u0915\u094d\u0937", "日本語のテキスト", "中文。", "123456",
]


@functools.lru_cache(maxsize=2)
def oracle(name: str) -> Any:
    return hf_tokenizer(name)


def _added_texts(tok: pymtok.Tokenizer) -> list[str]:
    return sorted(t.content for t in tok.added.by_id.values())[:20]


def _check(name: str, text: str) -> bool:
    """``tok(text, ...)``'s ids and offsets equal HF's; returns whether the native core gave them."""
    tok = ours(name)
    want = oracle(name).encode(text, add_special_tokens=False)
    got = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    assert got["input_ids"] == want.ids, (name, text)
    assert got["offset_mapping"] == want.offsets, (name, text)
    settings = tok.meta.call_settings
    if "add_bos_token" in settings or "add_eos_token" in settings:
        return _native_answers(tok, text)  # transformers' own layout: test_call.py compares it
    with_specials = oracle(name).encode(text)
    got = tok(text, return_offsets_mapping=True, return_special_tokens_mask=True)
    assert got["input_ids"] == with_specials.ids, (name, text)
    assert got["offset_mapping"] == with_specials.offsets, (name, text)
    assert got["special_tokens_mask"] == with_specials.special_tokens_mask, (name, text)
    return _native_answers(tok, text)


def _native_answers(tok: pymtok.Tokenizer, text: str) -> bool:
    fast = encoding._native_offsets(tok)  # the call's own, made once per tokenizer
    trim = encoding._trim_mode(encoding._call_post_processor(tok)) or 0
    return fast is not None and fast(text, trim, (), ()) is not None


@pytest.mark.skipif(PURE, reason="the native core is off")
@pytest.mark.parametrize("name", COVERED)
def test_covered_tokenizers_take_no_pure_detour(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """On corpus text the covered tokenizers' offsets come from the native core alone: the pure
    aligned pipeline (``encode_words``) is not called, and the offsets still equal HF's."""
    tok = ours(name)
    assert native.accelerate_offsets(tok) is not None, name
    texts = [c[:1500] for c in corpus_chunks(12, seed=7)]
    wants = [oracle(name).encode(text, add_special_tokens=False) for text in texts]
    _assert_hf_offsets(tok, name, texts, wants, monkeypatch, native_only=True)
    batch = tok(texts, add_special_tokens=False, return_offsets_mapping=True, truncation=True, max_length=64)
    assert batch["offset_mapping"] == [w.offsets[:64] for w in wants], name


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_offsets_on_corpus_and_edges(name: str) -> None:
    """Every fixture, whichever path answers: corpus chunks, the added tokens spelled in text."""
    covered = 0
    texts = [c[:2000] for c in corpus_chunks(16, seed=11)]
    texts += ["", " ", "   x  ", "\n\n\n", "".join(_PIECES), " ".join(_added_texts(ours(name)))]
    for text in texts:
        covered += _check(name, text)
    if name in COVERED and not PURE:
        assert covered >= len(texts) // 2, (name, covered)


@pytest.mark.parametrize("name", COVERED)
def test_offsets_property(name: str) -> None:
    """Hypothesis text: any Unicode, combining marks in and out of canonical order, emoji ZWJ
    sequences, CJK, whitespace runs and the tokenizer's added tokens, next to each other."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    pieces = _PIECES + _added_texts(ours(name))
    text = st.lists(st.one_of(st.sampled_from(pieces), st.text(st.characters(exclude_categories=("Cs",)), max_size=6)),
                    max_size=16).map("".join)

    @settings(max_examples=examples(100), deadline=None, database=None)
    @given(text)
    def prop(text: str) -> None:
        _check(name, text)

    prop()


@pytest.mark.parametrize("name", ["qwen3", "mistral-7b-v0.1", "all-minilm-l6-v2", "t5-small"])
def test_offsets_of_an_exported_mtok(name: str, exported_tokenizer: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A .mtok's tokens are measured from its records (a byte-level one's through its GPT-2
    characters, in bytes and in the characters they spell; WordPiece's after the prefix; Unigram
    pieces): on text of one- to four-byte characters the offsets are HF's, from the native core
    alone, which a length of the wrong kind would misplace or hand over to the pure path."""
    tok = exported_tokenizer(name)
    texts = [" ".join(_PIECES), *(c[:1500] for c in corpus_chunks(6, seed=5))]
    wants = [oracle(name).encode(text, add_special_tokens=False) for text in texts]
    if not PURE:
        assert native.accelerate_offsets(tok) is not None, name
    _assert_hf_offsets(tok, name, texts, wants, monkeypatch, native_only=not PURE)


def _assert_hf_offsets(tok: Any, name: str, texts: list[str], wants: list[Any], monkeypatch: pytest.MonkeyPatch,
                       native_only: bool) -> None:
    """tok's ids and offsets of each text are HF's (wants); native_only: with the pure aligned
    pipeline (encode_words) never called."""
    if native_only:
        def no_pure(*args: Any) -> Any:
            raise AssertionError("the pure aligned pipeline ran")

        monkeypatch.setattr(pymtok.Tokenizer, "encode_words", no_pure)
    for text, want in zip(texts, wants):
        got = tok(text, add_special_tokens=False, return_offsets_mapping=True)
        assert got["input_ids"] == want.ids and got["offset_mapping"] == want.offsets, (name, text[:80])


@pytest.mark.parametrize("name", ["t5-small", "albert-base-v2"])
def test_unigram_pieces_of_several_unknown_tokens(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Unigram piece holding two runs of characters the vocabulary lacks (its tokens' lengths
    cannot place two unknown tokens) takes each token's bytes from the model run again, which
    the piece cache keeps: the first call and the next ones, which read it there, give HF's
    offsets, from the native core alone; so do pieces of more tokens than one batch of lengths.
    ASCII text takes the ASCII way, where the pieces' keys start with the prepended "▁" that is
    not in the text."""
    text = "x日y本z Ñoño日本 a語b語c 語x語y語 " * 3 + "ab" * 40 + " 日" + "x語" * 20
    ascii = "a{b}c ~x~y {x}y x^y^z " * 3 + "ab" * 70 + " " + "zq" * 40
    wants = [oracle(name).encode(t, add_special_tokens=False) for t in (text, ascii)]
    assert wants[0].tokens.count("▁x") + wants[0].tokens.count("x") >= 3  # the pieces are cut as meant
    assert len(wants[1].tokens) > 3 * 16 + 33
    tok = ours(name)
    for _ in range(3):
        _assert_hf_offsets(tok, name, [text, ascii], wants, monkeypatch, native_only=not PURE)


# bases and marks that NFC / NFKC reorder, compose (one onto another: ẹ + ́), decompose and
# recompose (Hangul jamo, ﬁ, Ω), in any order
_MARKED = [*"aeoAEnsZy ", "\u1100", "\u1161", "\u11a8", "\uac00", "\u00e9", "\u1e9b", "\ufb01", "\u2126",
           "\u0958", "\u0928", "\u093c", "\u3046", "\u3099", "\u0345", "\u05b0", "\u0e38",
           *map(chr, range(0x300, 0x370, 3)), "\u0323", "\u0327"]


@pytest.mark.parametrize("name", [name for name in TOKENIZER_NAMES if name in ("qwen3", "clip-vit", "albert-base-v2")])
def test_offsets_where_normalization_reorders_and_composes_marks(name: str) -> None:
    # HF aligns NFC's output by its own composition algorithm (a composite takes the span of the
    # starter, a reordered mark the next original position): normalizers.py follows it
    from hypothesis import given, settings
    from hypothesis import strategies as st

    native_nfc = name in COVERED and not PURE  # the native core aligns NFC itself
    assert _check(name, "e\u0301\u0323 x") or not native_nfc  # offsets (0, 1), (2, 3), (3, 5)

    @settings(max_examples=examples(200), deadline=None, database=None)
    @given(st.lists(st.sampled_from(_MARKED), max_size=12).map("".join))
    def prop(text: str) -> None:
        assert _check(name, text) or not native_nfc, text

    prop()


_KEPT_MARKS = [*"aeEI ", "\u00c9", "\u0130", "\u0301", "\u0316", "\U0001d165", "\U0001d16e", "\U0001d172", "\u0f71",
               "\u0f72", "\u0f74", "\u4e2d", "\u0416", "\x01"]


@pytest.mark.parametrize("name", [name for name in TOKENIZER_NAMES if name in ("all-minilm-l6-v2", "bert-base-chinese")])
def test_bert_offsets_where_ordering_moves_marks_that_stay(name: str) -> None:
    """BertNormalizer's canonical ordering moves non-starters that strip_accents keeps (spacing
    marks, Tibetan vowel signs): the native core leaves their alignment to the pure path, and the
    offsets equal HF's; marks it drops, reordered or not, leave the others' alignment alone."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    for text in ["\u00c9\U0001d165\u0316 the\u4e2d", "\u0f71\u0f72\U0001d165\u0316\u4e2d", "\u0130\u0f72\U0001d172 \u0416"]:
        _check(name, text)

    @settings(max_examples=examples(300), deadline=None, database=None)
    @given(st.lists(st.sampled_from(_KEPT_MARKS), max_size=12).map("".join))
    def prop(text: str) -> None:
        _check(name, text)

    prop()


@pytest.mark.skipif(PURE, reason="the native core is off")
def test_encode_offsets_arguments() -> None:
    tok = ours("llama3")
    assert native.accelerate_offsets(tok) is not None
    encoder = tok._native_segment.__self__  # type: ignore[union-attr]
    with pytest.raises(TypeError):
        encoder.encode_offsets(b"bytes", None, -1)
    with pytest.raises(ValueError):
        encoder.encode_offsets("text", None, 2)
    with pytest.raises(ValueError, match="surrogate"):
        encoder.encode_offsets("a\ud800", None, -1)
    with pytest.raises(ValueError):
        encoder.set_offsets(b"abc", None, -1)
    assert encoder.encode_offsets("", None, -1) == ([], [])
    assert encoder.encode_offsets("", None, -1, [7], [8, 9]) == ([7, 8, 9], [(0, 0)] * 3)
    ids, offsets = encoder.encode_offsets("Hello world", None, -1)
    assert encoder.encode_offsets("Hello world", None, -1, [1], []) == ([1, *ids], [(0, 0), *offsets])
    with pytest.raises(TypeError):
        encoder.encode_offsets("text", None, -1, [1])
    with pytest.raises(ValueError):
        encoder.encode_offsets("text", None, -1, [-1], [])
    with pytest.raises(ValueError):
        encoder.set_offsets(b"\0" * 8, None, -1, b"\0" * 4)  # tables of different sizes


def test_nfkc_ids_native_and_offsets_as_hf() -> None:
    """NFKC runs natively (NFKD, then NFC) and gives HF's ids; HF aligns a composite of a
    compatibility decomposition its own way, which the pure path follows: the offsets equal HF's
    whichever path gives them."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    tokenizers = pytest.importorskip("tokenizers")
    config = json.loads(Path(fixture_path("tokenizers", "qwen3", "tokenizer.json")).read_text(encoding="utf-8"))
    config["normalizer"] = {"type": "NFKC"}
    tok, hf = pymtok.Tokenizer.from_config(config), tokenizers.Tokenizer.from_str(json.dumps(config))
    assert PURE or type(tok.normalizer).__module__ == "pymtok._native"
    compat = [*_MARKED, "①", "½", "Ａ", "㍿", "ﷺ", "ǅ", "\u2474", "\uff76\uff9e", "\u0f77", "\u1e9b\u0323"]

    @settings(max_examples=examples(200), deadline=None, database=None)
    @given(st.lists(st.sampled_from(compat), max_size=14).map("".join))
    def prop(text: str) -> None:
        want = hf.encode(text, add_special_tokens=False)
        got = tok(text, add_special_tokens=False, return_offsets_mapping=True)
        assert (got["input_ids"], got["offset_mapping"]) == (want.ids, want.offsets), text

    prop()


def test_an_empty_prepend_gives_each_segment_s_first_character_an_empty_span() -> None:
    """HF's Prepend of "" still prepends: the first character of each segment (text between
    added tokens) stands as the inserted one, which covers nothing at the segment's start."""
    tokenizers = pytest.importorskip("tokenizers")
    config = json.loads(Path(fixture_path("tokenizers", "mistral-7b-v0.1", "tokenizer.json")).read_text(encoding="utf-8"))
    config["normalizer"] = {"type": "Prepend", "prepend": ""}
    tok, hf = pymtok.Tokenizer.from_config(config), tokenizers.Tokenizer.from_str(json.dumps(config))
    for text in ["Hello", "a b", "Hello</s>world", "x</s> y</s>", "日本 語", *corpus_chunks(10, seed=4)]:
        want = hf.encode(text, add_special_tokens=False)
        got = tok(text, add_special_tokens=False, return_offsets_mapping=True)
        assert (got["input_ids"], got["offset_mapping"]) == (want.ids, want.offsets), text


def test_a_token_spelling_the_end_of_word_suffix_inside_a_piece() -> None:
    """Tokens are measured less their end-of-word suffix, which a piece's own characters may
    spell too: a token "</w>" made of them before the piece's end is not of length 0; HF's
    offsets all the same."""
    tokenizers = pytest.importorskip("tokenizers")
    vocab = {t: i for i, t in enumerate(["<unk>", "<", "/", "w", ">", "a", "a</w>", ">a</w>", "</", "</w", "</w>"])}
    config = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        "post_processor": None, "decoder": None,
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": "</w>", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [["<", "/"], ["</", "w"], ["</w", ">"], [">", "a</w>"]]},
    }
    tok, hf = pymtok.Tokenizer.from_config(config), tokenizers.Tokenizer.from_str(json.dumps(config))
    for text in ["</w>a", "a</w>a", "</w>", "a"]:
        want = hf.encode(text, add_special_tokens=False)
        got = tok(text, add_special_tokens=False, return_offsets_mapping=True)
        assert (got["input_ids"], got["offset_mapping"]) == (want.ids, want.offsets), text


@pytest.mark.parametrize("name", COVERED)
def test_long_text_and_special_tokens_laid_out(name: str) -> None:
    """A text longer than the spans whose tuples the native core shares (4096 characters), and
    the post-processor's special tokens laid around the offsets by the native core."""
    tok = ours(name)
    text = " ".join(c[:1500] for c in corpus_chunks(4, seed=3)) * 2
    want = oracle(name).encode(text, add_special_tokens=False)
    got = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    assert got["input_ids"] == want.ids and got["offset_mapping"] == want.offsets, name
    assert tok(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"] == want.offsets
    settings = tok.meta.call_settings
    if "add_bos_token" in settings or "add_eos_token" in settings:
        return  # transformers' own layout: test_call.py compares it
    with_specials = oracle(name).encode(text)
    laid = tok(text, return_offsets_mapping=True)
    assert laid["input_ids"] == with_specials.ids, name
    assert laid["offset_mapping"] == with_specials.offsets, name
    assert laid["attention_mask"] == with_specials.attention_mask, name


_PLACED = [*"abcxé日 ", "ab", "abc", "éa", "\u0301"]


def _placement_bpe(kind: str) -> tuple[pymtok.Tokenizer, Any]:
    tokenizers = pytest.importorskip("tokenizers")
    letters = ["a", "b", "c", "ab", "abc", "é", "éa"]
    config = {
        "drops": _char_bpe(letters, None, False, False),
        "unk": _char_bpe(["<unk>", *letters], "<unk>", False, False),
        "fused unk": _char_bpe(["<unk>", *letters], "<unk>", True, False),
        "byte fallback": _char_bpe(["<unk>", *_BYTES, *letters], "<unk>", True, True),
        "some byte tokens": _char_bpe([*_BYTES[:0xC8], *letters], None, False, True),
    }[kind]
    tok, hf = pymtok.Tokenizer.from_config(config), tokenizers.Tokenizer.from_str(json.dumps(config))
    assert PURE or native.accelerate_offsets(tok) is not None
    return tok, hf


@pytest.mark.parametrize("kind", ["drops", "unk", "byte fallback", "some byte tokens"])
@pytest.mark.parametrize("spaced", [1, 7, 300])
def test_bpe_tokens_placed_through_long_segments(kind: str, spaced: int) -> None:
    """Segments of thousands of tokens, with pieces every few hundred tokens or every few
    (WhitespaceSplit's gaps between them) and the characters above at random among them: the
    native core runs through a segment's tokens by their steps and checks the pieces' ends
    after (OffsetLengths.steps8), a piece that fails (a dropped character, an unknown token, a
    gap) placed apart and the run started again after it, until too many have failed; HF's
    offsets all the same, and from the native core on text it knows."""
    import random

    tok, hf = _placement_bpe(kind)
    rng = random.Random(f"{kind} {spaced}")
    letters = [p for p in _PLACED if p != " "]
    for rare in (0.0, 0.01, 0.3):
        text = " ".join("".join(rng.choice(letters) if rng.random() < rare else rng.choice(["ab", "abc", "éa", "é"])
                                for _ in range(spaced)) for _ in range(3000 // spaced))
        want = hf.encode(text, add_special_tokens=False)
        got = tok(text, add_special_tokens=False, return_offsets_mapping=True)
        assert (got["input_ids"], got["offset_mapping"]) == (want.ids, want.offsets), (kind, spaced, rare)
        if not PURE and rare == 0.0:
            assert _native_answers(tok, text), (kind, spaced)


def _char_bpe(vocab: list[str], unk: str | None, fuse_unk: bool, byte_fallback: bool) -> dict[str, Any]:
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
        "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": None, "decoder": None,
        "model": {"type": "BPE", "dropout": None, "unk_token": unk, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": fuse_unk, "byte_fallback": byte_fallback,
                  "ignore_merges": False, "vocab": {t: i for i, t in enumerate(vocab)},
                  "merges": [["a", "b"], ["ab", "c"], ["é", "a"]]},
    }


_BYTES = [f"<0x{b:02X}>" for b in range(256)]


@pytest.mark.parametrize("kind", ["drops", "unk", "fused unk", "byte fallback", "some byte tokens"])
def test_bpe_tokens_placed_after_unknown_and_dropped_characters(kind: str) -> None:
    """A piece's last BPE token takes what the others leave only where every character gives a
    token: one the model drops (no unk token, no byte token for one of its bytes) moves HF's
    offsets of the tokens after it short of the piece's end; an unk token, fused or not, and
    byte tokens between the others. HF's offsets all the same."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    tok, hf = _placement_bpe(kind)

    @settings(max_examples=examples(200), deadline=None, database=None)
    @given(st.lists(st.sampled_from(_PLACED), max_size=12).map("".join))
    def prop(text: str) -> None:
        want = hf.encode(text, add_special_tokens=False)
        got = tok(text, add_special_tokens=False, return_offsets_mapping=True)
        assert (got["input_ids"], got["offset_mapping"]) == (want.ids, want.offsets), text

    prop()
    if kind in ("byte fallback", "some byte tokens") and not PURE:
        # 日's first byte has no byte token among the first 200: only the full set covers it
        assert _native_answers(tok, "abc xéa 日é" if kind == "byte fallback" else "abc xéa")


@pytest.mark.parametrize("name, pre", [
    ("all-minilm-l6-v2", {"type": "Punctuation", "behavior": "Isolated"}),  # "[UNK]" for a long piece, "##"
    ("t5-small", None),                                                      # Unigram's "<unk>"
    ("mistral-7b-v0.1", None),                                               # "<0x0A>" for a newline
])
def test_trimmed_offsets_read_token_strings(name: str, pre: dict[str, Any] | None, tmp_path: Path) -> None:
    """An offsets-trimming post-processor (RoBERTa's) trims by the spaces of each token's string:
    an unknown token, a byte token or a "##" continuation has none where the text it covers has
    some (pieces hold spaces behind Punctuation): none is
    trimmed, as HF trims none."""
    tokenizers = pytest.importorskip("tokenizers")
    config = json.loads(Path(fixture_path("tokenizers", name, "tokenizer.json")).read_text(encoding="utf-8"))
    if pre is not None:
        config["pre_tokenizer"] = pre
    if config["model"].get("type") == "WordPiece":
        config["model"]["max_input_chars_per_word"] = 6
    config["padding"] = config["truncation"] = None
    config["post_processor"] = {"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 1],
                                "trim_offsets": True, "add_prefix_space": False}
    # both read the file: Unigram's ties fall by the scores as HF's JSON reader rounds them
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    tok = pymtok.load(path)
    hf = tokenizers.Tokenizer.from_file(str(path))
    texts = [" \n a\n", "word  \t\n", "over  long  pieces here.\n\nAnd more\u3000text", *corpus_chunks(60, seed=9)]
    for text in texts:
        want = hf.encode(text)
        assert tok(text, return_offsets_mapping=True)["offset_mapping"] == want.offsets, (name, text)


def test_trimmed_offsets_of_an_unknown_bpe_token(tmp_path: Path) -> None:
    """A BPE model's (fused) unknown token over whitespace keeps it in its offsets when they are
    trimmed: its string, "<unk>", has no space to trim."""
    tokenizers = pytest.importorskip("tokenizers")
    config = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
              "pre_tokenizer": None, "decoder": None,
              "post_processor": {"type": "RobertaProcessing", "sep": ["</s>", 5], "cls": ["<s>", 4],
                                 "trim_offsets": True, "add_prefix_space": False},
              "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                        "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": False, "ignore_merges": False,
                        "vocab": {"<unk>": 0, "a": 1, "b": 2, "ab": 3, "<s>": 4, "</s>": 5}, "merges": [["a", "b"]]}}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    tok = pymtok.load(path)
    hf = tokenizers.Tokenizer.from_file(str(path))
    for text in ["ab\r\tb", " a", "b\n", "\u3000\u3000ab \tab", "a b"]:
        want = hf.encode(text)
        assert tok(text, return_offsets_mapping=True)["offset_mapping"] == want.offsets, text
