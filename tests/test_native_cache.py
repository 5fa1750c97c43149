"""The native core's piece cache once it is full: emptied and refilled, the ids stay HF's; and
the new pieces of a text put in it ahead of their turn.

The cache holds a bounded number of pieces (module.c CACHE_SLOTS, CACHE_BYTES); a stream of
more distinct pieces than that fills it, it is emptied when no other thread reads it, and it
fills again. These texts hold far more distinct pieces than it can, so every case of a full
cache runs through at least one emptying, and compares each text with HF before, across and
after it.
"""

from __future__ import annotations

import json
import os
import random
import re
from concurrent.futures import ThreadPoolExecutor

import pytest
import tokenizers

import pymtok
from conftest import corpus_files, fixture_path, hf_tokenizer
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


def unmade_tokens(name: str) -> list[str]:
    """The model's ASCII tokens that HF's BPE without ignore_merges does not make of their text,
    each as a piece of its own (one that starts with a letter after a digit)."""
    config = json.loads(fixture_path("tokenizers", name, "tokenizer.json").read_text(encoding="utf-8"))
    if not config["model"].get("ignore_merges"):
        return []
    config["model"]["ignore_merges"] = False
    merged = tokenizers.Tokenizer.from_str(json.dumps(config))
    text_of = tokenizers.decoders.ByteLevel()
    out = []
    for token, id_ in config["model"]["vocab"].items():
        text = text_of.decode([token])
        if not (text.isascii() and 2 <= len(text) <= 32 and text.strip()):
            continue
        if merged.encode(text, add_special_tokens=False).ids != [id_]:
            out.append(text if text[0] == " " else "1" + text)
    assert len(out) > 20
    return out


@pytest.mark.parametrize(("name", "via"), [("llama3", "json"), ("llama3", "mtok"), ("gpt-4o", "json")])
def test_new_pieces_met_many_at_once_are_hf_s(name: str, via: str) -> None:
    """The pieces of a text that the cache lacks are merged several at a time before they are
    read in order (models.c merge_ahead): the corpus's words, each new, a few met again a few
    pieces on, some joined past the length merged that way, as one long text (more pieces than
    one look ahead takes) and as 2 KB texts, in a fresh tokenizer and then from the cache, are
    HF's ids. llama3 looks a new piece up whole first (ignore_merges), GPT-4o does not: among
    llama3's pieces, its tokens that its merges do not make."""
    rng = random.Random(7)
    found = (re.findall(r"[A-Za-z][a-z]*|\d+|[^\sA-Za-z\d]+", text) for _, text in corpus_files())
    words = sorted({w for ws in found for w in ws if w.isascii()})
    rng.shuffle(words)
    pieces = words[:8000] + ["".join(rng.sample(words, 6)) for _ in range(300)] + unmade_tokens(name)
    rng.shuffle(pieces)
    seq: list[str] = []
    for i, piece in enumerate(pieces):
        seq.append(piece)
        if i % 7 == 3:
            seq.append(pieces[i - 3])
    text = " ".join(seq)
    docs = [" ".join(seq[i : i + 300]) for i in range(0, len(seq), 300)]
    hf = hf_tokenizer(name)

    def fresh() -> pymtok.Tokenizer:
        tok = pymtok.load(fixture_path("tokenizers", name, "tokenizer.json"))
        tok = loads_mtok(dumps_mtok(tok.config, tok.meta), name) if via == "mtok" else tok
        native(tok)
        return tok

    want = hf.encode(text, add_special_tokens=False).ids
    tok = fresh()
    assert tok.encode(text, add_special_tokens=False) == want
    assert tok.encode(text, add_special_tokens=False) == want
    want_docs = hf_ids(name, docs)
    tok = fresh()
    assert [tok.encode(d, add_special_tokens=False) for d in docs] == want_docs
    assert [tok.encode(d, add_special_tokens=False) for d in docs] == want_docs
