"""Memory of one encode call (issue 16): the native core's work buffers for a long text, and the
ids of the windows and parts it encodes such a text in, against HF ``tokenizers``.

The bound is read from the native core itself (``_native.work_peak()``: the largest set of work
buffers a call gave back, in bytes), so it is exact and independent of the machine and of the
allocator. A long text is read from its str, normalized and encoded a part of about ``WINDOW``
characters at a time, each part's ids appended to the list; a long segment is pre-tokenized and
encoded a window at a time. The parts are cut before a space only where the added tokens, the
normalizer, the pre-tokenizer and the model give the whole text's ids, so the hypothesis texts
put what could join across such a space (combining marks, Hangul jamo, Precompiled's
multi-character rules, clusters, added tokens, case mappings, runs of spaces) there.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from conftest import corpus_files, examples, fixture_path, hf_tokenizer, ours

import pymtok
from pymtok import models, native

# code points of the native core's encode window and part (module.c WINDOW); a text of twice
# as many or more is encoded in parts (PARTS_MIN)
WINDOW = 1 << 13
PARTS_MIN = 2 * WINDOW
# the bench's peak-RSS models, and roberta-base for its lstrip <mask>
FAMILIES = ["llama3", "qwen3", "gpt-4o", "gemma-v1", "mistral-7b-v0.1", "all-minilm-l6-v2", "t5-small", "roberta-base"]
# the work buffers of one part: its code points, the normalizer's buffers, the pieces' spans and
# the model's scratch, as they double (some 40 bytes a character of a part, measured at 1-3.7 MB)
PART_BYTES = 8 << 20


@functools.lru_cache(maxsize=1)
def english() -> str:
    return "\n".join(text for name, text in corpus_files() if name.startswith("en_"))


@functools.lru_cache(maxsize=1)
def every_file() -> str:
    """The start of every corpus file, each less than a part: parts end in every script."""
    return "".join(text[: 3 * WINDOW // 4] for _, text in corpus_files())


def load(name: str, mtok: bool) -> Any:
    return mnn_exported(name) if mtok else ours(name)


@functools.lru_cache(maxsize=1)
def mnn_exported(name: str) -> Any:
    return pymtok.load(fixture_path("mnn-exported", name, "tokenizer.mtok"))


def core() -> Any:
    module = native._core()
    if module is None:
        pytest.skip("the native core is off (PYMTOK_PURE=1 or not built)")
    return module


@pytest.mark.parametrize(("name", "mtok"), [(name, False) for name in FAMILIES] + [("llama3", True), ("qwen3", True)])
def test_work_buffers_do_not_grow_with_the_text(name: str, mtok: bool) -> None:
    module = core()
    tok = load(name, mtok)
    if tok._native_text is None:
        pytest.skip("this load has no native text encoder")
    text = english() * 4
    peaks, ids = [], []
    for size in (1 << 19, 1 << 21):
        module.work_peak()
        ids.append(tok.encode(text[:size]))
        peaks.append(module.work_peak())
    assert ids[0] == hf_tokenizer(name).encode(text[: 1 << 19], add_special_tokens=True).ids
    # four times the text, parts like the first ones: a buffer may double once more, but grow by
    # less than a byte a character (the text's copy alone grew by 4)
    assert peaks[1] <= PART_BYTES, f"work buffers of {peaks[1]} bytes: {peaks}"
    assert peaks[1] - peaks[0] < (1 << 21) - (1 << 19), f"work buffers grew with the text: {peaks}"


@pytest.mark.parametrize(("name", "script"), [("llama3", "zh_"), ("llama3", "en_"), ("t5-small", "ja_")])
def test_a_long_texts_list_keeps_little_spare_room(name: str, script: str) -> None:
    """The list a text in parts is encoded into grows as its parts come (by half), then gives
    back the room it did not use: the ids it returns keep about what a list of theirs does."""
    core()
    text = "\n".join(t for n, t in corpus_files() if n.startswith(script))[: 8 * PARTS_MIN]
    assert len(text) >= 4 * PARTS_MIN
    ids = ours(name).encode(text)
    assert ids == hf_tokenizer(name).encode(text, add_special_tokens=True).ids
    room = (sys.getsizeof(ids) - sys.getsizeof([])) // 8
    assert room <= len(ids) + len(ids) // 8, f"{room} slots for {len(ids)} ids"


@pytest.mark.parametrize("name", FAMILIES)
def test_every_corpus_file_in_parts_matches_hf(name: str) -> None:
    """Every script of the corpus in one text, cut into parts wherever it allows."""
    core()
    text = every_file()
    assert len(text) > 4 * PARTS_MIN
    assert load(name, False).encode(text) == hf_tokenizer(name).encode(text, add_special_tokens=True).ids


# Text around a window's or part's end: the cut falls on the last space between ASCII letters or
# digits before it that every stage allows, so the fragments put every kind of run (spaces,
# newlines, digits, punctuation, other scripts, contractions) and what a normalizer joins
# (marks, jamo, clusters, decomposable and case-changing letters) there and across it.
FRAGMENTS = [" ", "  ", "\n", "\n\n", " \n ", "\t", "\r\n", "\r", "\u3000", "\u00a0", "a", "Ab", "word", "WORD",
             "1", "123456", "'s", "'LL", "!", ".", "é", "e\u0301", "\u0301", "\u0327\u0301", "\u0345", "a\u0300",
             "n\u0303", "\u1100", "\u1161", "\u11a8", "\uac00", "\u212b", "\u00c5", "\ufb01", "\uff21", "\u2460",
             "\u0130", "\u1e9e", "\u03a3", "\u30ab\u3099", "\u3099", "\u200d", "\u200b", "\u0600", "\U0001f1fa",
             "\U0001f1f8", "\u0915\u094d", "\x01", "\x7f", "中文", "ß", "👍", "  x", " 9", "_", "/", "▁", "▁▁"]


def added_contents(name: str) -> list[str]:
    """A few of the model's added tokens, which the raw or the normalized text may spell."""
    contents = sorted(t.content for t in hf_tokenizer(name).get_added_tokens_decoder().values())
    return contents[:3] + contents[-3:]


def fragments(name: str) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(FRAGMENTS + added_contents(name)), max_size=30).map("".join)


FILLER = "lorem ipsum dolor 42 sit amet, "


def around_cut(before: str, after: str, at: int) -> str:
    """A text of parts whose first cut is tried where ``before`` and ``after`` meet."""
    head = (FILLER * (WINDOW // 8))[: WINDOW + at]
    return head + before + after + (FILLER * (WINDOW // 8))[: PARTS_MIN - WINDOW + 64] + " tail end"


@pytest.mark.parametrize("name", FAMILIES)
@settings(max_examples=examples(16, fast=6), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), at=st.integers(-40, 40))
def test_ids_at_part_and_window_cuts_match_hf(name: str, data: st.DataObject, at: int) -> None:
    core()  # the pure path has no windows
    before, after = data.draw(fragments(name)), data.draw(fragments(name))
    text = around_cut(before, after, at)
    assert len(text) >= PARTS_MIN
    for mtok in (False, True) if name == "llama3" else (False,):
        assert load(name, mtok).encode(text) == hf_tokenizer(name).encode(text, add_special_tokens=True).ids


@functools.lru_cache(maxsize=4)
def with_tokens(name: str, folder: str) -> tuple[Any, Any]:
    """The model with added tokens a cut before a space could split: one holding a space between
    letters, one with rstrip ending in a letter (raw and normalized), one with lstrip; HF's
    tokenizer and pymtok on the tokenizer.json HF writes."""
    from tokenizers import AddedToken, Tokenizer

    # a tokenizer of its own: the shared hf_tokenizer(name) is every other test's oracle
    hf = Tokenizer.from_file(str(fixture_path("tokenizers", name, "tokenizer.json")))
    hf.no_truncation()
    hf.no_padding()
    hf.add_tokens([AddedToken("m i", normalized=False), AddedToken("um", rstrip=True, normalized=False),
                   AddedToken("or 4", normalized=True), AddedToken("sit", rstrip=True, normalized=True),
                   AddedToken("amet", lstrip=True, normalized=True)])
    path = Path(folder) / f"{name}.json"
    path.write_text(hf.to_str(), encoding="utf-8")
    return hf, pymtok.load(path)


@pytest.mark.parametrize("name", ["llama3", "all-minilm-l6-v2", "t5-small", "mistral-7b-v0.1"])
@settings(max_examples=examples(16, fast=6), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), at=st.integers(-40, 40))
def test_added_tokens_across_a_cut_match_hf(name: str, data: st.DataObject, at: int,
                                            tmp_path_factory: pytest.TempPathFactory) -> None:
    core()
    hf, tok = with_tokens(name, str(tmp_path_factory.getbasetemp()))
    if tok._native_text is None:
        pytest.skip("this load has no native text encoder")
    words = st.sampled_from(["m i", "um", " ", "  ", "m", "i", "or 4", "sit", " amet", "x", "\n", "ipsum"])
    before = "".join(data.draw(st.lists(words, max_size=12)))
    after = "".join(data.draw(st.lists(words, max_size=12)))
    text = around_cut(before, after, at)
    assert tok.encode(text) == hf.encode(text, add_special_tokens=True).ids


def test_sentencepiece_model_ids_share_their_ints() -> None:
    """A ``.model``'s ids in a long text: the library's own, and one int object per id kept by
    the model (an int of its own for every id cost 32 bytes more each, four times the list)."""
    core()
    spm = pytest.importorskip("sentencepiece")
    path = fixture_path("legacy", "sentencepiece", "mistral-7b-v0.1.model")
    text = english()[: 1 << 18]
    ids = pymtok.load(path).encode(text, add_special_tokens=False)
    assert ids == spm.SentencePieceProcessor(model_file=str(path)).encode(text)
    shared = {}
    for i in ids:
        assert shared.setdefault(i, i) is i, f"id {i} came as two int objects"


@pytest.mark.parametrize(("name", "mtok"), [("qwen3", False), ("qwen3", True), ("all-minilm-l6-v2", True),
                                            ("t5-small", False)])
def test_a_dropped_tokenizer_is_freed_at_once(name: str, mtok: bool, exported_mtok: Any) -> None:
    """A tokenizer refers to nothing that refers back to it, so dropping it frees it (its file's
    bytes and tables) at once, as HF's and tiktoken's are: one kept alive until the next full
    collection made a process that loads a tokenizer per task grow by every one it had dropped.
    Its methods, used first, must not tie it to itself; a bound encode keeps it alive."""
    import gc
    import weakref

    hf = hf_tokenizer(name)
    path = exported_mtok(name) if mtok else fixture_path("tokenizers", name, "tokenizer.json")
    text = "Hello world, the <unk> déjà vu 你好"
    gc.disable()
    try:
        tok = pymtok.load(path)
        ids = tok.encode(text)
        assert ids == hf.encode(text).ids
        assert tok.encode(text, add_special_tokens=False) == hf.encode(text, add_special_tokens=False).ids
        assert tok.encode_batch([text, text]) == [ids, ids]
        assert tok.decode(ids) == hf.decode(ids, skip_special_tokens=False)
        stream = tok.decode_stream()
        for i in ids:
            stream.step(i)
        tok(text, return_offsets_mapping=True)
        tok.meta.split_special_tokens = True  # the common call is then the Python method's
        assert tok.encode(text) == tok.encode(text, split_special_tokens=True)
        tok.meta.split_special_tokens = False
        dropped = weakref.ref(tok)
        del tok, stream
        assert dropped() is None, "the tokenizer outlived its last reference"
        encode = pymtok.load(path).encode
        assert encode(text) == ids and encode(text, add_special_tokens=False) == hf.encode(
            text, add_special_tokens=False).ids
    finally:
        gc.enable()


@pytest.mark.parametrize("name", FAMILIES)
def test_a_kept_tokenizer_leaves_the_collector_little_to_walk(name: str) -> None:
    """Every full collection of the cyclic collector walks each reference a tracked container
    holds, for as long as it lives: a tokenizer kept in a process must not hold its vocabulary
    or merges in lists (Qwen3's 151k merge pairs as JSON gives them cost each full collection
    8 ms). Tuples of strings and numbers, and dicts of them, the collector stops walking; what
    stays is one list of the vocabulary's size (a Unigram config's, whose entries are tuples)
    and less than a quarter of it besides (added tokens, the pipeline's objects)."""
    import gc

    path = fixture_path("tokenizers", name, "tokenizer.json")
    pymtok.load(path)  # the modules a load imports, and their caches, are not the tokenizer's
    gc.collect()
    before = {id(o) for o in gc.get_objects()}
    tok = pymtok.load(path)
    gc.collect()
    new = [o for o in gc.get_objects() if id(o) not in before and o is not before]
    walked = sum(len(gc.get_referents(o)) for o in new)
    limit = tok.vocab_size // 4 + (tok.vocab_size if isinstance(tok.model, models.Unigram) else 0)
    assert walked <= limit, sorted(
        ((len(gc.get_referents(o)), type(o).__name__) for o in new), reverse=True)[:3]
