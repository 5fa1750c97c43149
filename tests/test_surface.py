"""The surface users of transformers, tokenizers and tiktoken call: special-token text, decoding
inputs, vocabulary and special-token attributes, tiktoken's byte view. Each against its library.

The suite runs on both paths (``PYMTOK_PURE=1`` in CI), so every comparison holds on both.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import inspect
import json
import pickle
import shutil
import sys
import weakref
from pathlib import Path
from typing import Any

import pytest
from conftest import TOKENIZER_NAMES, auto_tokenizer, corpus_chunks, fixture_path, hf_tokenizer, ours, slow_for

import pymtok
from pymtok import legacy

np = pytest.importorskip("numpy")

CHUNKS = 120
# AutoTokenizer needs remote code for chatglm3-6b; PreTrainedTokenizerFast reads the same files
REMOTE_CODE = {"chatglm3-6b"}


@functools.lru_cache(maxsize=None)
def chunks() -> tuple[str, ...]:
    return tuple(corpus_chunks(CHUNKS, seed=13))


def transformers_tokenizer(name: str) -> Any:
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    return auto_tokenizer(name)


def transformers_tokenizer_at(folder: Path) -> Any:
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    return transformers.AutoTokenizer.from_pretrained(str(folder))


def special_texts(tok: pymtok.Tokenizer, limit: int = 40) -> list[str]:
    """Texts spelling the tokenizer's special tokens among ordinary words."""
    specials = sorted(tok.added.special)[:limit]
    return [f"a{t}b {t}{t} x\n{t} end" for t in specials] + [" ".join(specials)]


# -- special-token text ------------------------------------------------------------------------


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_split_special_tokens_matches_hf(name: str) -> None:
    """split_special_tokens=True is HF's encode_special_tokens (what transformers sets for it)."""
    hf = hf_tokenizer(name)
    tok = ours(name)
    texts = [*special_texts(tok), *chunks()[:40]]
    try:
        hf.encode_special_tokens = True
        split = [hf.encode(t, add_special_tokens=False).ids for t in texts]
        split_with = [hf.encode(t).ids for t in texts]
    finally:
        hf.encode_special_tokens = False
    default = [hf.encode(t).ids for t in texts]
    assert [tok.encode(t, add_special_tokens=False, split_special_tokens=True) for t in texts] == split
    assert [tok.encode(t, split_special_tokens=True) for t in texts] == split_with
    assert [tok.encode(t, split_special_tokens=False) for t in texts] == default
    assert [tok.encode(t) for t in texts] == default
    # the tokenizer-level default, for encode and encode_batch alike
    tok.split_special_tokens = True
    try:
        assert [tok.encode(t, add_special_tokens=False) for t in texts] == split
        assert tok.encode_batch(texts, add_special_tokens=False) == split
        assert [tok.encode(t, split_special_tokens=False) for t in texts] == default
    finally:
        tok.split_special_tokens = False
    assert tok.encode_batch(texts, split_special_tokens=True) == split_with
    assert tok.encode_batch(texts) == default


def call_shape_case(name: str) -> tuple[Any, pymtok.Tokenizer, list[str], tuple[list[list[int]], ...]]:
    """HF's tokenizer, a fresh pymtok one (a test changes its meta), texts with special tokens, and
    HF's ids of them: with the special tokens, without, and with them split"""
    hf = hf_tokenizer(name)
    tok = pymtok.load(fixture_path("tokenizers", name, "tokenizer.json"))
    texts = [*special_texts(tok, 4), *chunks()[:8]]
    try:
        hf.encode_special_tokens = True
        split = [hf.encode(t).ids for t in texts]
    finally:
        hf.encode_special_tokens = False
    bare = [hf.encode(t, add_special_tokens=False).ids for t in texts]
    return hf, tok, texts, ([hf.encode(t).ids for t in texts], bare, split)


@pytest.mark.parametrize("name", ["qwen3"])  # with qwen3's tests, which load its oracle
def test_encode_answers_every_call_shape_as_hf(name: str) -> None:
    """tok.encode is a C callable on the native path for its common call; every other shape of
    call, a meta replaced after load, wrong types and a subclass's own encode still get the
    method's answers, which are HF's."""
    hf, tok, texts, (plain, bare, split) = call_shape_case(name)
    assert [tok.encode(t) for t in texts] == plain
    assert [tok.encode(t, add_special_tokens=True) for t in texts] == plain
    assert [tok.encode(t, add_special_tokens=False) for t in texts] == bare
    assert [tok.encode(text=t) for t in texts] == plain
    assert [tok.encode(t, None) for t in texts] == plain
    assert tok.encode(texts[0], texts[1]) == hf.encode(texts[0], texts[1]).ids
    # the meta is read on each call, also after the reader's way of setting it: replacing it
    tok.meta = dataclasses.replace(tok.meta, split_special_tokens=True)
    assert [tok.encode(t) for t in texts] == split
    tok.meta = dataclasses.replace(tok.meta, split_special_tokens=False)
    assert [tok.encode(t) for t in texts] == plain
    # and setting its field in place; a misspelt field is refused, not set aside unread
    tok.meta.split_special_tokens = True
    assert [tok.encode(t) for t in texts] == split
    tok.meta.split_special_tokens = False
    with pytest.raises(AttributeError, match="split_special_token"):
        tok.meta.split_special_token = True  # type: ignore[attr-defined]
    assert [tok.encode(t) for t in texts] == plain
    with pytest.raises(TypeError, match="takes a str, got bytes"):
        tok.encode(b"abc")
    with pytest.raises(TypeError, match="add_special_tokens must be True or False, got int"):
        tok.encode("abc", add_special_tokens=1)
    with pytest.raises(TypeError):
        tok.encode("abc", add_special_token=False)
    assert inspect.signature(tok.encode) == inspect.signature(functools.partial(pymtok.Tokenizer.encode, tok))
    assert tok.encode.__doc__ == pymtok.Tokenizer.encode.__doc__ and tok.encode.__self__ is tok
    assert pickle.loads(pickle.dumps(tok.encode))(texts[0]) == plain[0]

    class Shouting(pymtok.Tokenizer):
        def encode(self, text: str, *args: Any, **kwargs: Any) -> list[int]:
            return super().encode(text.upper(), *args, **kwargs)

    assert Shouting.from_config(tok.config, tok.meta).encode("hello") == hf.encode("HELLO").ids
    # the tokenizer goes when its last reference does, bound encode and all (a cycle the GC breaks)
    gone = weakref.ref(tok)
    del tok
    gc.collect()
    assert gone() is None


@pytest.mark.parametrize("name", ["mistral-7b-v0.1", "all-minilm-l6-v2"])
@pytest.mark.parametrize("bos, eos", [(True, True), (False, False)])
def test_add_bos_and_eos_in_tokenizer_config_are_transformers(tmp_path: Path, name: str, bos: bool, eos: bool) -> None:
    """Beside a tokenizer.json, transformers runs its post-processor whatever tokenizer_config.json's
    add_bos_token / add_eos_token say (real configs often disagree with the file)."""
    folder = tmp_path / name
    shutil.copytree(fixture_path("tokenizers", name), folder)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config.update(add_bos_token=bos, add_eos_token=eos)
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    hf = transformers_tokenizer_at(folder)
    tok = pymtok.load(folder)
    texts = ["hi", *chunks()[:3]]
    assert [tok(t)["input_ids"] for t in texts] == [hf(t)["input_ids"] for t in texts]
    assert tok(texts[0], texts[1])["input_ids"] == hf(texts[0], texts[1])["input_ids"]


def test_call_follows_settings_changed_after_a_call() -> None:
    """What tok(...) works out once per tokenizer (the post-processor transformers runs, the ids
    it lays around a text) follows call_settings changed after a call, as transformers follows
    its attributes of the same names."""
    hf = transformers_tokenizer_at(fixture_path("tokenizers", "mistral-7b-v0.1"))
    tok = pymtok.load(fixture_path("tokenizers", "mistral-7b-v0.1"))
    texts = ["hi", *chunks()[:3]]
    before = [tok(t)["input_ids"] for t in texts]
    assert before == [hf(t)["input_ids"] for t in texts]
    offsets = [dict(tok(t, return_offsets_mapping=True)) for t in texts]
    assert offsets == [dict(hf(t, return_offsets_mapping=True)) for t in texts]
    hf.add_eos_token = True
    tok.meta.call_settings["add_eos_token"] = True
    assert [tok(t)["input_ids"] for t in texts] == [hf(t)["input_ids"] for t in texts] != before
    names = ["input_ids", "token_type_ids", "attention_mask"]
    hf.model_input_names = names
    tok.meta.call_settings["model_input_names"] = names
    changed = [dict(tok(t, return_offsets_mapping=True)) for t in texts]
    assert changed == [dict(hf(t, return_offsets_mapping=True)) for t in texts] != offsets


@pytest.mark.parametrize("name", ["qwen3", "llama3", "gemma-v1", "all-minilm-l6-v2", "t5-small"])
def test_split_special_tokens_matches_transformers(name: str) -> None:
    """transformers' keyword itself, on the texts where its tokenizer class agrees with the file."""
    hf = transformers_tokenizer(name)
    tok = ours(name)
    texts = [t for t in special_texts(tok) if hf.encode(t) == tok.encode(t)]
    assert texts
    for text in texts:
        assert tok.encode(text, split_special_tokens=True) == hf.encode(text, split_special_tokens=True)


def test_a_skipped_special_token_hides_tokens_inside_it_as_in_hf() -> None:
    """HF matches every added token, then leaves skipped special ones as text: a shorter added
    token inside a skipped match does not match there, but does elsewhere."""
    tokenizers = pytest.importorskip("tokenizers")
    hf = tokenizers.Tokenizer(tokenizers.models.BPE({c: i for i, c in enumerate("<>abx ")}, [], unk_token="x"))
    hf.add_tokens([tokenizers.AddedToken("ab", special=False, normalized=False)])
    hf.add_special_tokens([tokenizers.AddedToken("<ab>", special=True, normalized=False)])
    tok = pymtok.Tokenizer.from_config(json.loads(hf.to_str()))
    for text in ["x<ab>x<ab", "<ab><ab>ab", "a<ab"]:
        assert tok.encode(text) == hf.encode(text).ids
        hf.encode_special_tokens = True
        assert tok.encode(text, split_special_tokens=True) == hf.encode(text).ids
        assert tok.encode(text, disallowed_special=()) == hf.encode(text).ids
        hf.encode_special_tokens = False


CL100K_SPECIALS = ["<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|endofprompt|>"]


@functools.lru_cache(maxsize=None)
def cl100k(tmp: str) -> tuple[pymtok.Tokenizer, Any]:
    """cl100k as a legacy tokenizer.txt with its special tokens after the ranks, and the
    tiktoken.Encoding with the same specials at the same ids."""
    tiktoken = pytest.importorskip("tiktoken")
    from tiktoken.load import load_tiktoken_bpe

    file = fixture_path("legacy", "tiktoken", "cl100k_base.tiktoken")
    src = legacy.from_tiktoken(file)
    first = len(src.tokens)
    src.tokens.extend(t.encode() for t in CL100K_SPECIALS)
    src.special_ids = list(range(first, first + len(CL100K_SPECIALS)))
    path = src.write(Path(tmp) / "tokenizer.txt")
    tok = legacy.read_txt(path, pattern=legacy.CL100K_PATTERN)
    enc = tiktoken.Encoding(
        name="pymtok-cl100k", pat_str=legacy.CL100K_PATTERN, mergeable_ranks=load_tiktoken_bpe(str(file)),
        special_tokens={t: first + k for k, t in enumerate(CL100K_SPECIALS)},
    )
    return tok, enc


# a session's: the tests using it are spread over the workers, between other modules' tests
@pytest.fixture(scope="session")
def cl100k_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[pymtok.Tokenizer, Any]:
    return cl100k(str(tmp_path_factory.mktemp("cl100k")))


def cl100k_texts() -> list[str]:
    texts = list(chunks()[:60])
    for k, special in enumerate(CL100K_SPECIALS):
        texts.append(f"{texts[k][:50]}{special} and {special}{CL100K_SPECIALS[k - 1]}")
    texts.append("<|endoftext|")  # a prefix of a special token is text
    return texts


@pytest.mark.parametrize(
    "kwargs",
    [
        {"allowed_special": "all"},
        {"disallowed_special": ()},
        {"allowed_special": {"<|endoftext|>"}, "disallowed_special": ()},
        {"allowed_special": {"<|fim_prefix|>", "<|fim_suffix|>"}, "disallowed_special": ["<|endofprompt|>"]},
        {"allowed_special": "all", "disallowed_special": "all"},
        {"allowed_special": set()},
        {"disallowed_special": "all"},
        {"allowed_special": {"<|endoftext|>"}},
    ],
    ids=lambda kwargs: ",".join(f"{k}={sorted(v) if isinstance(v, set) else v}" for k, v in kwargs.items()),
)
def test_allowed_and_disallowed_special_match_tiktoken(cl100k_pair: tuple[pymtok.Tokenizer, Any], kwargs: dict[str, Any]) -> None:
    tok, enc = cl100k_pair
    for text in cl100k_texts():
        try:
            expected: Any = enc.encode(text, **kwargs)
        except ValueError as exc:
            with pytest.raises(ValueError) as ours_exc:
                tok.encode(text, **kwargs)
            assert str(ours_exc.value) == str(exc)  # the same words, naming the same token
            with pytest.raises(ValueError) as ours_exc:
                tok.encode_to_numpy(text, **kwargs)
            assert str(ours_exc.value) == str(exc)
            continue
        assert tok.encode(text, **kwargs) == expected, text
        got = tok.encode_to_numpy(text, **kwargs)
        assert got.dtype == np.uint32 and got.tolist() == enc.encode_to_numpy(text, **kwargs).tolist(), text
    batch = [t for t in cl100k_texts() if "<|" not in t]
    assert tok.encode_batch(batch, **kwargs) == enc.encode_batch(batch, **kwargs)


def test_special_keywords_refuse_what_they_cannot_mean(cl100k_pair: tuple[pymtok.Tokenizer, Any]) -> None:
    tok, _ = cl100k_pair
    with pytest.raises(TypeError, match="not both"):
        tok.encode("a", split_special_tokens=True, allowed_special="all")
    with pytest.raises(TypeError, match="collection"):
        tok.encode("a", allowed_special="<|endoftext|>")  # a str that is not "all" would be its characters
    with pytest.raises(ValueError, match="not added tokens"):
        tok.encode("a", allowed_special={"<|no such token|>"})
    with pytest.raises(TypeError, match="bool"):
        tok.encode("a", split_special_tokens=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="unexpected keyword"):
        tok.encode_batch(["a"], allowed_specials="all")


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_encode_to_numpy_gives_hfs_ids(name: str) -> None:
    tok, hf = ours(name), hf_tokenizer(name)
    # a text long enough that the native core reads it a part at a time (module.c PARTS_MIN)
    long_text = "\n".join(chunks())
    assert len(long_text) > 2 * 8192
    texts = [*chunks()[:40], *special_texts(tok, 10), "", long_text]
    for flag in (True, False):
        for text in texts:
            got = tok.encode_to_numpy(text, add_special_tokens=flag)
            assert got.dtype == np.uint32 and got.ndim == 1, text[:80]
            assert got.tolist() == hf.encode(text, add_special_tokens=flag).ids, text[:80]
    assert tok.encode_to_numpy("a b").flags.writeable  # the caller's own array, as tiktoken's


@pytest.mark.parametrize("name", ["qwen3"])  # with qwen3's tests, which load its oracle
def test_encode_to_numpy_answers_every_call_shape_as_hf(name: str) -> None:
    """encode_to_numpy's common call is C's too (module.c FastEncode): a meta changed after load,
    a numpy in sys.modules that is not the one first found, and a subclass's own method still
    get HF's ids."""
    hf, tok, texts, (plain, bare, split) = call_shape_case(name)

    def arrays(**kwargs: Any) -> list[list[int]]:
        return [tok.encode_to_numpy(t, **kwargs).tolist() for t in texts]

    assert arrays() == plain and arrays(add_special_tokens=False) == bare
    assert arrays(split_special_tokens=True) == split
    tok.meta.split_special_tokens = True
    assert arrays() == split
    tok.meta.split_special_tokens = False
    assert arrays() == plain
    with pytest.raises(TypeError, match="add_special_tokens must be True or False"):
        tok.encode_to_numpy("abc", add_special_tokens=None)  # type: ignore[arg-type]

    class Arrays:
        """numpy as another module would stand in for it: its own frombuffer"""

        @staticmethod
        def frombuffer(data: Any, dtype: Any) -> list[int]:
            return np.frombuffer(data, dtype).tolist()  # type: ignore[no-any-return]

        dtype = np.dtype

    if "_encode_fast" in vars(tok):  # the native core's call (the pure method's numpy is the first found)
        with pytest.MonkeyPatch.context() as patch:
            patch.setitem(sys.modules, "numpy", Arrays)
            assert tok.encode_to_numpy(texts[0]) == plain[0]
    assert tok.encode_to_numpy(texts[0]).tolist() == plain[0]
    assert inspect.signature(tok.encode_to_numpy) == inspect.signature(
        functools.partial(pymtok.Tokenizer.encode_to_numpy, tok)
    )
    assert tok.encode_to_numpy.__doc__ == pymtok.Tokenizer.encode_to_numpy.__doc__

    class Shouting(pymtok.Tokenizer):
        def encode_to_numpy(self, text: str, **kwargs: Any) -> Any:
            return super().encode_to_numpy(text.upper(), **kwargs)

    assert Shouting.from_config(tok.config, tok.meta).encode_to_numpy("hello").tolist() == hf.encode("HELLO").ids


def test_encode_to_numpy_refuses_as_encode_does(monkeypatch: pytest.MonkeyPatch) -> None:
    tok = ours("llama3")
    with pytest.raises(TypeError, match=r"encode_to_numpy\(\) takes a str"):
        tok.encode_to_numpy(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"encode_to_numpy\(\): add_special_tokens must be True or False"):
        tok.encode_to_numpy("a", add_special_tokens=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="surrogate"):
        tok.encode_to_numpy("a\ud800b")
    with pytest.raises(TypeError, match="unexpected keyword"):
        tok.encode_to_numpy("a", return_tensors="np")  # type: ignore[call-arg]
    from pymtok import tokenizer

    tokenizer._numpy_u32.cache_clear()
    with monkeypatch.context() as patch:
        patch.setitem(sys.modules, "numpy", None)  # as if not installed
        with pytest.raises(ImportError, match="encode_to_numpy needs numpy"):
            tok.encode_to_numpy("a")
    tokenizer._numpy_u32.cache_clear()
    assert tok.encode_to_numpy("a").tolist() == tok.encode("a")


# -- tiktoken's byte view ----------------------------------------------------------------------


def test_byte_view_matches_tiktoken(cl100k_pair: tuple[pymtok.Tokenizer, Any]) -> None:
    tok, enc = cl100k_pair
    for text in cl100k_texts():
        ids = enc.encode(text, allowed_special="all")
        assert tok.decode_bytes(ids) == enc.decode_bytes(ids)
        assert tok.decode_bytes(np.array(ids, dtype=np.uint32)) == enc.decode_bytes(ids)
    for id in [0, 1, 255, 256, 1000, 50000, 100255, *enc._special_tokens.values()]:
        assert tok.decode_single_token_bytes(id) == enc.decode_single_token_bytes(id)
    assert tok.token_byte_values() == enc.token_byte_values()
    assert tok.n_vocab == enc.n_vocab
    assert tok.eot_token == enc.eot_token
    with pytest.raises(KeyError):
        enc.decode_single_token_bytes(100270)
    with pytest.raises(KeyError):
        tok.decode_single_token_bytes(100270)


def test_byte_view_needs_a_byte_level_tokenizer() -> None:
    with pytest.raises(ValueError, match="byte-level"):
        ours("t5-small").decode_bytes([5])
    # HF byte-level files have the view too: the bytes are what decode reads as UTF-8
    tok = ours("llama3")
    for text in chunks()[:20]:
        ids = tok.encode(text, add_special_tokens=False)
        assert tok.decode_bytes(ids).decode("utf-8", errors="replace") == tok.decode(ids)


# -- decoding inputs ---------------------------------------------------------------------------


class Index:
    """An integer-like that is not an int (as torch's and numpy's scalars are)."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value


class FakeTensor:
    """What decode may rely on of a torch tensor: ``tolist()``."""

    def __init__(self, data: Any) -> None:
        self.data = data

    def tolist(self) -> Any:
        return self.data


@pytest.mark.parametrize("name", ["qwen3", "all-minilm-l6-v2", "t5-small"])
def test_decode_takes_integer_likes_like_transformers(name: str) -> None:
    hf = transformers_tokenizer(name)
    tok = ours(name)
    rows = [tok.encode(t) for t in chunks()[:8]]
    for ids in rows:
        expected = hf.decode(ids)
        assert tok.decode(ids) == expected
        for form in (np.array(ids), np.array(ids, dtype=np.int32), np.array(ids, dtype=np.uint64), tuple(ids)):
            assert tok.decode(form) == expected == hf.decode(form)
        assert tok.decode([np.int64(i) for i in ids]) == expected
        assert tok.decode([Index(i) for i in ids]) == expected
        assert tok.decode(FakeTensor(ids)) == expected
        assert tok.decode(iter(ids)) == expected
        assert tok.decode(ids, skip_special_tokens=True) == hf.decode(ids, skip_special_tokens=True)
    assert tok.decode(np.int64(rows[0][1])) == hf.decode(int(rows[0][1]))
    assert tok.decode(rows[0][1]) == hf.decode(rows[0][1])
    width = min(map(len, rows))
    square = np.array([r[:width] for r in rows])
    assert tok.batch_decode(square) == hf.batch_decode(square)
    assert tok.batch_decode(rows, skip_special_tokens=True) == hf.batch_decode(rows, skip_special_tokens=True)
    assert tok.batch_decode(FakeTensor([r[:width] for r in rows])) == hf.batch_decode(square)
    with pytest.raises(TypeError):
        tok.decode("12")
    with pytest.raises(TypeError):
        tok.decode([1.0])
    # a 2-D array is a batch, whatever its dtype, as transformers takes it
    assert tok.decode(np.array([[1, 2]], dtype=object)) == hf.decode(np.array([[1, 2]], dtype=object))


# Issue 11: the answers HF's bindings give, on both paths
@pytest.mark.parametrize(
    "call",
    [
        lambda t: t.decode([2**64]),
        lambda t: t.decode([-1]),
        lambda t: t.decode([2**32 - 1]),
        lambda t: t.decode([2**32]),
        lambda t: t.id_to_token(2**70),
        lambda t: t.id_to_token(-1),
        lambda t: t.id_to_token("a"),
        lambda t: t.id_to_token(2**32 - 1),
        lambda t: t.id_to_token(5),
        lambda t: t.encode_batch(x for x in ["a", "b"]),
        lambda t: t.encode_batch(["a", "b"]),
        lambda t: t.token_to_id(5),
        lambda t: t.token_to_id("<|im_end|>"),
    ],
)
@pytest.mark.parametrize("kind", ["json", "mtok"])
@pytest.mark.parametrize("name", ["qwen3"])  # with qwen3's other tests, and its export
def test_edge_answers_are_hf_answers(call: Any, kind: str, name: str, exported_tokenizer: Any) -> None:
    hf = hf_tokenizer(name)
    tok = ours(name) if kind == "json" else exported_tokenizer(name)

    def outcome(t: Any) -> Any:
        try:
            value = call(t)
        except (TypeError, OverflowError, ValueError) as exc:
            return type(exc)
        return [e.ids for e in value] if isinstance(value, list) and value and hasattr(value[0], "ids") else value

    assert outcome(tok) == outcome(hf)


# -- vocabulary and special tokens -------------------------------------------------------------

# chatglm3-6b's real class is remote code the fixture lacks: PreTrainedTokenizerFast stands in for
# chat templates, but it adds tokenizer_config.json's extra tokens to the vocabulary, which that
# class does not
@pytest.mark.parametrize("name", slow_for([n for n in TOKENIZER_NAMES if n not in REMOTE_CODE], "gemma-v1"))
def test_vocabulary_and_special_tokens_match_transformers(name: str) -> None:
    hf = transformers_tokenizer(name)
    backend = hf_tokenizer(name)
    tok = ours(name)
    # gemma-v1: GemmaTokenizer's mask_token, which tokenizer_config.json does not name
    for key in pymtok.tokenizer.NAMED_SPECIAL_TOKENS:
        assert getattr(tok, key) == getattr(hf, key), key
        assert getattr(tok, key + "_id") == getattr(hf, key + "_id"), key
    assert tok.all_special_tokens == hf.all_special_tokens
    assert tok.all_special_ids == hf.all_special_ids
    first = list(range(min(300, len(tok))))
    assert tok.decode(first, skip_special_tokens=True) == hf.decode(first, skip_special_tokens=True)
    assert tok.get_vocab() == hf.get_vocab()
    assert tok.get_vocab(with_added_tokens=False) == backend.get_vocab(with_added_tokens=False)
    assert len(tok) == len(hf)
    for pair in (False, True):
        assert tok.num_special_tokens_to_add(pair) == hf.num_special_tokens_to_add(pair)
    for text in chunks()[:10]:
        ids = tok.encode(text)
        assert tok.convert_ids_to_tokens(ids) == hf.convert_ids_to_tokens(ids)
        assert tok.convert_ids_to_tokens(ids, skip_special_tokens=True) == hf.convert_ids_to_tokens(
            ids, skip_special_tokens=True
        )
        tokens = tok.convert_ids_to_tokens(ids)
        assert tok.convert_tokens_to_ids(tokens) == hf.convert_tokens_to_ids(tokens)
        assert tok.convert_tokens_to_string(tokens) == hf.convert_tokens_to_string(tokens)
    assert tok.convert_ids_to_tokens(3) == hf.convert_ids_to_tokens(3)
    assert tok.convert_ids_to_tokens(np.array([3, 4])) == hf.convert_ids_to_tokens([3, 4])
    assert tok.convert_ids_to_tokens([10**9]) == hf.convert_ids_to_tokens([10**9])
    assert tok.convert_tokens_to_ids("\u0000no such token") == hf.convert_tokens_to_ids("\u0000no such token")


@pytest.mark.parametrize("name", ["qwen3", "all-minilm-l6-v2"])
def test_decode_call_shapes_match_transformers(name: str) -> None:
    """transformers 5's decode takes a batch (nested lists, a 2-D array) and gives a list of
    texts; its batch_decode of one flat sequence gives a list of that sequence's one text."""
    hf = transformers_tokenizer(name)
    tok = ours(name)
    ids = tok.encode("Hello world, how are you?")

    def outcome(tokenizer: Any, method: str, arg: Any, skip: bool) -> Any:
        try:
            return getattr(tokenizer, method)(arg, skip_special_tokens=skip)
        except (TypeError, ValueError) as exc:
            return type(exc)

    for arg in (ids, [ids, ids[:3]], (ids[:2], ids[2:]), np.array([ids[:3], ids[3:6]]), np.array(ids),
                [], [[]], ids[0]):
        for method in ("decode", "batch_decode"):
            for skip in (False, True):
                assert outcome(tok, method, arg, skip) == outcome(hf, method, arg, skip), (method, arg)


def test_special_token_attributes_are_settable_and_reach_the_template() -> None:
    tok = pymtok.load(fixture_path("tokenizers", "qwen3"))
    tok.eos_token = "<|endoftext|>"
    assert tok.eos_token_id == tok.token_to_id("<|endoftext|>")
    assert tok.meta.special_tokens["eos_token"] == "<|endoftext|>"
    with pytest.raises(AttributeError):
        tok.eos_token_id = 5
    with pytest.raises(TypeError):
        tok.eos_token = 5  # type: ignore[assignment]
    tok.bos_token = None
    assert tok.bos_token is None and tok.bos_token_id is None


def _lowercasing_folder(folder: Path, added: list[Any], config: dict[str, Any]) -> tuple[Any, Any]:
    """A WordPiece tokenizer.json lowercasing its text, with ``added`` tokens and ``config`` as its
    tokenizer_config.json: (HF tokenizers' tokenizer of the file, transformers' of the folder)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    hf = Tokenizer(models.WordPiece({"<unk>": 0, "a": 1, "b": 2}, unk_token="<unk>"))
    hf.normalizer = normalizers.Lowercase()
    hf.pre_tokenizer = pre_tokenizers.Whitespace()
    hf.add_special_tokens(["<unk>"])
    hf.add_tokens(added)
    hf.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({"unk_token": "<unk>", **config}), encoding="utf-8")
    return Tokenizer.from_file(str(folder / "tokenizer.json")), transformers_tokenizer_at(folder)


def test_a_normalized_added_token_is_named_by_its_normalized_form(tmp_path: Path) -> None:
    """HF names an added token it matches in normalized text by its normalized form (id_to_token,
    so transformers' convert_ids_to_tokens), and looks it up by its content; a .mtok keeps that."""
    from tokenizers import AddedToken

    raw, theirs = _lowercasing_folder(tmp_path, [AddedToken("AB", normalized=True), AddedToken("CD", normalized=False),
                                                 AddedToken("Ef", normalized=True, special=True)], {})
    tok = pymtok.load(tmp_path)
    tok.save(tmp_path / "tokenizer.mtok")
    ids = list(range(raw.get_vocab_size() + 1))
    for ours_ in (tok, pymtok.load(tmp_path / "tokenizer.mtok")):
        assert [ours_.id_to_token(i) for i in ids] == [raw.id_to_token(i) for i in ids]
        assert ours_.convert_ids_to_tokens(ids) == theirs.convert_ids_to_tokens(ids)
        for token in ("AB", "ab", "CD", "cd", "Ef", "ef"):
            assert ours_.token_to_id(token) == raw.token_to_id(token), token
            assert ours_.convert_tokens_to_ids(token) == theirs.convert_tokens_to_ids(token), token
        assert ours_.get_vocab() == theirs.get_vocab()
        for text in ("AB cd Ef", "ab CD ef"):
            assert ours_(text).tokens() == theirs(text).tokens()
            assert ours_.decode(ours_.encode(text), skip_special_tokens=True) == theirs.decode(
                theirs(text)["input_ids"], skip_special_tokens=True)


@pytest.mark.parametrize("config", [{}, {"sep_token": "Hello"}, {"extra_special_tokens": ["Hello"]},
                                    {"additional_special_tokens": ["Hello"]},
                                    {"mask_token": "Hello", "extra_special_tokens": ["Hello"]}])
@pytest.mark.parametrize("normalized", [True, False])
@pytest.mark.parametrize("special", [True, False])
def test_decode_skips_the_tokens_transformers_flags_special(
    config: dict[str, Any], normalized: bool, special: bool, tmp_path: Path
) -> None:
    """decode(skip_special_tokens=True) skips what transformers' backend holds special: an added
    token tokenizer.json leaves unflagged stays unless tokenizer_config.json names it as a role (an
    extra special token leaves it as it is), and HF tokenizers does not skip a special token whose
    normalized form differs from its content. Without transformers' fix-ups, HF tokenizers' decode."""
    from tokenizers import AddedToken

    raw, theirs = _lowercasing_folder(tmp_path, [AddedToken("Hello", special=special, normalized=normalized)], config)
    tok = pymtok.load(tmp_path)
    ids = [1, 3, 2, 0, 3]
    assert tok("a Hello b")["input_ids"] == theirs("a Hello b")["input_ids"]
    for skip in (False, True):
        assert tok.decode(ids, skip_special_tokens=skip) == theirs.decode(ids, skip_special_tokens=skip)
        assert tok.decode(ids, skip_special_tokens=skip, clean_up_tokenization_spaces=False) == raw.decode(
            ids, skip_special_tokens=skip)
        assert tok.batch_decode([ids, ids[:2]], skip_special_tokens=skip) == theirs.batch_decode(
            [ids, ids[:2]], skip_special_tokens=skip)
        assert tok.convert_ids_to_tokens(ids, skip_special_tokens=skip) == theirs.convert_ids_to_tokens(
            ids, skip_special_tokens=skip)
