"""SentencePiece ``.model`` files: the ``ModelProto`` protobuf, read without protobuf.

A ``.model`` is one serialized ``sentencepiece.ModelProto`` (sentencepiece's
``src/sentencepiece_model.proto``). This module reads the fields that decide tokenization with
its own bounds-checked wire-format reader and turns them into pipeline configs that mirror
sentencepiece's own stages one to one:

| sentencepiece                         | pipeline component                                  |
|---------------------------------------|-----------------------------------------------------|
| ``normalizer.cc`` + ``NormalizerSpec`` | normalizer ``SentencePiece`` (the spec's fields)    |
| ``bpe_model.cc`` / ``unigram_model.cc`` | model ``SentencePieceBPE`` / ``SentencePieceUnigram`` |
| ``SentencePieceProcessor::Decode``     | decoder ``SentencePiece``                            |
| ``add_bos`` / ``add_eos``              | a ``TemplateProcessing`` post-processor             |

The same configs are what a ``.mtok``'s exactness extension stores, so an exported file reads
back to the same pipeline.

>>> tok = read_model("tokenizer.model")                 # doctest: +SKIP
>>> tok.encode("Hello world")                            # doctest: +SKIP
[15043, 3186]
"""

from __future__ import annotations

import base64
import functools
import math
import os
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import FormatError
from .tokenizer import Tokenizer, TokenizerMeta

__all__ = ["ModelProto", "NormalizerSpec", "Piece", "TrainerSpec", "parse_model", "read_model", "tokenizer_config"]

# ModelProto.SentencePiece.Type
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
# TrainerSpec.ModelType
UNIGRAM, BPE, WORD, CHAR = 1, 2, 3, 4
_MODEL_TYPES = {UNIGRAM: "SentencePieceUnigram", BPE: "SentencePieceBPE"}

_VARINT, _FIXED64, _LEN, _FIXED32 = 0, 1, 2, 5
_WIRE_NAMES = {0: "varint", 1: "64-bit", 2: "length-delimited", 3: "group start", 4: "group end", 5: "32-bit"}


@dataclass
class Piece:
    piece: str
    score: float = 0.0
    type: int = NORMAL


@dataclass
class TrainerSpec:
    """The ``TrainerSpec`` fields that matter when tokenizing (the rest is training-only)."""

    model_type: int = UNIGRAM
    treat_whitespace_as_suffix: bool = False
    byte_fallback: bool = False
    unk_id: int = 0
    bos_id: int = 1
    eos_id: int = 2
    pad_id: int = -1
    unk_piece: str = "<unk>"
    bos_piece: str = "<s>"
    eos_piece: str = "</s>"
    pad_piece: str = "<pad>"
    unk_surface: str = " \u2047 "


@dataclass
class NormalizerSpec:
    name: str = ""
    precompiled_charsmap: bytes = b""
    add_dummy_prefix: bool = True
    remove_extra_whitespaces: bool = True
    escape_whitespaces: bool = True


@dataclass
class ModelProto:
    pieces: list[Piece] = field(default_factory=list)
    trainer_spec: TrainerSpec = field(default_factory=TrainerSpec)
    normalizer_spec: NormalizerSpec = field(default_factory=NormalizerSpec)
    denormalizer_spec: NormalizerSpec | None = None


# ------------------------------------------------------------------------------------------
# Wire format
# ------------------------------------------------------------------------------------------


class _Reader:
    """A cursor over one message's bytes; every read is checked against the message's end."""

    def __init__(self, data: memoryview, start: int, end: int, where: str) -> None:
        self.data, self.pos, self.end, self.where = data, start, end, where

    def fail(self, message: str, at: int | None = None) -> FormatError:
        return FormatError(f"{self.where}: byte {self.pos if at is None else at}: {message}")

    def varint(self, what: str) -> int:
        at, value, shift = self.pos, 0, 0
        while True:
            if self.pos >= self.end:
                raise self.fail(f"{what}: varint runs past the end of its message", at)
            byte = self.data[self.pos]
            self.pos += 1
            if shift == 63 and byte > 1:
                raise self.fail(f"{what}: varint longer than 64 bits", at)
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7

    def fields(self, message: str) -> Any:
        """Each field of the message in turn: (field number, wire type, offset of its tag)."""
        while self.pos < self.end:
            at = self.pos
            tag = self.varint(f"{message} field tag")
            number, wire = tag >> 3, tag & 7
            if number == 0 or number > 0x1FFFFFFF:
                raise self.fail(f"{message}: field number {number} is not a protobuf field number", at)
            if wire not in (_VARINT, _FIXED64, _LEN, _FIXED32):
                raise self.fail(f"{message} field {number}: wire type {wire} ({_WIRE_NAMES.get(wire, 'unknown')}) is not supported", at)
            yield number, wire, at

    def length(self, what: str) -> tuple[int, int]:
        at = self.pos
        n = self.varint(f"{what} length")
        if n > self.end - self.pos:
            raise self.fail(f"{what}: length {n} runs past the end of its message ({self.end - self.pos} bytes left)", at)
        start = self.pos
        self.pos += n
        return start, self.pos

    def skip(self, wire: int, what: str) -> None:
        if wire == _VARINT:
            self.varint(what)
        elif wire == _LEN:
            self.length(what)
        else:
            size = 8 if wire == _FIXED64 else 4
            if size > self.end - self.pos:
                raise self.fail(f"{what}: {size}-byte value runs past the end of its message")
            self.pos += size

    def expect(self, wire: int, want: int, what: str, at: int) -> None:
        if wire != want:
            raise self.fail(f"{what}: wire type {_WIRE_NAMES[wire]}, expected {_WIRE_NAMES[want]}", at)

    def int32(self, wire: int, what: str, at: int) -> int:
        self.expect(wire, _VARINT, what, at)
        value = self.varint(what) & 0xFFFFFFFF  # protobuf truncates an int32 to its low 32 bits
        return value - (1 << 32) if value >= 1 << 31 else value

    def flag(self, wire: int, what: str, at: int) -> bool:
        self.expect(wire, _VARINT, what, at)
        return self.varint(what) != 0

    def float32(self, wire: int, what: str, at: int) -> float:
        self.expect(wire, _FIXED32, what, at)
        if self.end - self.pos < 4:
            raise self.fail(f"{what}: 4-byte float runs past the end of its message")
        (value,) = struct.unpack_from("<f", self.data, self.pos)
        self.pos += 4
        return float(value)

    def raw(self, wire: int, what: str, at: int) -> bytes:
        self.expect(wire, _LEN, what, at)
        start, end = self.length(what)
        return bytes(self.data[start:end])

    def text(self, wire: int, what: str, at: int) -> str:
        raw = self.raw(wire, what, at)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.fail(f"{what}: not UTF-8 (byte {exc.start} of the string)", at) from None

    def message(self, wire: int, what: str, at: int) -> _Reader:
        self.expect(wire, _LEN, what, at)
        start, end = self.length(what)
        return _Reader(self.data, start, end, self.where)


def parse_model(data: bytes, where: str = "<bytes>") -> ModelProto:
    """Decode a serialized ``ModelProto``; a defect is a ``FormatError`` naming field and byte.

    Repeated singular fields take the last value and repeated sub-messages merge, as protobuf
    does; fields this reader does not need are skipped by their wire type.
    """
    proto = ModelProto()
    top = _Reader(memoryview(data), 0, len(data), where)
    pieces = proto.pieces
    for number, wire, at in top.fields("ModelProto"):
        if number == 1:
            if wire != _LEN:
                top.expect(wire, _LEN, f"ModelProto.pieces[{len(pieces)}]", at)
            start, end = top.length("ModelProto.pieces")
            pieces.append(_piece(top.data, start, end, len(pieces), where))
        elif number == 2:
            _trainer_spec(top.message(wire, "ModelProto.trainer_spec", at), proto.trainer_spec)
        elif number == 3:
            _normalizer_spec(top.message(wire, "ModelProto.normalizer_spec", at), proto.normalizer_spec, "normalizer_spec")
        elif number == 5:
            if proto.denormalizer_spec is None:
                proto.denormalizer_spec = NormalizerSpec()
            _normalizer_spec(top.message(wire, "ModelProto.denormalizer_spec", at), proto.denormalizer_spec, "denormalizer_spec")
        else:
            top.skip(wire, f"ModelProto field {number}")
    return proto


_PIECE_TYPES = frozenset((NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE))
_FLOAT = struct.Struct("<f")


def _piece(data: memoryview, start: int, end: int, index: int, where: str) -> Piece:
    """One ``SentencePiece`` message. Pieces are most of a file, so the usual layout (one-byte
    tags, a short piece, a score, a small type) is read inline; anything else goes through the
    general reader."""
    pos = start
    text, score, kind = "", 0.0, NORMAL
    while pos < end:
        tag = data[pos]
        if tag == 0x0A and pos + 1 < end and data[pos + 1] < 0x80 and pos + 2 + data[pos + 1] <= end:
            stop = pos + 2 + data[pos + 1]
            try:
                text = str(data[pos + 2 : stop], "utf-8")
            except UnicodeDecodeError:
                break  # the general reader names the error
            pos = stop
        elif tag == 0x15 and pos + 5 <= end:
            (score,) = _FLOAT.unpack_from(data, pos + 1)
            pos += 5
        elif tag == 0x18 and pos + 1 < end and data[pos + 1] in _PIECE_TYPES:
            kind = data[pos + 1]
            pos += 2
        else:
            break
    if pos == end:
        return Piece(piece=text, score=score, type=kind)
    r = _Reader(data, pos, end, where)
    name = f"ModelProto.pieces[{index}]"
    piece = Piece(piece=text, score=score, type=kind)
    for number, wire, at in r.fields(name):
        if number == 1:
            piece.piece = r.text(wire, f"{name}.piece", at)
        elif number == 2:
            piece.score = r.float32(wire, f"{name}.score", at)
        elif number == 3:
            kind = r.int32(wire, f"{name}.type", at)
            if kind not in _PIECE_TYPES:
                raise r.fail(f"{name}.type: {kind} is not a SentencePiece type (1-6)", at)
            piece.type = kind
        else:
            r.skip(wire, f"{name} field {number}")
    return piece


_TRAINER_INTS = {3: "model_type", 40: "unk_id", 41: "bos_id", 42: "eos_id", 43: "pad_id"}
_TRAINER_FLAGS = {24: "treat_whitespace_as_suffix", 35: "byte_fallback"}
_TRAINER_TEXTS = {45: "unk_piece", 46: "bos_piece", 47: "eos_piece", 48: "pad_piece", 44: "unk_surface"}


def _trainer_spec(r: _Reader, spec: TrainerSpec) -> None:
    for number, wire, at in r.fields("TrainerSpec"):
        if number in _TRAINER_INTS:
            setattr(spec, _TRAINER_INTS[number], r.int32(wire, f"TrainerSpec.{_TRAINER_INTS[number]}", at))
        elif number in _TRAINER_FLAGS:
            setattr(spec, _TRAINER_FLAGS[number], r.flag(wire, f"TrainerSpec.{_TRAINER_FLAGS[number]}", at))
        elif number in _TRAINER_TEXTS:
            setattr(spec, _TRAINER_TEXTS[number], r.text(wire, f"TrainerSpec.{_TRAINER_TEXTS[number]}", at))
        else:
            r.skip(wire, f"TrainerSpec field {number}")


def _normalizer_spec(r: _Reader, spec: NormalizerSpec, name: str) -> None:
    for number, wire, at in r.fields(name):
        if number == 1:
            spec.name = r.text(wire, f"{name}.name", at)
        elif number == 2:
            spec.precompiled_charsmap = r.raw(wire, f"{name}.precompiled_charsmap", at)
        elif number == 3:
            spec.add_dummy_prefix = r.flag(wire, f"{name}.add_dummy_prefix", at)
        elif number == 4:
            spec.remove_extra_whitespaces = r.flag(wire, f"{name}.remove_extra_whitespaces", at)
        elif number == 5:
            spec.escape_whitespaces = r.flag(wire, f"{name}.escape_whitespaces", at)
        else:
            r.skip(wire, f"{name} field {number}")


# ------------------------------------------------------------------------------------------
# The pipeline
# ------------------------------------------------------------------------------------------


def _byte_piece(b: int) -> str:
    return f"<0x{b:02X}>"


# model_interface.cc refuses a piece of this many UTF-8 bytes or more (measured on 0.2.3)
_MAX_PIECE_BYTES = 8000


def _null_piece(piece: Piece, spec: TrainerSpec) -> bool:
    """A piece that is the NUL character alone, which sentencepiece 0.2.3 loads with byte
    fallback as an UNUSED piece in no map (its text is then byte ``<0x00>``)."""
    return spec.byte_fallback and piece.piece == "\0"


def _check(proto: ModelProto) -> None:
    """What sentencepiece 0.2.3 refuses to load: ``ModelInterface::InitializePieces``'s pieces,
    ``unigram::Model``'s scores and trie, the normalizers' ``precompiled_charsmap``."""
    spec = proto.trainer_spec
    if spec.model_type not in _MODEL_TYPES:
        names = {WORD: "WORD", CHAR: "CHAR"}
        raise FormatError(
            f"TrainerSpec.model_type {spec.model_type} ({names.get(spec.model_type, 'unknown')}) is not supported "
            "(pymtok reads UNIGRAM and BPE models)"
        )
    if not proto.pieces:
        raise FormatError("ModelProto has no pieces")
    normal: set[str] = set()
    reserved: set[str] = set()
    unk: list[int] = []
    bytes_found: set[str] = set()
    byte_names = {_byte_piece(b) for b in range(256)}
    # BPE keeps every piece in one map (its merges skip the reserved ones), Unigram the reserved
    # pieces apart: only there may a reserved piece share its spelling with another
    one_map = spec.model_type == BPE
    for i, p in enumerate(proto.pieces):
        if spec.model_type == UNIGRAM and not math.isfinite(p.score):
            raise FormatError(f"ModelProto.pieces[{i}]: score {p.score} is NaN or infinite")
        if math.isnan(p.score):
            # sentencepiece loads it, but a NaN compares neither above nor below any score, so
            # its merges go in the order its heap happens to hold them, which pymtok does not
            # reproduce: refused rather than a tokenizer that differs somewhere
            raise FormatError(f"ModelProto.pieces[{i}]: BPE score is NaN (pymtok cannot order merges by it)")
        if _null_piece(p, spec):
            continue
        if not p.piece:
            raise FormatError(f"ModelProto.pieces[{i}]: piece is empty")
        # at most 4 bytes a character: a piece of fewer characters than a quarter cannot be too long
        if len(p.piece) >= _MAX_PIECE_BYTES // 4 and (size := len(p.piece.encode("utf-8"))) >= _MAX_PIECE_BYTES:
            raise FormatError(f"ModelProto.pieces[{i}]: piece of {size} bytes is too long "
                              f"(sentencepiece takes fewer than {_MAX_PIECE_BYTES})")
        if "\0" in p.piece:
            raise FormatError(f"ModelProto.pieces[{i}]: piece {p.piece!r} holds a NUL character")
        table = normal if one_map or p.type in (NORMAL, USER_DEFINED, UNUSED) else reserved
        if p.piece in table:
            raise FormatError(f"ModelProto.pieces[{i}]: piece {p.piece!r} is already defined")
        table.add(p.piece)
        if p.type == UNKNOWN:
            unk.append(i)
        if p.type == BYTE:
            if not spec.byte_fallback:
                raise FormatError(f"ModelProto.pieces[{i}]: byte piece {p.piece!r} although byte_fallback is false")
            if p.piece not in byte_names:
                raise FormatError(f"ModelProto.pieces[{i}]: byte piece {p.piece!r} is not <0xXX>")
            bytes_found.add(p.piece)
    if len(unk) != 1:
        raise FormatError(f"ModelProto has {len(unk)} UNKNOWN pieces (sentencepiece needs exactly one)")
    if spec.byte_fallback and len(bytes_found) != 256:
        raise FormatError(f"byte_fallback is true but the model has {len(bytes_found)} of the 256 byte pieces")
    if spec.model_type == UNIGRAM and not normal:
        raise FormatError("ModelProto has no NORMAL, USER_DEFINED or UNUSED piece for Unigram's trie")
    for name, normalizer in (("normalizer_spec", proto.normalizer_spec), ("denormalizer_spec", proto.denormalizer_spec)):
        if normalizer is not None and normalizer.precompiled_charsmap:
            defect = _charsmap_defect(normalizer.precompiled_charsmap)
            if defect:
                raise FormatError(f"ModelProto.{name}.precompiled_charsmap: {defect}")


@functools.lru_cache(maxsize=16)
def _charsmap_defect(blob: bytes) -> str | None:
    """Why ``normalizer.cc`` refuses a precompiled charsmap (a little-endian trie size, a
    darts-clone trie, NUL-terminated replacements), or None. The whole trie is checked, reached
    or not: every unit's 256 children inside it, every leaf flag on a value unit, every value
    inside the replacements. Remembered: models share a few charsmaps, each ~5 ms to check."""
    if len(blob) <= 4:
        return f"{len(blob)} bytes is too short for its trie size"
    (trie_size,) = struct.unpack_from("<I", blob)
    if trie_size >= len(blob) - 4:
        return f"a trie of {trie_size} bytes leaves no replacements in {len(blob)} bytes"
    if not trie_size or trie_size % 1024:
        return f"its trie of {trie_size} bytes is not whole 1024-byte blocks"
    replacements = len(blob) - 4 - trie_size
    if blob[-1]:
        return "its replacements do not end in NUL"
    units = struct.unpack_from(f"<{trie_size // 4}I", blob, 4)
    blocks = len(units) >> 8
    root = units[0]
    if root & 0x800001FF or not _unit_offset(root) or _unit_offset(root) >> 8 >= blocks:
        return "its trie's root unit is not one"
    for i, unit in enumerate(units):
        if unit >> 31:
            if unit & 0x7FFFFFFF >= replacements:
                return f"trie unit {i} points past the replacements"
            continue
        child = i ^ _unit_offset(unit)
        if child >> 8 >= blocks:
            return f"trie unit {i} has children outside the trie"
        if unit & 0x100 and not units[child] >> 31:
            return f"trie unit {i} has a leaf that is no value"
    return None


def _unit_offset(unit: int) -> int:
    return (unit >> 10) << ((unit & 0x200) >> 6)


def normalizer_config(spec: NormalizerSpec, *, treat_whitespace_as_suffix: bool = False,
                      user_defined_symbols: list[str] | None = None) -> dict[str, Any]:
    """The ``SentencePiece`` normalizer config: ``spec``'s fields as the normalizer reads them."""
    return {
        "type": "SentencePiece",
        "precompiled_charsmap": base64.b64encode(spec.precompiled_charsmap).decode("ascii") if spec.precompiled_charsmap else None,
        "add_dummy_prefix": spec.add_dummy_prefix,
        "remove_extra_whitespaces": spec.remove_extra_whitespaces,
        "escape_whitespaces": spec.escape_whitespaces,
        "treat_whitespace_as_suffix": treat_whitespace_as_suffix,
        "user_defined_symbols": list(user_defined_symbols or []),
    }


def special_ids(proto: ModelProto) -> tuple[int | None, int | None]:
    """BOS and EOS ids as ``SentencePieceProcessor.bos_id()/eos_id()`` find them: the piece named
    by ``bos_piece``/``eos_piece``, only if it is a CONTROL piece."""
    spec = proto.trainer_spec

    def control(name: str) -> int | None:
        for i, p in enumerate(proto.pieces):
            if p.piece == name and p.type == CONTROL:
                return i
        return None

    return control(spec.bos_piece or "<s>"), control(spec.eos_piece or "</s>")


def tokenizer_config(proto: ModelProto, *, add_bos: bool = False, add_eos: bool = False) -> dict[str, Any]:
    """The pipeline config for ``proto``; ``add_bos``/``add_eos`` as ``encode(add_bos=..., add_eos=...)``."""
    _check(proto)
    spec = proto.trainer_spec
    pieces = [p.piece for p in proto.pieces]
    types = [UNUSED if _null_piece(p, spec) else p.type for p in proto.pieces]
    unk_id = types.index(UNKNOWN)
    user_defined = [p for p, t in zip(pieces, types) if t == USER_DEFINED]
    denormalizer = proto.denormalizer_spec
    bos, eos = special_ids(proto)
    # ApplyExtraOptions refuses bos/eos whose piece is unknown; a non-control one is used as found
    ids_of = {p: i for i, p in reversed(list(enumerate(pieces)))}
    head, tail = [], []
    if add_bos:
        head = [_bos_eos(ids_of, spec.bos_piece or "<s>", "bos", bos, types)]
    if add_eos:
        tail = [_bos_eos(ids_of, spec.eos_piece or "</s>", "eos", eos, types)]
    return {
        "added_tokens": [],
        "normalizer": normalizer_config(
            proto.normalizer_spec, treat_whitespace_as_suffix=spec.treat_whitespace_as_suffix,
            user_defined_symbols=user_defined,
        ),
        "pre_tokenizer": None,
        "model": {
            "type": _MODEL_TYPES[spec.model_type],
            "vocab": [[p.piece, p.score] for p in proto.pieces],
            "piece_types": types,
            "unk_id": unk_id,
            "byte_fallback": spec.byte_fallback,
        },
        "decoder": {
            "type": "SentencePiece",
            "control_pieces": [p for p, t in zip(pieces, types) if t == CONTROL],
            "unk_piece": pieces[unk_id],
            "unk_surface": spec.unk_surface,
            "byte_fallback": spec.byte_fallback,
            "add_dummy_prefix": proto.normalizer_spec.add_dummy_prefix,
            "remove_extra_whitespaces": proto.normalizer_spec.remove_extra_whitespaces,
            "denormalizer": normalizer_config(denormalizer) if denormalizer is not None and denormalizer.precompiled_charsmap else None,
        },
        "post_processor": _template(head, tail, pieces),
    }


def _bos_eos(ids_of: Mapping[str, int], name: str, what: str, control: int | None, types: list[int]) -> int:
    if control is not None:
        return control
    # PieceToId looks the reserved pieces up first: a piece of that name that is not UNKNOWN
    id = ids_of.get(name)
    if id is None or types[id] == UNKNOWN:
        raise FormatError(f"add_{what}: the model has no {what} piece {name!r}")
    return id


def _template(head: list[int], tail: list[int], pieces: list[str]) -> dict[str, Any] | None:
    if not head and not tail:
        return None

    def items(ids: list[int]) -> list[dict[str, Any]]:
        return [{"SpecialToken": {"id": pieces[i], "type_id": 0}} for i in ids]

    a, b = {"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}
    return {
        "type": "TemplateProcessing",
        "single": [*items(head), a, *items(tail)],
        "pair": [*items(head), a, *items(tail), *items(head), b, *items(tail)],
        "special_tokens": {pieces[i]: {"id": pieces[i], "ids": [i], "tokens": [pieces[i]]} for i in {*head, *tail}},
    }


def read_model(
    path: str | os.PathLike[str], *, add_bos: bool | None = None, add_eos: bool | None = None
) -> Tokenizer:
    """A :class:`Tokenizer` for a SentencePiece ``.model`` (or a folder holding ``tokenizer.model``).

    ``encode(text, add_special_tokens=True)`` adds BOS/EOS as ``add_bos``/``add_eos`` say; by
    default as ``tokenizer_config.json`` beside the model says (``add_bos_token``,
    ``add_eos_token``), else neither, like ``SentencePieceProcessor.encode``. The folder's chat
    template and special-token strings are read as for ``tokenizer.json``. ``encode``,
    ``decode(..., clean_up_tokenization_spaces=False)`` and ``id_to_token`` are sentencepiece's;
    transformers' side of the API (``__call__``, ``decode``, ``len``, the vocabulary) is
    sentencepiece's for any other file name, and transformers' own for a ``tokenizer.model``
    (see :func:`_transformers_backend`).
    """
    p = Path(path)
    if p.is_dir():
        p = p / "tokenizer.model"
    if not p.is_file():
        raise FileNotFoundError(f"{p}: no such SentencePiece model")
    from .hf_json import folder_tokenizer_config

    proto = parse_model(p.read_bytes(), str(p))
    folder_config = folder_tokenizer_config(p.parent)
    if add_bos is None:
        add_bos = folder_config.get("add_bos_token") is True
    if add_eos is None:
        add_eos = folder_config.get("add_eos_token") is True
    try:
        config = tokenizer_config(proto, add_bos=add_bos, add_eos=add_eos)
    except FormatError as exc:
        raise FormatError(f"{p}: {exc}") from None
    tok = Tokenizer.from_config(config, _meta(proto, p.parent, config, folder_config))
    if p.name == "tokenizer.model":
        # what transformers loads from the folder: its side of the API follows it there
        _transformers_backend(tok, proto, folder_config)
    return tok


def _transformers_backend(tok: Tokenizer, proto: ModelProto, config: Mapping[str, Any]) -> None:
    """What transformers 5 adds to its backend for a folder holding ``tokenizer.model`` alone.

    With no tokenizer class named (its ``TokenizersBackend``), it converts the model to the
    pipeline sentencepiece runs, its control and unknown pieces special added tokens matched
    on the raw text, then adds the special tokens the configs name as for ``tokenizer.json``.
    A named class (``LlamaTokenizer``, ``T5Tokenizer``, ...) builds a pipeline of its own from
    the pieces instead, which pymtok does not model: transformers' side of the API refuses.
    """
    from .hf_json import backend_added_tokens

    name = str(config.get("tokenizer_class") or "")
    if name not in ("", "TokenizersBackend", "PreTrainedTokenizerFast") or config.get("legacy", True) is not True:
        why = f"names {name}" if config.get("legacy", True) is True else "sets legacy"
        tok.meta.backend_unmodeled = (
            f"tokenizer_config.json {why}: transformers builds its own pipeline from tokenizer.model then, "
            "which pymtok does not model; encode() gives sentencepiece's ids"
        )
        return
    spec = proto.normalizer_spec
    byte_fallback = proto.trainer_spec.byte_fallback
    tail = [{"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}] if spec.add_dummy_prefix else (
        [{"type": "Fuse"}] if byte_fallback else [])
    tok.meta.backend_decoder = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
        *([{"type": "ByteFallback"}] if byte_fallback else []), *tail]}
    tok.meta.backend_added_tokens = [
        {"id": i, "content": p.piece, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
         "special": True}
        for i, p in enumerate(proto.pieces) if p.type in (UNKNOWN, CONTROL) and i not in tok.added.by_id
    ]
    backend_tokens = [*(tok.config.get("added_tokens") or []), *tok.meta.backend_added_tokens]
    try:
        named = backend_added_tokens(tok.model, backend_tokens, config, {})
    except FormatError as exc:
        tok.meta.backend_unmodeled = str(exc)
        return
    tok.meta.backend_added_tokens = [*tok.meta.backend_added_tokens, *named]


def _meta(
    proto: ModelProto, folder: Path, config: Mapping[str, Any], tokenizer_config: Mapping[str, Any]
) -> TokenizerMeta:
    """Header lists and chat context: the control and unknown pieces are special, EOS (and the
    folder's ``generation_config.json`` ``eos_token_id``) stops, the BOS that ``add_bos`` puts
    first is the prefix; the folder's named tokens (``tokenizer_config.json``, then
    ``special_tokens_map.json``) are special too and are what a chat template sees."""
    from .hf_json import (
        config_call_settings,
        config_special_settings,
        find_chat_template,
        read_optional_json,
        special_tokens_from_config,
    )

    types = [p.type for p in proto.pieces]
    bos, eos = special_ids(proto)
    post = config.get("post_processor") or {"single": [], "special_tokens": {}}
    prefix: list[int] = []
    for item in post["single"]:
        if "SpecialToken" not in item:
            break
        prefix += post["special_tokens"][item["SpecialToken"]["id"]]["ids"]
    names = special_tokens_from_config(tokenizer_config)
    for key, id in (("bos_token", bos), ("eos_token", eos), ("unk_token", types.index(UNKNOWN))):
        if id is not None:
            names.setdefault(key, proto.pieces[id].piece)
    first_id = {p.piece: i for i, p in reversed(list(enumerate(proto.pieces)))}
    special = [i for i, t in enumerate(types) if t in (UNKNOWN, CONTROL)]
    special += [first_id[t] for t in names.values() if t in first_id and first_id[t] not in special]
    stop = [eos] if eos is not None else []
    generation_eos = read_optional_json(folder, "generation_config.json").get("eos_token_id")
    for id in generation_eos if isinstance(generation_eos, list) else [generation_eos]:
        if isinstance(id, int) and not isinstance(id, bool) and 0 <= id < len(types) and id not in stop:
            stop.append(id)
    return TokenizerMeta(
        special_ids=special,
        stop_ids=stop,
        prefix_ids=prefix,
        chat_template=find_chat_template(folder),
        special_tokens=names,
        call_settings=config_call_settings(tokenizer_config),
        **config_special_settings(tokenizer_config),
    )


# ------------------------------------------------------------------------------------------
# In a .mtok: MNN's tables hold what they can, the extension the rest
# ------------------------------------------------------------------------------------------


def bpe_merges(pieces: list[str], scores: list[float], types: list[int]) -> list[tuple[str, str]]:
    """Merges ranked so that rank-ordered BPE (MNN's, HF's) comes close to sentencepiece's BPE.

    sentencepiece merges, at each step, the adjacent pair whose concatenation is the
    highest-scoring piece (the leftmost on ties). Every way to split a piece into two pieces is
    a merge ranked by that score; equal scores fall back to id, then to the split point. Only
    the stand-in for MNN's runtime and type-0 ``.txt`` files use this: pymtok's own
    ``SentencePieceBPE`` merges by score.
    """
    symbols = {p: i for i, (p, t) in enumerate(zip(pieces, types)) if t in (NORMAL, UNUSED)}
    ranked: list[tuple[float, int, int, str, str]] = []
    for piece, i in symbols.items():
        if types[i] != NORMAL:
            continue
        for k in range(1, len(piece)):
            left, right = piece[:k], piece[k:]
            if left in symbols and right in symbols:
                ranked.append((-scores[i], i, k, left, right))
    ranked.sort()
    return [(left, right) for *_, left, right in ranked]


def mnn_bpe_table(model: Mapping[str, Any]) -> dict[str, Any]:
    """The HF BPE config that MNN's BPE section holds for a ``SentencePieceBPE`` model."""
    vocab = model["vocab"]
    pieces = [entry[0] for entry in vocab]
    ids: dict[str, int] = {}
    for i, piece in enumerate(pieces):
        if ids.setdefault(piece, i) != i:
            raise FormatError(f"SentencePieceBPE: pieces {ids[piece]} and {i} are both {piece!r}; MNN's BPE table holds one")
    return {
        "type": "BPE",
        "vocab": ids,
        "merges": bpe_merges(pieces, [float(entry[1]) for entry in vocab], list(model["piece_types"])),
        "byte_fallback": model.get("byte_fallback", False),
    }


def model_from_mtok(options: Mapping[str, Any], table: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The model config back from the extension's ``options`` and MNN's model section ``table``."""
    kind = options.get("type")
    fields = {k: v for k, v in options.items() if k != "scores"}
    if kind == "SentencePieceUnigram" and table["type"] == "Unigram":
        return {**fields, "vocab": table["vocab"]}
    if kind == "SentencePieceBPE" and table["type"] == "BPE":
        scores = options.get("scores")
        vocab = table["vocab"]
        if not isinstance(scores, list) or len(scores) != len(vocab):
            raise FormatError(f"{where}: extension: SentencePieceBPE needs one score per vocabulary entry ({len(vocab)})")
        token_of = getattr(vocab, "token_of", None)
        if token_of is None:
            by_id = {id: token for token, id in vocab.items()}
            token_of = by_id.get
        pieces = [token_of(i) for i in range(len(scores))]
        if None in pieces or not all(isinstance(s, (int, float)) and not isinstance(s, bool) for s in scores):
            raise FormatError(f"{where}: extension: SentencePieceBPE ids must be 0..{len(scores) - 1} with a number score each")
        return {**fields, "vocab": [[p, s] for p, s in zip(pieces, scores)]}
    raise FormatError(f"{where}: extension: a {kind} model cannot be read from MNN's {table['type']} section")


def mnn_normalizer(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """MNN's nearest stand-in for the ``SentencePiece`` normalizer (Llama's HF conversion)."""
    space = "\u2581" if cfg.get("escape_whitespaces") else " "
    steps: list[dict[str, Any]] = []
    if cfg.get("precompiled_charsmap"):
        steps.append({"type": "Precompiled", "precompiled_charsmap": cfg["precompiled_charsmap"]})
    if cfg.get("add_dummy_prefix") and not cfg.get("treat_whitespace_as_suffix"):
        steps.append({"type": "Prepend", "prepend": space})
    if cfg.get("escape_whitespaces"):
        steps.append({"type": "Replace", "pattern": {"String": " "}, "content": space})
    return {"type": "Sequence", "normalizers": steps}


def mnn_decoder(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """MNN's nearest stand-in for the ``SentencePiece`` decoder (Llama's HF conversion)."""
    steps: list[dict[str, Any]] = [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}]
    if cfg.get("byte_fallback"):
        steps.append({"type": "ByteFallback"})
    steps.append({"type": "Fuse"})
    if cfg.get("add_dummy_prefix") or cfg.get("remove_extra_whitespaces"):
        steps.append({"type": "Strip", "content": " ", "start": 1, "stop": 0})
    return {"type": "Sequence", "decoders": steps}
