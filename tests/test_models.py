"""Models alone against HF's own model objects, fed the pieces HF's pre-tokenizer produces."""

from __future__ import annotations

import functools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pymtok import models
from pymtok.errors import FormatError
from pymtok.hf_json import read_json
from conftest import TOKENIZER_NAMES, corpus_chunks, examples, fixture_path, hf_tokenizer


@functools.lru_cache(maxsize=None)
def our_model(name: str) -> models.Model:
    cfg = read_json(fixture_path("tokenizers", name, "tokenizer.json"), "tokenizer.json")
    return models.from_config(cfg["model"])


def hf_pieces(name: str, text: str) -> list[str]:
    hf = hf_tokenizer(name)
    normalized = hf.normalizer.normalize_str(text) if hf.normalizer else text
    if hf.pre_tokenizer is None:
        return [normalized] if normalized else []
    return [p for p, _ in hf.pre_tokenizer.pre_tokenize_str(normalized)]


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_model_matches_hf_on_corpus_pieces(name: str) -> None:
    hf, ours = hf_tokenizer(name), our_model(name)
    checked = 0
    for text in corpus_chunks(150, seed=11):
        for piece in hf_pieces(name, text):
            want = [t.id for t in hf.model.tokenize(piece)]
            assert ours(piece) == want, piece
            checked += 1
    assert checked > 100


@pytest.mark.parametrize("name", ["gemma-v1", "t5-small", "all-minilm-l6-v2", "clip-vit", "chatglm3-6b"])
def test_model_matches_hf_on_any_piece(name: str) -> None:
    """Arbitrary pieces reach unk, byte fallback, suffixes and max-length paths."""
    hf, ours = hf_tokenizer(name), our_model(name)

    @settings(max_examples=examples(300), deadline=None)
    @given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=40))
    def check(piece: str) -> None:
        assert ours(piece) == [t.id for t in hf.model.tokenize(piece)]

    check()


def test_wordpiece_long_word_is_unk() -> None:
    hf, ours = hf_tokenizer("all-minilm-l6-v2"), our_model("all-minilm-l6-v2")
    word = "a" * 101
    assert ours(word) == [t.id for t in hf.model.tokenize(word)]


def test_bpe_rejects_merge_outside_vocab() -> None:
    with pytest.raises(FormatError, match="not in the vocabulary"):
        models.BPE(vocab={"a": 0, "b": 1}, merges=["a b"])


def test_model_without_type_is_told_by_its_fields_as_hf_does() -> None:
    from tokenizers import Tokenizer

    base = {"version": "1.0", "added_tokens": [], "normalizer": None, "pre_tokenizer": None,
            "post_processor": None, "decoder": None}
    for cfg in ({"vocab": {"a": 0}, "unk_token": "a"}, {"vocab": {"a": 0}, "merges": []},
                {"vocab": {"a": 0, "[UNK]": 1}, "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                 "max_input_chars_per_word": 100}):
        hf_type = json.loads(Tokenizer.from_str(json.dumps({**base, "model": cfg})).to_str())["model"]["type"]
        assert type(models.from_config(cfg)).__name__ == hf_type
    with pytest.raises(FormatError, match="unk_token"):  # HF: "missing field `unk_token`"
        models.from_config({"vocab": {"a": 0}})
    with pytest.raises(FormatError, match="no known model"):
        models.from_config({"vocab": 3})


# The pure path's BPE shortcuts: pieces are merged by scanning pair ranks up to
# models._SHORT_WORD symbols and through a priority queue beyond; results are cached per piece.
SHORTCUT_BPE_NAMES = ["qwen3", "llama3", "gemma-v1", "mistral-7b-v0.1", "clip-vit", "roberta-base"]


def around_the_threshold() -> list[str]:
    """Pieces whose symbol counts run across the scan/queue threshold, with ties (the same pair
    at several places), multi-byte characters and byte fallback."""
    units = ["a", "ab", "aab", "的", "é", "\u0800", "🙂", " a", "\u4e00\u4e8c"]
    return [unit * n for unit in units for n in range(1, 2 * models._SHORT_WORD // len(unit) + 3)]


@pytest.mark.parametrize("name", SHORTCUT_BPE_NAMES)
def test_bpe_short_and_long_pieces_match_hf(name: str) -> None:
    hf, ours = hf_tokenizer(name), our_model(name)
    for text in around_the_threshold():
        for piece in hf_pieces(name, text):
            assert ours(piece) == [t.id for t in hf.model.tokenize(piece)], piece


@pytest.mark.parametrize("name", SHORTCUT_BPE_NAMES)
def test_bpe_scan_and_queue_agree(name: str) -> None:
    """Both merge loops on the same symbols, for every corpus piece the scan takes."""
    bpe = our_model(name)
    assert isinstance(bpe, models.BPE)
    checked = 0
    for text in corpus_chunks(60, seed=5) + around_the_threshold():
        for piece in hf_pieces(name, text):
            # SentencePiece-style BPE merges word by word
            for word in models._METASPACE_WORDS.findall(piece) if bpe._by_metaspace_words else [piece]:
                symbols = bpe._initial_symbols(word)
                if 2 < len(symbols) <= models._SHORT_WORD:
                    assert bpe._merge(list(symbols)) == bpe._merge_long(list(symbols)), word
                    checked += 1
    assert checked > 100


def test_cached_results_are_not_shared() -> None:
    ours = our_model("qwen3")
    first = ours("Ġhello")
    first.append(-1)
    assert ours("Ġhello") == [t.id for t in hf_tokenizer("qwen3").model.tokenize("Ġhello")]
