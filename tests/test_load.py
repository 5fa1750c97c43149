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
from conftest import examples, fixture_path, slow_for

import pymtok
from pymtok import models
from pymtok.mtok import dumps_mtok, loads_mtok

pytest.importorskip("pymtok._native")

# BPE byte-level (sparse ids in gpt-4o), BPE char-level with byte fallback, WordPiece
NAMES = ["qwen3", "gpt-4o", "gemma-v1", "all-minilm-l6-v2"]


@cache
def mtok_bytes(name: str) -> bytes:
    tok = pymtok.load(fixture_path("tokenizers", name, "tokenizer.json"))
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


def test_written_file_round_trips_from_lazy_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    # writing back a tokenizer read lazily gives the same bytes
    tok = load("qwen3", monkeypatch, pure=False)
    assert dumps_mtok(tok.config, tok.meta) == mtok_bytes("qwen3")


def test_pure_pre_tokenizer_before_the_native_model(monkeypatch: pytest.MonkeyPatch) -> None:
    # a pattern the native core has no scanner for is split on the pure path, and the model
    # runs native on the .mtok's tables: the ids stay those of the pure reader
    tok = pymtok.load(fixture_path("tokenizers", "qwen3", "tokenizer.json"))
    config = dict(tok.config)
    config["pre_tokenizer"] = {"type": "Split", "pattern": {"Regex": r"\s+|\w+|[^\s\w]+"}, "behavior": "Isolated", "invert": False}
    data = dumps_mtok(config, tok.meta)
    monkeypatch.delenv("PYMTOK_PURE", raising=False)
    lazy = loads_mtok(data)
    monkeypatch.setenv("PYMTOK_PURE", "1")
    pure = loads_mtok(data)
    assert lazy._native_segment is not None and lazy._native_text is None
    text = "Hello wörld, 123 これは テスト"
    assert lazy.encode(text) == pure.encode(text)


def test_tables_outlive_the_reader(tmp_path) -> None:
    # the file stays mapped for the tokenizer's lifetime: it encodes after the reader returned
    # and after the path is gone
    path = tmp_path / "t.mtok"
    path.write_bytes(mtok_bytes("gemma-v1"))
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


def test_load_builds_no_regex_the_native_path_does_not_use(monkeypatch: pytest.MonkeyPatch) -> None:
    # the Split pattern has a native scanner and added tokens are matched natively: neither the
    # pattern nor the added-token trie is compiled until the pure path needs them
    tok = load("qwen3", monkeypatch, pure=False)
    split = tok.pre_tokenizer.pretokenizers[0]
    assert "_compiled" not in vars(split) and "_raw" not in vars(tok.added)
    pure = load("qwen3", monkeypatch, pure=True)
    text = "Hello <|im_start|>wörld 123"
    assert pure.encode(text) == tok.encode(text)
    assert "_compiled" in vars(pure.pre_tokenizer.pretokenizers[0]) and "_raw" in vars(pure.added)


def test_bad_split_pattern_still_fails_the_load() -> None:
    # patterns the native core has no scanner for are compiled while loading
    tok = pymtok.load(fixture_path("tokenizers", "qwen3", "tokenizer.json"))
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
    data = dumps_mtok(config, TokenizerMeta(), index=False)  # the records are edited below
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


# ---- the stored index (docs/FORMAT_EXTENSION.md, "The stored index") ---------------------


def _index_location(data: bytes, body_len: int) -> tuple[int, int]:
    """(offset of the CRC-32 field, offset of the tables) in a file whose MNN part is body_len."""
    import struct

    json_len = struct.unpack_from("<I", data, body_len + 10)[0]
    crc_at = body_len + 14 + json_len
    crc_at += -crc_at % 8
    return crc_at, crc_at + 8


@pytest.mark.parametrize("name", slow_for(["qwen3", "gpt-4o", "gemma-v1", "llama3"], "gemma-v1"))
def test_stored_index_is_adopted_and_gives_hf_ids(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from conftest import corpus_chunks, hf_tokenizer

    monkeypatch.delenv("PYMTOK_PURE", raising=False)
    tok = pymtok.load(fixture_path("tokenizers", name, "tokenizer.json"))
    indexed = loads_mtok(dumps_mtok(tok.config, tok.meta), name)
    built = loads_mtok(dumps_mtok(tok.config, tok.meta, index=False), name)
    assert indexed.model.vocab.tables.stored_index and not built.model.vocab.tables.stored_index
    hf = hf_tokenizer(name)
    for text in corpus_chunks(150, seed=7):
        expected = hf.encode(text, add_special_tokens=False).ids
        assert indexed.encode(text, add_special_tokens=False) == expected
        assert built.encode(text, add_special_tokens=False) == expected
    assert indexed.decode(expected) == hf.decode(expected, skip_special_tokens=False)
    assert indexed.get_vocab() == hf.get_vocab()


def test_stored_index_with_a_continuing_subword_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    # the index holds merge results made with HF's prefix rule (left + right[len(prefix):])
    import json

    from tokenizers import Tokenizer as HFTokenizer

    from pymtok.tokenizer import TokenizerMeta

    monkeypatch.delenv("PYMTOK_PURE", raising=False)
    vocab = {"a": 0, "b": 1, "##b": 2, "ab": 3, "##a": 4, "aba": 5}
    merges = [["a", "##b"], ["ab", "##a"]]
    model = {"type": "BPE", "vocab": vocab, "merges": merges, "continuing_subword_prefix": "##"}
    config = {**_shuffled_bpe(1), "model": model}
    tok = loads_mtok(dumps_mtok(config, TokenizerMeta()))
    assert tok.model.vocab.tables.stored_index
    hf = HFTokenizer.from_str(json.dumps({"version": "1.0", "truncation": None, "padding": None, **config}))
    for text in ("ab", "aba abab", "ba", "aab"):
        assert tok.encode(text) == hf.encode(text).ids


def _toy_indexed() -> tuple[bytes, int]:
    from pymtok.mtok import mnn_bytes
    from pymtok.tokenizer import TokenizerMeta

    config = _shuffled_bpe(2)
    data = dumps_mtok(config, TokenizerMeta())
    return data, len(mnn_bytes(config, TokenizerMeta())[0])


def test_damaged_index_or_records_fail_the_checksum(monkeypatch: pytest.MonkeyPatch) -> None:
    import struct

    config = _shuffled_bpe(2)
    monkeypatch.delenv("PYMTOK_PURE", raising=False)  # the native core writes the index
    data, body_len = _toy_indexed()
    _, tables_at = _index_location(data, body_len)
    for pure in ("", "1"):
        monkeypatch.setenv("PYMTOK_PURE", pure)  # empty: the native reader
        for at in (tables_at + 50, len(data) - 3):
            damaged = bytearray(data)
            damaged[at] ^= 0x10
            with pytest.raises(pymtok.FormatError, match="extension index at byte .*CRC-32 mismatch"):
                loads_mtok(bytes(damaged))
        # two merges' ranks swapped: the records are still sound, so only the checksum knows
        merges, vocab = config["model"]["merges"], config["model"]["vocab"]
        first, second = ([vocab[t] for t in merges[rank]] for rank in (0, 1))
        swapped = data.replace(struct.pack("<III", *first, 0), struct.pack("<III", *first, 1), 1)
        swapped = swapped.replace(struct.pack("<III", *second, 1), struct.pack("<III", *second, 0), 1)
        assert swapped != data
        with pytest.raises(pymtok.FormatError, match="CRC-32 mismatch"):
            loads_mtok(swapped)


class _TrustingZlib:
    """zlib whose checksum always matches the file's: what a forged file can arrange."""

    def __init__(self, crc: int) -> None:
        self.crc = crc

    def crc32(self, data: object, value: int = 0) -> int:
        return self.crc


def _forged(data: bytes, body_len: int, edit) -> bytes:
    import array

    crc_at, tables_at = _index_location(data, body_len)
    words = array.array("I", data[tables_at:])
    edit(words)
    return data[:tables_at] + words.tobytes()


def _each_used(words, first: int, count: int, mask: int):
    return [i for i in range(first, first + count) if words[i] & mask]


# header: layout, skip, records, merges, slots, offset mask, id cells, merge slots, merge mask,
# bytes, char tables, ▁ inside; then the tables (the toy is byte-level: no char tables)
_HEAD = 12
_FORGERIES = {
    "slot into a record": lambda w: w.__setitem__(
        _each_used(w, _HEAD, w[4], w[5])[0],
        (w[_each_used(w, _HEAD, w[4], w[5])[0]] & ~w[5]) | ((w[_each_used(w, _HEAD, w[4], w[5])[0]] & w[5]) + 1),
    ),
    "no empty merge slot": lambda w: [
        w.__setitem__(i, 1) for i in range(_HEAD + w[4] + w[6], _HEAD + w[4] + w[6] + w[7]) if not w[i] & w[8]
    ],
    "merge result out of range": lambda w: w.__setitem__(len(w) - 1, 0x7FFFFFFF),
    "negative merge result": lambda w: w.__setitem__(len(w) - 1, 0xFFFFFFFF),
    "id cell swapped": lambda w: w.__setitem__(_HEAD + w[4], w[_HEAD + w[4] + 1]),
    "record count": lambda w: w.__setitem__(2, w[2] + 1),
    "slot count not a power of two": lambda w: w.__setitem__(4, w[4] - 1),
    "merge slot out of range": lambda w: w.__setitem__(_each_used(w, _HEAD + w[4] + w[6], w[7], w[8])[0], w[8]),
    "char tables claimed": lambda w: w.__setitem__(10, 1),
}


_TOY_TEXT = "abcdefgh hgfedcba aabbccdd abcabc gg hh"


@pytest.mark.parametrize("forgery", sorted(_FORGERIES))
def test_forged_index_is_ignored_not_read(forgery: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # an index the checks refuse is not read: the tables are built from the records, as the
    # pure reader's (docs/FORMAT_EXTENSION.md)
    import struct

    from pymtok import mtok

    monkeypatch.delenv("PYMTOK_PURE", raising=False)
    data, body_len = _toy_indexed()
    reference = loads_mtok(data)
    forged = _forged(data, body_len, _FORGERIES[forgery])
    crc_at, _ = _index_location(data, body_len)
    monkeypatch.setattr(mtok, "zlib", _TrustingZlib(struct.unpack_from("<I", forged, crc_at)[0]))
    tok = loads_mtok(forged)
    assert not tok.model.vocab.tables.stored_index and reference.model.vocab.tables.stored_index
    assert tok.encode(_TOY_TEXT) == reference.encode(_TOY_TEXT)


def test_forged_char_tables_are_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    # a char-level BPE's index holds each BMP character's token: a forged one is not read
    import struct

    from pymtok import mtok
    from pymtok.mtok import mnn_bytes
    from pymtok.tokenizer import TokenizerMeta

    monkeypatch.delenv("PYMTOK_PURE", raising=False)
    config = {**_shuffled_bpe(1), "pre_tokenizer": None, "decoder": None,
              "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [["a", "b"]]}}
    data = dumps_mtok(config, TokenizerMeta())
    body_len = len(mnn_bytes(config, TokenizerMeta())[0])
    assert loads_mtok(data).encode("abba") == [2, 1, 0]
    crc_at, tables_at = _index_location(data, body_len)
    words = struct.unpack_from("<12I", data, tables_at)
    assert words[10] == 1  # char tables stored
    bmp_at = tables_at + 4 * (_HEAD + words[4] + words[6] + words[7] + words[3])
    forged = data[: bmp_at + 4 * ord("a")] + struct.pack("<i", 7) + data[bmp_at + 4 * ord("a") + 4 :]
    monkeypatch.setattr(mtok, "zlib", _TrustingZlib(struct.unpack_from("<I", forged, crc_at)[0]))
    tok = loads_mtok(forged)
    assert not tok.model.vocab.tables.stored_index
    assert tok.encode("abba") == [2, 1, 0]


def test_index_of_another_layout_is_rebuilt(monkeypatch: pytest.MonkeyPatch) -> None:
    # another pymtok's (or byte order's) tables are not read: the records are indexed anew
    import struct

    from pymtok import mtok

    monkeypatch.delenv("PYMTOK_PURE", raising=False)
    data, body_len = _toy_indexed()
    crc_at, _ = _index_location(data, body_len)
    other = _forged(data, body_len, lambda w: w.__setitem__(0, w[0] ^ 0xFF))
    monkeypatch.setattr(mtok, "zlib", _TrustingZlib(struct.unpack_from("<I", other, crc_at)[0]))
    tok, reference = loads_mtok(other), loads_mtok(data)
    assert not tok.model.vocab.tables.stored_index and reference.model.vocab.tables.stored_index
    text = "abcdefgh hgfedcba aabbccdd abcabc"
    assert tok.encode(text) == reference.encode(text)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 2**32 - 1)), min_size=1, max_size=4))
def test_any_index_that_passes_the_checksum_is_safe(edits, monkeypatch: pytest.MonkeyPatch) -> None:
    # forged tables the checksum cannot catch: ignored, or adopted because every lookup answers
    # as the built tables would (the toy is byte-level: no join filter taken on trust)
    import struct

    from pymtok import mtok

    monkeypatch.delenv("PYMTOK_PURE", raising=False)
    data, body_len = _toy_indexed()
    reference = loads_mtok(data)
    crc_at, _ = _index_location(data, body_len)

    def edit(words) -> None:
        for at, value in edits:
            words[at % len(words)] = value

    forged = _forged(data, body_len, edit)
    monkeypatch.setattr(mtok, "zlib", _TrustingZlib(struct.unpack_from("<I", forged, crc_at)[0]))
    tok = loads_mtok(forged)
    assert tok.encode(_TOY_TEXT) == reference.encode(_TOY_TEXT)
    assert tok.get_vocab() == reference.get_vocab()
