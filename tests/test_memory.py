"""Memory of one encode call (issue 16): the native core's work buffers for a long text, and the
ids of the windows it encodes such a text in, against HF ``tokenizers``.

The bound is read from the native core itself (``_native.work_peak()``: the largest set of work
buffers a call gave back, in bytes), so it is exact and independent of the machine and of the
allocator. A long segment is pre-tokenized and encoded a window at a time; what still grows
with the text is its code-point copy (4 bytes a character) and, for a model with a normalizer,
the normalizer's output buffers.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from conftest import corpus_files, examples, fixture_path, hf_tokenizer

import pymtok
from pymtok import native

# code points of the native core's encode window (module.c WINDOW)
WINDOW = 1 << 16
# bytes a character the work buffers may still grow by: the text's code points (4), and with a
# normalizer its output buffers (NFC 8, SentencePiece's precompiled map 4, BERT's steps 16, as
# they double); before windowing the pieces' spans and copy added 15-25 more
PER_CHAR = {"llama3": 4.5, "gpt-4o": 4.5, "roberta-base": 4.5, "qwen3": 13, "all-minilm-l6-v2": 21, "t5-small": 9}


@functools.lru_cache(maxsize=1)
def english() -> str:
    return "\n".join(text for name, text in corpus_files() if name.startswith("en_"))


@functools.lru_cache(maxsize=2)
def load(name: str, mtok: bool) -> Any:
    if mtok:
        return pymtok.load(fixture_path("mnn-exported", name, "tokenizer.mtok"))
    return pymtok.load(fixture_path("tokenizers", name, "tokenizer.json"))


def core() -> Any:
    module = native._core()
    if module is None:
        pytest.skip("the native core is off (PYMTOK_PURE=1 or not built)")
    return module


@pytest.mark.parametrize(("name", "mtok"), [(name, False) for name in sorted(PER_CHAR)] + [("llama3", True)])
def test_work_buffers_grow_only_by_the_text_copy(name: str, mtok: bool) -> None:
    module = core()
    tok = load(name, mtok)
    if tok._native_text is None:
        pytest.skip("this load has no native text encoder")
    text = english() * 4
    peaks = []
    # powers of two, which the buffers' capacities double through
    for size in (1 << 20, 1 << 21):
        module.work_peak()
        ids = tok.encode(text[:size])
        peaks.append(module.work_peak())
        assert ids == hf_tokenizer(name).encode(text[:size], add_special_tokens=True).ids
    grown = (peaks[1] - peaks[0]) / (1 << 20)
    assert grown <= PER_CHAR[name], f"work buffers grew by {grown:.1f} bytes a character: {peaks}"


# Text around a window's end: the cut falls on the last space between ASCII letters or digits
# before it, so the fragments put every kind of run (spaces, newlines, digits, punctuation,
# other scripts, contractions) there and across it.
FRAGMENTS = [" ", "  ", "\n", "\n\n", " \n ", "\t", "\r\n", "\u3000", "\u00a0", "a", "Ab", "word", "1", "123456",
             "'s", "'LL", "!", ".", "é", "e\u0301", "中文", "ß", "👍", "  x", " 9", "_", "/", "▁"]


@pytest.mark.parametrize("name", ["llama3", "qwen3", "gpt-4o", "roberta-base", "all-minilm-l6-v2", "t5-small"])
@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(before=st.lists(st.sampled_from(FRAGMENTS), max_size=30).map("".join),
       after=st.lists(st.sampled_from(FRAGMENTS), max_size=30).map("".join),
       at=st.integers(-40, 40))
def test_windowed_ids_match_hf(name: str, before: str, after: str, at: int) -> None:
    core()  # the pure path has no windows
    filler = ("lorem ipsum dolor 42 sit amet, " * (WINDOW // 8))[: WINDOW + at]
    text = filler + before + after + " tail end"
    for mtok in (False, True) if name == "llama3" else (False,):
        assert load(name, mtok).encode(text) == hf_tokenizer(name).encode(text, add_special_tokens=True).ids
