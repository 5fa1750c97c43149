"""The native core (pymtok._native) against HF ``tokenizers``, the oracle.

Every model the native core accelerates is checked on corpus chunks, on generated strings
that stress the scanners (mixed scripts, odd whitespace, digits of many scripts, emoji,
combining marks) and on 1 MB worst cases (with a generous time bound: speed itself is
measured by bench/bench.py, not asserted here).
"""

from __future__ import annotations

import functools
import os
import random
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pymtok
from conftest import corpus_chunks, fixture_path, hf_tokenizer

pytestmark = pytest.mark.skipif(
    os.environ.get("PYMTOK_PURE", "") not in ("", "0"), reason="PYMTOK_PURE disables the native core"
)

# Every fixture whose configuration the native core reproduces, by kind of pipeline.
ACCELERATED = [
    "llama3",            # cl100k split + byte-level BPE, ignore_merges
    "qwen3",             # Qwen2 split + byte-level BPE (NFC normalizer stays in Python)
    "gpt-4o",            # o200k split, Removed + invert
    "deepseek-v3",       # three Splits
    "roberta-base",      # ByteLevel with GPT-2's own pattern
    "gemma-v1",          # char-level BPE, byte fallback, no pre-tokenizer
    "mistral-7b-v0.1",   # char-level BPE, byte fallback, fuse_unk
    "phi-3-mini",
    "all-minilm-l6-v2",  # WordPiece + BertPreTokenizer
    "bert-base-chinese",
    "t5-small",          # Unigram + WhitespaceSplit + Metaspace
    "albert-base-v2",
]


@functools.lru_cache(maxsize=None)
def load(name: str) -> pymtok.Tokenizer:
    return pymtok.load(fixture_path("tokenizers", name, "tokenizer.json"))


def assert_same_ids(name: str, text: str) -> None:
    ours = load(name).encode(text, add_special_tokens=False)
    theirs = hf_tokenizer(name).encode(text, add_special_tokens=False).ids
    if ours != theirs:
        at = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
        pytest.fail(f"{name}: ids differ at {at} for {text[:200]!r}: ours {ours[at:at + 8]} "
                    f"HF {theirs[at:at + 8]}")


@pytest.mark.parametrize("name", ACCELERATED)
def test_native_is_used(name: str) -> None:
    assert load(name)._native_segment is not None


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
@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts)
def test_generated_strings(name: str, text: str) -> None:
    assert_same_ids(name, text)


@functools.lru_cache(maxsize=None)
def worst_cases() -> dict[str, str]:
    rng = random.Random(0)
    no_space = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789.,;-_") for _ in range(1_000_000))
    code_points = (rng.randrange(0x20, 0x30000) for _ in range(300_000))
    return {
        "no-space": no_space,
        "one-char": "a" * 1_000_000,
        "random-code-points": "".join(chr(c) for c in code_points if not 0xD800 <= c < 0xE000),
    }


@pytest.mark.slow
@pytest.mark.parametrize("case", ["no-space", "one-char", "random-code-points"])
@pytest.mark.parametrize("name", ["llama3", "gpt-4o", "gemma-v1", "all-minilm-l6-v2", "t5-small"])
def test_worst_cases(name: str, case: str) -> None:
    text = worst_cases()[case]
    tok = load(name)
    start = time.perf_counter()
    ours = tok.encode(text, add_special_tokens=False)
    elapsed = time.perf_counter() - start
    assert ours == hf_tokenizer(name).encode(text, add_special_tokens=False).ids
    # generous: the native core takes well under a second; quadratic behaviour takes minutes
    assert elapsed < 20, f"{name} {case}: {elapsed:.1f}s"
