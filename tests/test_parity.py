"""Id-for-id parity with HF ``tokenizers`` (encode) and ``transformers`` (decode) on every fixture.

Per model: the llama.cpp golden strings, 2,000 corpus chunks (lines, paragraphs, windows from every
corpus file) and hypothesis strings mixing scripts, whitespace, digits, emoji, control characters,
added-token texts and lone combining marks.
"""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import TOKENIZER_NAMES, auto_tokenizer, corpus_chunks, examples, fixture_path, golden_cases, hf_tokenizer, ours

CHUNKS = int(os.environ.get("PYMTOK_PARITY_CHUNKS", "2000"))


def transformers_tokenizer(name: str):
    folder = fixture_path("tokenizers", name)
    config_file = folder / "tokenizer_config.json"
    config = json.loads(config_file.read_text(encoding="utf-8")) if config_file.is_file() else {}
    if "auto_map" not in config:
        return auto_tokenizer(name)
    # chatglm3-6b names remote code; transformers' generic fast tokenizer on the same files
    # applies the same decode and the folder's clean_up_tokenization_spaces
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_file=str(folder / "tokenizer.json"),
        clean_up_tokenization_spaces=config.get("clean_up_tokenization_spaces", False),
    )


def _mismatches(name: str, texts: list[str], add_special_tokens: bool) -> list[tuple[str, list[int], list[int]]]:
    hf, tok = hf_tokenizer(name), ours(name)
    expected = [e.ids for e in hf.encode_batch(texts, add_special_tokens=add_special_tokens)]
    bad = []
    for text, want in zip(texts, expected):
        got = tok.encode(text, add_special_tokens=add_special_tokens)
        if got != want:
            bad.append((text, want, got))
    return bad


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_golden(name: str) -> None:
    cases = golden_cases(name)
    if not cases:
        pytest.skip(f"llama.cpp has no golden file for {name}")
    tok = ours(name)
    hf = hf_tokenizer(name)
    for text, ids in cases:
        # the golden ids come from transformers' AutoTokenizer; HF tokenizers is our target
        want = hf.encode(text, add_special_tokens=False).ids
        assert tok.encode(text, add_special_tokens=False) == want, text
        if name != "phi-3-mini":
            assert want == ids, f"golden file disagrees with HF tokenizers on {text!r}"


@pytest.mark.parametrize("add_special_tokens", [False, True])
@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_corpus(name: str, add_special_tokens: bool) -> None:
    texts = corpus_chunks(CHUNKS, seed=hash(name) & 0xFFFF)
    bad = _mismatches(name, texts, add_special_tokens)
    assert not bad, f"{len(bad)}/{len(texts)} differ; first: {bad[0]!r}"


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_decode_matches_transformers(name: str) -> None:
    hf, tok, tf = hf_tokenizer(name), ours(name), transformers_tokenizer(name)
    texts = corpus_chunks(300, seed=7)
    for text in texts:
        ids = hf.encode(text, add_special_tokens=True).ids
        for skip in (False, True):
            assert tok.decode(ids, skip_special_tokens=skip) == tf.decode(ids, skip_special_tokens=skip), text
            assert tok.decode(ids, skip_special_tokens=skip, clean_up_tokenization_spaces=False) == hf.decode(
                ids, skip_special_tokens=skip
            ), text


def _added_texts(name: str) -> list[str]:
    return [t.content for t in ours(name).added.by_id.values()][:200] or ["<s>"]


_FRAGMENTS = [
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=8),
    st.sampled_from([" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\u00a0", "\u3000", "\u2028", "\u0085", "\x0b", "\x0c"]),
    st.text(alphabet="0123456789٠١٢३४५", min_size=1, max_size=7),
    st.sampled_from(["😀", "👍🏽", "👨‍👩‍👧", "🇯🇵", "✅", "🦙"]),
    st.sampled_from(["\x00", "\x01", "\x07", "\x1b", "\x7f", "\u200b", "\u200d", "\ufeff", "\u00ad"]),
    st.sampled_from(["\u0301", "\u0308", "\u093e", "\u0651", "\u20dd", "e\u0301", "\u1100\u1161"]),
    st.sampled_from(["Hello", "world", "你好", "こんにちは", "안녕", "привет", "مرحبا", "नमस्ते", "I'm", "DON'T", "x=1;"]),
]


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_hypothesis(name: str) -> None:
    added = _added_texts(name)
    fragment = st.one_of(*_FRAGMENTS, st.sampled_from(added))

    @settings(max_examples=examples(150), deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(fragment, max_size=12).map("".join))
    def check(text: str) -> None:
        hf, tok = hf_tokenizer(name), ours(name)
        for special in (False, True):
            want = hf.encode(text, add_special_tokens=special).ids
            assert tok.encode(text, add_special_tokens=special) == want
        ids = hf.encode(text, add_special_tokens=True).ids
        assert tok.decode(ids, clean_up_tokenization_spaces=False) == hf.decode(ids, skip_special_tokens=False)

    check()


@pytest.mark.parametrize("name", ["llama3", "qwen3", "gemma-v1", "mistral-7b-v0.1", "all-minilm-l6-v2", "t5-small"])
def test_decode_stream_matches_hf(name: str) -> None:
    from tokenizers.decoders import DecodeStream as HFDecodeStream

    hf, tok = hf_tokenizer(name), ours(name)
    for text in corpus_chunks(40, seed=3):
        ids = hf.encode(text, add_special_tokens=True).ids
        for skip in (False, True):
            ref = HFDecodeStream(skip_special_tokens=skip)
            mine = tok.decode_stream(skip_special_tokens=skip)
            for id in ids:
                assert mine.step(id) == ref.step(hf, id)


@pytest.mark.parametrize("name", ["llama3", "gemma-v1", "all-minilm-l6-v2", "t5-small", "clip-vit"])
def test_encode_batch_matches_hf(name: str) -> None:
    hf, tok = hf_tokenizer(name), ours(name)
    texts = corpus_chunks(200, seed=5)
    for special in (False, True):
        want = [e.ids for e in hf.encode_batch(texts, add_special_tokens=special)]
        for threads in (None, 1, 2, 7):
            assert tok.encode_batch(texts, add_special_tokens=special, num_threads=threads) == want
    assert tok.encode_batch([]) == []
    with pytest.raises(TypeError):
        tok.encode_batch("not a list")  # type: ignore[arg-type]
