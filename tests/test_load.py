"""Loading a .mtok lazily: the native reader's vocabulary (a Mapping over the file's tables) must
be the vocabulary, decode must work without building Python dicts, and the native and pure
readers must agree. Speed is measured by bench/bench.py, not here."""

from __future__ import annotations

import subprocess
import sys
from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from conftest import examples, fixture_path, ours, slow_for

import pymtok
from pymtok import models
from pymtok.mtok import dumps_mtok, loads_mtok

pytest.importorskip("pymtok._native")

# BPE byte-level (sparse ids in gpt-4o), BPE char-level with byte fallback, WordPiece
NAMES = ["qwen3", "gpt-4o", "gemma-v1", "all-minilm-l6-v2"]


@cache
def mtok_bytes(name: str) -> bytes:
    tok = ours(name)
    return dumps_mtok(tok.config, tok.meta)


def load(name: str, monkeypatch: pytest.MonkeyPatch, pure: bool):
    if pure:
        monkeypatch.setenv("PYMTOK_PURE", "1")
    else:
        monkeypatch.delenv("PYMTOK_PURE", raising=False)
    return loads_mtok(mtok_bytes(name), name)


@pytest.mark.parametrize("name", slow_for(NAMES, "gemma-v1"))  # its 256k vocabulary: minutes
def test_lazy_vocabulary_is_the_vocabulary(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    lazy = load(name, monkeypatch, pure=False).model
    full = load(name, monkeypatch, pure=True).model.vocab
    assert isinstance(lazy.vocab, models.IndexedVocab) and type(full) is dict
    assert len(lazy.vocab) == len(full) and lazy.vocab_size == len(full)
    assert set(lazy.vocab) == set(full)
    assert lazy.vocab == full and dict(lazy.vocab.items()) == full
    for token, id in full.items():
        assert lazy.token_to_id(token) == id and lazy.vocab[token] == id and token in lazy.vocab
        assert lazy.id_to_token(id) == token
    for missing in ("\u0000not a token\u0000", "\ud800", 3):
        assert missing not in lazy.vocab and lazy.vocab.get(missing) is None  # type: ignore[call-overload]
    top = max(full.values())
    for id in (-1, top + 1, 2**31 - 1, 2**31, 2**40):
        assert lazy.id_to_token(id) is None


@pytest.mark.parametrize("name", slow_for(NAMES, "gemma-v1"))  # its 256k vocabulary: minutes
def test_native_and_pure_readers_agree(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    lazy = load(name, monkeypatch, pure=False)
    pure = load(name, monkeypatch, pure=True)
    assert lazy._native_segment is not None and pure._native_segment is None
    text = "Hello wörld, 123 ① これは テスト\n\tcode(x) => x ** 2 🤗 <unk> [UNK]"
    for special in (True, False):
        assert lazy.encode(text, add_special_tokens=special) == pure.encode(text, add_special_tokens=special)
    ids = pure.encode(text)
    assert lazy.decode(ids) == pure.decode(ids)
    assert lazy.get_vocab() == pure.get_vocab() and lazy.vocab_size == pure.vocab_size
    if isinstance(pure.model, models.BPE):
        assert list(lazy.model.vocab) == list(pure.model.vocab)  # file order
        assert lazy.config["model"]["merges"] == list(pure.config["model"]["merges"])
        # the pure path's table, had it been needed, is the same
        assert lazy.model.merges == pure.model.merges


@pytest.mark.parametrize("name", slow_for(NAMES, "gemma-v1"))  # its 256k vocabulary: minutes
def test_decode_and_encode_build_no_python_tables(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    tok = load(name, monkeypatch, pure=False)
    ids = tok.encode("Hello world, a test of decode.")
    assert tok.decode(ids) == load(name, monkeypatch, pure=True).decode(ids)
    built = vars(tok.model)
    assert "_lookup" not in built and tok.model._inverse is None
    assert "merges" not in built  # BPE's Python merge table is only made for the pure path


# these name qwen3 to run with its other tests here, which write and read its file too
@pytest.mark.parametrize("name", ["qwen3"])
def test_written_file_round_trips_from_lazy_tables(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # writing back a tokenizer read lazily gives the same bytes
    tok = load(name, monkeypatch, pure=False)
    assert dumps_mtok(tok.config, tok.meta) == mtok_bytes(name)


@pytest.mark.parametrize("name", ["qwen3"])
def test_pure_pre_tokenizer_before_the_native_model(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # a pattern the native core runs neither with a scanner nor with its regex engine (which
    # knows no scripts) is split on the pure path, and the model runs native on the .mtok's
    # tables: the ids stay those of the pure reader
    tok = ours(name)
    config = dict(tok.config)
    config["pre_tokenizer"] = {"type": "Split", "pattern": {"Regex": r"\s+|\p{Greek}+|[^\s\p{Greek}]+"},
                               "behavior": "Isolated", "invert": False}
    data = dumps_mtok(config, tok.meta)
    monkeypatch.delenv("PYMTOK_PURE", raising=False)
    lazy = loads_mtok(data)
    monkeypatch.setenv("PYMTOK_PURE", "1")
    pure = loads_mtok(data)
    assert lazy._native_segment is not None and lazy._native_text is None
    text = "Hello wörld, 123 これは テスト αβγ"
    assert lazy.encode(text) == pure.encode(text)


@pytest.mark.parametrize("name", ["qwen3"])
def test_tables_outlive_the_reader(name: str, tmp_path) -> None:
    # the file stays mapped for the tokenizer's lifetime: it encodes after the reader returned
    # and after the path is gone
    path = tmp_path / "t.mtok"
    path.write_bytes(mtok_bytes(name))
    script = (
        "import gc, os, sys; from pymtok.mtok import read_mtok; tok = read_mtok(sys.argv[1]); "
        "os.remove(sys.argv[1]); gc.collect(); print(tok.encode('Hello world'), tok.decode([1, 2, 3]))"
    )
    proc = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-500:]


def _shuffled_bpe(seed: int, continuing_prefix: str | None = None) -> dict:
    """A byte-level BPE over a small alphabet whose merge results are numbered at random, so
    the native reader's guesses (previous result, next id) mostly fail and it looks them up;
    some pairs are listed twice (the later merge wins, as in HF)."""
    import random

    rng = random.Random(seed)
    alphabet = "abcdefgh"
    tokens = list(alphabet)
    merges: list[list[str]] = []
    while len(merges) < 300:
        left, right = rng.choice(tokens), rng.choice(tokens)
        if len(left) + len(right) > 6:
            continue
        merges.append([left, right])
        if left + right not in tokens:
            tokens.append(left + right)
    merges += merges[5:15]  # repeated pairs: HF keeps the later rank
    ids = list(range(len(tokens)))
    rng.shuffle(ids)
    vocab = dict(zip(tokens, ids))
    model = {"type": "BPE", "vocab": vocab, "merges": merges}
    if continuing_prefix is not None:
        model["continuing_subword_prefix"] = continuing_prefix
    return {
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "model": model,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "post_processor": None,
        "added_tokens": [],
    }


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_merge_results_that_follow_no_order(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from pymtok.tokenizer import Tokenizer, TokenizerMeta

    config = _shuffled_bpe(seed)
    data = dumps_mtok(config, TokenizerMeta())
    reference = Tokenizer.from_config(config, TokenizerMeta())
    monkeypatch.delenv("PYMTOK_PURE", raising=False)
    lazy = loads_mtok(data)
    monkeypatch.setenv("PYMTOK_PURE", "1")
    pure = loads_mtok(data)
    assert lazy.model.merges == pure.model.merges == reference.model.merges
    text = "abcdefgh hgfedcba aabbccdd abcabc " * 3
    assert lazy.encode(text) == pure.encode(text) == reference.encode(text)


def test_merge_results_with_a_continuing_subword_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    # the reader resolves merges without a prefix first; a file with one is resolved again
    # (HF's left + right[len(prefix):]), and a merge whose result is missing is a FormatError
    from pymtok.tokenizer import TokenizerMeta

    vocab = {"a": 0, "b": 1, "##b": 2, "ab": 3}
    model = {"type": "BPE", "vocab": vocab, "merges": [["a", "##b"]], "continuing_subword_prefix": "##"}
    config = {**_shuffled_bpe(1), "model": model}
    data = dumps_mtok(config, TokenizerMeta())
    monkeypatch.delenv("PYMTOK_PURE", raising=False)
    lazy = loads_mtok(data)
    monkeypatch.setenv("PYMTOK_PURE", "1")
    assert lazy.model.merges == loads_mtok(data).model.merges == {(0, 2): (0, 3)}
    monkeypatch.delenv("PYMTOK_PURE", raising=False)
    del vocab["ab"]
    vocab["a##b"] = 3  # what the merge makes without the prefix rule
    with pytest.raises(pymtok.FormatError, match="merges at byte .* makes a token that is not in the vocabulary"):
        loads_mtok(dumps_mtok(config, TokenizerMeta()))


@pytest.mark.parametrize("name", ["qwen3"])
def test_load_builds_no_regex_the_native_path_does_not_use(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # the Split pattern has a native scanner and added tokens are matched natively: neither the
    # pattern nor the added-token trie is compiled until the pure path needs them
    tok = load(name, monkeypatch, pure=False)
    split = tok.pre_tokenizer.pretokenizers[0]
    assert "_compiled" not in vars(split) and "_raw" not in vars(tok.added)
    pure = load(name, monkeypatch, pure=True)
    text = "Hello <|im_start|>wörld 123"
    assert pure.encode(text) == tok.encode(text)
    assert "_compiled" in vars(pure.pre_tokenizer.pretokenizers[0]) and "_raw" in vars(pure.added)


@pytest.mark.parametrize("name", ["qwen3"])
def test_bad_split_pattern_still_fails_the_load(name: str) -> None:
    # patterns the native core has no scanner for are compiled while loading
    tok = ours(name)
    config = dict(tok.config)
    config["pre_tokenizer"] = {"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated", "invert": False}
    with pytest.raises(pymtok.FormatError):
        loads_mtok(dumps_mtok(config, tok.meta))


def test_pair_listed_twice_out_of_rank_order(monkeypatch: pytest.MonkeyPatch) -> None:
    # results are rank + 8, so the native reader walks the merges in file order; a pair listed
    # twice whose later-ranked record comes first in the file still ends with the later rank
    import struct

    from pymtok.tokenizer import Tokenizer, TokenizerMeta

    tokens = list("abcdefgh")
    merges: list[list[str]] = []
    for left in tokens[:]:
        for right in "abcdefgh":
            if len(merges) < 100:
                merges.append([left, right])
                tokens.append(left + right)
    for left in tokens[8:20]:
        merges.append([left, "a"])
        tokens.append(left + "a")
    vocab = {t: i for i, t in enumerate(tokens)}
    dup = max(merges, key=lambda m: (vocab[m[0]], vocab[m[1]]))
    merges.append(dup)
    config = {**_shuffled_bpe(1), "model": {"type": "BPE", "vocab": vocab, "merges": merges}}
    data = dumps_mtok(config, TokenizerMeta())  # the records are edited below
    a, b = vocab[dup[0]], vocab[dup[1]]
    first, second = struct.pack("<III", a, b, merges.index(dup)), struct.pack("<III", a, b, len(merges) - 1)
    assert data.count(first + second) == 1
    data = data.replace(first + second, second + first)
    reference = Tokenizer.from_config(config, TokenizerMeta()).model.merges
    assert reference[(a, b)][0] == len(merges) - 1
    monkeypatch.delenv("PYMTOK_PURE", raising=False)
    lazy = loads_mtok(data)
    monkeypatch.setenv("PYMTOK_PURE", "1")
    assert lazy.model.merges == loads_mtok(data).model.merges == reference


# ---- building the tables (docs/FORMAT_EXTENSION.md, "The stored index") --------------------


@pytest.mark.parametrize("name", slow_for(["qwen3", "gpt-4o", "gemma-v1", "llama3"], "gemma-v1"))
def test_large_tables_give_hf_ids(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # large vocabularies' tables (mtok_tables.c): merges in the file's order (Qwen3, GPT-4o:
    # results follow the ranks) and in HF's (Llama 3, Gemma)
    from conftest import corpus_chunks, hf_tokenizer

    monkeypatch.delenv("PYMTOK_PURE", raising=False)
    tok = ours(name)  # the shared load, on either path: the pure one's merge table is the reference
    read = loads_mtok(mtok_bytes(name), name)
    hf = hf_tokenizer(name)
    for text in corpus_chunks(150, seed=7):
        assert read.encode(text, add_special_tokens=False) == hf.encode(text, add_special_tokens=False).ids
    assert read.get_vocab() == hf.get_vocab()
    assert read.model.merges == tok.model.merges


# A replica of the native tables' hashes and slots (native.h hash_bytes, mtok_tables.h
# mtok_pair_hash, mtok_first_slot, mtok_tables.c slots_for): the test below needs keys that all
# land in one half of a table, which no real file has.
_M64 = 2**64 - 1


def _hash_bytes(data: bytes) -> int:
    h = 0x9E3779B97F4A7C15 ^ (len(data) * 0xFF51AFD7ED558CCD & _M64)
    whole = len(data) - len(data) % 8
    for at in range(0, whole, 8):
        h = (h ^ int.from_bytes(data[at:at + 8], "little")) * 0xBF58476D1CE4E5B9 & _M64
        h ^= h >> 31
    h = (h ^ int.from_bytes(data[whole:], "little")) * 0x94D049BB133111EB & _M64
    h ^= h >> 29
    h = h * 0xBF58476D1CE4E5B9 & _M64
    return h ^ h >> 32


def _pair_slot_bits(left: int, right: int) -> int:
    return ((left << 32 | right) * 0x9E3779B97F4A7C15 & _M64) >> 24 & 0xFFFFFFFF


def _table_size(n: int) -> int:
    return n + 2 * n // 3 + 16


def _in_upper_half(bits: int, size: int) -> bool:
    return bits * size >> 32 >= size // 2


def test_keys_crowding_one_half_of_a_table_give_hf_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    # A file whose tokens or pairs nearly all fall in the upper half of a table (hostile, or
    # freak chance) makes long probe runs, which wrap past the table's end (and overfilled one
    # half when two builders shared the table): the ids must not change.
    import json
    import random

    from tokenizers import Tokenizer as HFTokenizer

    from pymtok.byte_level import bytes_to_chars
    from pymtok.tokenizer import TokenizerMeta

    rng = random.Random(11)
    letters = [bytes_to_chars(bytes([b])) for b in range(256)]
    tokens, merges, lefts = list(letters), [], letters[0x61:0x7B]
    goal = 16_000
    vocab_slots, merge_slots = _table_size(256 + goal), _table_size(goal)
    ids = {t: i for i, t in enumerate(tokens)}
    while len(merges) < goal:
        a, b = rng.choice(lefts), rng.choice(letters[0x61:0x7B])
        made = a + b
        if made in ids:
            continue
        if not _in_upper_half(_hash_bytes(made.encode()) >> 32, vocab_slots) or not _in_upper_half(
            _pair_slot_bits(ids[a], ids[b]), merge_slots
        ):
            continue
        ids[made] = len(tokens)
        tokens.append(made)
        merges.append([a, b])
        if len(made) < 10:
            lefts.append(made)
    # the premise: more keys in the upper half than 4/5 of its slots, in both tables
    upper = sum(_in_upper_half(_hash_bytes(t.encode()) >> 32, vocab_slots) for t in tokens)
    half, merge_half = vocab_slots // 2, merge_slots // 2
    assert upper > half - half // 5 and goal > merge_half - merge_half // 5
    step = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    config = {"normalizer": None, "pre_tokenizer": step, "decoder": step, "post_processor": None,
              "added_tokens": [], "model": {"type": "BPE", "vocab": ids, "merges": merges}}
    hf = HFTokenizer.from_str(json.dumps({"version": "1.0", "truncation": None, "padding": None, **config}))
    data = dumps_mtok(config, TokenizerMeta())
    texts = [" ".join("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(1, 14)))
                      for _ in range(40)) for _ in range(30)]
    for pure in ("0", "1"):
        monkeypatch.setenv("PYMTOK_PURE", pure)
        tok = loads_mtok(data)
        assert tok.get_vocab() == hf.get_vocab()
        for text in texts:
            assert tok.encode(text, add_special_tokens=False) == hf.encode(text, add_special_tokens=False).ids


def test_continuing_subword_prefix_results(monkeypatch: pytest.MonkeyPatch) -> None:
    # merge results are made with HF's prefix rule (left + right[len(prefix):])
    import json

    from tokenizers import Tokenizer as HFTokenizer

    from pymtok.tokenizer import TokenizerMeta

    vocab = {"a": 0, "b": 1, "##b": 2, "ab": 3, "##a": 4, "aba": 5}
    merges = [["a", "##b"], ["ab", "##a"]]
    model = {"type": "BPE", "vocab": vocab, "merges": merges, "continuing_subword_prefix": "##"}
    config = {**_shuffled_bpe(1), "model": model}
    hf = HFTokenizer.from_str(json.dumps({"version": "1.0", "truncation": None, "padding": None, **config}))
    for pure in ("0", "1"):
        monkeypatch.setenv("PYMTOK_PURE", pure)
        tok = loads_mtok(dumps_mtok(config, TokenizerMeta()))
        for text in ("ab", "aba abab", "ba", "aab"):
            assert tok.encode(text) == hf.encode(text).ids


def _with_index(data: bytes, tables: bytes) -> bytes:
    import mtok_mutations as mm

    return mm.with_stored_index(data, mm.layout(data), tables)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tables=st.binary(max_size=600).map(lambda b: b[: len(b) // 4 * 4]), pure=st.sampled_from(["0", "1"]))
def test_an_earlier_stored_index_is_skipped(tables: bytes, pure: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # files of earlier pymtok versions carry their tables after the JSON payload; whatever
    # those hold (and whether their CRC-32 matches), the records alone are read
    from pymtok.tokenizer import TokenizerMeta

    monkeypatch.setenv("PYMTOK_PURE", pure)
    data = dumps_mtok(_shuffled_bpe(2), TokenizerMeta())
    tok, reference = loads_mtok(_with_index(data, tables)), loads_mtok(data)
    text = "abcdefgh hgfedcba aabbccdd abcabc gg hh"
    assert tok.encode(text) == reference.encode(text)
    assert tok.get_vocab() == reference.get_vocab()


@pytest.mark.parametrize("pure", ["0", "1"])
def test_bytes_after_the_payload_that_are_no_index_are_refused(pure: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import struct

    import mtok_mutations as mm

    from pymtok import mtok
    from pymtok.tokenizer import TokenizerMeta

    monkeypatch.setenv("PYMTOK_PURE", pure)
    data = dumps_mtok(_shuffled_bpe(2), TokenizerMeta())
    ext = data.find(mtok.EXTENSION_MAGIC, mm.layout(data).records_end)
    _, _, pad, length = mtok._EXTENSION_HEAD.unpack_from(data, ext)
    after = ext + mtok._EXTENSION_HEAD.size + length
    assert after + pad == len(data)
    fill = b"\x00" * (-after % 8)
    for tail, message in (
        (b"\x01\x02\x03", "not an index"),
        (fill + struct.pack("<II", 0, 100) + bytes(16), "announces 100 bytes but 16 remain"),
    ):
        with pytest.raises(pymtok.FormatError, match=f"extension index at byte .*{message}"):
            loads_mtok(data[:after] + tail + data[after:])
