"""Hostile edits of real ``.mtok`` files, and the two readers' verdicts on them.

A file pymtok wrote is taken apart (:func:`layout`: where the model's records and the merges
lie) and edited the way an attacker would: records made to contradict each other (a token listed
twice, a merge naming an id or a result the vocabulary lacks, ...), or given a stored index of
any content as earlier pymtok versions wrote one (docs/FORMAT_EXTENSION.md: readers skip it).
:func:`verdict` reads a file with one reader (native or pure) and says what came of it: the ids
of a few texts, or the exception type.

Used by tests/test_mtok_forged.py and by the fuzz harness (fuzz/mtok_fuzz.py).
"""

from __future__ import annotations

import dataclasses
import os
import random
import struct
import zlib
from collections.abc import Callable, Iterator
from typing import Any

from corruption import flip_bits
from pymtok import mtok
from pymtok.errors import FormatError

_U16, _U32 = struct.Struct("<H"), struct.Struct("<I")
TEXTS = ("Hello world, qz!", "  naïve café 日本語 ▁x\n\tend", "ab <s> 12345 don't")


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where a pymtok-written BPE ``.mtok``'s parts lie (absolute offsets)."""

    vocab_at: int  # the first vocabulary record
    count: int
    records: list[tuple[int, int, int]]  # (offset, token length, id) per vocabulary record
    merges_at: int
    nmerges: int

    @property
    def records_end(self) -> int:
        return self.merges_at + 12 * self.nmerges


def layout(data: bytes) -> Layout:
    """The parts of a BPE ``.mtok`` written by pymtok."""
    _, _, _, at = mtok._parse_header(data, "<mutated>")
    cur = mtok._Cursor(data, at, "<mutated>")
    mtok._read_normalizer(cur, 0, [])
    mtok._read_pre_tokenizer(cur, 0)
    code = cur.u8("model", "type code")
    assert code == 0, "a BPE model"
    count = cur.u32("model", "vocabulary size")
    cur.pos += 2  # byte_fallback, byte_level
    nmerges = cur.u32("model", "merge count")
    vocab_at = pos = cur.pos
    records = []
    for _ in range(count):
        (n,) = _U16.unpack_from(data, pos)
        records.append((pos, n, _U32.unpack_from(data, pos + 2 + n)[0]))
        pos += 2 + n + 4
    return Layout(vocab_at, count, records, pos, nmerges)


def with_stored_index(data: bytes, lay: Layout, tables: bytes) -> bytes:
    """``data`` with ``tables`` after its extension's JSON payload, framed as the stored index
    earlier pymtok versions wrote (zero fill to 8 bytes, CRC-32, length)."""
    ext = data.find(mtok.EXTENSION_MAGIC, lay.records_end)
    _, _, pad, length = mtok._EXTENSION_HEAD.unpack_from(data, ext)
    after = ext + mtok._EXTENSION_HEAD.size + length
    tail = b"\x00" * (-after % 8) + struct.pack("<II", zlib.crc32(tables), len(tables)) + tables
    head = mtok._EXTENSION_HEAD.pack(mtok.EXTENSION_MAGIC, 2, pad, length)
    return data[:ext] + head + data[ext + mtok._EXTENSION_HEAD.size : after] + tail + data[after:]


Mutation = Callable[[bytearray, Layout, random.Random], str]
"""Edits the file in place and returns what it did; raises LookupError when it does not apply."""


def _token(data: bytes, rec: tuple[int, int, int]) -> bytes:
    return bytes(data[rec[0] + 2 : rec[0] + 2 + rec[1]])


def _merge_at(lay: Layout, k: int) -> int:
    return lay.merges_at + 12 * k


def duplicate_token(data: bytearray, lay: Layout, rng: random.Random) -> str:
    by_len: dict[int, list[tuple[int, int, int]]] = {}
    for rec in lay.records:
        by_len.setdefault(rec[1], []).append(rec)
    lengths = [n for n, recs in by_len.items() if len(recs) > 1 and n > 0]
    a, b = rng.sample(by_len[rng.choice(lengths)], 2)
    data[b[0] + 2 : b[0] + 2 + b[1]] = _token(data, a)
    return f"record at {b[0]} made a copy of the token at {a[0]}"


def duplicate_id(data: bytearray, lay: Layout, rng: random.Random) -> str:
    a, b = rng.sample(lay.records, 2)
    _U32.pack_into(data, b[0] + 2 + b[1], a[2])
    return f"record at {b[0]} given id {a[2]}"


def huge_id(data: bytearray, lay: Layout, rng: random.Random) -> str:
    rec = rng.choice(lay.records)
    value = rng.choice([2**31, 2**32 - 1, 2**31 - 1, len(lay.records) + 5])
    _U32.pack_into(data, rec[0] + 2 + rec[1], value)
    return f"record at {rec[0]} given id {value}"


def bad_utf8(data: bytearray, lay: Layout, rng: random.Random) -> str:
    rec = rng.choice([r for r in lay.records if r[1]])
    at = rec[0] + 2 + rng.randrange(rec[1])
    data[at] = rng.choice([0xFF, 0xC0, 0x80, 0xED])
    return f"byte {at} made invalid UTF-8"


def merge_unknown_id(data: bytearray, lay: Layout, rng: random.Random) -> str:
    if not lay.nmerges:
        raise LookupError("no merges")
    k = rng.randrange(lay.nmerges)
    top = max(r[2] for r in lay.records)
    value = rng.choice([top + 1, top + 1000, 2**31 - 1, 2**32 - 1])
    _U32.pack_into(data, _merge_at(lay, k) + rng.choice([0, 4]), value)
    return f"merge {k} names id {value}"


def merge_unknown_result(data: bytearray, lay: Layout, rng: random.Random) -> str:
    """A merge of two tokens whose concatenation is no token."""
    if not lay.nmerges:
        raise LookupError("no merges")
    tokens = {_token(data, r) for r in lay.records}
    for _ in range(200):
        a, b = rng.sample(lay.records, 2)
        if _token(data, a) + _token(data, b) not in tokens:
            k = rng.randrange(lay.nmerges)
            _U32.pack_into(data, _merge_at(lay, k), a[2])
            _U32.pack_into(data, _merge_at(lay, k) + 4, b[2])
            return f"merge {k} made ({a[2]}, {b[2]})"
    raise LookupError("no pair without a result")


def merge_other_result(data: bytearray, lay: Layout, rng: random.Random) -> str:
    """A merge moved onto another pair whose concatenation is a token: a legal file."""
    by_token = {_token(data, r): r for r in lay.records}
    for _ in range(2000):
        r = rng.choice(lay.records)
        t = _token(data, r)
        if len(t) < 2:
            continue
        cut = rng.randrange(1, len(t))
        a, b = by_token.get(t[:cut]), by_token.get(t[cut:])
        if a and b:
            k = rng.randrange(lay.nmerges)
            _U32.pack_into(data, _merge_at(lay, k), a[2])
            _U32.pack_into(data, _merge_at(lay, k) + 4, b[2])
            return f"merge {k} made ({a[2]}, {b[2]}) -> {r[2]}"
    raise LookupError("no token splits into two tokens")


def duplicate_pair(data: bytearray, lay: Layout, rng: random.Random) -> str:
    if lay.nmerges < 2:
        raise LookupError("fewer than two merges")
    i, j = rng.sample(range(lay.nmerges), 2)
    data[_merge_at(lay, j) : _merge_at(lay, j) + 8] = data[_merge_at(lay, i) : _merge_at(lay, i) + 8]
    return f"merge {j} repeats merge {i}'s pair"


def odd_ranks(data: bytearray, lay: Layout, rng: random.Random) -> str:
    """Ranks that are no permutation of 0..n-1 (legal: merges are ordered by them)."""
    if lay.nmerges < 2:
        raise LookupError("fewer than two merges")
    i, j = rng.sample(range(lay.nmerges), 2)
    how = rng.choice(["swap", "equal", "large"])
    ri, rj = (_U32.unpack_from(data, _merge_at(lay, k) + 8)[0] for k in (i, j))
    if how == "swap":
        _U32.pack_into(data, _merge_at(lay, i) + 8, rj)
        _U32.pack_into(data, _merge_at(lay, j) + 8, ri)
    elif how == "equal":
        _U32.pack_into(data, _merge_at(lay, j) + 8, ri)
    else:
        _U32.pack_into(data, _merge_at(lay, j) + 8, 2**32 - 1)
    return f"ranks of merges {i}, {j}: {how}"


def record_bytes(data: bytearray, lay: Layout, rng: random.Random) -> str:
    """A few bits flipped anywhere in the records."""
    return f"record bytes {flip_bits(data, rng, lay.vocab_at, lay.records_end, most=3)} changed"


def stored_index(data: bytearray, lay: Layout, rng: random.Random) -> str:
    """A stored index of any content: what an earlier pymtok wrote (its layout's header, then
    slots, id cells, merge slots and results), forged as issue 11 found (every empty slot holding
    only tag bits; words pointing outside the records), or noise."""
    n = rng.choice([0, 1, 12, 100, 4 * lay.count])
    how = rng.choice(["header", "tag bits", "noise", "zeros", "ones"])
    if how == "header":
        words = [0x4D544902, 0, lay.count, lay.nmerges] + [rng.getrandbits(32) for _ in range(n)]
    elif how == "tag bits":
        words = [0x4D544902, 0, lay.count, lay.nmerges, 1 << 16, 0xFFFF] + [0xFFFF0000] * n
    else:
        words = [rng.getrandbits(32) if how == "noise" else 0 if how == "zeros" else 0xFFFFFFFF for _ in range(n)]
    data[:] = with_stored_index(bytes(data), lay, struct.pack(f"<{len(words)}I", *words))
    return f"a stored index of {len(words)} words: {how}"


RECORD_MUTATIONS: tuple[Mutation, ...] = (
    duplicate_token, duplicate_id, huge_id, bad_utf8, merge_unknown_id, merge_unknown_result,
    merge_other_result, duplicate_pair, odd_ranks, record_bytes,
)
INDEX_MUTATIONS: tuple[Mutation, ...] = (stored_index,)


def mutants(source: bytes, mutations: tuple[Mutation, ...], n: int, seed: int) -> Iterator[tuple[str, bytes]]:
    """n edited copies of source."""
    lay = layout(source)
    rng = random.Random(seed)
    made = 0
    while made < n:
        mutation = mutations[made % len(mutations)]
        data = bytearray(source)
        try:
            what = mutation(data, lay, rng)
        except LookupError:
            made += 1
            continue
        made += 1
        yield f"{mutation.__name__}: {what}", bytes(data)


def verdict(data: bytes, pure: bool) -> tuple[str, Any]:
    """("ids", [...]) or ("FormatError", message) or (another exception's type, message), reading
    data with the pure or the native reader."""
    old = os.environ.get("PYMTOK_PURE")
    os.environ["PYMTOK_PURE"] = "1" if pure else "0"
    try:
        tok = mtok.loads_mtok(data, "mutated.mtok")
        return "ids", [tok.encode(text) for text in TEXTS] + [[tok.id_to_token(i) for i in range(0, 300, 7)]]
    except FormatError as exc:
        return "FormatError", str(exc)
    except Exception as exc:  # noqa: BLE001 - the point is to see any other exception
        return type(exc).__name__, str(exc)
    finally:
        if old is None:
            del os.environ["PYMTOK_PURE"]
        else:
            os.environ["PYMTOK_PURE"] = old
