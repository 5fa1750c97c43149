"""The seam to the native core (``pymtok._native``): the same encoding, in C.

:func:`accelerate` looks at a tokenizer's pre-tokenizer and model and, when the native core
reproduces the pure-Python path exactly for that configuration, returns a function encoding
one normalized segment: ``Tokenizer._encode_segment``'s pre-tokenizer and model loop, with
the GIL released.

>>> encode = accelerate(pymtok.load("llama3/tokenizer.json"))     # doctest: +SKIP
>>> encode("Hello world", 0)                                      # doctest: +SKIP
[9906, 1917]

:func:`accelerate_text` goes on to the whole of ``Tokenizer.encode``: added-token matching, the
normalizer (called from C on each segment between added tokens) and segment encoding in one
native call, the post-processor's ids around them. Texts that added tokens cut into many segments (Gemma's
newline tokens) no longer pay a Python round trip per segment.

:func:`accelerate_normalizer` swaps the normalizers the native core reproduces
(``BertNormalizer``, ``NFC``, ``NFKD``, ``StripAccents``, ``Lowercase``, ``Precompiled``, literal
``Replace`` and the ``Replace`` of runs of spaces, ``Prepend``, also inside a ``Sequence``) for
native ones with the same ``__call__(text) -> str``.

Set ``PYMTOK_PURE=1`` to keep every tokenizer on the pure path.

:func:`accelerate_offsets` gives ``tok(..., return_offsets_mapping=True)`` each token's span of
the text from the native core too, where it knows them for certain.
"""

from __future__ import annotations

import functools
import os
import re
import struct
import sys
import warnings
import weakref
from array import array
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from . import byte_level as _byte_level
from . import decoders, models, normalizers, pre_tokenizers, processors
from .backtracking import may_backtrack

if TYPE_CHECKING:
    from .tokenizer import Tokenizer

SegmentEncoder = Callable[[str, int], list[int]]
TextEncoder = Callable[[str, bool], list[int]]
OffsetsEncoder = Callable[[str, int, "Sequence[int]", "Sequence[int]"], "tuple[list[int], list[tuple[int, int]]] | None"]
Step = tuple[Any, ...]

# GPT-2's pattern, which ByteLevel(use_regex=True) applies and some files spell as a Split.
_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
_CONTRACTIONS = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)"
_DEEPSEEK_MAIN = (
    r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^CRLF\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+|"""
    r""" ?[\p{P}\p{S}]+[CRLF]*|\s*[CRLF]+|\s+(?!\S)|\s+"""
)

# Split patterns with a hand-written native scanner, spelled exactly as tokenizer.json files
# ship them (Oniguruma syntax); any other pattern runs on the native regex engine where it takes
# it (engine_takes), else keeps the tokenizer on the pure path.
SCANNERS: dict[str, str] = {
    _GPT2: "gpt2",
    # cl100k as Llama 3 ships it
    _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
    r"|\s+(?!\S)|\s+": "cl100k",
    # Qwen2 / Qwen3: one digit per piece
    _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
    r"|\s+(?!\S)|\s+": "qwen2",
    # o200k (GPT-4o)
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
    + _CONTRACTIONS + r"?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+"
    r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]*" + _CONTRACTIONS + r"?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+": "o200k",
    # DeepSeek-V3's three Splits; the file holds raw CR/LF characters in the third
    r"\p{N}{1,3}": "deepseek_digits",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+": "deepseek_cjk",
    _DEEPSEEK_MAIN.replace("CRLF", "\r\n"): "deepseek_main",
    _DEEPSEEK_MAIN.replace("CRLF", r"\r\n"): "deepseek_main",
    # CLIP (after its normalizer's lower-casing and whitespace runs to one space)
    r"<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+": "clip",
}


def accelerate(tokenizer: Tokenizer) -> SegmentEncoder | None:
    """A native ``encode_segment(normalized_text, offset)`` for ``tokenizer``, or None.

    None when ``PYMTOK_PURE=1``, when the extension is not built, or when any component of
    the pre-tokenizer or model is one the native core does not reproduce exactly.
    """
    _native = _core()
    if _native is None:
        return None
    steps = _program(tokenizer)
    if steps is None or len(steps) > _native.MAX_STEPS:
        return _pieces_encoder(tokenizer)
    # A last ByteLevel leaves the mapping to the model, which then works on the bytes themselves;
    # before other steps it maps the text to GPT-2 characters, which the model takes as they are.
    byte_level = bool(steps) and steps[-1][0] == "byte_level"
    encoder = _model_encoder(_native, tokenizer.model, steps, byte_level)
    if encoder is None:
        return None
    encode: SegmentEncoder = encoder.encode
    return encode


def _pieces_encoder(tokenizer: Tokenizer) -> SegmentEncoder | None:
    """The pure pre-tokenizer, then the native model on each of its pieces: for a pre-tokenizer
    the native core has no program for (a Split pattern without a native scanner, ByteLevel
    before other steps). Its pieces are text as the model sees it (GPT-2 characters after a
    ByteLevel), so the model runs on them as they are."""
    pre = tokenizer.pre_tokenizer
    if pre is None:
        return None
    encoder = _model_encoder(_core(), tokenizer.model, [], False)
    if encoder is None:
        return None
    encode_piece = encoder.encode

    def encode(normalized: str, offset: int) -> list[int]:
        ids: list[int] = []
        for piece, _ in pre([(normalized, offset)]):
            ids += encode_piece(piece, 0)
        return ids

    _PIECES_MODELS[encode] = encoder
    return encode


# the native model each _pieces_encoder runs, which accelerate_offsets runs on the same pieces
_PIECES_MODELS: weakref.WeakKeyDictionary[Callable[..., Any], Any] = weakref.WeakKeyDictionary()


def _native_suffix(_native: Any, suffix: str, model: Any, byte_level: bool) -> bool:
    """Whether the native BPE takes this end_of_word_suffix: one that fits its key buffer, with no
    byte fallback (which HF applies to the suffixed character), of byte-level characters when
    the vocabulary is byte-level."""
    return (
        len(suffix.encode("utf-8")) <= _native.BPE_SUFFIX_MAX
        and not model.byte_fallback
        and (not byte_level or all(c in _byte_level.CHAR_TO_BYTE for c in suffix))
    )


def _model_encoder(_native: Any, model: Any, steps: list[Step], byte_level: bool) -> Any:
    """The native Encoder running ``steps`` and then ``model``, or None where it has no exact one."""
    if type(model) in (models.BPE, models.WordPiece, models.WordLevel) and not _ids_fit(model.vocab):
        return None
    encoder: Any
    if type(model) is models.BPE:
        suffix = model.end_of_word_suffix or ""
        if model.continuing_subword_prefix or (suffix and not _native_suffix(_native, suffix, model, byte_level)):
            return None
        if byte_level and model.byte_fallback:
            return None
        unk_id = -1
        if model.unk_token is not None:
            found = model.vocab.get(model.unk_token)
            if found is None:
                return None  # the pure path raises FormatError when it needs the unk token
            unk_id = found
        vocab, merges = _model_tables(model)
        encoder = _native.Encoder(
            "BPE", tuple(steps), vocab, merges=merges,
            byte_level=byte_level, ignore_merges=model.ignore_merges,
            byte_fallback=model.byte_fallback, fuse_unk=model.fuse_unk, unk_id=unk_id, suffix=suffix,
        )
    elif type(model) is models.WordPiece:
        unk = model.vocab.get(model.unk_token)
        if byte_level or unk is None:
            return None  # without an unknown id the pure path raises at the first word it cannot cut, as HF does
        encoder = _native.Encoder(
            "WordPiece", tuple(steps), _model_tables(model)[0], unk_id=unk,
            prefix=model.continuing_subword_prefix, max_chars=model.max_input_chars_per_word,
        )
    elif type(model) is models.WordLevel:
        unk, prefix = model.vocab.get(model.unk_token), models.absent_prefix(model.vocab)
        if byte_level or unk is None or prefix is None:
            return None  # without an unknown id the pure path raises at the first unknown piece, as HF does
        # WordPiece whose continuation prefix starts no token is WordLevel: a piece that is not
        # one token has no continuation to match, so it is the unknown token whole
        encoder = _native.Encoder(
            "WordPiece", tuple(steps), _model_tables(model)[0], unk_id=unk,
            prefix=prefix, max_chars=sys.maxsize,
        )
    elif type(model) in (models.SentencePieceBPE, models.SentencePieceUnigram):
        # the library's models take the whole normalized text: no pre-tokenizer runs before them
        if steps or not all(isinstance(t, int) and 0 <= t < 256 for t in model.piece_types):
            return None
        pieces = list(model.pieces)
        scores = model._scores if type(model) is models.SentencePieceBPE else model._f32_scores
        encoder = _native.SentencePieceModel(
            "BPE" if type(model) is models.SentencePieceBPE else "Unigram", pieces, bytes(model.piece_types),
            list(scores), model.unk_id, model.byte_fallback,
        )
    elif type(model) is models.Unigram:
        if model.unk_id is None or byte_level:
            return None
        encoder = _native.Encoder(
            "Unigram", tuple(steps), list(model.pieces), scores=list(model.scores),
            unk_id=model.unk_id, unk_score=model.min_score - models.Unigram._UNK_PENALTY,
            byte_fallback=model.byte_fallback,
        )
    else:
        return None
    return encoder


def accelerate_text(tokenizer: Tokenizer) -> TextEncoder | None:
    """A native ``encode(text, add_special_tokens)`` for ``tokenizer``, or None.

    Needs the native segment encoder (:func:`accelerate`); None when the post-processor does more
    than put fixed ids around the text's.
    """
    _native = _core()
    encoder = getattr(tokenizer._native_segment, "__self__", None)
    if _native is not None and isinstance(encoder, _native.SentencePieceModel):
        return _sentencepiece_text(tokenizer, encoder)
    if _native is None or not isinstance(encoder, _native.Encoder):
        return None
    added = tokenizer.added
    raw: list[tuple[str, int, int]] = []
    normalized: list[tuple[str, int, int]] = []
    for id, token in added.by_id.items():
        if id > _MAX_ID:
            return None
        flags = (_native.ADDED_LSTRIP * token.lstrip | _native.ADDED_RSTRIP * token.rstrip
                 | _native.ADDED_SINGLE_WORD * token.single_word)
        if token.normalized:
            # matched in normalized text, in their normalized form
            normalized.append((added.token_for_decode(id) or token.content, id, flags))
        else:
            raw.append((token.content, id, flags))
    affixes = _affixes(tokenizer.post_processor)
    if affixes is None:
        return None
    encoder.set_added(raw, normalized)
    encoder.set_post(*affixes)
    encoder.set_first(tokenizer._normalize_first)
    # a partial, not a Python function: the common encode call then runs no Python frame here
    encode: TextEncoder = functools.partial(encoder.encode_text, tokenizer.normalizer)
    return encode


def is_encoder(obj: Any) -> bool:
    """Whether ``obj`` is the native core's ``Encoder`` (batches, ``bind``), not another model's."""
    _native = _core()
    return _native is not None and isinstance(obj, _native.Encoder)


_FEW_FIRSTS = 4


def _sentencepiece_text(tokenizer: Tokenizer, model: Any) -> TextEncoder | None:
    """The sentencepiece library's pipeline (its normalizer, then its model on the whole text) in
    one native call that reads a long text a part at a time. With added tokens (a GGUF's control
    tokens), a text holding none of them takes that call, the others the split in Python; None
    with a normalized added token, matched in the normalized text."""
    _native = _core()
    normalizer = tokenizer.normalizer
    affixes = _affixes(tokenizer.post_processor)
    added = tokenizer.added
    if (affixes is None or any(token.normalized for token in added.by_id.values())
            or not (normalizer is None or isinstance(normalizer, _native.SentencePieceNormalizer))):
        return None
    model.set_post(*affixes)
    encode: TextEncoder = functools.partial(model.encode_text, normalizer)
    if not added.by_id:
        return encode
    # weak: the tokenizer holds this function
    owner = weakref.ref(tokenizer)
    # a text without the tokens' first characters (a few: str's search for one runs at memory
    # speed, the matcher's regex at a tenth of it) needs no search for the tokens
    firsts = {token.content[0] for token in added.by_id.values() if token.content}
    few = tuple(firsts) if len(firsts) <= _FEW_FIRSTS else None

    def encode_text(text: str, add_special_tokens: bool) -> list[int]:
        if few is not None and not any(first in text for first in few):
            return encode(text, add_special_tokens)
        matcher = added._raw
        if matcher is None or matcher[0].search(text) is None:
            return encode(text, add_special_tokens)
        tok = owner()
        if tok is None:
            raise ReferenceError("encode_text: the tokenizer it was made for is gone")
        return tok._encode_split(text, add_special_tokens)

    return encode_text


def accelerate_offsets(tokenizer: Tokenizer) -> OffsetsEncoder | None:
    """A native ``encode_offsets(text, trim, before, after) -> (ids, offsets) | None`` for
    ``tokenizer``, or None.

    The ids are ``encode(text, add_special_tokens=False)``'s within ``before`` and ``after`` (the
    post-processor's ids), the offsets each token's characters of ``text`` as HF reports them,
    within as many ``(0, 0)``; ``trim`` (-1 none, 0, 1 with add_prefix_space) is a ByteLevel
    post-processor's trimming of them. The native core locates a piece's tokens by
    their byte lengths (a Unigram model's unknown and byte tokens by its Viterbi path), so it
    covers BPE, WordPiece and Unigram after the native pre-tokenizers but a ByteLevel prefix
    space (Metaspace's added character takes the span of the one it stands before), with a
    native normalizer or none, aligned as HF aligns it. A text whose normalizer changes it in a
    way the native core does not align (BertNormalizer or NFC inside a Sequence, a Replace by
    nothing: the alignment is the pure path's to follow) or that meets a token of unknown length
    (an unknown BPE token, an id spelled two ways) gives None, as does every text of a tokenizer
    this returns None for: those take the pure path.
    """
    _native = _core()
    encoder = getattr(tokenizer._native_segment, "__self__", None)
    if _native is not None and tokenizer._native_segment in _PIECES_MODELS:
        return _pieces_offsets(tokenizer, _PIECES_MODELS[tokenizer._native_segment])
    if _native is None or tokenizer._native_text is None or not isinstance(encoder, _native.Encoder):
        return None
    normalizer = tokenizer.normalizer
    if normalizer is not None and not isinstance(normalizer, _native.Normalizer) or _pure_aligned(
        tokenizer._pure_normalizer
    ):
        return None
    steps = _program(tokenizer)
    if steps is None or any(step[0] == "byte_level" and step[1] for step in steps):
        return None  # ByteLevel's prefix space: its offsets are trimmed by rules not followed here
    model = tokenizer.model
    bound = _id_bound(model)
    if bound is None:
        return None
    if type(model) is models.BPE:
        byte_level = bool(steps) and steps[-1][0] == "byte_level"
        first, chars, edges = _token_lengths(_native, model.vocab, bound, "byte_level" if byte_level else "utf8",
                                             model.end_of_word_suffix or "")
        unknown = model.vocab.get(model.unk_token) if model.unk_token is not None else None
        if model.byte_fallback:
            for b in range(256):
                token = _byte_level.byte_token(b)
                id = model.vocab.get(token)
                if id is None:
                    continue
                if first[id] != -1:
                    # a byte token the model emits stands for one byte of the piece, unless its
                    # own characters could make it too: a whole-piece lookup, or a merge of two
                    # tokens that spell it
                    made = model.ignore_merges or any(
                        token[:j] in model.vocab and token[j:] in model.vocab for j in range(1, len(token))
                    )
                    first[id] = -1 if made else 1
                chars[id] = -1  # one byte of a character
        if unknown is not None:
            first[unknown] = -1
        encoder.set_offsets(first.tobytes(), None, -1, chars.tobytes(), edges)
    elif type(model) is models.WordPiece:
        first, cont, _ = _token_lengths(_native, model.vocab, bound, "wordpiece", model.continuing_subword_prefix)
        encoder.set_offsets(first.tobytes(), cont.tobytes(), model.vocab[model.unk_token])
    elif type(model) is models.WordLevel:
        # its encoder is the WordPiece one _model_encoder made, which found the prefix and unk
        first, cont, _ = _token_lengths(_native, model.vocab, bound, "wordpiece", models.absent_prefix(model.vocab) or "")
        encoder.set_offsets(first.tobytes(), cont.tobytes(), model.vocab[model.unk_token])
    elif type(model) is models.Unigram:
        # a piece's bytes; the unknown token and byte tokens have none of their own (the core
        # asks the model for their bytes)
        first, chars, _ = _token_lengths(_native, list(model.pieces), bound, "utf8")
        first[model.unk_id] = chars[model.unk_id] = -1
        if model.byte_fallback:
            for b in range(256):
                id = model.token_to_id(_byte_level.byte_token(b))
                if id is not None:
                    first[id] = chars[id] = -1
        encoder.set_offsets(first.tobytes(), None, -1, chars.tobytes())
    else:
        return None
    encode_offsets = encoder.encode_offsets
    # HF trims a token's offsets by the spaces of its string, which the core counts in the text
    # the token covers: the same characters but for an unknown token, a byte token, and the
    # prefix or suffix a model adds (a WordPiece "##", a BPE end-of-word suffix), whose strings
    # are not their text. Those models' trimmed offsets are the pure path's.
    strings_are_text = (type(model) is models.BPE and not model.byte_fallback and not model.end_of_word_suffix
                        and (model.unk_token is None or model.unk_token not in model.vocab))

    def encode(text: str, trim: int, before: Sequence[int], after: Sequence[int]
               ) -> tuple[list[int], list[tuple[int, int]]] | None:
        if trim != -1 and not strings_are_text:
            return None
        if not before and not after:
            laid_alone: tuple[list[int], list[tuple[int, int]]] | None = encode_offsets(text, normalizer, trim)
            return laid_alone
        if max(*before, *after, 0) > _MAX_ID:
            found = encode_offsets(text, normalizer, trim)  # ids beyond the native core's int32
            if found is None:
                return None
            ids, offsets = found
            return [*before, *ids, *after], [(0, 0)] * len(before) + offsets + [(0, 0)] * len(after)
        laid: tuple[list[int], list[tuple[int, int]]] | None = encode_offsets(text, normalizer, trim, before, after)
        return laid

    return encode


def _pieces_offsets(tokenizer: Tokenizer, encoder: Any) -> OffsetsEncoder | None:
    """``accelerate_offsets`` for a pre-tokenizer the native core has no program for (Falcon's
    Punctuation and Digits around ByteLevel): the pure pipeline's added tokens, normalizer and
    pre-tokenizer with their alignments, as ``encode_words`` runs them, then the native model on
    each piece (``_pieces_encoder``'s, on the piece as it is), which locates its tokens in the
    piece's characters, each the span of the text its alignment says. None where the model has
    no native lengths, or an offsets-trimming post-processor (whose trimming reads the token
    strings) asks for them."""
    model = tokenizer.model
    bound = _id_bound(model)
    if type(model) is not models.BPE or bound is None:
        return None
    if model.byte_fallback or model.continuing_subword_prefix or model.end_of_word_suffix:
        return None
    first, chars, _ = _token_lengths(_core(), model.vocab, bound, "utf8")
    unknown = model.vocab.get(model.unk_token) if model.unk_token is not None else None
    if unknown is not None:
        first[unknown] = chars[unknown] = -1
    encoder.set_offsets(first.tobytes(), None, -1, chars.tobytes())
    pre = tokenizer.pre_tokenizer
    normalizer = tokenizer._pure_normalizer
    added = tokenizer.added
    encode_offsets = encoder.encode_offsets

    def normalize(text: str, spans: list[tuple[int, int]]) -> tuple[str, list[tuple[int, int]]]:
        return normalizers.aligned(normalizer, text, spans) if normalizer is not None else (text, spans)

    def encode(text: str, trim: int, before: Sequence[int], after: Sequence[int]
               ) -> tuple[list[int], list[tuple[int, int]]] | None:
        if trim != -1 or not isinstance(text, str) or not text.isascii() and _SURROGATE.search(text):
            return None  # the pure path raises for a lone surrogate
        ids: list[int] = [*before]
        offsets: list[tuple[int, int]] = [(0, 0)] * len(before)
        for piece, offset, spans, added_id in added.split_aligned(text, normalize):
            if not piece:
                continue
            if added_id is not None:
                ids.append(added_id)
                offsets.append((spans[0][0], spans[-1][1]))
                continue
            for sub, _, sub_spans in pre_tokenizers.pre_tokenize_aligned(pre, [(piece, offset, spans)]):
                found = encode_offsets(sub, None, -1)
                if found is None:
                    return None
                ids += found[0]
                offsets += [(sub_spans[a][0], sub_spans[b - 1][1]) for a, b in found[1]]
        ids += after
        offsets += [(0, 0)] * len(after)
        return ids, offsets

    return encode


def _token_lengths(_native: Any, vocab: Mapping[str, int] | list[str], bound: int, kind: str, affix: str = ""
                   ) -> tuple[array[int], array[int], bytes | None]:
    """Each id's two lengths of ``kind`` (``_native.token_lengths``') of its token, 0 for an id no
    token has, -1 for one spelled with two lengths (which of them a piece holds is not known), and
    for "byte_level" the spaces ByteLevel's trimming cuts of each (``set_offsets``' edges)."""
    tables = getattr(vocab, "tables", None)
    source = tables if tables is not None else vocab if isinstance(vocab, list) else _as_dict(vocab)
    first, second = array("i"), array("i")
    *lengths, edges = _native.token_lengths(source, bound, kind, affix)
    for length, table in zip((first, second), lengths):
        length.frombytes(table)
    # a .mtok's records filling gaps in the ids stand for no token
    for id in getattr(vocab, "hidden", ()):
        if id < bound:
            first[id] = second[id] = 0
    return first, second, edges


def _pure_aligned(normalizer: object) -> bool:
    """Whether the normalizer has a step whose alignment only the pure path follows: NFKC (the
    native core runs it as NFKD then NFC, the same text, but HF aligns a composite of a
    compatibility decomposition its own way), and an empty Prepend (no text changes, but HF
    gives the first character an empty span)."""
    if type(normalizer) is normalizers.Sequence:
        return any(_pure_aligned(member) for member in normalizer.normalizers)  # type: ignore[attr-defined]
    return type(normalizer) is normalizers.NFKC or type(normalizer) is normalizers.Prepend and not normalizer.prepend


_SURROGATE = re.compile("[\ud800-\udfff]")


_MAX_ID = 2**31 - 1
_LAYOUT_PROCESSORS = (
    processors.ByteLevel, processors.BertProcessing, processors.RobertaProcessing, processors.TemplateProcessing,
)


def _affixes(post: processors.PostProcessor | None) -> tuple[list[int], list[int]] | None:
    """The ids ``post`` puts before and after a single sequence, which the native core adds itself;
    None when ``post`` does more than lay out fixed ids around it (or is of a kind not known here).

    >>> _affixes(processors.BertProcessing(sep=("[SEP]", 2), cls=("[CLS]", 1)))
    ([1], [2])
    """
    if post is None:
        return [], []
    if not _lays_out(post):
        return None
    marker: Any = object()
    out = [i for seq in post.process_encodings([[marker]]) for i in seq]
    at = [k for k, i in enumerate(out) if i is marker]
    # a template repeating (or dropping) the sequence, or ids beyond the native core's int32
    if len(at) != 1 or any(i is not marker and i > _MAX_ID for i in out):
        return None
    return out[: at[0]], out[at[0] + 1 :]


def _lays_out(post: processors.PostProcessor) -> bool:
    if type(post) is processors.Sequence:
        return all(_lays_out(member) for member in post.processors)
    return type(post) in _LAYOUT_PROCESSORS


_PER_CHARACTER: dict[type, str] = {
    normalizers.NFKD: "nfkd", normalizers.StripAccents: "strip_accents", normalizers.Lowercase: "lowercase",
}
_SPACE_RUNS = re.compile(r" \{([0-9]{1,10}),\}")


def accelerate_normalizer(normalizer: normalizers.Normalizer | None) -> normalizers.Normalizer | None:
    """``normalizer``, or a native one giving the same text for every input.

    >>> bert = normalizers.BertNormalizer()
    >>> accelerate_normalizer(bert)("Héllo\\t世界") == bert("Héllo\\t世界")       # doctest: +SKIP
    True
    """
    _native = _core()
    if _native is None or normalizer is None:
        return normalizer
    kind = type(normalizer)
    if kind is normalizers.BertNormalizer:
        bert: Any = normalizer
        flags = (
            _native.BERT_CLEAN * bert.clean_text
            | _native.BERT_CHINESE * bert.handle_chinese_chars
            | _native.BERT_STRIP * bert._strip
            | _native.BERT_LOWER * bert.lowercase
        )
        native: normalizers.Normalizer = _native.Normalizer(normalizer, "bert", flags=flags)
        return native
    if kind is normalizers.NFC:
        native = _native.Normalizer(normalizer, "nfc")
        return native
    if kind is normalizers.NFKC:
        # NFKC is NFC of NFKD: a compatibility-decomposed text is its own canonical decomposition
        steps = (_native.Normalizer(normalizers.NFKD(), "nfkd"), _native.Normalizer(normalizers.NFC(), "nfc"))
        native = _native.Normalizer(normalizer, "sequence", members=steps)
        return native
    if kind is normalizers.Precompiled:
        pc: Any = normalizer
        units = struct.pack(f"<{len(pc._units)}I", *pc._units)
        native = _native.Normalizer(normalizer, "precompiled", units=units, replacements=pc._replacements)
        return native
    if kind is normalizers.SentencePiece:
        sp: Any = normalizer
        native = _native.SentencePieceNormalizer(
            normalizer, units=struct.pack(f"<{len(sp._units)}I", *sp._units), replacements=sp._replacements,
            user=list(sp.user_defined_symbols), add_dummy_prefix=sp.add_dummy_prefix,
            remove_extra_whitespaces=sp.remove_extra_whitespaces, escape_whitespaces=sp.escape_whitespaces,
            treat_whitespace_as_suffix=sp.treat_whitespace_as_suffix,
        )
        return native
    if kind in _PER_CHARACTER:
        native = _native.Normalizer(normalizer, _PER_CHARACTER[kind])
        return native
    if kind is normalizers.Replace:
        rp: Any = normalizer
        runs = _SPACE_RUNS.fullmatch(rp.pattern.get("Regex", "")) if rp._regex is not None else None
        if runs is not None and 1 <= int(runs[1]) < 2**31:
            # ALBERT's " {2,}": each run of at least that many spaces becomes the content
            native = _native.Normalizer(normalizer, "runs", pattern=" ", content=rp.content, flags=int(runs[1]))
            return native
        if rp._regex is not None and rp.pattern.get("Regex") in _WHITESPACE_RUNS:
            # CLIP's "\s+" -> " ": each run of \s characters becomes the content
            native = _native.Normalizer(normalizer, "space_runs", content=rp.content)
            return native
        if rp._regex is not None or not rp._literal:
            return normalizer
        native = _native.Normalizer(normalizer, "replace", pattern=rp._literal, content=rp.content)
        return native
    if kind is normalizers.Prepend:
        native = _native.Normalizer(normalizer, "prepend", content=normalizer.prepend)  # type: ignore[attr-defined]
        return native
    if kind is normalizers.Sequence:
        members = normalizer.normalizers  # type: ignore[attr-defined]
        fast = [accelerate_normalizer(member) for member in members]
        # all native: one native Normalizer, which encode_text runs without the GIL
        if all(isinstance(member, _native.Normalizer) for member in fast):
            native = _native.Normalizer(normalizer, "sequence", members=tuple(fast))
            return native
        if any(a is not b for a, b in zip(fast, members)):
            return normalizers.Sequence(fast)  # type: ignore[arg-type]
    return normalizer


def accelerate_decode(tokenizer: Tokenizer) -> Any:
    """A native ``Decoder`` for ``tokenizer`` (``decode(ids, skip_special_tokens) -> str | None``),
    or None when the decoder has a step the native core does not reproduce exactly (a regex
    ``Replace``, empty patterns, ``SentencePiece`` inside a chain or with a denormalizer) or the
    ids are too sparse for a table.

    Its table holds, for every id, the token ``Tokenizer._decode_tokens`` would pass the decoder
    (the added token's decode form, else the model's) and whether skip_special_tokens drops it.
    """
    _native = _core()
    if _native is None:
        return None
    decoder = tokenizer.decoder
    steps = _decoder_steps(decoder) if decoder is not None else []
    sp: Any = decoder if type(decoder) is decoders.SentencePiece else None
    if sp is not None and sp._denormalize is None:
        strip = bool(sp.add_dummy_prefix or sp.remove_extra_whitespaces)
        steps = [("sentencepiece", sp.unk_surface, strip, bool(sp.remove_extra_whitespaces))]
    model = tokenizer.model
    bound = _id_bound(model)
    added = tokenizer.added
    if steps is None or bound is None:
        return None
    bound = max(bound, max(added.by_id, default=-1) + 1)
    if bound > 4 * (model.vocab_size + len(added.by_id)) + 2**16:
        return None  # ids spread far apart: a table by id would be mostly holes
    # a .mtok's tokens are taken from its records in C: a str per token cost Qwen3's first decode
    # over 20 ms
    vocab = model.vocab if type(model).id_to_token is models._VocabModel.id_to_token else None
    indexed = vocab if isinstance(vocab, models.IndexedVocab) and sp is None else None
    tokens: list[str | None] = [None] * bound if indexed is not None else _tokens_by_id(model, bound)
    for id in added.by_id:  # every one has a token for decode
        tokens[id] = added.token_for_decode(id)

    def token(id: int) -> str | None:
        return tokens[id] if indexed is None or tokens[id] is not None else model.id_to_token(id)

    # the ids whose token is special: a special token's model id, where its table holds it, and
    # the added ids (no pass over every id)
    candidates = {*added.by_id, *(model.token_to_id(content) for content in added.special)}
    specials = sorted(id for id in candidates if id is not None and 0 <= id < bound and token(id) in added.special)
    kinds = bytes(_sentencepiece_kind(_native, sp, t) for t in tokens) if sp is not None else b""
    records = indexed.tables if indexed is not None else None
    hidden = tuple(indexed.hidden) if indexed is not None else ()
    try:
        return _native.Decoder(tokens, specials, tuple(steps), decoder is None, kinds, records, hidden)
    except UnicodeEncodeError:
        return None  # a token with a lone surrogate has no UTF-8 form: the pure path copes


def _tokens_by_id(model: Any, bound: int) -> list[str | None]:
    """``model.id_to_token(id)`` for every id below ``bound``, without a call per id where the
    model's own table answers the same."""
    by_id = type(model).id_to_token
    if by_id in (models.Unigram.id_to_token, models.SentencePieceBPE.id_to_token):
        return [*model.pieces, *[None] * (bound - len(model.pieces))]
    if by_id is models._VocabModel.id_to_token and type(model.vocab) is dict:
        tokens: list[str | None] = [None] * bound
        for token, id in model.vocab.items():  # later tokens of one id win, as in its inverse
            tokens[id] = token
        return tokens
    return [model.id_to_token(i) for i in range(bound)]


def decode_stream(decoder: Any, skip_special_tokens: bool) -> Any:
    """The native core's DecodeStream over ``decoder`` (an :func:`accelerate_decode` result)."""
    return _built().DecodeStream(decoder, skip_special_tokens)


def _sentencepiece_kind(_native: Any, sp: Any, token: str | None) -> int:
    """How the SentencePiece decoder treats a piece, in the order it tests them."""
    if token is None:
        return 0
    if token in sp._bytes:
        return int(_native.DEC_BYTE_PIECE)
    if token in sp._control:
        return int(_native.DEC_CONTROL)
    return int(_native.DEC_UNK) if token == sp.unk_piece else 0


def _id_bound(model: Any) -> int | None:
    """One more than the largest id ``model.id_to_token`` may know, None when that is unknown."""
    pieces = getattr(model, "pieces", None)
    if isinstance(pieces, (list, tuple)):
        return len(pieces)
    vocab = getattr(model, "vocab", None)
    tables = getattr(vocab, "tables", None)
    if tables is not None:
        return int(tables.max_id) + 1
    if isinstance(vocab, Mapping):
        return max(vocab.values(), default=-1) + 1
    return None


def _decoder_steps(decoder: Any) -> list[Step] | None:
    """The native program of a decoder (Sequences flattened), None if it has no exact one."""
    kind = type(decoder)
    if kind is decoders.Sequence:
        steps: list[Step] = []
        for member in decoder.decoders:
            sub = _decoder_steps(member)
            if sub is None:
                return None
            steps += sub
        return steps
    if kind is decoders.ByteLevel:
        return [("byte_level",)]
    if kind is decoders.ByteFallback:
        return [("byte_fallback",)]
    if kind is decoders.Fuse:
        return [("fuse",)]
    if kind is decoders.Metaspace:
        return [("metaspace", decoder.replacement, decoder.prepend_scheme != "never")]
    if kind is decoders.Strip:
        return [("strip", decoder.content, decoder.start, decoder.stop)]
    if kind is decoders.WordPiece and isinstance(decoder.prefix, str):
        return [("wordpiece", decoder.prefix, bool(decoder.cleanup))]
    if kind is decoders.Replace and _nonempty(decoder._literal) and isinstance(decoder.content, str):
        return [("replace", decoder._literal, decoder.content)]
    if kind is decoders.BPEDecoder and _nonempty(decoder.suffix):
        return [("bpe", decoder.suffix)]
    if kind is decoders.CTC and _nonempty(decoder.pad_token, decoder.word_delimiter_token):
        return [("ctc", decoder.pad_token, decoder.word_delimiter_token, bool(decoder.cleanup))]
    return None


def _nonempty(*literals: object) -> bool:
    """Whether every one is a literal the native core can search for: a non-empty str."""
    return all(isinstance(literal, str) and literal for literal in literals)


_NOT_BUILT = (
    "pymtok: the native core is not built (no C compiler when pymtok was installed), so every "
    "tokenizer runs on the slower pure-Python path; for the fast path install a C compiler and "
    "reinstall: pip install --force-reinstall --no-deps --no-binary pymtok pymtok (or, in a "
    "checkout, pip install .)"
)


@functools.cache
def _built() -> Any:
    try:
        from . import _native  # type: ignore[attr-defined]
    except ImportError:
        _native = None
    # Run from a source tree without the build, the C sources' folder (pymtok/_native/) imports
    # as an empty namespace package of the same name.
    if getattr(_native, "__file__", None) is None:
        warnings.warn(_NOT_BUILT, RuntimeWarning, stacklevel=4)
        return None
    return _native


# FastEncode's modes, in module.c's order (FAST_ENCODE, FAST_NUMPY, FAST_CALL)
_FAST_FORMS = ("encode", "encode_to_numpy", "__call__")


def fast_method(method: Callable[..., Any], batch_encoding: type | None = None) -> Any:
    """The ``Tokenizer`` method of that name (``encode``, ``encode_to_numpy``, or ``__call__``,
    which makes ``batch_encoding``'s instances) as the native core's method descriptor
    (``FastEncode``): its commonest call runs in C with what a tokenizer's ``_encode_fast`` holds
    (``__call__``: from the plan ``encoding._plain_call`` keeps, where the tokenizer is a
    ``Tokenizer`` itself); the method itself when the core is not built. Quiet: the warning that
    the core is missing is the first load's."""
    try:
        from . import _native  # type: ignore[attr-defined]
    except ImportError:
        return method
    fast = getattr(_native, "FastEncode", None)
    if fast is None:
        return method
    mode = _FAST_FORMS.index(method.__name__)
    return fast(method, mode, batch_encoding) if batch_encoding is not None else fast(method, mode)


def _core() -> Any:
    """The ``_native`` module, or None when it is not built or ``PYMTOK_PURE=1``.

    Not built, the pure path is taken after one warning saying how to get the fast one.
    """
    if os.environ.get("PYMTOK_PURE", "") not in ("", "0"):
        return None
    return _built()


def _as_dict(table: Mapping[Any, Any]) -> dict[Any, Any]:
    return table if type(table) is dict else dict(table)


def _ids_fit(vocab: Mapping[str, int]) -> bool:
    """Whether a vocabulary's ids fit the native core's int32 (HF allows any u32)."""
    return getattr(vocab, "tables", None) is not None or max(vocab.values(), default=0) <= _MAX_ID


def _model_tables(model: Any) -> tuple[Any, Any]:
    """The Encoder's vocab and merges: a .mtok's native tables as they are, else dicts."""
    tables = getattr(model.vocab, "tables", None)
    if tables is not None:
        return tables, None
    return _as_dict(model.vocab), (_as_dict(model.merges) if isinstance(model, models.BPE) else None)


def _unseen_literals(normalizer: object) -> frozenset[str]:
    """Strings no text ``normalizer`` gives holds: a literal Replace's pattern, when its content
    is not empty and holds none of the pattern's characters, and every later step is such a
    Replace whose content holds none of them either.

    Replace matches left to right, so the text between its matches holds no match, and a
    match would have to take in some of the content. ChatGLM3 replaces its dummy prefix, then
    splits on it: that Split never cuts.

    >>> sorted(_unseen_literals(normalizers.Replace(pattern={"String": "<p>"}, content="_")))
    ['<p>']
    """
    steps = normalizer.normalizers if isinstance(normalizer, normalizers.Sequence) else [normalizer]
    unseen: set[str] = set()
    for step in steps:
        if not isinstance(step, normalizers.Replace) or "String" not in step.pattern:
            unseen.clear()
            continue
        content = set(step.content)
        unseen = {s for s in unseen if content and not content & set(s)}
        pattern = step.pattern["String"]
        if pattern and content and not content & set(pattern):
            unseen.add(pattern)
    return frozenset(unseen)


# The characters an Oniguruma pattern gives a meaning of their own
_ONIG_META = frozenset("\\^$.|?*+()[]{}")

# Split patterns that match the runs of whitespace (MNN's exports write WhitespaceSplit as one)
_WHITESPACE_RUNS = frozenset({"\\s+"})


def _steps(pre: object, cfg: Any, unseen: frozenset[str] = frozenset()) -> list[Step] | None:
    """The native program for a pre-tokenizer (flattened), or None if it has no exact one;
    a Split on a string in ``unseen`` (which the text never holds) cuts nothing."""
    if pre is None:
        return []
    kind = type(pre)
    if kind is pre_tokenizers.Sequence:
        children = cfg.get("pretokenizers") if isinstance(cfg, Mapping) else None
        members = pre.pretokenizers  # type: ignore[attr-defined]
        if children is not None and len(children) != len(members):
            return None
        steps: list[Step] = []
        for i, member in enumerate(members):
            sub = _steps(member, children[i] if children is not None else None, unseen)
            if sub is None:
                return None
            steps += sub
        return steps
    if kind is pre_tokenizers.ByteLevel:
        return [("byte_level", bool(pre.add_prefix_space), bool(pre.use_regex))]  # type: ignore[attr-defined]
    if kind is pre_tokenizers.BertPreTokenizer:
        return [("bert",)]
    if kind is pre_tokenizers.WhitespaceSplit:
        return [("whitespace_split",)]
    if kind is pre_tokenizers.Metaspace:
        ms: Any = pre
        return [("metaspace", ms.replacement, ms.prepend_scheme, bool(ms.split))]
    if kind is pre_tokenizers.Split:
        sp: Any = pre
        if not isinstance(cfg, Mapping) or cfg.get("type") != "Split":
            return None
        pattern = cfg.get("pattern")
        if isinstance(pattern, Mapping) and pattern.get("String") in unseen and not sp.invert:
            return []  # no match: every behavior keeps the piece whole
        regex = pattern.get("Regex") if isinstance(pattern, Mapping) else None
        literal = pattern.get("String") if isinstance(pattern, Mapping) else None
        if isinstance(literal, str) and literal:
            # a string's matches (Rust's match_indices: leftmost, not overlapping) are a regex's
            # of the string escaped; the empty string matches nothing in HF, nothing to scan
            regex = "".join("\\" + c if c in _ONIG_META else c for c in literal)
        if regex in _WHITESPACE_RUNS and sp.behavior == "Removed" and not sp.invert:
            # Oniguruma's \s is White_Space, WhitespaceSplit's char::is_whitespace: the same pieces
            return [("whitespace_split",)]
        if not isinstance(regex, str):
            return None
        scanner = SCANNERS.get(regex)
        if scanner is not None:
            return [("split", scanner, sp.behavior, bool(sp.invert))]
        if not engine_takes(regex):
            return None
        return [("split", "regex", sp.behavior, bool(sp.invert), regex)]
    # HF's character-predicate splitters
    if kind is pre_tokenizers.Punctuation:
        return [("split", "punctuation", pre.behavior, False)]  # type: ignore[attr-defined]
    if kind is pre_tokenizers.Digits:
        return [("split", "numeric", "Isolated" if pre.individual_digits else "Contiguous", False)]  # type: ignore[attr-defined]
    if kind is pre_tokenizers.Whitespace:
        return [("split", "words", "Removed", True)]
    if kind is pre_tokenizers.CharDelimiterSplit:
        return [("delimiter", pre.delimiter)]  # type: ignore[attr-defined]
    if kind is pre_tokenizers.UnicodeScripts:
        return [("scripts",)]
    return None


def _program(tokenizer: Tokenizer) -> list[Step] | None:
    """The native pre-tokenizer program of ``tokenizer`` (:func:`_steps`), its ByteLevel step
    told whether later steps follow it; None where the core has none."""
    config = tokenizer.config
    # Split keeps no pattern string: that comes from the config the pipeline was built from.
    pre_config = config.get("pre_tokenizer") if "model" in config else None
    steps = _steps(tokenizer.pre_tokenizer, pre_config, _unseen_literals(tokenizer._pure_normalizer))
    if steps is None:
        return None
    kinds = [step[0] for step in steps]
    levels = [k for k, kind in enumerate(kinds) if kind == "byte_level"]
    # after ByteLevel the steps see GPT-2 characters: a second mapping or a Metaspace (whose
    # "first" scheme reads offsets the mapping does not keep) stay on the pure path
    if len(levels) > 1 or levels and "metaspace" in kinds[levels[0]:]:
        return None
    if levels:
        k = levels[0]
        steps[k] = (*steps[k], k < len(steps) - 1)
    return steps


def engine_takes(pattern: str) -> bool:
    """Whether the native regex engine runs a Split pattern exactly as HF's Oniguruma: one it
    compiles (regex.c lists what it refuses) and that cannot backtrack catastrophically (the
    engine has no time limit)."""
    _native = _core()
    return _native is not None and _engine_compiles(_native, pattern)


@functools.lru_cache(maxsize=256)
def _engine_compiles(_native: Any, pattern: str) -> bool:
    return not may_backtrack(pattern) and _native.regex_refusal(pattern) is None
