"""MNN's binary ``.mtok`` tokenizer (type 4): reader and writer, plus pymtok's exactness extension.

The file is MNN's layout (``spec/FORMAT.md`` §1–§5) byte for byte, so MNN's runtime loads what we
write. MNN's layout drops information HF needs (``ignore_merges``, ``unk_token``, the real
normalizer behind a code-point table, ...), so after the post-processor section the writer
appends a small block MNN's loader never reads: the exact HF configuration of everything except
the vocabulary and merges, which stay in MNN's tables (``docs/FORMAT_EXTENSION.md``).

The reader decodes every section into the HF ``tokenizer.json``-shaped config it means and builds
the pipeline with ``Tokenizer.from_config``. Without the extension, MNN's sections are interpreted
with HF semantics (an NFKC table becomes HF's NFKC normalizer, decoder code 0 becomes ByteLevel,
the post-processor program becomes a TemplateProcessing, ...).

>>> tok = read_mtok("Qwen3/tokenizer.mtok")      # doctest: +SKIP
>>> tok.encode("Hello world")                     # doctest: +SKIP
[9707, 1879]
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import struct
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from . import decoders, models, native
from .errors import FormatError
from .mnn_compat import DEVICE, MNN_IDENTICAL
from .paths import regular_file
from .tokenizer import FileSource, Tokenizer, TokenizerMeta, _built

MAGIC_NUMBER = 430
PIPELINE_TYPE = 4

# The extension block: magic, u8 version, u8 padding length, u32 JSON length, JSON, [the stored
# index earlier pymtok wrote, skipped: zero fill to an 8-byte boundary, u32 CRC-32, u32 length,
# tables], padding (docs/FORMAT_EXTENSION.md). Version 1 blocks have no index.
EXTENSION_MAGIC = b"\xffPYMTOK\x00"
EXTENSION_VERSION = 2
_EXTENSION_HEAD = struct.Struct("<8sBBI")
_INDEX_HEAD = struct.Struct("<II")

# Normalizer codes (FORMAT.md §3.1)
_N_NONE, _N_NFKC_EMPTY, _N_PREPEND, _N_REPLACE, _N_SEQUENCE, _N_BERT, _N_TABLE, _N_BERT_NFD, _N_STRIP = range(9)
# Pre-tokenizer codes (§3.2)
_P_NONE, _P_BYTE_LEVEL, _P_DIGITS, _P_METASPACE, _P_SPLIT, _P_BERT, _P_SEQUENCE = range(7)
# Model codes (§3.3)
_M_BPE, _M_WORDPIECE, _M_UNIGRAM = range(3)
# Decoder codes (§3.4); there is no "none": 0 is ByteLevel
_D_BYTE_LEVEL, _D_BYTE_FALLBACK, _D_METASPACE, _D_WORDPIECE, _D_FUSE, _D_REPLACE, _D_STRIP, _D_SEQUENCE = range(8)
# Post-processor ops (§5.2)
_OP_SEQUENCE_A, _OP_SPECIAL = 0, 1

# Nested Sequence records recurse; a real file nests two or three deep, a hostile one could nest
# millions deep in a few megabytes.
_MAX_DEPTH = 32
_MAX_ID = 2**31 - 1  # MNN keeps ids in a C int

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_F64 = struct.Struct("<d")
_MERGE = struct.Struct("<III")
_ADDED_HEAD = struct.Struct("<IBBBH")  # an added token's id, flags and content length
# TokenizerMeta beyond the header's id lists (chat template, special-token strings, decode
# options): all of it goes into the extension
_NONE = type(None)
# Payload fields and their JSON types; the optional ones may be absent
_EXTENSION_FIELDS: dict[str, tuple[tuple[type, ...], bool]] = {
    "normalizer": ((dict, _NONE), True), "pre_tokenizer": ((dict, _NONE), True),
    "decoder": ((dict, _NONE), True), "post_processor": ((dict, _NONE), True),
    "model": ((dict,), True), "added_tokens": ((list,), True),
    "chat_template": ((str, dict, _NONE), True), "special_tokens": ((dict,), True),
    "clean_up_tokenization_spaces": ((bool,), True), "decode_suffix_as_space": ((str, _NONE), False),
    "unigram_scores": ((list,), False),
    "extra_special_tokens": ((list,), False), "split_special_tokens": ((bool,), False),
    "backend_added_tokens": ((list,), False), "backend_unmodeled": ((str, _NONE), False),
    "backend_decoder": ((dict, _NONE), False),
    "call_settings": ((dict,), False),
    # older files kept it apart as well, a duplicate of call_settings' (read into it where it lacks one)
    "model_max_length": ((int, _NONE), False),
}
_META_FIELDS = [
    f.name for f in dataclasses.fields(TokenizerMeta)
    if f.name not in ("special_ids", "stop_ids", "prefix_ids", "extension_version", "mnn_layout")
]
_UNIGRAM_TAIL = struct.Struct("<Id")


# ------------------------------------------------------------------------------------------
# Reading
# ------------------------------------------------------------------------------------------


class _Cursor:
    """Bounds-checked little-endian reads over the file, with errors naming section and offset."""

    def __init__(self, data: bytes, pos: int, path: str) -> None:
        self.data = data
        self.pos = pos
        self.end = len(data)
        self.path = path

    def error(self, section: str, message: str, at: int | None = None) -> FormatError:
        return FormatError(f"{self.path}: {section} at byte {self.pos if at is None else at}: {message}")

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def need(self, n: int, section: str, what: str) -> None:
        if n > self.end - self.pos:
            raise self.error(section, f"{what} needs {n} bytes but only {self.end - self.pos} remain (truncated?)")

    def count(self, section: str, what: str, min_record: int) -> int:
        """A u32 record count, refused when even the smallest records could not fit."""
        at = self.pos
        n = self.u32(section, what)
        if n * min_record > self.end - self.pos:
            raise self.error(section, f"{what} {n} cannot fit in the {self.end - self.pos} bytes left", at)
        return n

    def u8(self, section: str, what: str) -> int:
        self.need(1, section, what)
        value = self.data[self.pos]
        self.pos += 1
        return value

    def u16(self, section: str, what: str) -> int:
        self.need(2, section, what)
        (value,) = _U16.unpack_from(self.data, self.pos)
        self.pos += 2
        return int(value)

    def u32(self, section: str, what: str) -> int:
        self.need(4, section, what)
        (value,) = _U32.unpack_from(self.data, self.pos)
        self.pos += 4
        return int(value)

    def f64(self, section: str, what: str) -> float:
        self.need(8, section, what)
        (value,) = _F64.unpack_from(self.data, self.pos)
        self.pos += 8
        return float(value)

    def id(self, section: str, what: str) -> int:
        at = self.pos
        value = self.u32(section, what)
        if value > _MAX_ID:
            raise self.error(section, f"{what} {value} is not a valid token id", at)
        return value

    def text(self, n: int, section: str, what: str) -> str:
        self.need(n, section, what)
        at = self.pos
        raw = self.data[at : at + n]
        self.pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.error(section, f"{what} is not valid UTF-8", at + exc.start) from None

    def string(self, section: str, what: str) -> str:
        """MNN's ``str``: u16 byte length, then UTF-8 bytes."""
        return self.text(self.u16(section, what), section, what)

    def flag(self, section: str, what: str) -> bool:
        return self.u8(section, what) != 0


def read_mtok(path: str | os.PathLike[str], *, use_extension: bool = True) -> Tokenizer:
    """Load a ``.mtok`` file (MNN's own, or ours with the exactness extension).

    ``use_extension=False`` reads only what MNN's loader reads, to see what MNN works with.
    """
    name = os.fspath(path)
    # Read whole, not mapped: the native tables index the records where they lie for as long as
    # the tokenizer lives, and a mapped file truncated or rewritten meanwhile (`cp new old`)
    # would take them from under it (SIGBUS) or change its ids. The bytes are the tokenizer's.
    with open(regular_file(path), "rb", buffering=0) as f:
        data = _read_whole(f)
    if not data:
        raise FormatError(f"{name}: header at byte 0: the file is empty")
    config, meta = _parse(data, name, use_extension)
    try:
        tok = Tokenizer.from_config(config, meta)
    except FormatError as exc:
        raise FormatError(f"{name}: {exc}") from None
    tok.source = FileSource("mtok", data, name, use_extension)
    return tok


def _read_whole(f: io.FileIO) -> bytes:
    core = native._core()
    if core is None:
        return f.readall()
    data: bytes = core.read_whole(f.fileno(), os.fstat(f.fileno()).st_size)
    # a file that grew since fstat: the rest, as readall would give it
    rest = f.readall()
    return data + rest if rest else data


def loads_mtok(data: bytes, name: str = "<bytes>", *, use_extension: bool = True) -> Tokenizer:
    """``read_mtok`` for a file already in memory."""
    # the tokenizer keeps what it reads: a caller's bytearray changed afterwards must not change it
    data = bytes(data)
    config, meta = _parse(data, name, use_extension)
    try:
        tok = Tokenizer.from_config(config, meta)
    except FormatError as exc:
        raise FormatError(f"{name}: {exc}") from None
    tok.source = FileSource("mtok", data, None, use_extension)
    return tok


def _parse(data: bytes, name: str, use_extension: bool = True) -> tuple[dict[str, Any], TokenizerMeta]:
    special, stop, prefix, body = _parse_header(data, name)
    cur = _Cursor(data, body, name)
    tables: list[_PendingTable] = []
    normalizer = _read_normalizer(cur, 0, tables)
    pre_tokenizer = _read_pre_tokenizer(cur, 0)
    model, byte_level = _read_model(cur)
    decoder = _read_decoder(cur, 0)
    added = _read_added_tokens(cur)
    meta = TokenizerMeta(special_ids=special, stop_ids=stop, prefix_ids=prefix, mnn_layout=MNN_IDENTICAL)
    ops = _read_trailer(cur, meta)
    extension, version = _read_extension(cur) if use_extension else (None, None)

    if extension is not None:
        meta.extension_version = version
        options = extension["model"]
        overrides = extension.get("unigram_scores", [])
        if overrides and (model["type"] != "Unigram" or not all(0 <= id < len(model["vocab"]) for id, _ in overrides)):
            raise FormatError(f"{name}: extension: unigram_scores name ids the model does not have")
        for id, score in overrides:
            model["vocab"][id][1] = score
        _build_model(cur, model, _prefix_chars(options))
        fillers = _payload_fillers(cur, extension.get("vocab_fillers", []), model)
        if fillers:
            model["vocab"] = _without_fillers(model["vocab"], fillers)
        model_config = {**options, "type": model["type"], "vocab": model["vocab"], **_merges_of(model)}
        if options.get("type") == "WordLevel" and model["type"] == "WordPiece":
            if model["unk_token"] != options.get("unk_token"):
                raise FormatError(f"{name}: extension: the WordLevel unk_token is not the model's")
            model_config = {**options, "vocab": model["vocab"]}
        if str(options.get("type")).startswith("SentencePiece"):
            from .sentencepiece import model_from_mtok

            model_config = model_from_mtok(options, model, name)
        config = {
            "normalizer": extension["normalizer"],
            "pre_tokenizer": extension["pre_tokenizer"],
            "model": model_config,
            "decoder": extension["decoder"],
            "post_processor": extension["post_processor"],
            "added_tokens": extension["added_tokens"],
        }
        for key in _META_FIELDS:
            if key in extension:
                setattr(meta, key, extension[key])
        if meta.backend_decoder is not None:
            # built only when transformers' side of the API is first used: checked now, as the
            # pipeline's own decoder is
            try:
                _built("backend_decoder", decoders.from_config, meta.backend_decoder)
            except FormatError as exc:
                raise cur.error("extension", str(exc)) from None
        if type(extension.get("model_max_length")) is int:
            meta.call_settings.setdefault("model_max_length", extension["model_max_length"])
        if "prefix_ids" in extension:
            meta.prefix_ids = _payload_ids(cur, extension["prefix_ids"], "prefix_ids")
        layout = extension.get("mnn_layout", MNN_IDENTICAL)  # files before the device layout
        if layout not in (DEVICE, MNN_IDENTICAL):
            raise cur.error("extension", f"unknown mnn_layout {layout!r:.40}")
        meta.mnn_layout = layout
        return config, meta

    for table in tables:
        table.decide()
    if byte_level:
        # The BPE model maps bytes through the GPT-2 table itself: in HF that is a ByteLevel
        # pre-tokenizer step without a regex, after whatever splitting came before.
        step = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
        if pre_tokenizer is None:
            pre_tokenizer = step
        elif pre_tokenizer["type"] == "Sequence":
            pre_tokenizer["pretokenizers"].append(step)
        else:
            pre_tokenizer = {"type": "Sequence", "pretokenizers": [pre_tokenizer, step]}
    _build_model(cur, model, 0)
    config = {
        "normalizer": normalizer,
        "pre_tokenizer": pre_tokenizer,
        "model": model,
        "decoder": decoder,
        "post_processor": _template_processing(ops, model, added),
        "added_tokens": added,
    }
    return config, meta


def _payload_ids(cur: _Cursor, value: Any, key: str) -> list[int]:
    if not isinstance(value, list) or not all(type(i) is int and 0 <= i <= 0xFFFFFFFF for i in value):
        raise cur.error("extension", f"{key} must be a list of token ids, got {value!r:.80}")
    return value


def _payload_fillers(cur: _Cursor, value: Any, model: Mapping[str, Any]) -> frozenset[int]:
    """The ids of the vocabulary records the device layout added to fill gaps in the ids."""
    if not isinstance(value, list) or not all(type(i) is int and 0 <= i <= _MAX_ID for i in value):
        raise cur.error("extension", f"vocab_fillers must be a list of token ids, got {value!r:.80}")
    fillers = frozenset(value)
    if not fillers:
        return fillers
    vocab = model["vocab"]
    present = (
        all(vocab.token_of(i) is not None for i in fillers) if isinstance(vocab, _TableVocab)
        else fillers <= set(vocab.values())
    )
    if model["type"] != "BPE" or not present:
        raise cur.error("extension", "vocab_fillers name ids the BPE vocabulary does not have")
    return fillers


def _without_fillers(vocab: Any, fillers: frozenset[int]) -> Any:
    if isinstance(vocab, _TableVocab):
        vocab.hidden = fillers
        return vocab
    return {token: id for token, id in vocab.items() if id not in fillers}


def _merges_of(model: dict[str, Any]) -> dict[str, Any]:
    return {"merges": model["merges"]} if "merges" in model else {}


def _parse_header(data: bytes, name: str) -> tuple[list[int], list[int], list[int], int]:
    lines: list[bytes] = []
    starts: list[int] = []
    pos = 0
    for _ in range(3):
        end = data.find(b"\n", pos)
        if end < 0:
            raise FormatError(f"{name}: header at byte {pos}: expected 3 text lines ending in '\\n'")
        starts.append(pos)
        lines.append(data[pos:end].rstrip(b"\r"))
        pos = end + 1

    def ints(index: int, what: str) -> list[int]:
        try:
            return [int(x) for x in lines[index].decode("ascii").split()]
        except (UnicodeDecodeError, ValueError):
            raise FormatError(
                f"{name}: header at byte {starts[index]}: line {index + 1} must be {what}, "
                f"got {lines[index][:80]!r}"
            ) from None

    first = ints(0, "'430 4'")
    if len(first) != 2 or first[0] != MAGIC_NUMBER:
        raise FormatError(f"{name}: header at byte 0: bad magic {lines[0][:40]!r}, expected '430 4'")
    if first[1] != PIPELINE_TYPE:
        kind = "a legacy tokenizer.txt type" if 0 <= first[1] <= 3 else "unknown"
        raise FormatError(f"{name}: header at byte 0: tokenizer type {first[1]} is {kind}, not .mtok (4)")
    counts = ints(1, "three counts")
    if len(counts) != 3 or min(counts) < 0:
        raise FormatError(f"{name}: header at byte {starts[1]}: expected three counts, got {lines[1][:80]!r}")
    ids = ints(2, "token ids")
    if len(ids) != sum(counts):
        raise FormatError(
            f"{name}: header at byte {starts[2]}: counts {counts} announce {sum(counts)} ids, "
            f"line 3 holds {len(ids)}"
        )
    bad = next((i for i in ids if not 0 <= i <= _MAX_ID), None)
    if bad is not None:
        raise FormatError(f"{name}: header at byte {starts[2]}: {bad} is not a valid token id")
    s, p, _ = counts
    return ids[:s], ids[s : s + p], ids[s + p :], pos


def _unknown(cur: _Cursor, section: str, code: int, at: int) -> FormatError:
    # MNN's loader would skip nothing and read the payload as the next record: the rest is garbage
    return cur.error(section, f"unknown type code {code}", at)


def _depth_check(cur: _Cursor, section: str, depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise cur.error(section, f"Sequence records nested more than {_MAX_DEPTH} deep")


def _read_normalizer(cur: _Cursor, depth: int, tables: list[_PendingTable]) -> dict[str, Any] | None:
    section = "normalizer"
    _depth_check(cur, section, depth)
    at = cur.pos
    code = cur.u8(section, "type code")
    if code in (_N_NONE, _N_NFKC_EMPTY):
        return None  # code 1 is NFKC with an empty table: the identity
    if code == _N_PREPEND:
        return {"type": "Prepend", "prepend": cur.string(section, "Prepend text")}
    if code == _N_REPLACE:
        pattern = cur.string(section, "Replace pattern")
        content = cur.string(section, "Replace content")
        # MNN's runtime skips an empty pattern (what a Regex pattern is exported as)
        return {"type": "Replace", "pattern": {"String": pattern}, "content": content} if pattern else None
    if code == _N_SEQUENCE:
        n = cur.count(section, "Sequence length", 1)
        children = [_read_normalizer(cur, depth + 1, tables) for _ in range(n)]
        return {"type": "Sequence", "normalizers": [c for c in children if c is not None]}
    if code in (_N_BERT, _N_BERT_NFD):
        clean, chinese, strip, lower = (cur.flag(section, f) for f in ("clean_text", "handle_chinese_chars", "strip_accents", "lowercase"))
        if code == _N_BERT_NFD and strip:
            # The decomposition table is how MNN strips accents; HF's BertNormalizer does it
            # itself: the table is only validated and stepped over.
            _PendingTable(cur, section, at)
        return {
            "type": "BertNormalizer", "clean_text": clean, "handle_chinese_chars": chinese,
            "strip_accents": strip, "lowercase": lower,
        }
    if code == _N_TABLE:
        table = _PendingTable(cur, section, at)
        if not table.count:
            return None
        tables.append(table)
        return table.config
    if code == _N_STRIP:
        return {"type": "Strip", "strip_left": cur.flag(section, "strip_left"), "strip_right": cur.flag(section, "strip_right")}
    raise _unknown(cur, section, code, at)


def _read_table(cur: _Cursor, section: str) -> list[tuple[int, str]]:
    n = cur.count(section, "table entry count", 6)
    entries: list[tuple[int, str]] = []
    last = -1
    for _ in range(n):
        at = cur.pos
        cp = cur.u32(section, "table code point")
        if cp > 0x10FFFF or cp <= last:
            raise cur.error(section, f"table code point {cp:#x} is out of range or not ascending", at)
        last = cp
        entries.append((cp, cur.string(section, "table replacement")))
    return entries


class _PendingTable:
    """A normalizer code-point table, validated and stepped over; which form it stands for
    (``config["type"]``) is only worked out by ``decide()``, for files without the extension:
    the extension's normalizer supersedes the table, and reading it costs more than the rest
    of the file's metadata."""

    def __init__(self, cur: _Cursor, section: str, at: int) -> None:
        self.cur = _Cursor(cur.data, cur.pos, cur.path)
        self.section, self.at = section, at
        core = native._core()
        if core is None:
            self.entries: list[tuple[int, str]] | None = _read_table(cur, section)
            self.count = len(self.entries)
        else:
            self.entries = None
            self.count = cur.count(section, "table entry count", 6)
            try:
                cur.pos = core.scan_norm_table(cur.data, cur.pos, self.count)
            except FormatError as exc:
                raise FormatError(f"{cur.path}: {exc}") from None
        self.config: dict[str, Any] = {"type": None}

    def decide(self) -> None:
        entries = self.entries if self.entries is not None else _read_table(self.cur, self.section)
        self.config["type"] = _table_form(self.cur, entries, self.at)


def _table_form(cur: _Cursor, entries: list[tuple[int, str]], at: int) -> str:
    """Which Unicode form a code-point table was generated from (MNN writes NFKC or NFC tables).

    Tables depend on the writer's Unicode version, so entries our ``unicodedata`` disagrees with
    are tolerated as long as nearly all agree.
    """
    agree = {"NFC": 0, "NFKC": 0}
    for cp, text in entries:
        ch = chr(cp)
        for form in agree:
            if unicodedata.normalize(form, ch) == text:
                agree[form] += 1
    # NFC wins ties: without a single compatibility mapping there is no sign of NFKC
    form = max(("NFC", "NFKC"), key=lambda f: agree[f])
    if agree[form] * 10 < len(entries) * 9:
        raise cur.error(
            "normalizer",
            f"code-point table ({len(entries)} entries) matches neither NFC ({agree['NFC']}) "
            f"nor NFKC ({agree['NFKC']})",
            at,
        )
    return form


def _read_pre_tokenizer(cur: _Cursor, depth: int) -> dict[str, Any] | None:
    section = "pre-tokenizer"
    _depth_check(cur, section, depth)
    at = cur.pos
    code = cur.u8(section, "type code")
    if code == _P_NONE:
        return None
    if code == _P_BYTE_LEVEL:
        # MNN keeps no add_prefix_space; its runtime never adds one
        return {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": cur.flag(section, "use_regex")}
    if code == _P_DIGITS:
        return {"type": "Digits", "individual_digits": cur.flag(section, "individual_digits")}
    if code == _P_METASPACE:
        replacement = cur.string(section, "Metaspace replacement")
        prepend = cur.flag(section, "add_prefix_space")
        return {"type": "Metaspace", "replacement": replacement, "prepend_scheme": "always" if prepend else "never", "split": True}
    if code == _P_SPLIT:
        pattern = cur.string(section, "Split pattern")
        invert = cur.flag(section, "invert")
        behavior = cur.u8(section, "behavior")
        # the loader's reading of the byte, not the exporter's (FORMAT.md §3.2)
        name = {0: "Isolated", 2: "MergedWithPrevious"}.get(behavior, "Removed")
        return {"type": "Split", "pattern": {"Regex": pattern}, "behavior": name, "invert": invert}
    if code == _P_BERT:
        return {"type": "BertPreTokenizer"}
    if code == _P_SEQUENCE:
        n = cur.count(section, "Sequence length", 1)
        children = [_read_pre_tokenizer(cur, depth + 1) for _ in range(n)]
        return {"type": "Sequence", "pretokenizers": [c for c in children if c is not None]}
    raise _unknown(cur, section, code, at)


def _read_vocab(cur: _Cursor, n: int, section: str) -> tuple[dict[str, int], dict[int, str]]:
    """``n`` records of ``str token, u32 id``: the token -> id map and a by-id table."""
    data, pos, end = cur.data, cur.pos, cur.end
    unpack_u16, unpack_u32 = _U16.unpack_from, _U32.unpack_from
    tokens: list[str] = []
    ids: list[int] = []
    for _ in range(n):
        if pos + 2 > end:
            cur.pos = pos
            raise cur.error(section, "vocabulary record is truncated")
        (length,) = unpack_u16(data, pos)
        start = pos + 2
        pos = start + length + 4
        if pos > end:
            cur.pos = start - 2
            raise cur.error(section, "vocabulary record is truncated")
        raw = data[start : start + length]
        try:
            tokens.append(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise cur.error(section, "vocabulary token is not valid UTF-8", start + exc.start) from None
        ids.append(unpack_u32(data, start + length)[0])
    cur.pos = pos
    return _index_vocab(cur, section, tokens, ids)


def _index_vocab(
    cur: _Cursor, section: str, tokens: list[str], ids: list[int]
) -> tuple[dict[str, int], dict[int, str]]:
    vocab = dict(zip(tokens, ids))
    if len(vocab) != len(tokens):
        raise cur.error(section, "the vocabulary lists a token twice")
    top = max(ids, default=0)
    if top > _MAX_ID:
        raise cur.error(section, f"vocabulary id {top} is not a valid token id")
    # ids may be sparse (gpt-4o's are), so the inverse is a dict, not a list sized by an id
    by_id = dict(zip(ids, tokens))
    if len(by_id) != len(ids):
        twice = next(i for i, n in Counter(ids).items() if n > 1)
        raise cur.error(section, f"vocabulary id {twice} is given to two tokens")
    return vocab, by_id


def _read_model(cur: _Cursor) -> tuple[dict[str, Any], bool]:
    section = "model"
    at = cur.pos
    code = cur.u8(section, "type code")
    if code not in (_M_BPE, _M_WORDPIECE, _M_UNIGRAM):
        raise _unknown(cur, section, code, at)
    n = cur.count(section, "vocabulary size", 6)
    core = native._core()
    if code == _M_BPE:
        byte_fallback = cur.flag(section, "byte_fallback")
        byte_level = cur.flag(section, "byte_level")
        merge_count = cur.count(section, "merge count", 12)
        merges: _Merges
        if core is not None:
            tables = _native_tables(core, cur, "BPE", n, merge_count)
            vocab: Mapping[str, int] = _TableVocab(tables)
            merges = _TableMerges(tables, merge_count)
        else:
            vocab, by_id = _read_vocab(cur, n, "model vocabulary")
            merges = _read_merges(cur, merge_count, vocab, by_id)
        model = {"type": "BPE", "vocab": vocab, "merges": merges, "byte_fallback": byte_fallback}
        return model, byte_level
    if code == _M_WORDPIECE:
        unk = cur.string(section, "unk_token")
        prefix = cur.string(section, "continuing_subword_prefix")
        max_chars = cur.u32(section, "max_input_chars_per_word")
        if core is not None:
            vocab = _TableVocab(_native_tables(core, cur, "WordPiece", n, 0))
        else:
            vocab, _ = _read_vocab(cur, n, "model vocabulary")
        return {
            "type": "WordPiece", "vocab": vocab, "unk_token": unk,
            "continuing_subword_prefix": prefix, "max_input_chars_per_word": max_chars,
        }, False
    unk_id = cur.u32(section, "unk_id")
    byte_fallback = cur.flag(section, "byte_fallback")
    return {"type": "Unigram", "vocab": _read_unigram_vocab(cur, n), "unk_id": unk_id, "byte_fallback": byte_fallback}, False


class _Merges(models.IndexedMerges):
    """A .mtok's merge records: id pairs in rank order, each merge's result found once."""

    def __init__(self, count: int, pairs: Callable[[], list[tuple[int, int]]], token: Callable[[int], Any]) -> None:
        self._count = count
        self._pairs = pairs  # (left id, right id) in rank order
        self._token = token  # id -> token
        self._strings: list[tuple[str, str]] | None = None

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index: Any) -> Any:
        if self._strings is None:  # for writers and inspection only; encoding never asks
            token = self._token
            self._strings = [(token(a), token(b)) for a, b in self._pairs()]
        return self._strings[index]


class _PyMerges(_Merges):
    """The pure-Python reading: the merge table is built while resolving."""

    def __init__(
        self, triples: list[tuple[int, int, int]], start: int, vocab: dict[str, int], by_id: dict[int, str]
    ) -> None:
        # Ranks are the merges' positions in tokenizer.json, so normally a permutation of
        # 0..n-1; anything else is ordered by rank (stable for equal ranks), as the native reader.
        order = sorted(range(len(triples)), key=lambda k: triples[k][2])
        super().__init__(len(triples), lambda: [triples[k][:2] for k in order], by_id.__getitem__)
        self._order, self._triples, self._start = order, triples, start  # the merge records' offset
        self._vocab, self._by_id = vocab, by_id
        self._table: models.MergeTable = {}

    def resolve(self, skip: int) -> None:
        """Find each merge's result (``left + right[skip:]``, HF's rule), raising FormatError."""
        vocab, by_id, table = self._vocab, self._by_id, self._table
        for rank, k in enumerate(self._order):
            a, b, _ = self._triples[k]
            merged = vocab.get(by_id[a] + by_id[b][skip:])
            if merged is None:
                raise FormatError(
                    f"merges at byte {self._start + 12 * k}: merge ({a}, {b}) makes a token that is not in the vocabulary"
                )
            table[(a, b)] = (rank, merged)

    def merge_table(self) -> models.MergeTable:
        return self._table


class _TableMerges(_Merges):
    """The native reading: resolving and the table are the C index's."""

    def __init__(self, tables: Any, count: int) -> None:
        super().__init__(count, tables.merges, tables.token)
        self.tables = tables

    def merge_table(self) -> models.MergeTable:
        table: models.MergeTable = self.tables.merge_table()
        return table


class _TableVocab(models.IndexedVocab):
    """The vocabulary as the native index answers it, read in place from the file, less the
    records the device layout added to fill gaps in the ids (``hidden``: no text reaches them,
    see ``vocab_fillers``)."""

    def __init__(self, tables: Any) -> None:
        self.tables = tables  # native.accelerate hands these to the encoder as they are
        self.hidden: frozenset[int] = frozenset()

    def __getitem__(self, token: str) -> int:
        id = self.get(token)
        if id is None:
            raise KeyError(token)
        return id

    def get(self, token: str, default: Any = None) -> Any:
        id = self.tables.get(token)
        return default if id is None or id in self.hidden else id

    def __contains__(self, token: object) -> bool:
        return self.get(token) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(dict(self.items()))

    def __len__(self) -> int:
        return len(self.tables) - len(self.hidden)

    def items(self) -> Any:
        pairs = zip(self.tables.tokens(), self.tables.ids())
        return dict(pair for pair in pairs if pair[1] not in self.hidden).items()

    def token_of(self, id: int) -> str | None:
        if id in self.hidden:
            return None
        token: str | None = self.tables.token(id)
        return token


def _native_tables(core: Any, cur: _Cursor, kind: str, n: int, merge_count: int) -> Any:
    """The model's records, checked by the native core where they lie (``_build_model`` indexes
    them once the extension has said how)."""
    try:
        tables = core.MtokTables(cur.data, cur.pos, kind, n, merge_count)
    except FormatError as exc:
        raise FormatError(f"{cur.path}: {exc}") from None
    cur.pos = tables.end
    return tables


def _prefix_chars(model: Mapping[str, Any]) -> int:
    """The length of a BPE model's continuing-subword prefix: what merges drop from their right
    side (HF's ``left + right[len(prefix):]``)."""
    prefix = model.get("continuing_subword_prefix")
    return len(prefix) if isinstance(prefix, str) else 0


def _build_model(cur: _Cursor, model: dict[str, Any], skip: int) -> None:
    """Index the model's tables (native), or resolve the pure reader's merges, with HF's rule
    for a ``skip``-character continuing-subword prefix."""
    vocab, merges = model["vocab"], model.get("merges")
    try:
        if isinstance(vocab, _TableVocab):
            vocab.tables.build(skip)
        elif isinstance(merges, _PyMerges):
            merges.resolve(skip)
    except FormatError as exc:
        raise FormatError(f"{cur.path}: {exc}") from None
    if model["type"] == "WordPiece" and model["unk_token"] not in vocab:
        # HF's WordPiece fails at the first word it cannot cut; MNN's runtime gives it the id -1
        raise FormatError(f"{cur.path}: WordPiece unk_token {model['unk_token']!r} is not in the vocabulary")


def _read_merges(cur: _Cursor, n: int, vocab: dict[str, int], by_id: dict[int, str]) -> _PyMerges:
    section = "merges"
    cur.need(12 * n, section, f"{n} merges")
    start = cur.pos
    triples = list(_MERGE.iter_unpack(cur.data[start : start + 12 * n]))
    cur.pos += 12 * n
    for k, (a, b, _) in enumerate(triples):
        if a not in by_id or b not in by_id:
            missing = a if a not in by_id else b
            raise cur.error(section, f"merge ({a}, {b}) names id {missing}, which is not in the vocabulary", start + 12 * k)
    return _PyMerges(triples, start, vocab, by_id)


def _read_unigram_vocab(cur: _Cursor, n: int) -> list[list[Any]]:
    section = "model vocabulary"
    data, end = cur.data, cur.end
    length_at, tail_at = _U16.unpack_from, _UNIGRAM_TAIL.unpack_from
    pieces: list[Any] = [None] * n
    pos = cur.pos
    # the cursor's checks inlined: this loop reads every record of the vocabulary
    for _ in range(n):
        if end - pos < 2:
            raise cur.error(section, "Unigram record is truncated", pos)
        (size,) = length_at(data, pos)
        text_end = pos + 2 + size
        if end - text_end < 12:
            raise cur.error(section, "Unigram record is truncated", pos)
        try:
            token = data[pos + 2 : text_end].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise cur.error(section, "piece is not valid UTF-8", pos + 2 + exc.start) from None
        id, score = tail_at(data, text_end)
        # HF's Unigram vocabulary is a list: ids are positions, so they must cover 0..n-1
        if id >= n or pieces[id] is not None:
            raise cur.error(section, f"Unigram id {id} is out of range or repeated (vocabulary size {n})", pos)
        pieces[id] = [token, score]
        pos = text_end + 12
    cur.pos = pos
    return pieces


def _read_decoder(cur: _Cursor, depth: int) -> dict[str, Any]:
    section = "decoder"
    _depth_check(cur, section, depth)
    at = cur.pos
    code = cur.u8(section, "type code")
    if code == _D_BYTE_LEVEL:
        return {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    if code == _D_BYTE_FALLBACK:
        return {"type": "ByteFallback"}
    if code == _D_METASPACE:
        replacement = cur.string(section, "Metaspace replacement")
        prepend = cur.flag(section, "add_prefix_space")
        return {"type": "Metaspace", "replacement": replacement, "prepend_scheme": "always" if prepend else "never", "split": True}
    if code == _D_WORDPIECE:
        prefix = cur.string(section, "WordPiece prefix")
        return {"type": "WordPiece", "prefix": prefix, "cleanup": cur.flag(section, "cleanup")}
    if code == _D_FUSE:
        return {"type": "Fuse"}
    if code == _D_REPLACE:
        pattern = cur.string(section, "Replace pattern")
        return {"type": "Replace", "pattern": {"String": pattern}, "content": cur.string(section, "Replace content")}
    if code == _D_STRIP:
        content = cur.string(section, "Strip content")
        start = cur.u32(section, "Strip start")
        stop = cur.u32(section, "Strip stop")
        return {"type": "Strip", "content": content, "start": start, "stop": stop}
    if code == _D_SEQUENCE:
        n = cur.count(section, "Sequence length", 1)
        return {"type": "Sequence", "decoders": [_read_decoder(cur, depth + 1) for _ in range(n)]}
    raise _unknown(cur, section, code, at)


def _read_added_tokens(cur: _Cursor) -> list[dict[str, Any]]:
    section = "added tokens"
    n = cur.count(section, "count", 9)
    added: list[dict[str, Any]] = []
    data, end, head = cur.data, cur.end, _ADDED_HEAD.unpack_from
    for _ in range(n):
        # a sound record is read at once (Llama 3 has 256), any other field by field, which
        # names its first fault
        pos = cur.pos
        content: str | None = None
        if end - pos >= _ADDED_HEAD.size:
            id, special, lstrip, rstrip, size = head(data, pos)
            start = pos + _ADDED_HEAD.size
            if id <= _MAX_ID and end - start >= size:
                try:
                    content = data[start : start + size].decode("utf-8")
                    cur.pos = start + size
                except UnicodeDecodeError:
                    pass
        if content is None:
            id = cur.id(section, "added token id")
            special = cur.flag(section, "special")
            lstrip = cur.flag(section, "lstrip")
            rstrip = cur.flag(section, "rstrip")
            content = cur.string(section, "content")
        # MNN matches every added token on the raw text, i.e. HF's normalized=false
        added.append({
            "id": id, "content": content, "single_word": False, "lstrip": lstrip != 0,
            "rstrip": rstrip != 0, "normalized": False, "special": special != 0,
        })
    return added


def _read_trailer(cur: _Cursor, meta: TokenizerMeta) -> list[tuple[int, int]]:
    """The optional trailer (§5.1) read as MNN's loader does, each item only while bytes remain.

    Returns the post-processor program as (op, id) pairs.
    """
    if cur.remaining:
        n = cur.u32("chat template", "length")
        template = cur.text(n, "chat template", "template")
        meta.chat_template = template or None
        if cur.remaining:
            eos = cur.string("eos token", "text")
            if eos:
                meta.special_tokens["eos_token"] = eos
    if cur.remaining:
        meta.clean_up_tokenization_spaces = bool(cur.u8("flags", "flags") & 1)
    if cur.remaining:
        bos = cur.string("bos token", "text")
        if bos:
            meta.special_tokens["bos_token"] = bos
    if not cur.remaining:
        return []
    section = "post-processor"
    count = cur.u16(section, "op count")
    if cur.remaining == 4 * count:
        # MNN's legacy layout: `count` raw ids appended after the sequence (FORMAT.md §5.2)
        return [(_OP_SEQUENCE_A, 0)] + [(_OP_SPECIAL, cur.id(section, "legacy suffix id")) for _ in range(count)]
    ops: list[tuple[int, int]] = []
    for _ in range(count):
        at = cur.pos
        op = cur.u8(section, "op type")
        if op == _OP_SEQUENCE_A:
            ops.append((op, 0))
        elif op == _OP_SPECIAL:
            ops.append((op, cur.id(section, "special token id")))
        else:
            raise cur.error(section, f"unknown op type {op}", at)
    return ops


def _read_extension(cur: _Cursor) -> tuple[dict[str, Any] | None, int | None]:
    """The extension's JSON payload and its version, if the file has them."""
    section = "extension"
    if not cur.remaining:
        return None, None
    at = cur.pos
    if cur.remaining < _EXTENSION_HEAD.size or cur.data[at : at + 8] != EXTENSION_MAGIC:
        raise cur.error(section, f"{cur.remaining} unexpected bytes after the post-processor")
    _, version, pad, length = _EXTENSION_HEAD.unpack_from(cur.data, at)
    if version not in (1, EXTENSION_VERSION):
        raise cur.error(section, f"version {version} is not supported (this pymtok reads 1 and {EXTENSION_VERSION})", at + 8)
    cur.pos += _EXTENSION_HEAD.size
    if length + pad > cur.remaining or (version == 1 and length + pad != cur.remaining):
        raise cur.error(section, f"block announces {length} + {pad} bytes but {cur.remaining} remain", at)
    payload_at = cur.pos
    text = cur.text(length, section, "JSON payload")
    _skip_index(cur, cur.remaining - pad)
    if cur.data[cur.pos : cur.end].strip(b"\x00"):
        raise cur.error(section, "padding bytes are not zero")
    try:
        ext = json.loads(text)
    except json.JSONDecodeError as exc:
        raise cur.error(section, f"JSON payload is invalid ({exc.msg})", payload_at + len(text[: exc.pos].encode())) from None
    except (ValueError, RecursionError) as exc:  # an integer past Python's digit limit, deep nesting
        raise cur.error(section, f"JSON payload cannot be read ({type(exc).__name__})", payload_at) from None
    if not isinstance(ext, dict):
        raise cur.error(section, "JSON payload is not an object", payload_at)
    for key, (types, required) in _EXTENSION_FIELDS.items():
        if key in ext or required:
            if not isinstance(ext.get(key, ...), types):
                raise cur.error(section, f"JSON payload field {key!r} is missing or has the wrong type", payload_at)
    for key, what in (("special_tokens", "special_tokens"), ("chat_template", "named chat templates")):
        value = ext[key]
        if isinstance(value, dict) and not all(isinstance(v, str) for v in value.values()):
            raise cur.error(section, f"{what} must be strings", payload_at)
    for key in ("added_tokens", "backend_added_tokens"):
        if not all(isinstance(t, dict) for t in ext.get(key, [])):
            raise cur.error(section, f"{key} must be objects", payload_at)
    if not all(
        isinstance(e, list) and len(e) == 2 and type(e[0]) is int and type(e[1]) in (int, float)
        for e in ext.get("unigram_scores", [])
    ):
        raise cur.error(section, "unigram_scores must be a list of [id, score]", payload_at)
    return ext, version


def _skip_index(cur: _Cursor, size: int) -> None:
    """The ``size`` bytes after the JSON payload: a stored index, whose tables building from the
    records is as fast as checking them; only its framing is read."""
    section = "extension index"
    if not size:
        return
    at = cur.pos
    fill = -at % 8
    if size < fill + _INDEX_HEAD.size or cur.data[at : at + fill].strip(b"\x00"):
        raise cur.error(section, f"{size} bytes after the JSON payload are not an index", at)
    _, length = _INDEX_HEAD.unpack_from(cur.data, at + fill)
    if fill + _INDEX_HEAD.size + length != size:
        raise cur.error(section, f"the index announces {length} bytes but {size - fill - _INDEX_HEAD.size} remain", at + fill)
    cur.pos = at + size


def _template_processing(
    ops: list[tuple[int, int]], model: dict[str, Any], added: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """MNN's single-sequence program as HF's TemplateProcessing (no program: no processor)."""
    if not ops or ops == [(_OP_SEQUENCE_A, 0)]:
        return None
    names: dict[int, str] = {t["id"]: t["content"] for t in added}
    vocab = model["vocab"]
    wanted = {id for op, id in ops if op == _OP_SPECIAL and id not in names}
    if isinstance(vocab, models.IndexedVocab):
        names.update((id, token) for id in wanted if (token := vocab.token_of(id)) is not None)
    elif wanted:
        # HF names template tokens by their text; a few lookups, so invert lazily
        entries = enumerate(vocab) if isinstance(vocab, list) else ((i, t) for t, i in vocab.items())
        for id, token in entries:
            if id in wanted:
                names[id] = token[0] if isinstance(token, (list, tuple)) else token
    special_tokens: dict[str, dict[str, Any]] = {}
    single: list[dict[str, Any]] = []
    for op, id in ops:
        if op == _OP_SEQUENCE_A:
            single.append({"Sequence": {"id": "A", "type_id": 0}})
            continue
        name = names.get(id, str(id))
        known = special_tokens.get(name)
        if known is not None and known["ids"] != [id]:
            name = str(id)  # two ids share a text: fall back to the id, which is unique
        special_tokens[name] = {"id": name, "ids": [id], "tokens": [name]}
        single.append({"SpecialToken": {"id": name, "type_id": 0}})
    # MNN has no pair template; HF requires one: the second sequence follows the first layout
    pair = single + [{"Sequence": {"id": "B", "type_id": 1}}]
    return {"type": "TemplateProcessing", "single": single, "pair": pair, "special_tokens": special_tokens}


# ------------------------------------------------------------------------------------------
# Writing
# ------------------------------------------------------------------------------------------


def _pack_str(value: object, what: str) -> bytes:
    if not isinstance(value, str):
        raise FormatError(f"{what} must be a string, got {value!r}")
    try:
        raw = value.encode("utf-8")
    except UnicodeEncodeError:
        raise FormatError(f"{what} {value!r} holds a lone surrogate, which has no UTF-8 form") from None
    if len(raw) > 0xFFFF:
        raise FormatError(f"{what} is {len(raw)} bytes; MNN's format holds at most 65535")
    return _U16.pack(len(raw)) + raw


def _byte(code: int) -> bytes:
    return bytes((code,))


def _u8(value: object) -> bytes:
    return _byte(1 if value else 0)


def _u32(value: object, what: str) -> bytes:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 0xFFFFFFFF:
        raise FormatError(f"{what} must be an integer in 0..2^32-1, got {value!r}")
    return _U32.pack(value)


Progress = Callable[[str, int, int], None]

_NORM_TABLES: dict[str, bytes] = {}


def _norm_table(form: str, progress: Progress | None = None) -> bytes:
    """MNN's NormTable for ``form`` over every code point, as its exporter builds it (once per
    process: a second or two, reported to ``progress(step, done, total)`` in code planes)."""
    table = _NORM_TABLES.get(form)
    if table is not None:
        return table
    parts: list[bytes] = []
    count = 0
    for cp in range(0x110000):
        if progress is not None and cp % 0x10000 == 0:
            progress(f"building the {form} table", cp >> 16, 0x11)
        ch = chr(cp)
        normalized = unicodedata.normalize(form, ch)
        if normalized != ch:
            raw = normalized.encode("utf-8")
            parts.append(_U32.pack(cp) + _U16.pack(len(raw)) + raw)
            count += 1
    table = _NORM_TABLES[form] = _U32.pack(count) + b"".join(parts)
    return table


_REGEX_SPECIAL = frozenset("\\^$.|?*+()[]{}/-")


def _string_pattern(cfg: Mapping[str, Any], regex_too: bool, escape: bool = False) -> object:
    """The pattern MNN gets. Its Split reads every pattern as a regex: ``escape`` writes a literal
    (String) pattern as the regex matching exactly that text (a backslash before each ASCII
    metacharacter means the character itself to both of MNN's regex engines)."""
    pattern = cfg.get("pattern")
    if isinstance(pattern, Mapping):
        if regex_too:
            if "Regex" in pattern:
                return pattern["Regex"]
            literal = pattern.get("String", "")
            if escape and isinstance(literal, str):
                return "".join("\\" + c if c in _REGEX_SPECIAL else c for c in literal)
            return literal
        return pattern.get("String", "")  # MNN's Replace is literal: a Regex becomes ""
    return pattern if isinstance(pattern, str) else ""


def _write_normalizer(out: list[bytes], cfg: Any, progress: Progress | None) -> None:
    if cfg is None:
        out.append(_byte(_N_NONE))
        return
    kind = cfg.get("type", "")
    if kind == "SentencePiece":
        from .sentencepiece import mnn_normalizer

        _write_normalizer(out, mnn_normalizer(cfg), progress)
    elif kind in ("NFKC", "Precompiled", "NFKD"):
        out += [_byte(_N_TABLE), _norm_table("NFKC", progress)]  # MNN's lossy stand-in for all three
    elif kind == "NFC":
        out += [_byte(_N_TABLE), _norm_table("NFC", progress)]
    elif kind == "Prepend":
        out += [_byte(_N_PREPEND), _pack_str(cfg.get("prepend", ""), "Prepend normalizer text")]
    elif kind == "Replace":
        out += [
            _byte(_N_REPLACE), _pack_str(_string_pattern(cfg, False), "Replace normalizer pattern"),
            _pack_str(cfg.get("content", ""), "Replace normalizer content"),
        ]
    elif kind == "Sequence":
        children = cfg.get("normalizers", [])
        out += [_byte(_N_SEQUENCE), _u32(len(children), "normalizer Sequence length")]
        for child in children:
            _write_normalizer(out, child, progress)
    elif kind == "BertNormalizer":
        strip = cfg.get("strip_accents", False)
        if strip is None and cfg.get("lowercase", True):
            strip = True  # HF: unset strip_accents follows lowercase
        flags = [cfg.get("clean_text", True), cfg.get("handle_chinese_chars", True), strip, cfg.get("lowercase", True)]
        out += [_byte(_N_BERT_NFD if strip else _N_BERT), *(_u8(f) for f in flags)]
        if strip:
            out.append(_norm_table("NFD", progress))
    elif kind == "Lowercase":
        out += [_byte(_N_BERT), b"\x00\x00\x00\x01"]  # only lowercase
    elif kind == "StripAccents":
        out += [_byte(_N_BERT_NFD), b"\x00\x00\x01\x00", _norm_table("NFD", progress)]  # only strip
    elif kind == "Strip":
        out += [_byte(_N_STRIP), _u8(cfg.get("strip_left", True)), _u8(cfg.get("strip_right", True))]
    else:
        out.append(_byte(_N_NONE))  # NFD, Nmt, ByteLevel, ...: MNN has no code (the extension keeps them)


# HF's Punctuation predicate (Rust's is_ascii_punctuation or a Unicode P* category) in the words of
# MNN's regex engine, whose \p{P} is the ASCII punctuation outside $+<=>^`|~ plus every P* character
_MNN_PUNCTUATION = "[\\p{P}$+<=>^`|~]"
_SPLIT_BEHAVIOR = {"Isolated": 0, "MergedWithPrevious": 2, "Removed": 1}


def _device_pre_tokenizer(cfg: Mapping[str, Any]) -> Mapping[str, Any]:
    r"""A pre-tokenizer MNN's runtime drops or gets wrong, as the Split that does the same there.

    Digits split runs of numeric characters (Rust's is_numeric: N*, MNN's \p{N}), one by one or
    together; MNN's own Digits only knows ASCII digits and ignores ``individual_digits: false``.
    Punctuation isolates (or removes, or merges) punctuation characters, runs of them with
    ``Contiguous``."""
    kind = cfg.get("type")
    if kind == "Digits":
        pattern = "\\p{N}" if cfg.get("individual_digits", False) else "\\p{N}+"
        return {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False}
    if kind == "Punctuation":
        behavior = cfg.get("behavior", "Isolated")
        if behavior == "Contiguous":
            return {"type": "Split", "pattern": {"Regex": _MNN_PUNCTUATION + "+"}, "behavior": "Isolated", "invert": False}
        if behavior in _SPLIT_BEHAVIOR:
            return {"type": "Split", "pattern": {"Regex": _MNN_PUNCTUATION}, "behavior": behavior, "invert": False}
    return cfg


def _write_pre_tokenizer(out: list[bytes], cfg: Any, mnn_identical: bool) -> None:
    if cfg is None:
        out.append(_byte(_P_NONE))
        return
    if not mnn_identical:
        cfg = _device_pre_tokenizer(cfg)
    kind = cfg.get("type", "")
    if kind == "ByteLevel":
        out += [_byte(_P_BYTE_LEVEL), _u8(cfg.get("use_regex", True))]
    elif kind == "Digits":
        out += [_byte(_P_DIGITS), _u8(cfg.get("individual_digits", False))]
    elif kind == "Metaspace":
        replacement = cfg.get("str_rep") or cfg.get("replacement", "\u2581")
        out += [_byte(_P_METASPACE), _pack_str(replacement, "Metaspace replacement"), _u8(cfg.get("add_prefix_space", True))]
    elif kind == "Split":
        code = _SPLIT_BEHAVIOR.get(cfg.get("behavior", "Isolated"), 1)  # MNN's exporter: 1 for the rest
        out += [
            _byte(_P_SPLIT), _pack_str(_string_pattern(cfg, True, escape=not mnn_identical), "Split pattern"),
            _u8(cfg.get("invert", False)), _byte(code),
        ]
    elif kind == "BertPreTokenizer":
        out.append(_byte(_P_BERT))
    elif kind == "Sequence":
        children = cfg.get("pretokenizers", [])
        out += [_byte(_P_SEQUENCE), _u32(len(children), "pre-tokenizer Sequence length")]
        for child in children:
            _write_pre_tokenizer(out, child, mnn_identical)
    elif kind == "WhitespaceSplit":
        out += [_byte(_P_SPLIT), _pack_str("\\s+", "Split pattern"), b"\x00\x01"]  # not inverted, Removed
    else:
        out.append(_byte(_P_NONE))


def _mnn_model_type(model: Mapping[str, Any]) -> str:
    kind = model.get("type")
    if kind:
        return str(kind)
    # MNN's exporter infers a missing type in this order (FORMAT.md §4.3)
    if "continuing_subword_prefix" in model and "merges" not in model:
        return "WordPiece"
    if isinstance(model.get("vocab"), list):
        return "Unigram"
    return "BPE"


def _has_type(cfg: Any, key: str, kind: str) -> bool:
    return isinstance(cfg, Mapping) and (
        cfg.get("type") == kind
        or (cfg.get("type") == "Sequence" and any(isinstance(c, Mapping) and c.get("type") == kind for c in cfg.get(key, [])))
    )


def _sorted_vocab(vocab: Any) -> list[tuple[str, int]]:
    if not isinstance(vocab, Mapping):
        raise FormatError(f"model vocab must be an object, got {type(vocab).__name__}")
    # Python orders str by code point, which is UTF-8 byte order: what MNN binary-searches
    return sorted(vocab.items(), key=lambda item: item[0])


def vocab_fillers(config: Mapping[str, Any], mnn_identical: bool) -> dict[str, int]:
    """Records for the ids a byte-level BPE vocabulary skips (gpt-4o's 199998, 200000-200017), in
    the device layout: MNN's loader stores each record at ``id_to_token[id]`` in a table sized
    by the record count, so a gap puts the highest ids past its end. Each filler has a space,
    which no byte-level piece holds (GPT-2's byte characters stand for it), so no text reaches
    one; the extension lists them and pymtok's readers leave them out."""
    model = config.get("model")
    if mnn_identical or not isinstance(model, Mapping) or _mnn_model_type(model) != "BPE":
        return {}
    vocab = model.get("vocab")
    if not isinstance(vocab, Mapping) or not vocab:
        return {}
    ids = set(vocab.values())
    top = max(ids)
    # a few gaps are filled; ids spread far beyond the vocabulary's size (2**31 for 10 tokens)
    # would take more fillers than tokens, and are left to mnn_compat's warning
    if not isinstance(top, int) or top + 1 == len(ids) or top + 1 - len(ids) > len(ids):
        return {}
    if not (_has_type(config.get("pre_tokenizer"), "pretokenizers", "ByteLevel")
            or _has_type(config.get("decoder"), "decoders", "ByteLevel")):
        return {}  # no filler is unreachable for a char-level vocabulary: mnn_compat warns instead
    fillers = {f"<pymtok unused {id}>": id for id in range(top + 1) if id not in ids}
    if any(token in vocab for token in fillers):
        raise FormatError("the vocabulary has a token spelled like pymtok's gap fillers ('<pymtok unused N>')")
    return fillers


def _write_model(
    out: list[bytes], config: Mapping[str, Any], table_scores: Sequence[float] | None, mnn_identical: bool = False
) -> None:
    model = config.get("model")
    if not isinstance(model, Mapping):
        raise FormatError("tokenizer config has no 'model' object")
    kind = _mnn_model_type(model)
    if kind == "SentencePieceBPE":
        from .sentencepiece import mnn_bpe_table

        model, kind = mnn_bpe_table(model), "BPE"
    if kind == "BPE":
        vocab = model.get("vocab", {})
        entries = _sorted_vocab({**vocab, **vocab_fillers(config, mnn_identical)})
        merges = model.get("merges") or []
        pre, dec = config.get("pre_tokenizer"), config.get("decoder")
        # the model does the byte mapping itself only when no ByteLevel pre-tokenizer step does
        byte_level = (
            isinstance(pre, Mapping) and pre.get("type") == "Sequence"
            and not any(isinstance(p, Mapping) and p.get("type") == "ByteLevel" for p in pre.get("pretokenizers", []))
            and _has_type(dec, "decoders", "ByteLevel")
        )
        out += [
            _byte(_M_BPE), _u32(len(entries), "vocabulary size"), _u8(model.get("byte_fallback", False)),
            _u8(byte_level), _u32(len(merges), "merge count"),
        ]
        _write_vocab(out, entries)
        out.append(_merge_records(vocab, merges))
    elif kind == "WordPiece":
        entries = _sorted_vocab(model.get("vocab", {}))
        if model.get("unk_token", "[UNK]") not in model.get("vocab", {}):
            raise FormatError(
                f"WordPiece unk_token {model.get('unk_token', '[UNK]')!r} is not in the vocabulary: MNN's runtime "
                "would give a word it cannot cut the id -1"
            )
        out += [
            _byte(_M_WORDPIECE), _u32(len(entries), "vocabulary size"),
            _pack_str(model.get("unk_token", "[UNK]"), "WordPiece unk_token"),
            _pack_str(model.get("continuing_subword_prefix", "##"), "WordPiece continuing_subword_prefix"),
            _u32(model.get("max_input_chars_per_word", 100), "WordPiece max_input_chars_per_word"),
        ]
        _write_vocab(out, entries)
    elif kind == "WordLevel" and not mnn_identical:
        # MNN has no WordLevel: a WordPiece whose prefix starts no token is one (models.absent_prefix)
        # and its unlimited word length keeps every piece
        entries = _sorted_vocab(model.get("vocab", {}))
        prefix = models.absent_prefix(token for token, _ in entries)
        if prefix is None:
            raise FormatError("WordLevel model: its tokens start with every character, so no WordPiece stands for it")
        out += [
            _byte(_M_WORDPIECE), _u32(len(entries), "vocabulary size"),
            _pack_str(model.get("unk_token", ""), "WordLevel unk_token"),
            _pack_str(prefix, "WordPiece continuing_subword_prefix"), _u32(2**32 - 1, "max_input_chars_per_word"),
        ]
        _write_vocab(out, entries)
    elif kind in ("Unigram", "SentencePieceUnigram"):
        vocab = model.get("vocab", [])
        if not isinstance(vocab, list):
            raise FormatError("Unigram vocab must be a list of [piece, score]")
        scores = table_scores if table_scores is not None else [entry[1] for entry in vocab]
        if len(scores) != len(vocab):
            raise FormatError(f"{len(scores)} table scores given for {len(vocab)} Unigram pieces")
        pieces = [
            (entry[0], i, scores[i]) for i, entry in enumerate(vocab) if isinstance(entry, (list, tuple)) and len(entry) >= 2
        ]
        pieces.sort(key=lambda p: p[0])
        out += [
            _byte(_M_UNIGRAM), _u32(len(pieces), "vocabulary size"), _u32(model.get("unk_id", 0), "Unigram unk_id"),
            _u8(model.get("byte_fallback", False)),
        ]
        for piece, id, score in pieces:
            if not isinstance(score, (int, float)) or isinstance(score, bool):
                raise FormatError(f"Unigram score of {piece!r} must be a number, got {score!r}")
            out += [_pack_str(piece, "Unigram piece"), _U32.pack(id), _F64.pack(score)]
    elif kind == "WordLevel":
        raise FormatError("model type 'WordLevel': MNN's exporter has no layout for it (the device layout writes it as a WordPiece)")
    else:
        raise FormatError(f"model type {kind!r} has no .mtok layout (MNN knows BPE, WordPiece, Unigram)")


def _write_vocab(out: list[bytes], entries: list[tuple[str, int]]) -> None:
    pack_id = _U32.pack
    for token, id in entries:
        if not isinstance(id, int) or isinstance(id, bool) or not 0 <= id <= _MAX_ID:
            raise FormatError(f"vocabulary token {token!r} has id {id!r}, not a token id")
        out += [_pack_str(token, "vocabulary token"), pack_id(id)]
    if len({id for _, id in entries}) != len(entries):
        # HF loads such a vocabulary, but which token an id decodes to is then left to chance
        seen: dict[int, str] = {}
        token, id = next((t, i) for t, i in entries if seen.setdefault(i, t) != t)
        raise FormatError(
            f"vocabulary id {id} is given to two tokens, {seen[id]!r} and {token!r}: a .mtok holds one token per id"
        )


def _merge_records(vocab: Mapping[str, int], merges: Sequence[Any]) -> bytes:
    triples: list[tuple[int, int, int]] = []
    for rank, merge in enumerate(merges):
        if isinstance(merge, str):
            left, sep, right = merge.partition(" ")
            if not sep:
                # MNN skips it but still counts it in merge_size, desynchronising its file
                raise FormatError(f"BPE merge #{rank} {merge!r} is not 'left right'")
        elif isinstance(merge, Sequence) and len(merge) >= 2:
            left, right = merge[0], merge[1]
        else:
            raise FormatError(f"BPE merge #{rank} {merge!r} is not a pair")
        a, b = vocab.get(left), vocab.get(right)
        if a is None or b is None:
            raise FormatError(f"BPE merge #{rank} ({left!r}, {right!r}) names a token missing from the vocabulary")
        triples.append((a, b, rank))
    triples.sort(key=lambda t: (t[0] << 32) | t[1])  # MNN binary-searches this key; sort is stable
    try:
        return b"".join(_MERGE.pack(*t) for t in triples)
    except struct.error:
        raise FormatError("BPE merge ids must be in 0..2^32-1") from None


def _write_decoder(out: list[bytes], cfg: Any) -> None:
    kind = cfg.get("type", "") if isinstance(cfg, Mapping) else None
    if kind == "SentencePiece":
        from .sentencepiece import mnn_decoder

        _write_decoder(out, mnn_decoder(cfg))
    elif kind == "ByteFallback":
        out.append(_byte(_D_BYTE_FALLBACK))
    elif kind == "Metaspace":
        out += [_byte(_D_METASPACE), _pack_str(cfg.get("replacement", "\u2581"), "Metaspace replacement"), _u8(cfg.get("add_prefix_space", True))]
    elif kind == "WordPiece":
        out += [_byte(_D_WORDPIECE), _pack_str(cfg.get("prefix", "##"), "WordPiece prefix"), _u8(cfg.get("cleanup", True))]
    elif kind == "Fuse":
        out.append(_byte(_D_FUSE))
    elif kind == "Replace":
        out += [
            _byte(_D_REPLACE), _pack_str(_string_pattern(cfg, False), "Replace decoder pattern"),
            _pack_str(cfg.get("content", ""), "Replace decoder content"),
        ]
    elif kind == "Strip":
        out += [
            _byte(_D_STRIP), _pack_str(cfg.get("content", ""), "Strip content"),
            _u32(cfg.get("start", 0), "Strip start"), _u32(cfg.get("stop", 0), "Strip stop"),
        ]
    elif kind == "Sequence":
        children = cfg.get("decoders", [])
        out += [_byte(_D_SEQUENCE), _u32(len(children), "decoder Sequence length")]
        for child in children:
            _write_decoder(out, child)
    else:
        out.append(_byte(_D_BYTE_LEVEL))  # ByteLevel, and MNN's stand-in for null or unknown decoders


def _write_added_tokens(out: list[bytes], added: Any) -> None:
    if not isinstance(added, list):
        raise FormatError("'added_tokens' must be a list")
    out.append(_u32(len(added), "added token count"))
    for token in added:
        if not isinstance(token, Mapping):
            raise FormatError(f"added token {token!r} is not an object")
        out += [
            _u32(token.get("id"), f"id of added token {token.get('content')!r}"),
            _u8(token.get("special", False)), _u8(token.get("lstrip", False)), _u8(token.get("rstrip", False)),
            _pack_str(token.get("content", ""), "added token content"),
        ]


def _post_processor_ops(cfg: Any, mnn_identical: bool) -> list[tuple[int, int]]:
    """The single-sequence post-processor as MNN's program: MNN's exporter
    (``extract_single_post_processor_ops``) takes only TemplateProcessing; the device layout also
    writes Bert/RobertaProcessing, whose single form is the same ``CLS A SEP`` program."""
    if not isinstance(cfg, Mapping):
        return []
    kind = cfg.get("type", "")
    if kind == "Sequence":
        for child in cfg.get("processors", []):
            ops = _post_processor_ops(child, mnn_identical)
            if ops:
                return ops
        return []
    if kind in ("BertProcessing", "RobertaProcessing") and not mnn_identical:
        (_, cls_id), (_, sep_id) = cfg.get("cls"), cfg.get("sep")
        return [(_OP_SPECIAL, int(cls_id)), (_OP_SEQUENCE_A, 0), (_OP_SPECIAL, int(sep_id))]
    if kind != "TemplateProcessing":
        return []
    special_tokens = cfg.get("special_tokens", {})
    ops: list[tuple[int, int]] = []
    for item in cfg.get("single", []):
        if not isinstance(item, Mapping) or len(item) != 1:
            return []
        key, value = next(iter(item.items()))
        if key == "Sequence":
            if value.get("id") != "A":
                return []
            ops.append((_OP_SEQUENCE_A, 0))
        elif key == "SpecialToken":
            ids = value.get("ids") or special_tokens.get(value.get("id"), {}).get("ids", [])
            if not isinstance(ids, list):
                return []
            ops += [(_OP_SPECIAL, int(id)) for id in ids]
        else:
            return []
    return ops


def header_prefix_ids(meta: TokenizerMeta, ops: Sequence[tuple[int, int]], mnn_identical: bool) -> list[int]:
    """The header's prefix list. MNN's ``encode`` puts it before the text and then runs the
    post-processor program, which adds the same BOS again (BEHAVIOR.md §12 item 1); where there is
    a program the device layout leaves the list empty, so the program alone adds the prefix and
    ``encode("")`` (how MNN's engine counts prefix tokens) still gives it."""
    if ops and not mnn_identical:
        return []
    return list(meta.prefix_ids)


def _trailer_template(template: str | dict[str, str] | None) -> str:
    if isinstance(template, dict):
        return template.get("default", "")  # MNN holds one template: the one used by default
    return template or ""


def mnn_bytes(
    config: Mapping[str, Any],
    meta: TokenizerMeta,
    table_scores: Sequence[float] | None = None,
    progress: Progress | None = None,
    mnn_identical: bool = False,
) -> tuple[bytes, list[tuple[int, int]]]:
    """MNN's own part of the file: header through the post-processor program, and that program.

    ``table_scores`` replace a Unigram vocabulary's scores in MNN's table (see ``dumps_mtok``);
    ``progress`` is told of the steps that take seconds. ``mnn_identical`` writes exactly what
    MNN's exporter writes; by default the layout is the one MNN's runtime reads right
    (docs/FORMAT_EXTENSION.md, "Where the device layout differs").
    """
    ops = _post_processor_ops(config.get("post_processor"), mnn_identical)
    prefix = header_prefix_ids(meta, ops, mnn_identical)
    ids = [*meta.special_ids, *meta.stop_ids, *prefix]
    header = (
        f"{MAGIC_NUMBER} {PIPELINE_TYPE}\n"
        f"{len(meta.special_ids)} {len(meta.stop_ids)} {len(prefix)}\n"
        + " ".join(str(i) for i in ids) + "\n"
    )
    out: list[bytes] = [header.encode("ascii")]
    _write_normalizer(out, config.get("normalizer"), progress)
    _write_pre_tokenizer(out, config.get("pre_tokenizer"), mnn_identical)
    if progress is not None:
        progress("laying out the vocabulary and merges", 0, 1)
    _write_model(out, config, table_scores, mnn_identical)
    _write_decoder(out, config.get("decoder"))
    _write_added_tokens(out, config.get("added_tokens") or [])
    template = _trailer_template(meta.chat_template).encode("utf-8")
    out += [
        _u32(len(template), "chat template length"), template,
        _pack_str(meta.special_tokens.get("eos_token", ""), "eos token"),
        _u8(meta.clean_up_tokenization_spaces),
        _pack_str(meta.special_tokens.get("bos_token", ""), "bos token"),
    ]
    if len(ops) > 0xFFFF:
        raise FormatError(f"post-processor program has {len(ops)} ops; MNN's format holds at most 65535")
    out.append(_U16.pack(len(ops)))
    for op, id in ops:
        out.append(_byte(op) if op == _OP_SEQUENCE_A else _byte(op) + _u32(id, "post-processor token id"))
    return b"".join(out), ops


def extension_block(payload: bytes, ops: list[tuple[int, int]]) -> bytes:
    """The exactness extension holding ``payload`` (UTF-8 JSON), placed after ``ops``.

    MNN's loader reads its op list as legacy raw ids when the bytes after the op count number
    exactly 4 × count (FORMAT.md §5.2). Those bytes are the ops (1 per SEQUENCE_A, 5 per
    SPECIAL_TOKEN) plus this block, so the block must never be 3·#A − #SPECIAL bytes long: one
    byte of padding moves it off that size.
    """
    n_a = sum(1 for op, _ in ops if op == _OP_SEQUENCE_A)
    fatal = 3 * n_a - (len(ops) - n_a)
    pad = 1 if _EXTENSION_HEAD.size + len(payload) == fatal else 0
    head = _EXTENSION_HEAD.pack(EXTENSION_MAGIC, EXTENSION_VERSION, pad, len(payload))
    return head + payload + b"\x00" * pad


def extension_payload(
    config: Mapping[str, Any],
    meta: TokenizerMeta,
    table_scores: Sequence[float] | None = None,
    header_prefix: Sequence[int] | None = None,
    layout: str = DEVICE,
) -> bytes:
    """Compact JSON of everything MNN's layout cannot hold exactly (all but vocab and merges).

    ``header_prefix`` is the prefix list the header holds; where it is not the tokenizer's own
    (the device layout leaves it to the post-processor program) the payload keeps the real one.
    """
    model = config.get("model") or {}
    options = {k: v for k, v in model.items() if k not in ("vocab", "merges")}
    if model.get("type") == "SentencePieceBPE":
        options["scores"] = [entry[1] for entry in model["vocab"]]  # MNN's BPE table has none
    options["type"] = _mnn_model_type(model)
    payload: dict[str, Any] = {
        "normalizer": config.get("normalizer"),
        "pre_tokenizer": config.get("pre_tokenizer"),
        "decoder": config.get("decoder"),
        "post_processor": config.get("post_processor"),
        "model": options,
        "added_tokens": list(config.get("added_tokens") or []),
        **{key: getattr(meta, key) for key in _META_FIELDS},
        "mnn_layout": layout,
    }
    if header_prefix is not None and list(header_prefix) != list(meta.prefix_ids):
        payload["prefix_ids"] = list(meta.prefix_ids)
    fillers = vocab_fillers(config, layout == MNN_IDENTICAL)
    if fillers:
        payload["vocab_fillers"] = sorted(fillers.values())
    if table_scores is not None:
        vocab = model.get("vocab") or []
        payload["unigram_scores"] = [[i, entry[1]] for i, (entry, t) in enumerate(zip(vocab, table_scores)) if entry[1] != t]
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def dumps_mtok(
    config: Mapping[str, Any],
    meta: TokenizerMeta,
    *,
    table_scores: Sequence[float] | None = None,
    progress: Progress | None = None,
    mnn_identical: bool = False,
) -> bytes:
    """The ``.mtok`` bytes for a ``tokenizer.json``-shaped config: MNN's layout + our extension.

    ``config`` holds the values the pipeline uses. A Unigram model's scores are what HF's
    serde_json reads from the JSON numbers, which can be one ulp away from Python's correctly
    rounded reading that MNN's exporter stores: ``table_scores`` (Python's reading, by id) go into
    MNN's table, and the extension records the scores that differ.

    ``progress(step, done, total)`` is told of the steps that can take seconds (normalization
    tables, records).
    ``mnn_identical`` writes MNN's part byte for byte as MNN's exporter does, its runtime's
    faults included (see ``mnn_bytes``).
    """
    if table_scores is not None and _mnn_model_type(config.get("model") or {}) != "Unigram":
        raise ValueError("table_scores only apply to a Unigram model")
    body, ops = mnn_bytes(config, meta, table_scores, progress, mnn_identical)
    payload = extension_payload(
        config, meta, table_scores, header_prefix_ids(meta, ops, mnn_identical), MNN_IDENTICAL if mnn_identical else DEVICE
    )
    return body + extension_block(payload, ops)


def write_mtok(tokenizer: Tokenizer, path: str | os.PathLike[str]) -> Path:
    """Write ``tokenizer`` (its config and meta) as a ``.mtok`` file."""
    data = dumps_mtok(tokenizer.config, tokenizer.meta)
    out = Path(path)
    out.write_bytes(data)
    return out
