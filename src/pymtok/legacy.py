"""MNN's legacy ``tokenizer.txt`` (types 0–3): read, write, and export from a model folder.

A ``.txt`` holds only a vocabulary (and, for type 3, merges): the algorithm that goes with each
type is ours to supply, and we supply the one of the library the vocabulary came from, not MNN's
approximation of it (``spec/BEHAVIOR.md`` §10):

| type | file body (``spec/FORMAT.md`` §6)        | pipeline built here (exact against)                          |
|------|------------------------------------------|--------------------------------------------------------------|
| 0    | base64 piece, score, SentencePiece type  | sentencepiece's normalizer, BPE or Unigram, decoder (``sentencepiece``) |
| 1    | base64 token bytes, rank = line          | regex split + byte-level BPE by rank (``tiktoken``)          |
| 2    | base64 WordPiece token                   | BERT normalizer + WordPiece (HF ``BertWordPieceTokenizer``)  |
| 3    | raw vocab lines, then ``left right`` merges | GPT-2 byte-level BPE (HF ``ByteLevelBPETokenizer``)       |

Every reader decodes the file into :class:`LegacyTxt` and builds the shared pipeline with
``Tokenizer.from_config`` from ``tokenizer.json``-shaped configs; writers go the other way.
Header prefix ids (BOS) are added by ``encode(add_special_tokens=True)`` through a
TemplateProcessing post-processor.

What a ``.txt`` cannot say, and how we fill it in:

- Type 0 stores neither the model kind nor SentencePiece's normalizer spec. The kind is read off
  the scores (SentencePiece BPE scores pieces by merge order, so every NORMAL score is a whole
  number; Unigram scores are log-probabilities); ``model_kind=`` overrides it. The default
  normalization is the identity rules of Llama-style models (a ``▁`` prefix, spaces become
  ``▁``), which is also what MNN's runtime does; for any other spec (e.g. ``nmt_nfkc`` with
  whitespace collapsing) pass ``normalizer=sentencepiece_normalizer("tokenizer.model")``, or
  better read the ``.model`` itself (``pymtok.sentencepiece.read_model``).
  :func:`sentencepiece_txt_losses` lists what a type-0 file loses of a given model.
- Type 1 stores no pre-tokenizer regex: ``pattern=`` gives it, default :data:`QWEN_PATTERN`
  (MNN's exporter writes type 1 for Qwen-1's ``mergeable_ranks``).
- Type 2 stores no casing: ``lowercase=True`` (uncased, like MNN's runtime) is the default.

>>> tok = read_txt("tokenizer.txt")                         # doctest: +SKIP
>>> tok.encode("Hello world")                                # doctest: +SKIP
[1, 15043, 3186]
"""

from __future__ import annotations

import base64
import binascii
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import regex

from .backtracking import class_end
from .byte_level import bytes_to_chars
from .errors import FormatError
from .hf_json import folder_tokenizer_config, read_optional_json, special_token_strings
from .paths import regular_file
from .sentencepiece import NormalizerSpec
from .tokenizer import Tokenizer, TokenizerMeta

__all__ = [
    "BERT", "CL100K_PATTERN", "HUGGINGFACE", "LLAMA3_PATTERN", "LegacyTxt", "O200K_PATTERN",
    "QWEN_PATTERN", "SENTENCEPIECE", "TIKTOKEN", "convert_txt_to_mtok", "export_txt", "from_bert_vocab",
    "from_sentencepiece", "from_tiktoken", "from_vocab_merges", "legacy_source", "parse_txt", "read_txt",
    "build_tokenizer", "sentencepiece_normalizer", "sentencepiece_txt_losses", "txt_losses",
]

MAGIC_NUMBER = 430
SENTENCEPIECE, TIKTOKEN, BERT, HUGGINGFACE = 0, 1, 2, 3

# SentencePiece piece types, as ModelProto numbers them and the type-0 body stores them
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6

# tiktoken's own patterns (tiktoken_ext/openai_public.py)
CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
# Qwen-1's tokenization_qwen.py PAT_STR
QWEN_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
# Meta Llama 3's tokenizer.py pat_str
LLAMA3_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

# r50k's, which tiktoken's gpt2, r50k_base and p50k_base use
R50K_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""


@dataclass(frozen=True)
class TiktokenEncoding:
    """A published tiktoken vocabulary and what its code (not its file) adds: pattern, specials, stops."""

    name: str
    pattern: str
    special_tokens: Mapping[str, int]
    stop_tokens: tuple[str, ...] = ("<|endoftext|>",)


_ENDOFTEXT, _ENDOFPROMPT = "<|endoftext|>", "<|endofprompt|>"
_FIM = ("<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>")
# sha256 of the rank-ordered "<base64> <rank>" lines (the published file, byte for byte, and what
# tiktoken's dump_tiktoken_bpe writes) -> the encoding. The four OpenAI hashes are tiktoken's own
# expected_hash values (tiktoken_ext/openai_public.py); Qwen-1's is of the qwen.tiktoken it ships.
TIKTOKEN_ENCODINGS: dict[str, TiktokenEncoding] = {
    "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930": TiktokenEncoding(
        "r50k_base (gpt2)", R50K_PATTERN, {_ENDOFTEXT: 50256}
    ),
    # p50k_edit shares this file and adds FIM tokens at 50281-50283: the file cannot tell them apart
    "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069": TiktokenEncoding(
        "p50k_base", R50K_PATTERN, {_ENDOFTEXT: 50256}
    ),
    "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7": TiktokenEncoding(
        "cl100k_base", CL100K_PATTERN,
        {_ENDOFTEXT: 100257, _FIM[0]: 100258, _FIM[1]: 100259, _FIM[2]: 100260, _ENDOFPROMPT: 100276},
    ),
    "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d": TiktokenEncoding(
        "o200k_base", O200K_PATTERN, {_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018}
    ),
    # tokenization_qwen.py: <|endoftext|>, <|im_start|>, <|im_end|>, <|extra_0..204|> from 151643
    "b2b1b8dfb5cc5f024bafc373121c6aba3f66f9a5a0269e243470a1de16a33186": TiktokenEncoding(
        "Qwen-1 (qwen.tiktoken)", QWEN_PATTERN,
        {
            t: 151643 + i
            for i, t in enumerate(["<|endoftext|>", "<|im_start|>", "<|im_end|>", *(f"<|extra_{k}|>" for k in range(205))])
        },
        stop_tokens=("<|im_end|>", "<|endoftext|>"),
    ),
}

_SPACE = "\u2581"  # SentencePiece's visible space
_UNK_SURFACE = " \u2047 "  # what sentencepiece decodes the unknown piece to (trainer default)
# what a type-0 file is read with: Llama's normalization (a ▁ prefix, spaces escaped, none removed)
_LLAMA_SPEC = NormalizerSpec(add_dummy_prefix=True, remove_extra_whitespaces=False, escape_whitespaces=True)
_BERT_SPECIALS = ("[UNK]", "[SEP]", "[CLS]", "[PAD]", "[MASK]")  # BertWordPieceTokenizer's
_MODEL_KINDS = ("bpe", "unigram")


@dataclass
class LegacyTxt:
    """The content of a ``tokenizer.txt``: header lists and the type's tables, one entry per id.

    ``tokens`` are the decoded line payloads (UTF-8 text for types 0, 2, 3; raw bytes for type 1).
    ``scores`` and ``piece_types`` exist for type 0 only, ``merges`` for type 3 only.
    """

    type: int
    tokens: list[bytes]
    special_ids: list[int] = field(default_factory=list)
    stop_ids: list[int] = field(default_factory=list)
    prefix_ids: list[int] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    piece_types: list[int] = field(default_factory=list)
    merges: list[tuple[str, str]] = field(default_factory=list)

    def to_bytes(self) -> bytes:
        """The file, as MNN's exporter lays it out (FORMAT.md §1.2, §6).

        Unlike MNN's exporter, ``▁`` stays ``▁`` in type-0 pieces (MNN's runtime needs it) and
        type-3 merges hold no ``#version`` line.
        """
        ids = self.special_ids + self.stop_ids + self.prefix_ids
        lines = [
            f"{MAGIC_NUMBER} {self.type}",
            f"{len(self.special_ids)} {len(self.stop_ids)} {len(self.prefix_ids)}",
            "".join(f"{i} " for i in ids),
        ]
        if self.type == HUGGINGFACE:
            lines.append(f"{len(self.tokens)} {len(self.merges)}")
            for i, token in enumerate(self.tokens):
                if b"\n" in token or b"\r" in token:
                    raise FormatError(f"type-3 token {i} {token!r} holds a line break the format cannot store")
                lines.append(token.decode("utf-8"))
            for left, right in self.merges:
                if " " in left or "\n" in left + right:
                    raise FormatError(f"merge ({left!r}, {right!r}) cannot be written as one 'left right' line")
                lines.append(f"{left} {right}")
        else:
            lines.append(str(len(self.tokens)))
            b64 = [base64.b64encode(t).decode("ascii") for t in self.tokens]
            if self.type == SENTENCEPIECE:
                # repr of a float32 value read back as a double is the shortest exact form
                lines += [f"{t} {s!r} {k}" for t, s, k in zip(b64, self.scores, self.piece_types)]
            else:
                lines += b64
        return ("\n".join(lines) + "\n").encode("utf-8")

    def write(self, path: str | os.PathLike[str]) -> Path:
        out = Path(path)
        out.write_bytes(self.to_bytes())
        return out


# ------------------------------------------------------------------------------------------
# Parsing
# ------------------------------------------------------------------------------------------


def parse_txt(path: str | os.PathLike[str]) -> LegacyTxt:
    """Decode a legacy ``tokenizer.txt`` into its tables; every defect names its line."""
    p = regular_file(path)
    data = p.read_bytes()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()  # the final newline ends the last line, it does not start another
    # MNN reads with getline and >>, so a CR left by CRLF line ends is harmless there too
    lines = [line[:-1] if line.endswith(b"\r") else line for line in lines]

    def fail(lineno: int, message: str) -> FormatError:
        return FormatError(f"{p}: line {lineno}: {message}")

    def ints(lineno: int, what: str, count: int | None = None) -> list[int]:
        if lineno > len(lines):
            raise fail(lineno, f"missing; expected {what}")
        fields = lines[lineno - 1].split()
        try:
            values = [int(f) for f in fields]
        except ValueError:
            raise fail(lineno, f"expected {what}, got {lines[lineno - 1][:80]!r}") from None
        if count is not None and len(values) != count:
            raise fail(lineno, f"expected {what}, got {len(values)} number(s)")
        if any(v < 0 for v in values):
            raise fail(lineno, f"expected {what}, got a negative number")
        return values

    if not lines or lines[0].split()[:1] != [str(MAGIC_NUMBER).encode()]:
        raise fail(1, f"not an MNN tokenizer file: expected '430 <type>', got {lines[0][:40] if lines else b''!r}")
    kind = ints(1, "'430 <type>'", 2)[1]
    if kind == 4:
        raise fail(1, "this is a binary .mtok (type 4); read it with pymtok.mtok.read_mtok")
    if kind not in (SENTENCEPIECE, TIKTOKEN, BERT, HUGGINGFACE):
        raise fail(1, f"unknown tokenizer type {kind} (expected 0-3)")
    n_special, n_stop, n_prefix = ints(2, "'<special> <stop> <prefix>' counts", 3)
    header_ids = ints(3, f"{n_special + n_stop + n_prefix} header ids", n_special + n_stop + n_prefix)
    legacy = LegacyTxt(
        type=kind,
        tokens=[],
        special_ids=header_ids[:n_special],
        stop_ids=header_ids[n_special : n_special + n_stop],
        prefix_ids=header_ids[n_special + n_stop :],
    )
    if kind == HUGGINGFACE:
        n_vocab, n_merges = ints(4, "'<vocab size> <merge count>'", 2)
    else:
        (n_vocab,) = ints(4, "the vocabulary size", 1)
        n_merges = 0
    body = 5
    if len(lines) < body - 1 + n_vocab + n_merges:
        raise fail(len(lines) + 1, f"file ends after {len(lines) - 4} of {n_vocab + n_merges} body lines")

    def b64(lineno: int, text: bytes) -> bytes:
        try:
            return base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise fail(lineno, f"bad base64 {text[:80]!r}") from None

    for i in range(n_vocab):
        lineno = body + i
        line = lines[lineno - 1]
        if kind == SENTENCEPIECE:
            fields = line.split(b" ")
            if len(fields) != 3:
                raise fail(lineno, f"expected '<base64 piece> <score> <type>', got {line[:80]!r}")
            piece = b64(lineno, fields[0])
            try:
                score = float(fields[1])
            except ValueError:
                raise fail(lineno, f"score {fields[1][:40]!r} is not a number") from None
            if math.isnan(score):
                raise fail(lineno, "score is NaN")
            if fields[2] not in (b"1", b"2", b"3", b"4", b"5", b"6"):
                raise fail(lineno, f"piece type {fields[2][:20]!r} is not 1-6")
            legacy.tokens.append(piece)
            legacy.scores.append(score)
            legacy.piece_types.append(int(fields[2]))
        elif kind == HUGGINGFACE:
            legacy.tokens.append(line)
        else:
            legacy.tokens.append(b64(lineno, line))
        if kind != TIKTOKEN:
            _utf8(legacy.tokens[-1], lambda m, n=lineno: fail(n, m))
    for i in range(n_merges):
        lineno = body + n_vocab + i
        line = _utf8(lines[lineno - 1], lambda m, n=lineno: fail(n, m))
        if line.startswith("#version"):
            continue  # MNN's exporter copies merges.txt's comment line; it is no merge
        left, sep, right = line.partition(" ")
        if not sep or not left or not right:
            raise fail(lineno, f"expected a merge '<left> <right>', got {line[:80]!r}")
        legacy.merges.append((left, right))
    return legacy


def _utf8(data: bytes, fail: Callable[[str], FormatError]) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise fail(f"token is not UTF-8 (byte {exc.start})") from None


# ------------------------------------------------------------------------------------------
# Building the pipeline
# ------------------------------------------------------------------------------------------


def read_txt(
    path: str | os.PathLike[str],
    *,
    pattern: str | None = None,
    model_kind: str | None = None,
    lowercase: bool = True,
    normalizer: Mapping[str, Any] | None = None,
) -> Tokenizer:
    """Load a legacy ``tokenizer.txt`` as a :class:`Tokenizer`.

    ``pattern``: type 1's pre-tokenizer regex (default :data:`QWEN_PATTERN`).
    ``model_kind``: type 0's algorithm, ``"bpe"`` or ``"unigram"`` (default: read off the scores).
    ``lowercase``: type 2's casing (default uncased; accents are stripped with the case).
    ``normalizer``: type 0's normalizer config, replacing the Llama-style default
    (see :func:`sentencepiece_normalizer`).
    """
    legacy = parse_txt(path)
    try:
        return build_tokenizer(
            legacy, pattern=pattern, model_kind=model_kind, lowercase=lowercase, normalizer=normalizer
        )
    except FormatError as exc:
        raise FormatError(f"{path}: {exc}") from None


def build_tokenizer(
    legacy: LegacyTxt,
    *,
    pattern: str | None = None,
    model_kind: str | None = None,
    lowercase: bool = True,
    normalizer: Mapping[str, Any] | None = None,
) -> Tokenizer:
    """The pipeline for ``legacy``'s tables (options as in :func:`read_txt`)."""
    if pattern is not None and legacy.type != TIKTOKEN:
        raise ValueError("pattern= applies to type 1 (tiktoken) files only")
    if (model_kind is not None or normalizer is not None) and legacy.type != SENTENCEPIECE:
        raise ValueError("model_kind= and normalizer= apply to type 0 (SentencePiece) files only")
    if model_kind is not None and model_kind not in _MODEL_KINDS:
        raise ValueError(f"model_kind must be one of {_MODEL_KINDS}, got {model_kind!r}")
    n = len(legacy.tokens)
    for what, ids in (("special", legacy.special_ids), ("stop", legacy.stop_ids), ("prefix", legacy.prefix_ids)):
        bad = [i for i in ids if i >= n]
        if bad:
            raise FormatError(f"header {what} ids {bad[:5]} are outside the vocabulary of {n} tokens")
    if legacy.type == SENTENCEPIECE:
        config = _sentencepiece_config(legacy, model_kind, normalizer)
    elif legacy.type == TIKTOKEN:
        config = _tiktoken_config(legacy, QWEN_PATTERN if pattern is None else pattern)
    elif legacy.type == BERT:
        config = _bert_config(legacy, lowercase)
    else:
        config = _bpe_config(legacy)
    meta = TokenizerMeta(
        special_ids=list(legacy.special_ids), stop_ids=list(legacy.stop_ids), prefix_ids=list(legacy.prefix_ids)
    )
    return Tokenizer.from_config(config, meta)


def _texts(legacy: LegacyTxt) -> list[str]:
    return [t.decode("utf-8") for t in legacy.tokens]


def _prefix_processor(prefix_ids: list[int], token_of: Sequence[str]) -> dict[str, Any] | None:
    """A TemplateProcessing that puts the header's prefix ids before every sequence."""
    if not prefix_ids:
        return None
    names = [token_of[i] for i in prefix_ids]
    special = {name: {"id": name, "ids": [i], "tokens": [name]} for name, i in zip(names, prefix_ids)}
    if len(special) != len(prefix_ids):
        # two prefix ids with the same text: one entry naming both ids in order
        name = "".join(names)
        special = {name: {"id": name, "ids": list(prefix_ids), "tokens": names}}
        names = [name]
    head = [{"SpecialToken": {"id": name, "type_id": 0}} for name in names]
    return {
        "type": "TemplateProcessing",
        "single": [*head, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [*head, {"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": special,
    }


def _added_specials(legacy: LegacyTxt, token_of: Sequence[str]) -> list[dict[str, Any]]:
    """Header special ids as HF special added tokens (matched in raw text, skippable in decode)."""
    return [
        {"id": i, "content": token_of[i], "special": True, "single_word": False, "lstrip": False,
         "rstrip": False, "normalized": False}
        for i in dict.fromkeys(legacy.special_ids)
        if token_of[i]
    ]


# -- type 0 --------------------------------------------------------------------------------


def _sentencepiece_pieces(legacy: LegacyTxt) -> list[str]:
    pieces = _texts(legacy)
    # MNN's exporter turns every ▁ into a space (FORMAT.md §6.2). SentencePiece escapes spaces,
    # so a real piece never holds one: spaces without any ▁ mean such a file.
    if any(" " in p for p in pieces) and not any(_SPACE in p for p in pieces):
        pieces = [p.replace(" ", _SPACE) for p in pieces]
    return pieces


def _detect_kind(legacy: LegacyTxt) -> str:
    # SentencePiece's BPE trainer scores piece k by -k (whole numbers); Unigram scores are
    # log-probabilities, which are never all whole.
    normal = [s for s, t in zip(legacy.scores, legacy.piece_types) if t == NORMAL]
    return "bpe" if all(s == int(s) for s in normal if math.isfinite(s)) else "unigram"


def _sentencepiece_config(
    legacy: LegacyTxt, model_kind: str | None, normalizer: Mapping[str, Any] | None
) -> dict[str, Any]:
    from .sentencepiece import normalizer_config

    pieces = _sentencepiece_pieces(legacy)
    types = legacy.piece_types
    kind = model_kind or _detect_kind(legacy)
    unknown = [i for i, t in enumerate(types) if t == UNKNOWN]
    if not unknown:
        raise FormatError("type-0 vocabulary has no UNKNOWN (type 2) piece")
    unk_id = unknown[-1]  # as MNN's loader: the last one wins
    if normalizer is None:
        # the identity rules of Llama-style models: a ▁ prefix, every space a ▁, nothing collapsed
        normalizer = normalizer_config(
            _LLAMA_SPEC, user_defined_symbols=[p for p, t in zip(pieces, types) if t == USER_DEFINED]
        )
    spec = dict(normalizer)
    add_dummy_prefix = spec.get("add_dummy_prefix", True) if spec.get("type") == "SentencePiece" else True
    remove_extra = spec.get("remove_extra_whitespaces", False) if spec.get("type") == "SentencePiece" else False
    return {
        "added_tokens": [],
        "normalizer": spec,
        "pre_tokenizer": None,
        "model": {
            "type": "SentencePieceUnigram" if kind == "unigram" else "SentencePieceBPE",
            "vocab": [[p, s] for p, s in zip(pieces, legacy.scores)],
            "piece_types": list(types),
            "unk_id": unk_id,
            "byte_fallback": BYTE in types,
        },
        "decoder": {
            "type": "SentencePiece",
            "control_pieces": [p for p, t in zip(pieces, types) if t == CONTROL],
            "unk_piece": pieces[unk_id],
            "unk_surface": _UNK_SURFACE,
            "byte_fallback": BYTE in types,
            "add_dummy_prefix": add_dummy_prefix,
            "remove_extra_whitespaces": remove_extra,
            "denormalizer": None,
        },
        "post_processor": _prefix_processor(legacy.prefix_ids, pieces),
    }


def _first_ids(tokens: Sequence[str]) -> dict[str, int]:
    vocab: dict[str, int] = {}
    for i, token in enumerate(tokens):
        vocab.setdefault(token, i)  # a duplicated token keeps its first id, as MNN's loader
    return vocab


def _bpe_model(
    tokens: Sequence[str],
    merges: list[Any],
    *,
    unk_token: str | None = None,
    fuse_unk: bool = False,
    byte_fallback: bool = False,
    ignore_merges: bool = False,
) -> dict[str, Any]:
    """HF's BPE ``model`` config, every field spelled out as tokenizer.json has it."""
    return {
        "type": "BPE",
        "vocab": _first_ids(tokens),
        "merges": merges,
        "dropout": None,
        "unk_token": unk_token,
        "continuing_subword_prefix": None,
        "end_of_word_suffix": None,
        "fuse_unk": fuse_unk,
        "byte_fallback": byte_fallback,
        "ignore_merges": ignore_merges,
    }


def sentencepiece_normalizer(model_file: str | os.PathLike[str]) -> dict[str, Any]:
    """The normalizer config of a SentencePiece ``.model`` (its ``NormalizerSpec``, the trainer's
    ``treat_whitespace_as_suffix`` and its user-defined pieces), to read a type-0 file with."""
    from .sentencepiece import normalizer_config

    proto = _model_proto(Path(model_file))
    return normalizer_config(
        proto.normalizer_spec, treat_whitespace_as_suffix=proto.trainer_spec.treat_whitespace_as_suffix,
        user_defined_symbols=[p.piece for p in proto.pieces if p.type == USER_DEFINED],
    )


def txt_losses(path: str | os.PathLike[str]) -> list[str]:
    """What a ``tokenizer.txt`` does not hold, for ``pymtok info``: for type 0 beside the
    ``tokenizer.model`` it was exported from, exactly what differs from that model (see
    :func:`sentencepiece_txt_losses`); otherwise what the reader had to assume."""
    p = Path(path)
    legacy = parse_txt(p)
    if legacy.type == TIKTOKEN:
        return ["split pattern not stored: read with Qwen's (read_txt(path, pattern=...) for another encoding's)"]
    if legacy.type == BERT:
        return ["casing not stored: read as uncased, accents stripped (read_txt(path, lowercase=False) for a cased vocabulary)"]
    if legacy.type != SENTENCEPIECE:
        return []
    model = p.parent / "tokenizer.model"
    if model.is_file():
        return sentencepiece_txt_losses(model)
    return [
        "normalizer spec not stored: read as add_dummy_prefix=true, remove_extra_whitespaces=false, "
        "escape_whitespaces=true, no precompiled charsmap, treat_whitespace_as_suffix=false",
        f"model kind not stored: read off the scores as {_detect_kind(legacy)}",
        f"unk_surface not stored: read as {_UNK_SURFACE!r}",
    ]


def normalizer_from_spec(
    *, precompiled_charsmap: bytes, remove_extra_whitespaces: bool, add_dummy_prefix: bool, escape_whitespaces: bool
) -> dict[str, Any]:
    """The SentencePiece normalizer config for a normalizer spec's fields given one by one (a
    GGUF file carries them as keys)."""
    from .sentencepiece import normalizer_config

    return normalizer_config(
        NormalizerSpec(
            precompiled_charsmap=precompiled_charsmap, add_dummy_prefix=add_dummy_prefix,
            remove_extra_whitespaces=remove_extra_whitespaces, escape_whitespaces=escape_whitespaces,
        )
    )


# -- type 1 --------------------------------------------------------------------------------


def _one_letter_property(m: regex.Match[str]) -> str:
    return f"\\{m[1]}{{{m[2]}}}" if m[1] else m[0]


def oniguruma_pattern(pattern: str) -> str:
    r"""A tiktoken pattern (fancy-regex: Perl's quantifiers) in the Oniguruma syntax tokenizer.json
    holds and the rest of pymtok, HF and MNN read. Where the two differ: a possessive interval
    ``x{1,3}+`` is ``(?>x{1,3})`` (Ruby's syntax reads ``x{1,3}+`` as ``(?:x{1,3})+``), or just
    ``x{1,3}`` at the end of a branch of the whole pattern, where nothing is left to backtrack
    into it (cl100k's ``\p{N}{1,3}+``); a lazy exact interval ``x{2}?`` is ``x{2}``; ``\pL`` is
    ``\p{L}``."""
    out: list[str] = []
    opened: list[int] = []
    atom: int | None = None
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            kind = pattern[i + 1 : i + 2]
            j = i + 2
            if kind in ("p", "P", "x") and pattern.startswith("{", j):
                j = pattern.find("}", j) + 1 or len(pattern)
                piece = pattern[i:j]
            elif kind in ("p", "P") and j < len(pattern):
                piece = f"\\{kind}{{{pattern[j]}}}"
                j += 1
            else:
                piece = pattern[i:j]
            atom = len(out)
            out.append(piece)
            i = j
            continue
        if c == "[":
            j = class_end(pattern, i)
            if j < 0:
                raise FormatError(f"tiktoken pattern {pattern!r}: unterminated character class")
            atom = len(out)
            out.append(regex.sub(r"\\([pP])([^{])|\\.", _one_letter_property, pattern[i:j]))
            i = j
            continue
        interval = regex.match(r"\{\d+(,\d*)?\}", pattern[i:]) if c == "{" else None
        if interval and atom is not None:
            quantifier, after = interval.group(), i + interval.end()
            suffix = pattern[after : after + 1]
            if suffix == "+":
                if not opened and pattern[after + 1 : after + 2] in ("", "|"):
                    out.append(quantifier)
                else:
                    out[atom:] = ["(?>" + "".join(out[atom:]) + quantifier + ")"]
                after += 1
            elif suffix == "?" and "," not in quantifier:
                out.append(quantifier)
                after += 1
            else:
                out.append(quantifier)
            atom = None
            i = after
            continue
        if c == "(":
            opened.append(len(out))
            atom = None
        elif c == ")":
            atom = opened.pop() if opened else None
        elif c in "|*+?":
            atom = None
        else:
            atom = len(out)
        out.append(c)
        i += 1
    return "".join(out)


def _tiktoken_pre_tokenizer(pattern: str) -> dict[str, Any]:
    """tiktoken's split by ``pattern``, then its byte-level mapping, as HF steps. tiktoken encodes
    the pattern's matches alone, dropping the text between them (none for the published patterns,
    which match every character): the matches kept, the rest removed."""
    return {
        "type": "Sequence",
        "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": oniguruma_pattern(pattern)}, "behavior": "Removed",
             "invert": True},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        ],
    }


def _tiktoken_config(legacy: LegacyTxt, pattern: str) -> dict[str, Any]:
    special = set(legacy.special_ids)
    token_of: list[str] = []
    for i, raw in enumerate(legacy.tokens):
        if i in special:
            # matched as added tokens on the raw text: their vocabulary key is their text
            token_of.append(raw.decode("utf-8", errors="replace"))
        else:
            token_of.append(bytes_to_chars(raw))
    ranks = {raw: i for i, raw in reversed(list(enumerate(legacy.tokens))) if i not in special}
    return {
        "added_tokens": _added_specials(legacy, token_of),
        "normalizer": None,
        "pre_tokenizer": _tiktoken_pre_tokenizer(pattern),
        "model": _bpe_model(
            token_of,
            [(bytes_to_chars(a), bytes_to_chars(b)) for a, b in _merges_by_rank(ranks)],
            # tiktoken takes a piece that is itself a token whole, before any merging
            ignore_merges=True,
        ),
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        "post_processor": _prefix_processor(legacy.prefix_ids, token_of),
    }


def _merges_by_rank(ranks: Mapping[bytes, int]) -> list[tuple[bytes, bytes]]:
    """The merge list that makes rank-ordered BPE replay tiktoken.

    tiktoken merges the adjacent pair whose concatenation has the lowest rank. Each token's
    merge is the last step of that procedure run on the token alone with lower ranks only (as
    HF's tiktoken converter does); tokens that lower ranks cannot build get no merge.
    """
    merges: list[tuple[int, bytes, bytes]] = []
    for token, rank in ranks.items():
        if len(token) < 2:
            continue
        parts = [token[i : i + 1] for i in range(len(token))]
        while len(parts) > 2:
            best, at = rank, -1
            for i in range(len(parts) - 1):
                r = ranks.get(parts[i] + parts[i + 1])
                if r is not None and r < best:
                    best, at = r, i
            if at < 0:
                break
            parts[at : at + 2] = [parts[at] + parts[at + 1]]
        if len(parts) == 2 and parts[0] in ranks and parts[1] in ranks:
            merges.append((rank, parts[0], parts[1]))
    merges.sort()
    return [(a, b) for _, a, b in merges]


# -- type 2 --------------------------------------------------------------------------------


def _bert_config(legacy: LegacyTxt, lowercase: bool) -> dict[str, Any]:
    tokens = _texts(legacy)
    vocab = _first_ids(tokens)
    if "[UNK]" not in vocab:
        raise FormatError("type-2 vocabulary has no [UNK] token")
    return {
        "added_tokens": _added_specials(legacy, tokens),
        "normalizer": {
            "type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
            "strip_accents": None, "lowercase": lowercase,
        },
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "model": {
            "type": "WordPiece", "vocab": vocab, "unk_token": "[UNK]",
            "continuing_subword_prefix": "##", "max_input_chars_per_word": 100,
        },
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "post_processor": _prefix_processor(legacy.prefix_ids, tokens),
    }


# -- type 3 --------------------------------------------------------------------------------


def _bpe_config(legacy: LegacyTxt) -> dict[str, Any]:
    tokens = _texts(legacy)
    return {
        "added_tokens": _added_specials(legacy, tokens),
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "model": _bpe_model(tokens, list(legacy.merges)),
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": _prefix_processor(legacy.prefix_ids, tokens),
    }


# ------------------------------------------------------------------------------------------
# From the files models ship with
# ------------------------------------------------------------------------------------------


def _model_proto(path: Path) -> Any:
    from .sentencepiece import parse_model

    proto = parse_model(path.read_bytes(), str(path))
    if not proto.pieces:
        raise FormatError(f"{path}: SentencePiece model has no pieces")
    return proto


def from_sentencepiece(model_file: str | os.PathLike[str], *, add_bos: bool = False) -> LegacyTxt:
    """Type 0 from a SentencePiece ``.model``: pieces, scores and types in id order.

    Special ids are the control and unknown pieces, stop id the EOS piece, prefix the BOS piece
    when ``add_bos`` (the model's ``tokenizer_config.json`` says whether it wants one).
    """
    path = Path(model_file)
    proto = _model_proto(path)
    legacy = LegacyTxt(type=SENTENCEPIECE, tokens=[])
    for piece in proto.pieces:
        legacy.tokens.append(piece.piece.encode("utf-8"))
        legacy.scores.append(piece.score)
        legacy.piece_types.append(piece.type)
    legacy.special_ids = [i for i, t in enumerate(legacy.piece_types) if t in (UNKNOWN, CONTROL)]
    spec = proto.trainer_spec
    if 0 <= spec.eos_id < len(legacy.tokens):
        legacy.stop_ids = [spec.eos_id]
    if add_bos and 0 <= spec.bos_id < len(legacy.tokens):
        legacy.prefix_ids = [spec.bos_id]
    return legacy


def sentencepiece_txt_losses(model_file: str | os.PathLike[str], *, add_eos: bool = False) -> list[str]:
    """What a type-0 ``tokenizer.txt`` written from ``model_file`` loses: every setting of the
    model that differs from what a type-0 reader has to assume (``read_txt``'s defaults)."""
    path = Path(model_file)
    proto = _model_proto(path)
    legacy = from_sentencepiece(path)
    norm, trainer = proto.normalizer_spec, proto.trainer_spec
    lost: list[str] = []
    if norm.precompiled_charsmap:
        lost.append(f"normalizer: the precompiled charsmap ({norm.name or 'unnamed'} rules) is dropped")
    for name, assumed in (("add_dummy_prefix", True), ("remove_extra_whitespaces", False), ("escape_whitespaces", True)):
        if getattr(norm, name) != assumed:
            lost.append(f"normalizer: {name}={str(getattr(norm, name)).lower()} is read back as {str(assumed).lower()}")
    if trainer.treat_whitespace_as_suffix:
        lost.append("normalizer: treat_whitespace_as_suffix=true is read back as false")
    detected = "bpe" if _detect_kind(legacy) == "bpe" else "unigram"
    actual = {1: "unigram", 2: "bpe"}.get(trainer.model_type)
    if detected != actual:
        lost.append(f"model: a {actual} model whose scores read back as {detected}")
    if trainer.unk_surface != _UNK_SURFACE:
        lost.append(f"decoder: unk_surface {trainer.unk_surface!r} is read back as {_UNK_SURFACE!r}")
    if proto.denormalizer_spec is not None and proto.denormalizer_spec.precompiled_charsmap:
        lost.append("decoder: the denormalizer's charsmap is dropped")
    if add_eos:
        lost.append("post-processor: the EOS id appended by add_eos (a .txt has only prefix ids)")
    return lost


def from_tiktoken(path: str | os.PathLike[str]) -> LegacyTxt:
    """Type 1 from a ``.tiktoken`` file (``<base64 token> <rank>`` lines, ranks 0..n-1).

    A ``.tiktoken`` file holds no special tokens (their ids live in the model's code).
    """
    p = Path(path)
    by_rank = {rank: token for token, rank in read_tiktoken_ranks(p).items()}
    tokens = [by_rank.get(i) for i in range(len(by_rank))]
    if None in tokens:
        raise FormatError(f"{p}: ranks are not 0..{len(by_rank) - 1} (a .txt stores rank as line index)")
    return LegacyTxt(type=TIKTOKEN, tokens=[t for t in tokens if t is not None])


def from_bert_vocab(vocab_file: str | os.PathLike[str]) -> LegacyTxt:
    """Type 2 from a BERT ``vocab.txt`` (one token per line, line index = id)."""
    p = Path(vocab_file)
    try:
        tokens = p.read_text(encoding="utf-8").split("\n")
    except UnicodeDecodeError as exc:
        raise FormatError(f"{p}: not UTF-8 (byte {exc.start})") from None
    if tokens and tokens[-1] == "":
        tokens.pop()
    tokens = [t[:-1] if t.endswith("\r") else t for t in tokens]
    legacy = LegacyTxt(type=BERT, tokens=[t.encode("utf-8") for t in tokens])
    legacy.special_ids = [tokens.index(t) for t in _BERT_SPECIALS if t in tokens]
    return legacy


def from_vocab_merges(vocab_json: str | os.PathLike[str], merges_txt: str | os.PathLike[str]) -> LegacyTxt:
    """Type 3 from GPT-2-style ``vocab.json`` + ``merges.txt``."""
    from .hf_json import read_json

    vocab = read_json(Path(vocab_json), "vocab.json")
    if not isinstance(vocab, dict) or not all(isinstance(v, int) for v in vocab.values()):
        raise FormatError(f"{vocab_json}: expected an object of token -> id")
    by_id: dict[int, str] = {}
    for token, id in vocab.items():
        by_id.setdefault(id, token)
    # ids missing from vocab.json are filled as MNN's exporter does
    tokens = [by_id.get(i, "<unk>") for i in range(max(by_id, default=-1) + 1)]
    legacy = LegacyTxt(type=HUGGINGFACE, tokens=[t.encode("utf-8") for t in tokens])
    p = Path(merges_txt)
    for lineno, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
        if not line or line.startswith("#version"):
            continue
        left, sep, right = line.partition(" ")
        if not sep:
            raise FormatError(f"{p}: line {lineno}: expected '<left> <right>', got {line[:80]!r}")
        legacy.merges.append((left, right))
    return legacy


def legacy_source(model_dir: str | os.PathLike[str]) -> LegacyTxt:
    """The ``tokenizer.txt`` content for a model folder, its type chosen as MNN's exporter does.

    In MNN's order (FORMAT.md §6): a SentencePiece ``tokenizer.model`` (or ``ice_text.model``)
    gives type 0, a ``*.tiktoken`` file type 1, ``merges.txt`` (with ``vocab.json``) type 3, and a
    BERT ``vocab.txt`` type 2. Special/stop ids come from ``tokenizer_config.json`` where it
    names them; a type-0 prefix is ``[BOS]`` when it says ``add_bos_token``.
    """
    src = Path(model_dir)
    if not src.is_dir():
        raise FileNotFoundError(f"{src}: no such model folder")
    config = read_optional_json(src, "tokenizer_config.json")
    sp_model = next((src / n for n in ("tokenizer.model", "ice_text.model") if (src / n).is_file()), None)
    tiktoken_files = sorted(src.glob("*.tiktoken"))
    if sp_model is not None:
        legacy = from_sentencepiece(sp_model, add_bos=config.get("add_bos_token") is True)
    elif tiktoken_files:
        legacy = from_tiktoken(tiktoken_files[0])
    elif (src / "merges.txt").is_file():
        if not (src / "vocab.json").is_file():
            raise FormatError(f"{src}: merges.txt without vocab.json")
        legacy = from_vocab_merges(src / "vocab.json", src / "merges.txt")
    elif (src / "vocab.txt").is_file():
        legacy = from_bert_vocab(src / "vocab.txt")
    else:
        raise FormatError(
            f"{src}: nothing to export as tokenizer.txt (no tokenizer.model, *.tiktoken, merges.txt + "
            "vocab.json or vocab.txt, the files MNN's legacy types are made from; a tokenizer.json alone "
            "exports as .mtok)"
        )
    if legacy.type != SENTENCEPIECE:
        _header_from_config(legacy, config)
    return legacy


def export_txt(model_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str]) -> Path:
    """Write ``out_dir/tokenizer.txt`` for a model folder (the content :func:`legacy_source` picks)."""
    legacy = legacy_source(model_dir)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return legacy.write(out / "tokenizer.txt")


def _header_from_config(legacy: LegacyTxt, config: Mapping[str, Any]) -> None:
    """Special and stop ids named by ``tokenizer_config.json`` (MNN asks ``transformers``)."""
    named = special_token_strings(config)
    decoded = (config.get("added_tokens_decoder") or {}).values()
    strings = [*named.values(), *(t.get("content") for t in decoded if isinstance(t, Mapping))]
    lookup = {t: i for i, t in reversed(list(enumerate(legacy.tokens)))}
    for text in strings:
        id = lookup.get(text.encode("utf-8")) if isinstance(text, str) else None
        if id is not None and id not in legacy.special_ids:
            legacy.special_ids.append(id)
    eos = named.get("eos_token")
    if eos is not None and eos.encode("utf-8") in lookup:
        legacy.stop_ids = [lookup[eos.encode("utf-8")]]


# ------------------------------------------------------------------------------------------
# To .mtok
# ------------------------------------------------------------------------------------------


def convert_txt_to_mtok(path: str | os.PathLike[str], out_dir: str | os.PathLike[str], **options: Any) -> Path:
    """Write ``out_dir/tokenizer.mtok`` for a legacy ``tokenizer.txt`` (``options`` as :func:`read_txt`'s).

    Nothing is lost: MNN's tables hold the vocabulary (and merges) and the exactness extension
    the pipeline built for the file, SentencePiece's components included.
    """
    from .mtok import write_mtok

    tok = read_txt(path, **options)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return write_mtok(tok, out / "tokenizer.mtok")



# ------------------------------------------------------------------------------------------
# Sources loaded directly: a .tiktoken file, a BERT vocab.txt, GPT-2's vocab.json + merges.txt
# ------------------------------------------------------------------------------------------


def read_tiktoken_ranks(path: str | os.PathLike[str]) -> dict[bytes, int]:
    """A ``.tiktoken`` file's ``<base64 token> <rank>`` lines; every defect names its line."""
    p = Path(path)
    ranks: dict[bytes, int] = {}
    seen: set[int] = set()
    for lineno, line in enumerate(p.read_bytes().splitlines(), 1):
        if not line:
            continue
        fields = line.split()
        if len(fields) != 2:
            raise FormatError(f"{p}: line {lineno}: expected '<base64 token> <rank>', got {line[:80]!r}")
        try:
            token = base64.b64decode(fields[0], validate=True)
            rank = int(fields[1])
        except (binascii.Error, ValueError):
            raise FormatError(f"{p}: line {lineno}: expected '<base64 token> <rank>', got {line[:80]!r}") from None
        if rank < 0 or rank in seen:
            raise FormatError(f"{p}: line {lineno}: rank {rank} is negative or appears twice")
        if token in ranks:
            raise FormatError(f"{p}: line {lineno}: token {token!r} appears twice")
        if not token:
            raise FormatError(f"{p}: line {lineno}: empty token")
        seen.add(rank)
        ranks[token] = rank
    if not ranks:
        raise FormatError(f"{p}: no tokens")
    # the file bounds the ranks: a forged rank must not make the id table huge
    if max(seen) > 4 * len(ranks) + 1024:
        raise FormatError(f"{p}: rank {max(seen)} is far beyond the {len(ranks)} tokens")
    return ranks


def tiktoken_digest(ranks: Mapping[bytes, int]) -> str:
    """sha256 of the ranks in tiktoken's own file layout: the key of :data:`TIKTOKEN_ENCODINGS`."""
    import hashlib

    digest = hashlib.sha256()
    for token, rank in sorted(ranks.items(), key=lambda item: item[1]):
        digest.update(base64.b64encode(token) + b" " + str(rank).encode("ascii") + b"\n")
    return digest.hexdigest()


def load_tiktoken(
    path: str | os.PathLike[str],
    *,
    pattern: str | None = None,
    special_tokens: Mapping[str, int] | None = None,
) -> Tokenizer:
    """A ``.tiktoken`` file as tiktoken encodes with it.

    The file holds only the ranks; the split pattern and special tokens live in the code of the
    encoding. A published encoding (r50k/gpt2, p50k, cl100k, o200k, Qwen-1's) is recognised from
    the ranks themselves and gets its own; ``pattern=`` and ``special_tokens=`` override them.
    For an unknown vocabulary without ``pattern=``, cl100k's pattern and no special tokens are
    assumed, with a warning saying so.
    """
    import warnings

    p = Path(path)
    ranks = read_tiktoken_ranks(p)
    encoding = TIKTOKEN_ENCODINGS.get(tiktoken_digest(ranks))
    notes: list[str] = []
    if encoding is not None:
        notes.append(f"tiktoken encoding {encoding.name}, recognised from the vocabulary")
    if pattern is None:
        if encoding is not None:
            pattern = encoding.pattern
        else:
            pattern = CL100K_PATTERN
            message = (
                f"{p}: not a published tiktoken vocabulary; assuming cl100k_base's split pattern and no "
                "special tokens (pass pattern= and special_tokens= to say what the model uses)"
            )
            warnings.warn(message, stacklevel=2)
            notes.append(message)
    if special_tokens is None:
        special_tokens = encoding.special_tokens if encoding is not None else {}
    stops = encoding.stop_tokens if encoding is not None else ()
    by_rank = {rank: token for token, rank in ranks.items()}
    for text, id in special_tokens.items():
        if id in by_rank:
            raise FormatError(f"{p}: special token {text!r} has id {id}, which is a rank of the vocabulary")
    vocab = {bytes_to_chars(token): rank for token, rank in ranks.items()}
    merges = [[bytes_to_chars(a), bytes_to_chars(b)] for a, b in _merges_by_rank(ranks)]
    model = _bpe_model([], merges, ignore_merges=True)  # tiktoken takes a piece that is a token whole
    model["vocab"] = {**vocab, **special_tokens}
    config = {
        "added_tokens": [
            {"id": id, "content": text, "special": True, "single_word": False, "lstrip": False,
             "rstrip": False, "normalized": False}
            for text, id in sorted(special_tokens.items(), key=lambda item: item[1])
        ],
        "normalizer": None,
        "pre_tokenizer": _tiktoken_pre_tokenizer(pattern),
        "model": model,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        "post_processor": None,
    }
    tok = _from_source_config(config, p)
    # the encoding's own end-of-text tokens first, then any the configs beside the file name
    own_stops = [special_tokens[t] for t in stops if t in special_tokens]
    tok.meta.stop_ids = list(dict.fromkeys([*own_stops, *tok.meta.stop_ids]))
    tok.meta.source_notes = notes
    return tok


def _from_source_config(config: dict[str, Any], path: Path) -> Tokenizer:
    from .hf_json import folder_meta

    try:
        tok = Tokenizer.from_config(config)
    except FormatError as exc:
        raise FormatError(f"{path}: {exc}") from None
    tok.meta = folder_meta(tok, path.parent)
    return tok


def is_cased_vocabulary(tokens: Iterable[str]) -> bool:
    """Whether a WordPiece vocabulary keeps case: an uncased one was lowercased before training.

    Bracketed specials (``[CLS]``, ``[unused0]``) are not words and do not count.
    """
    return any(t.lower() != t for t in tokens if not (t.startswith("[") and t.endswith("]")))


def load_bert_vocab(vocab_file: str | os.PathLike[str], *, lowercase: bool | None = None) -> Tokenizer:
    """A BERT ``vocab.txt`` as HF's ``BertWordPieceTokenizer`` (or the model's BertTokenizer) runs it.

    Casing: ``lowercase=`` when given, else ``tokenizer_config.json``'s ``do_lower_case`` beside
    the file, else read off the vocabulary (any uppercase word means cased). ``strip_accents``
    and ``tokenize_chinese_chars`` come from the config too. ``[CLS] … [SEP]`` wrap each
    sequence when both tokens are in the vocabulary.
    """
    p = Path(vocab_file)
    legacy = from_bert_vocab(p)
    tokens = _texts(legacy)
    cfg = folder_tokenizer_config(p.parent)
    if lowercase is not None:
        how = "lowercase= given"
    elif isinstance(cfg.get("do_lower_case"), bool):
        lowercase, how = cfg["do_lower_case"], "tokenizer_config.json's do_lower_case"
    else:
        lowercase = not is_cased_vocabulary(tokens)
        how = "read off the vocabulary: " + ("no uppercase words" if lowercase else "it has uppercase words")
    named = special_token_strings(cfg)
    config = _bert_config(legacy, lowercase)
    unk = named.get("unk_token", "[UNK]")
    if unk not in config["model"]["vocab"]:
        raise FormatError(f"{p}: the unknown token {unk!r} is not in the vocabulary")
    config["model"]["unk_token"] = unk
    strip = cfg.get("strip_accents")
    config["normalizer"]["strip_accents"] = strip if isinstance(strip, bool) else None
    chinese = cfg.get("tokenize_chinese_chars")
    config["normalizer"]["handle_chinese_chars"] = chinese if isinstance(chinese, bool) else True
    vocab = config["model"]["vocab"]
    specials = [named.get(k, d) for k, d in (("pad_token", "[PAD]"), ("unk_token", "[UNK]"), ("cls_token", "[CLS]"),
                                             ("sep_token", "[SEP]"), ("mask_token", "[MASK]"))]
    config["added_tokens"] = [
        {"id": vocab[t], "content": t, "special": True, "single_word": False, "lstrip": False,
         "rstrip": False, "normalized": False}
        for t in dict.fromkeys(specials) if t in vocab
    ]
    cls, sep = named.get("cls_token", "[CLS]"), named.get("sep_token", "[SEP]")
    config["post_processor"] = (
        {"type": "BertProcessing", "sep": [sep, vocab[sep]], "cls": [cls, vocab[cls]]}
        if cls in vocab and sep in vocab else None
    )
    tok = _from_source_config(config, p)
    tok.meta.source_notes = [f"BERT vocabulary, {'uncased' if lowercase else 'cased'} ({how})"]
    return tok


def load_vocab_merges(vocab_json: str | os.PathLike[str], merges_txt: str | os.PathLike[str]) -> Tokenizer:
    """GPT-2-style ``vocab.json`` + ``merges.txt`` as HF's ``ByteLevelBPETokenizer`` runs them.

    Tokens that ``tokenizer_config.json`` / ``special_tokens_map.json`` beside them name
    (``<|endoftext|>``) become special added tokens; nothing is put around a sequence, since
    these files do not say what the model's tokenizer class adds.
    """
    from .hf_json import read_json

    vp, mp = Path(vocab_json), Path(merges_txt)
    vocab = read_json(vp, "vocab.json")
    if not isinstance(vocab, dict) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in vocab.values()):
        raise FormatError(f"{vp}: expected an object of token -> non-negative id")
    legacy = from_vocab_merges(vp, mp)
    config = _bpe_config(legacy)
    config["model"]["vocab"] = dict(vocab)
    config["model"]["merges"] = [list(m) for m in legacy.merges]
    cfg = folder_tokenizer_config(vp.parent)
    named = [t for t in special_token_strings(cfg).values() if t in vocab]
    config["added_tokens"] = [
        {"id": vocab[t], "content": t, "special": True, "single_word": False, "lstrip": False,
         "rstrip": False, "normalized": False}
        for t in dict.fromkeys(named)
    ]
    config["post_processor"] = None
    tok = _from_source_config(config, vp)
    tok.meta.source_notes = ["GPT-2 byte-level BPE from vocab.json + merges.txt (no post-processor)"]
    return tok
