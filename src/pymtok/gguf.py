"""llama.cpp's GGUF files: the tokenizer in their ``tokenizer.ggml.*`` metadata, read exactly.

A GGUF file starts with ``GGUF``, a version (2 or 3), the tensor and metadata counts, then the
metadata: key (a length-prefixed string), value type, value (``docs/gguf.md`` in llama.cpp;
``gguf-py`` is the reference reader). Only the metadata is read; the tensors are never touched.
Every read is bounds-checked against the bytes left, so a truncated or forged file is a
:class:`FormatError` naming the key and byte offset, and a forged count cannot make us allocate
more than the file could hold.

``tokenizer.ggml.model`` picks the algorithm, as llama.cpp's ``llama_vocab::load`` does:

| model   | pipeline built here (tokenizer.json-shaped configs)                              |
|---------|-----------------------------------------------------------------------------------|
| llama   | SentencePiece BPE by score, ``▁`` prefix (``add_space_prefix``), byte fallback    |
| gpt2    | byte-level BPE by merge rank, split by the regexes ``tokenizer.ggml.pre`` names    |
| bert    | BERT normalizer + WordPiece (llama.cpp's ``▁``-prefixed vocabulary turned back)    |
| t5      | SentencePiece Unigram with the file's precompiled charsmap                         |

Every token keeps its id (MNN's ``gguf2mnn.py`` drops non-NORMAL/CONTROL tokens and shifts the
ids after them; we do not). CONTROL tokens become special added tokens, USER_DEFINED ones plain
added tokens, as the converters that wrote the file took them from ``tokenizer.json``.

>>> tok = read_gguf("ggml-vocab-llama-bpe.gguf")          # doctest: +SKIP
>>> tok.encode("Hello world")                              # doctest: +SKIP
[128000, 9906, 1917]
"""

from __future__ import annotations

import os
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import FormatError
from .tokenizer import Tokenizer, TokenizerMeta

__all__ = ["GGUFMetadata", "PRE_TOKENIZERS", "gguf_config", "read_gguf", "read_metadata"]

_MAGIC = b"GGUF"
_VERSIONS = (2, 3)

# GGUF value types: (name, struct format of a scalar, its size); STRING and ARRAY are read apart
_UINT8, _INT8, _UINT16, _INT16, _UINT32, _INT32, _FLOAT32, _BOOL, _STRING, _ARRAY, _UINT64, _INT64, _FLOAT64 = range(13)
_SCALARS: dict[int, tuple[str, int]] = {
    _UINT8: ("B", 1), _INT8: ("b", 1), _UINT16: ("H", 2), _INT16: ("h", 2), _UINT32: ("I", 4),
    _INT32: ("i", 4), _FLOAT32: ("f", 4), _BOOL: ("?", 1), _UINT64: ("Q", 8), _INT64: ("q", 8),
    _FLOAT64: ("d", 8),
}
_TYPE_NAMES = (
    "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array",
    "uint64", "int64", "float64",
)

# llama.cpp's token types (LLAMA_TOKEN_TYPE_*), numbered as SentencePiece's piece types
_UNDEFINED, _NORMAL, _UNKNOWN, _CONTROL, _USER_DEFINED, _UNUSED, _BYTE = range(7)


@dataclass
class GGUFMetadata:
    """A GGUF file's version and metadata, each value as read (arrays as lists)."""

    version: int
    values: dict[str, Any] = field(default_factory=dict)
    offsets: dict[str, int] = field(default_factory=dict)


class _Cursor:
    """Little-endian reads from ``data`` that never run past its end."""

    def __init__(self, data: bytes, path: Path) -> None:
        self.data = memoryview(data)
        self.pos = 0
        self.path = path
        self.key = "header"

    def fail(self, message: str, at: int | None = None) -> FormatError:
        return FormatError(f"{self.path}: {self.key} at byte {self.pos if at is None else at}: {message}")

    def take(self, n: int) -> memoryview:
        if n > len(self.data) - self.pos:
            raise self.fail(f"needs {n} bytes, the file has {len(self.data) - self.pos} left")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def scalar(self, kind: int) -> Any:
        fmt, size = _SCALARS[kind]
        return struct.unpack("<" + fmt, self.take(size))[0]

    def string(self) -> str:
        at = self.pos
        raw = bytes(self.take(self.scalar(_UINT64)))
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.fail(f"string is not UTF-8 (byte {exc.start} of it)", at) from None

    def value(self, kind: int) -> Any:
        if kind in _SCALARS:
            return self.scalar(kind)
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            at = self.pos
            item = self.scalar(_UINT32)
            count = self.scalar(_UINT64)
            if item == _ARRAY:
                raise self.fail("arrays of arrays are not used by tokenizer metadata", at)
            # the smallest encoding of one element bounds how many the rest of the file can hold
            smallest = 8 if item == _STRING else _SCALARS[item][1] if item in _SCALARS else None
            if smallest is None:
                raise self.fail(f"unknown array element type {item}", at)
            if count * smallest > len(self.data) - self.pos:
                raise self.fail(f"array of {count} {_TYPE_NAMES[item]} cannot fit in the {len(self.data) - self.pos} bytes left", at)
            if item in _SCALARS:
                fmt, size = _SCALARS[item]
                return list(struct.unpack(f"<{count}{fmt}", self.take(count * size)))
            return [self.string() for _ in range(count)]
        raise self.fail(f"unknown value type {kind}")


def read_metadata(path: str | os.PathLike[str]) -> GGUFMetadata:
    """The header and metadata of a GGUF file (its tensors are not read)."""
    p = Path(path)
    cur = _Cursor(p.read_bytes(), p)
    if bytes(cur.take(4)) != _MAGIC:
        raise cur.fail("not a GGUF file (expected the magic 'GGUF')", 0)
    version = cur.scalar(_UINT32)
    if version not in _VERSIONS:
        hint = " (a big-endian file? only little-endian GGUF is read)" if version in (2 << 24, 3 << 24) else ""
        raise cur.fail(f"GGUF version {version} is not supported (expected 2 or 3){hint}", 4)
    cur.scalar(_UINT64)  # tensor count: the tensors are not read
    n_kv = cur.scalar(_UINT64)
    # a key/value pair takes at least 8 (key length) + 4 (type) + 1 bytes
    if n_kv * 13 > len(cur.data) - cur.pos:
        raise cur.fail(f"{n_kv} metadata entries cannot fit in the file", 16)
    meta = GGUFMetadata(version=version)
    for index in range(n_kv):
        cur.key = f"metadata entry {index}"
        key = cur.string()
        if key in meta.values:
            raise cur.fail(f"key {key!r} appears twice")
        cur.key = key
        meta.offsets[key] = cur.pos
        meta.values[key] = cur.value(cur.scalar(_UINT32))
    return meta


# ------------------------------------------------------------------------------------------
# tokenizer.ggml.pre: llama.cpp's pre-tokenizer names
# ------------------------------------------------------------------------------------------

_CONTRACTIONS = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)"
_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
_LLAMA3 = _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
_QWEN2 = _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
_BLOOM = r" ?[^(\s|.,!?…。，、।۔،)]+"
_O200K_WORDS = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+{c}|"
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*{c}|"
)
_DEEPSEEK3_MAIN = (
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
    " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"
)
_DEEPSEEK_LLM_LETTERS = (
    "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝ\u1f5f-\u1f7dᾀ-ᾴᾶ-ᾼ\u1fbeῂ-ῄῆ-ῌ\u1fd0-\u1fd3\u1fd6-\u1fdbῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\u2126ℨ\u212a-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+"
)


@dataclass(frozen=True)
class PreTokenizer:
    """What a ``tokenizer.ggml.pre`` name stands for: HF's pre-tokenizer steps and llama.cpp's flags.

    ``steps`` are the pre-tokenizer configs before the byte-level step, as the model's own
    ``tokenizer.json`` has them (llama.cpp's regexes rewrite ``(?i:…)`` and a few classes for its
    own engine; where its source gives the original, the original is used here).
    """

    steps: tuple[Mapping[str, Any], ...]
    # the normalizer of the tokenizer.json the name was given for, which llama.cpp does not apply
    normalizer: Mapping[str, Any] | None = None
    ignore_merges: bool = False
    add_bos: bool = False
    add_sep: bool = False  # between the texts of a pair, when the file has no add_sep_token key
    byte_level_regex: bool = False  # the GPT-2 split done by ByteLevel(use_regex=True) itself


def _split(pattern: str) -> dict[str, Any]:
    return {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False}


def _digits(individual: bool) -> dict[str, Any]:
    return {"type": "Digits", "individual_digits": individual}


_GPT2_FAMILY = PreTokenizer(steps=(), byte_level_regex=True)
_LLAMA3_FAMILY = PreTokenizer(steps=(_split(_LLAMA3),), ignore_merges=True, add_bos=True)
_QWEN2_FAMILY = PreTokenizer(steps=(_split(_QWEN2),))
_STARCODER_FAMILY = PreTokenizer(steps=(_digits(True),), byte_level_regex=True)
_DEEPSEEK3_FAMILY = PreTokenizer(
    steps=(_split(r"\p{N}{1,3}"), _split("[一-龥぀-ゟ゠-ヿ]+"), _split(_DEEPSEEK3_MAIN))
)
_GPT4O_FAMILY = PreTokenizer(
    steps=(_split(_O200K_WORDS.replace("{c}", _CONTRACTIONS + "?") + r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"),)
)

# llama.cpp's llama_vocab::load name -> pre-type table (src/llama-vocab.cpp), each name as the
# split of the tokenizer.json it was named for, whose ids llama.cpp's test files hold. Where
# llama.cpp approximates that split (its lookahead rewrite of GPT-4o's classes) the original is
# taken; names whose split is known only through llama.cpp's custom code are refused, not guessed.
PRE_TOKENIZERS: dict[str, PreTokenizer] = {
    **dict.fromkeys(
        ("gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum",
         "modern-bert", "mpt", "olmo", "jais", "trillion", "granite-docling", "exaone4"),
        _GPT2_FAMILY,
    ),
    **dict.fromkeys(("roberta-bpe", "jina-v1-en", "jina-v2-code"), PreTokenizer(steps=(), byte_level_regex=True, add_sep=True)),
    **dict.fromkeys(
        ("llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"),
        _LLAMA3_FAMILY,
    ),
    "dbrx": PreTokenizer(steps=(_split(_LLAMA3),)),
    "smaug-bpe": PreTokenizer(steps=(_split(_LLAMA3),)),
    "chatglm-bpe": PreTokenizer(steps=(_split(_LLAMA3),)),
    "glm4": PreTokenizer(steps=(_split(_LLAMA3),)),
    # llama.cpp's converter names a vocabulary "qwen2" by the hash of Qwen's own tokenizer.json
    # (and "deepseek-r1-qwen" of the distilled models' copy of it), which normalizes to NFC
    **dict.fromkeys(("qwen2", "deepseek-r1-qwen"), PreTokenizer(steps=(_split(_QWEN2),), normalizer={"type": "NFC"})),
    **dict.fromkeys(
        ("kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan", "solar-open", "grok-2"), _QWEN2_FAMILY
    ),
    "qwen35": PreTokenizer(
        steps=(_split(_CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"),)
    ),
    **dict.fromkeys(
        ("starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2"),
        _STARCODER_FAMILY,
    ),
    **dict.fromkeys(("deepseek-v3", "hunyuan-dense", "hy_v4", "joyai-llm"), _DEEPSEEK3_FAMILY),
    "deepseek-llm": PreTokenizer(
        steps=(
            _split("[\r\n]"), _split(_DEEPSEEK_LLM_LETTERS), _split("\\s?[!-/:-~！-／：-～‘-‟　-。]+"),
            _split("\\s+$"), _split("[一-龥ࠀ-一가-퟿]+"), _digits(False),
        )
    ),
    "deepseek-coder": PreTokenizer(
        steps=(_split("[\r\n]"), _split(r"\s?\p{L}+"), _split(r"\s?\p{P}+"), _split("[一-龥ࠀ-一가-퟿]+"), _digits(True))
    ),
    "falcon": PreTokenizer(
        # Falcon's tokenizer.json: Punctuation, ByteLevel, Digits, Split (llama.cpp folds the
        # byte-level split and digits into regexes)
        steps=(
            {"type": "Punctuation", "behavior": "Contiguous"},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
            _digits(False),
            _split("[0-9][0-9][0-9]"),
        )
    ),
    **dict.fromkeys(("gpt-4o", "llama4", "kanana2", "talkie"), _GPT4O_FAMILY),
    "tekken": PreTokenizer(
        steps=(_split(_O200K_WORDS.replace("{c}", "") + r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"),),
        ignore_merges=True,
        add_bos=True,
    ),
    "minicpm5": PreTokenizer(
        steps=(
            _split(r"\p{N}{1,3}"),
            _split(_CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"),
        ),
        ignore_merges=True,
    ),
    "seed-coder": PreTokenizer(
        steps=(_split(_CONTRACTIONS + "|[^\r\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\r\n]+|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"),)
    ),
    **dict.fromkeys(
        ("bailingmoe", "bailingmoe2", "llada-moe"),
        PreTokenizer(
            steps=(_split(r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"),)
        ),
    ),
    # BLOOM's Split (its tokenizer.json nests [.,!?…。，、।۔،] in the class; the same characters)
    **dict.fromkeys(("bloom", "poro-chat", "gpt3-finnish"), PreTokenizer(steps=(_split(_BLOOM),))),
    "viking": PreTokenizer(steps=(_split(_BLOOM), _split(r"\p{N}"))),
    # Qwen2's split without the English contractions
    "ufakzeka": PreTokenizer(
        steps=(_split(r"[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"),)
    ),
    "laguna": PreTokenizer(steps=(_split(r"[^\n]+|[\n]+"), _split(_QWEN2))),
    "exaone-moe": PreTokenizer(
        steps=(_split(_CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+"),)
    ),
    "jais-2": PreTokenizer(
        steps=(
            _split(
                _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)"
                r"|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)"
                r"|\s{1,2}(?!\S)|\s{1}"
            ),
        )
    ),
}


# ------------------------------------------------------------------------------------------
# Metadata -> pipeline configs
# ------------------------------------------------------------------------------------------


class _Fields:
    """Typed access to ``tokenizer.ggml.*`` values, each failure naming the key and its offset."""

    def __init__(self, meta: GGUFMetadata, path: Path) -> None:
        self.meta = meta
        self.path = path

    def fail(self, key: str, message: str) -> FormatError:
        at = self.meta.offsets.get(key)
        where = f" (value at byte {at})" if at is not None else ""
        return FormatError(f"{self.path}: {key}{where}: {message}")

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = None) -> Any:
        value = self.meta.values.get(key, default)
        if value is not None and (not isinstance(value, kind) or (kind is int and isinstance(value, bool))):
            raise self.fail(key, f"expected {getattr(kind, '__name__', kind)}, got {type(value).__name__}")
        return value

    def added(self, name: str, add: bool, token: int | None) -> list[int]:
        """[token] when the add_<name>_token key is true (it must name one), else []."""
        if not add:
            return []
        if token is None:
            key = "seperator" if name == "sep" else name
            raise self.fail(f"tokenizer.ggml.add_{name}_token", f"is true, but tokenizer.ggml.{key}_token_id is not set")
        return [token]

    def array(
        self, key: str, item: type | tuple[type, ...], length: int | None, required: bool = False
    ) -> list[Any] | None:
        value = self.meta.values.get(key)
        if value is None:
            if required:
                raise self.fail(key, "missing")
            return None
        if not isinstance(value, list) or not all(isinstance(v, item) and not isinstance(v, bool) for v in value):
            names = " or ".join(t.__name__ for t in (item if isinstance(item, tuple) else (item,)))
            raise self.fail(key, f"expected an array of {names}")
        if length is not None and len(value) < length:
            raise self.fail(key, f"has {len(value)} entries for {length} tokens")
        return value[:length] if length is not None else value

    def token_id(self, key: str, n: int, default: int | None) -> int | None:
        value = self.get(key, int)
        if value is None:
            return default if default is not None and default < n else None
        if not 0 <= value < n:
            # llama.cpp warns and keeps its default; a file naming a token it lacks is broken
            raise self.fail(key, f"token id {value} is outside the vocabulary of {n}")
        return value


def _template(
    prefix: Sequence[int], suffix: Sequence[int], second: Sequence[int], tokens: Sequence[str]
) -> dict[str, Any] | None:
    """TemplateProcessing putting ``prefix`` ids before a text and ``suffix`` ids after it; a pair
    is prefix A suffix, ``second``, B suffix."""
    if not prefix and not suffix and not second:
        return None
    special = {tokens[i]: {"id": tokens[i], "ids": [i], "tokens": [tokens[i]]} for i in [*prefix, *suffix, *second]}

    def piece(ids: Sequence[int], type_id: int) -> list[dict[str, Any]]:
        return [{"SpecialToken": {"id": tokens[i], "type_id": type_id}} for i in ids]

    single = [*piece(prefix, 0), {"Sequence": {"id": "A", "type_id": 0}}, *piece(suffix, 0)]
    pair = [*single, *piece(second, 1), {"Sequence": {"id": "B", "type_id": 1}}, *piece(suffix, 1)]
    return {"type": "TemplateProcessing", "single": single, "pair": pair, "special_tokens": special}


def _added(f: _Fields, tokens: Sequence[str], types: Sequence[int], special_ids: set[int]) -> list[dict[str, Any]]:
    """CONTROL, USER_DEFINED and UNKNOWN tokens (llama.cpp's special-token cache) as added tokens.

    llama.cpp gives some of them lstrip/rstrip by the model's name, not by anything in the
    vocabulary (``llama_vocab::load``): that is what the model's tokenizer.json says, so it is done
    here too.
    """
    name = (f.get("general.name", str) or "").lower()
    pre = f.get("tokenizer.ggml.pre", str) or ""
    arch = f.get("general.architecture", str) or ""
    lstrip: set[str] = set()
    rstrip: set[str] = set()
    # llama.cpp tests the names as substrings
    if any(n in pre for n in ("jina-v2-de", "jina-v2-es", "jina-v2-code")) or any(
        n in arch for n in ("nomic-bert-moe", "jina-bert-v3")
    ):
        lstrip.add("<mask>")
    elif "phi-3" in name or "phi3" in name:
        rstrip.update(tokens[i] for i, kind in enumerate(types) if kind in (_CONTROL, _USER_DEFINED, _UNKNOWN))
        rstrip.add("</s>")
        rstrip -= {"<unk>", "<s>", "<|endoftext|>"}
    elif "modern-bert" in name:
        lstrip.add("[MASK]")
    added = []
    for i, kind in enumerate(types):
        if kind in (_CONTROL, _USER_DEFINED, _UNKNOWN) or i in special_ids:
            added.append(
                {"id": i, "content": tokens[i], "special": kind != _USER_DEFINED, "single_word": False,
                 "lstrip": tokens[i] in lstrip, "rstrip": tokens[i] in rstrip, "normalized": False}
            )
    return added


def _bpe_configs(f: _Fields, tokens: list[str]) -> tuple[dict[str, Any], PreTokenizer]:
    pre_name = f.get("tokenizer.ggml.pre", str)
    if pre_name is None:
        raise f.fail("tokenizer.ggml.pre", "missing: llama.cpp would fall back to a default split no model uses")
    pre = PRE_TOKENIZERS.get(pre_name)
    if pre is None:
        raise f.fail("tokenizer.ggml.pre", f"pre-tokenizer {pre_name!r} is not supported (known: {', '.join(sorted(PRE_TOKENIZERS))})")
    merges_raw = f.array("tokenizer.ggml.merges", str, None, required=True)
    assert merges_raw is not None
    merges = []
    for i, line in enumerate(merges_raw):
        # llama.cpp splits at the first space after the first byte (a merge may start with one)
        cut = line.find(" ", 1)
        if cut < 0:
            raise f.fail("tokenizer.ggml.merges", f"entry {i} {line[:40]!r} is not 'left right'")
        merges.append([line[:cut], line[cut + 1 :]])
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": pre.byte_level_regex}
    steps = [dict(s) for s in pre.steps]
    if not any(s["type"] == "ByteLevel" for s in steps):
        steps.append(byte_level)
    config = {
        "normalizer": dict(pre.normalizer) if pre.normalizer is not None else None,
        "pre_tokenizer": steps[0] if len(steps) == 1 else {"type": "Sequence", "pretokenizers": steps},
        "model": {
            "type": "BPE", "vocab": _vocab(f, tokens), "merges": merges, "dropout": None, "unk_token": None,
            "continuing_subword_prefix": None, "end_of_word_suffix": None, "fuse_unk": False,
            "byte_fallback": False, "ignore_merges": pre.ignore_merges,
        },
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
    }
    return config, pre


def _vocab(f: _Fields, tokens: Sequence[str]) -> dict[str, int]:
    vocab: dict[str, int] = {}
    for i, token in enumerate(tokens):
        if token in vocab:
            raise f.fail("tokenizer.ggml.tokens", f"token {token!r} appears at ids {vocab[token]} and {i}")
        vocab[token] = i
    return vocab


_PHANTOM_SPACE = "\u2581"


def _wordpiece_configs(
    f: _Fields, tokens: list[str], types: list[int], lowercase: bool, strip_accents: bool | None
) -> tuple[dict[str, Any], list[str]]:
    # llama.cpp's converter writes a word-initial piece as "▁piece" and a continuation "##piece"
    # as "piece"; bracketed specials stay as they are. Turn that back into BERT's vocabulary.
    pieces = []
    for token, kind in zip(tokens, types):
        if kind in (_CONTROL, _USER_DEFINED, _UNKNOWN) or (token.startswith("[") and token.endswith("]")):
            pieces.append(token)
        elif token.startswith(_PHANTOM_SPACE):
            pieces.append(token[1:])
        else:
            pieces.append("##" + token)
    unk = f.token_id("tokenizer.ggml.unknown_token_id", len(tokens), 100)
    if unk is None:
        raise f.fail("tokenizer.ggml.unknown_token_id", "missing, and the vocabulary has no id 100")
    return {
        "normalizer": {
            "type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
            "strip_accents": strip_accents, "lowercase": lowercase,
        },
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "model": {
            "type": "WordPiece", "vocab": _vocab(f, pieces), "unk_token": pieces[unk],
            "continuing_subword_prefix": "##", "max_input_chars_per_word": 100,
        },
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
    }, pieces


def gguf_config(path: str | os.PathLike[str]) -> tuple[dict[str, Any], TokenizerMeta]:
    """The tokenizer.json-shaped config and MNN header lists for a GGUF file's tokenizer."""
    from .legacy import is_cased_vocabulary

    p = Path(path)
    f = _Fields(read_metadata(p), p)
    model_name = f.get("tokenizer.ggml.model", str)
    if model_name is None:
        raise f.fail("tokenizer.ggml.model", "missing: this GGUF file carries no tokenizer")
    tokens = f.array("tokenizer.ggml.tokens", str, None, required=True)
    assert tokens is not None
    n = len(tokens)
    if n == 0:
        raise f.fail("tokenizer.ggml.tokens", "is empty")
    typed = f.array("tokenizer.ggml.token_type", int, n)
    types = typed or [_NORMAL] * n
    scores_raw = f.array("tokenizer.ggml.scores", (int, float), n)
    add_bos = add_eos = add_sep = False
    bos_default = eos_default = None
    if model_name == "llama":
        kind = "spm"
        add_bos, bos_default, eos_default = True, 1, 2
    elif model_name == "gpt2":
        kind = "bpe"
        bos_default = eos_default = 11
    elif model_name == "bert":
        kind = "wpm"
        bos_default = 101
    elif model_name == "t5":
        kind = "ugm"
        add_eos, eos_default = True, 1
    else:
        raise f.fail("tokenizer.ggml.model", f"tokenizer model {model_name!r} is not supported (llama, gpt2, bert, t5)")

    notes: list[str] = []
    # llama.cpp names an empty token by its id rather than refuse the file
    tokens = [t or f"[EMPTY_{i}]" for i, t in enumerate(tokens)]
    if kind == "bpe":
        config, pre = _bpe_configs(f, tokens)
        add_bos, add_sep = pre.add_bos, pre.add_sep
    elif kind == "wpm":
        # the converter writes the lowercase key for a tokenizer.json that lowercases; older files
        # have no key, and their casing is read off the vocabulary
        lowercase = f.get("tokenizer.ggml.normalizer.lowercase", bool)
        how = "tokenizer.ggml.normalizer.lowercase"
        if lowercase is None:
            lowercase = not is_cased_vocabulary(
                t[1:] if t.startswith(_PHANTOM_SPACE) else t for t, k in zip(tokens, types) if k == _NORMAL
            )
            how = "read off the vocabulary: " + ("no uppercase words" if lowercase else "it has uppercase words")
        notes.append(f"BERT vocabulary, {'uncased' if lowercase else 'cased'} ({how})")
        strip_accents = f.get("tokenizer.ggml.normalizer.strip_accents", bool)
        config, tokens = _wordpiece_configs(f, tokens, types, lowercase, strip_accents)
    else:
        config = _sentencepiece_configs(f, tokens, types, scores_raw, kind)

    if kind == "wpm":
        # BERT's "BOS" is [CLS]; converters write it as cls_token_id
        bos_default = f.token_id("tokenizer.ggml.cls_token_id", n, bos_default)
    bos = f.token_id("tokenizer.ggml.bos_token_id", n, bos_default)
    eos = f.token_id("tokenizer.ggml.eos_token_id", n, eos_default)
    sep = f.token_id("tokenizer.ggml.seperator_token_id", n, 102 if kind == "wpm" else None)
    # The second text of a pair follows what the model's tokenizer.json does, which the keys tell
    # apart: BERT's [CLS] A [SEP] B [SEP], RoBERTa's <s> A </s></s> B </s> (its converted files
    # set add_sep, which is where llama.cpp's rerank input puts SEP), else BOS A EOS BOS B EOS.
    if kind == "wpm":
        # llama.cpp's WPM encode puts BOS ([CLS]) before a text and [SEP] after it whatever the
        # add_* keys say, as BERT's tokenizer.json does
        if bos is None or sep is None:
            raise f.fail("tokenizer.ggml.model", "a BERT vocabulary needs a BOS ([CLS]) and a separator token")
        prefix, suffix, second = [bos], [sep], []
    else:
        # llama.cpp's SPM, BPE and UGM encodes add BOS and EOS by the keys, never SEP
        prefix = f.added("bos", f.get("tokenizer.ggml.add_bos_token", bool, add_bos), bos)
        suffix = f.added("eos", f.get("tokenizer.ggml.add_eos_token", bool, add_eos), eos)
        between = f.added("sep", f.get("tokenizer.ggml.add_sep_token", bool, add_sep and sep is not None), sep)
        second = between or prefix
    named = {
        key: f.token_id(f"tokenizer.ggml.{key}_token_id", n, None)
        for key in ("unknown", "padding", "mask", "eot", "eom", "cls")
    }
    specials = {i for i in (bos, eos, sep, *named.values()) if i is not None}
    # Without token types the keys are all a file says of its special tokens. With them, a NORMAL
    # token a key names (a pad id of 0 that is "!") stays a word, as in llama.cpp and in the
    # tokenizer.json it was converted from, which has no such added token.
    config["added_tokens"] = _added(f, tokens, types, specials if typed is None else set())
    config["post_processor"] = _template(prefix, suffix, second, tokens)
    config.setdefault("truncation", None)
    config.setdefault("padding", None)

    stop = [i for i in (eos, named["eot"], named["eom"]) if i is not None]
    template = f.get("tokenizer.chat_template", str)
    named_templates = {
        key.removeprefix("tokenizer.chat_template."): value
        for key, value in f.meta.values.items()
        if key.startswith("tokenizer.chat_template.") and isinstance(value, str)
    }
    chat_template: str | dict[str, str] | None = template
    if named_templates:
        chat_template = {**({"default": template} if template is not None else {}), **named_templates}
    special_tokens = {
        name: tokens[i]
        for name, i in (("bos_token", bos), ("eos_token", eos), ("unk_token", named["unknown"]),
                        ("pad_token", named["padding"]), ("sep_token", sep), ("cls_token", named["cls"]),
                        ("mask_token", named["mask"]))
        if i is not None
    }
    special_list = sorted(i for i, k in enumerate(types) if k in (_CONTROL, _UNKNOWN)) or sorted(specials)
    meta = TokenizerMeta(
        special_ids=special_list,
        stop_ids=list(dict.fromkeys(stop)),
        prefix_ids=prefix,
        chat_template=chat_template,
        special_tokens=special_tokens,
        source_notes=notes,
    )
    return config, meta


def _sentencepiece_configs(
    f: _Fields, tokens: list[str], types: list[int], scores: list[Any] | None, kind: str
) -> dict[str, Any]:
    from . import legacy

    if scores is None:
        raise f.fail("tokenizer.ggml.scores", "missing (a SentencePiece vocabulary is ranked by its scores)")
    add_space_prefix = f.get("tokenizer.ggml.add_space_prefix", bool, True)
    if kind == "ugm":
        charsmap = f.array("tokenizer.ggml.precompiled_charsmap", int, None)
        normalizer = legacy.normalizer_from_spec(
            precompiled_charsmap=bytes(v & 0xFF for v in charsmap or []),
            add_dummy_prefix=add_space_prefix,
            remove_extra_whitespaces=f.get("tokenizer.ggml.remove_extra_whitespaces", bool, False),
            escape_whitespaces=True,
        )
    else:
        # llama.cpp reads remove_extra_whitespaces for t5 vocabularies only, and HF's Llama
        # tokenizer.json has no such step either: a llama file's key changes nothing
        normalizer = legacy.normalizer_from_spec(
            precompiled_charsmap=b"", add_dummy_prefix=add_space_prefix, remove_extra_whitespaces=False,
            escape_whitespaces=True,
        )
    # llama.cpp's defaults: <unk> is 0 in Llama's vocabulary, 2 in T5's
    default_unk = 2 if kind == "ugm" else 0
    unk = f.token_id("tokenizer.ggml.unknown_token_id", len(tokens), default_unk)
    if unk is None:
        raise f.fail("tokenizer.ggml.unknown_token_id", f"missing, and the vocabulary has no id {default_unk}")
    # the unknown token is the one the key names (Phi-3's files also type their padding UNKNOWN);
    # other UNKNOWN-typed tokens are whole tokens, like CONTROL ones
    piece_types = [t if 1 <= t <= 6 else legacy.NORMAL for t in types]
    piece_types = [legacy.CONTROL if t == legacy.UNKNOWN else t for t in piece_types]
    piece_types[unk] = legacy.UNKNOWN
    src = legacy.LegacyTxt(
        type=legacy.SENTENCEPIECE,
        tokens=[t.encode("utf-8") for t in tokens],
        scores=[float(s) for s in scores],
        piece_types=piece_types,
    )
    try:
        tok = legacy.build_tokenizer(
            src, model_kind="unigram" if kind == "ugm" else "bpe", normalizer=normalizer
        )
    except FormatError as exc:
        raise FormatError(f"{f.path}: {exc}") from None
    return dict(tok.config)


def read_gguf(path: str | os.PathLike[str]) -> Tokenizer:
    """Load the tokenizer of a GGUF file (``tokenizer.ggml.*`` metadata) as a :class:`Tokenizer`."""
    config, meta = gguf_config(path)
    try:
        return Tokenizer.from_config(config, meta)
    except FormatError as exc:
        raise FormatError(f"{path}: {exc}") from None
