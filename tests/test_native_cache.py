"""The native core's piece cache once it is full: emptied and refilled, the ids stay HF's.

The cache holds a bounded number of pieces (module.c CACHE_SLOTS, CACHE_BYTES); a stream of
more distinct pieces than that fills it, it is emptied when no other thread reads it, and it
fills again. These texts hold far more distinct pieces than it can, so every case below runs
through at least one emptying, and compares each text with HF before, across and after it.
"""

from __future__ import annotations

import os
import random
from concurrent.futures import ThreadPoolExecutor

import pytest

import pymtok
from conftest import fixture_path, hf_tokenizer
from pymtok.mtok import dumps_mtok, loads_mtok

pytestmark = pytest.mark.skipif(
    os.environ.get("PYMTOK_PURE", "") not in ("", "0"), reason="PYMTOK_PURE disables the native core"
)

# more distinct pieces than the cache's 3/4 of 2**18 slots
DISTINCT = 240_000
LETTERS = "abcdefghijklmnopqrstuvwxyz" + "éüßøñ" + "данные" + "漢字仮名한국어"


def distinct_texts(seed: int, count: int = DISTINCT) -> list[str]:
    """~2 KB texts of ``count`` random words: nearly every word a piece never seen before."""
    rng = random.Random(seed)
    words = ["".join(rng.choice(LETTERS) for _ in range(rng.randint(4, 9))) for _ in range(count)]
    return [" ".join(words[i : i + 250]) + "\n" for i in range(0, count, 250)]


def native(tok: pymtok.Tokenizer) -> object:
    encoder = getattr(tok._native_segment, "__self__", None)
    if encoder is None:
        pytest.skip("pure-Python path: no native piece cache")
    return encoder


def hf_ids(name: str, texts: list[str]) -> list[list[int]]:
    return [e.ids for e in hf_tokenizer(name).encode_batch(texts, add_special_tokens=False)]


@pytest.mark.parametrize(
    ("name", "via"),
    [pytest.param("llama3", "json", marks=pytest.mark.slow), ("qwen3", "mtok"),
     pytest.param("gemma-v1", "json", marks=pytest.mark.slow), pytest.param("t5-small", "json", marks=pytest.mark.slow),
     ("all-minilm-l6-v2", "json")],
)
def test_full_cache_is_emptied_and_ids_stay_exact(name: str, via: str) -> None:
    tok = pymtok.load(fixture_path("tokenizers", name, "tokenizer.json"))
    if via == "mtok":
        tok = loads_mtok(dumps_mtok(tok.config, tok.meta), name)
    encoder = native(tok)
    texts = distinct_texts(seed=len(name))
    expected = hf_ids(name, texts)
    assert [tok.encode(t, add_special_tokens=False) for t in texts] == expected
    entries, resets = encoder.cache_stats()
    assert resets >= 1 and entries > 0
    # the texts of before the emptying, from a cache refilled with others
    assert [tok.encode(t, add_special_tokens=False) for t in texts[:40]] == expected[:40]
    # and on two threads, which share the cache and empty it between their texts
    assert tok.encode_batch(texts, add_special_tokens=False, num_threads=2) == expected
    assert encoder.cache_stats()[1] > resets


def test_doubled_slots_keep_every_piece() -> None:
    # the slots in use double from a few thousand as pieces come: each doubling must put every
    # entry back, or the pieces it dropped would be encoded and put again on the next pass
    tok = pymtok.load(fixture_path("tokenizers", "qwen3", "tokenizer.json"))
    encoder = native(tok)
    texts = distinct_texts(seed=11, count=40_000)
    expected = hf_ids("qwen3", texts)
    assert [tok.encode(t, add_special_tokens=False) for t in texts] == expected
    entries, resets = encoder.cache_stats()
    assert entries > 30_000 and resets == 0
    assert [tok.encode(t, add_special_tokens=False) for t in texts] == expected
    assert encoder.cache_stats() == (entries, 0)
    # doubled by the last of two threads out, or by one finding itself alone
    fresh = pymtok.load(fixture_path("tokenizers", "qwen3", "tokenizer.json"))
    assert fresh.encode_batch(texts, add_special_tokens=False, num_threads=2) == expected
    assert native(fresh).cache_stats()[0] > 30_000


def test_full_cache_shared_by_python_threads() -> None:
    tok = pymtok.load(fixture_path("tokenizers", "qwen3", "tokenizer.json"))
    encoder = native(tok)
    texts = distinct_texts(seed=5)
    expected = hf_ids("qwen3", texts)
    parts = [texts[k::4] for k in range(4)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda part: [tok.encode(t, add_special_tokens=False) for t in part], parts))
    for k, result in enumerate(results):
        assert result == expected[k::4]
    assert encoder.cache_stats()[1] >= 1


def test_encoding_inside_a_python_normalizer() -> None:
    # The thread's reused work buffers are in use while encode_text calls a Python normalizer;
    # an encode made from inside it (another tokenizer, or the same) must bring its own.
    outer = pymtok.load(fixture_path("tokenizers", "qwen3", "tokenizer.json"))
    inner = pymtok.load(fixture_path("tokenizers", "gemma-v1", "tokenizer.json"))
    encoder = native(outer)
    native(inner)
    texts = distinct_texts(seed=9, count=30 * 250)
    seen: list[tuple[str, list[int]]] = []

    def normalizer(piece: str) -> str:
        long = piece * 3  # grows the inner call's buffers beyond the outer one's
        seen.append((long, inner.encode(long, add_special_tokens=False)))
        seen.append((piece, outer.encode(piece, add_special_tokens=False)))
        return piece

    expected = hf_ids("qwen3", texts)
    assert [encoder.encode_text(normalizer, t, False) for t in texts] == expected
    gemma, qwen = hf_tokenizer("gemma-v1"), hf_tokenizer("qwen3")
    for k, (piece, ids) in enumerate(seen):
        oracle = gemma if k % 2 == 0 else qwen
        assert ids == oracle.encode(piece, add_special_tokens=False).ids


@pytest.mark.parametrize("name", ["all-minilm-l6-v2", pytest.param("t5-small", marks=pytest.mark.slow)])
def test_spans_kept_beside_entries_go_with_an_emptying(name: str) -> None:
    """A piece's token spans kept beside its cache entry (WordPiece, Unigram) are not read for
    another piece whose entry takes its place once the cache is emptied: offsets of texts met
    first in a fresh cache, then of other texts right after an emptying (their entries where the
    first ones' were), then of the first again, are HF's."""
    tok = pymtok.load(fixture_path("tokenizers", name, "tokenizer.json"))
    encoder = native(tok)
    hf = hf_tokenizer(name)
    first, then = distinct_texts(seed=1, count=5_000), distinct_texts(seed=2, count=5_000)

    def assert_offsets(texts: list[str]) -> None:
        for text in texts:
            want = hf.encode(text, add_special_tokens=False)
            got = tok(text, add_special_tokens=False, return_offsets_mapping=True)
            assert got["input_ids"] == want.ids and got["offset_mapping"] == want.offsets, text[:60]

    assert_offsets(first)
    assert_offsets(first)  # the spans read where they were kept
    resets = encoder.cache_stats()[1]
    for text in distinct_texts(seed=3):
        tok.encode(text, add_special_tokens=False)
        if encoder.cache_stats()[1] > resets:
            break
    assert encoder.cache_stats()[1] > resets
    assert_offsets(then)
    assert_offsets(first)
