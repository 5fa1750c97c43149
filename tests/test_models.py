"""Models alone against HF's own model objects, fed the pieces HF's pre-tokenizer produces."""

from __future__ import annotations

import functools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pymtok import models
from pymtok.errors import FormatError
from pymtok.hf_json import read_json
from conftest import TOKENIZER_NAMES, corpus_chunks, fixture_path, hf_tokenizer


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

    @settings(max_examples=300, deadline=None)
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


def test_model_without_type_needs_known_fields() -> None:
    with pytest.raises(FormatError, match="no known model"):
        models.from_config({"vocab": {"a": 0}})
