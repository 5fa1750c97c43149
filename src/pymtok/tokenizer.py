"""The tokenizer: one pipeline (added tokens → normalizer → pre-tokenizer → model → post-processor).

Every file format is read into the same component configs (``tokenizer.json``'s shape) and built
here by ``Tokenizer.from_config``; nothing else constructs a pipeline.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import operator
import os
import re
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypeVar, overload

from . import decoders, encoding, models, native, normalizers, pre_tokenizers, processors
from .added_tokens import AddedToken, AddedVocabulary
from .byte_level import CHAR_TO_BYTE
from .errors import FormatError, TextError

if TYPE_CHECKING:
    from .encoding import BatchEncoding

T = TypeVar("T")
AbstractSpecials = str | Iterable[str]
"""tiktoken's ``allowed_special`` / ``disallowed_special``: ``"all"`` or a set of token strings."""

NAMED_SPECIAL_TOKENS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
_U32 = 2**32


@dataclass(slots=True)
class TokenizerMeta:
    """What MNN files carry beside the pipeline (FORMAT.md §1, §5.1), and the chat context.

    Slots: a misspelt field raises instead of being set aside, and ``encode`` reads
    ``split_special_tokens`` on every call through a slot, not a dict.
    """

    special_ids: list[int] = field(default_factory=list)
    stop_ids: list[int] = field(default_factory=list)
    prefix_ids: list[int] = field(default_factory=list)
    chat_template: str | dict[str, str] | None = None
    # bos_token, eos_token, unk_token, ... as strings: the chat template context
    special_tokens: dict[str, str] = field(default_factory=dict)
    clean_up_tokenization_spaces: bool = False
    # transformers' CLIPTokenizer turns this end-of-word suffix into a space after decoding and
    # strips the result; tokenizer.json's decoder alone leaves it in the text
    decode_suffix_as_space: str | None = None
    # version of pymtok's exactness extension the .mtok file carried (None: MNN's layout only)
    extension_version: int | None = None
    # the settings of transformers' __call__ (model_max_length, padding_side, truncation_side,
    # model_input_names, add_bos_token, add_eos_token): tokenizer_config.json's, over those its
    # tokenizer_class declares
    call_settings: dict[str, Any] = field(default_factory=dict)
    # transformers' extra special tokens (tokenizer_config.json's additional_special_tokens)
    extra_special_tokens: list[str] = field(default_factory=list)
    # the default of encode's split_special_tokens (tokenizer_config.json can set it)
    split_special_tokens: bool = False
    # the added tokens transformers' tokenizer holds beyond the pipeline's own, in added_tokens'
    # shape: the special tokens tokenizer_config.json names that tokenizer.json lacks, registers
    # as added or holds unflagged (transformers adds or flags them in its backend). The
    # transformers API (__call__, decode, len, the vocabulary) runs with them, HF tokenizers'
    # (encode, id_to_token, ...) without, as each library does
    backend_added_tokens: list[dict[str, Any]] = field(default_factory=list)
    # why those tokens could not be worked out (tokenizer_config.json asks for what pymtok does
    # not model): the transformers API raises it, HF tokenizers' runs the pipeline as it is
    backend_unmodeled: str | None = None
    # the decoder transformers' backend runs where it is not the pipeline's (a SentencePiece
    # model's: transformers converts it to HF decoders, which write control tokens out)
    backend_decoder: dict[str, Any] | None = None
    # what a reader recognised or assumed about a source that does not say everything itself
    # (the tiktoken encoding, a BERT vocabulary's casing); shown by ``pymtok info``
    source_notes: list[str] = field(default_factory=list)
    # how a .mtok's MNN part is laid out: "device" (what MNN's runtime reads right, pymtok's
    # default) or "mnn-identical" (MNN's exporter's bytes); None for other sources
    mnn_layout: str | None = None


class _NamedToken:
    """A transformers special-token attribute: ``bos_token`` is the text tokenizer_config.json
    names (None if none), ``bos_token_id`` its id (``unk_token_id`` when the vocabulary lacks it)."""

    def __init__(self, *, id: bool = False) -> None:
        self._id = id
        self._key = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self._key = name.removesuffix("_id")

    def __get__(self, tok: Tokenizer | None, owner: type | None = None) -> Any:
        if tok is None:
            return self
        text = tok.meta.special_tokens.get(self._key)
        if not self._id or text is None:
            return text
        return tok.convert_tokens_to_ids(text)

    def __set__(self, tok: Tokenizer, value: str | None) -> None:
        if self._id:
            raise AttributeError(f"{self._key}_id is read-only: set {self._key} to the token's text")
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{self._key} must be a str or None, got {type(value).__name__}")
        if value is None:
            tok.meta.special_tokens.pop(self._key, None)
        else:
            tok.meta.special_tokens[self._key] = value
        tok._chat = None  # the chat template sees the special tokens


@dataclass
class FileSource:
    """The file a tokenizer was read from, which pickling sends instead of the tables built from it.

    ``data`` is what the reader parsed; ``path`` (when it read a file) is sent instead while the
    file still holds those bytes (size and SHA-256 compared), so that a pickle is a path.
    """

    kind: str  # "mtok"
    data: Any  # bytes-like
    path: str | None = None
    use_extension: bool = True
    _digest: bytes | None = None

    def digest(self) -> bytes:
        if self._digest is None:
            self._digest = hashlib.sha256(self.data).digest()
        return self._digest

    def state(self) -> tuple[Any, ...]:
        """What a pickle holds: the path with size and digest, or else the bytes."""
        if self.path is not None and _file_digest(self.path, len(self.data)) == self.digest():
            return (self.kind, self.path, len(self.data), self.digest(), self.use_extension)
        return (self.kind, bytes(self.data), None, None, self.use_extension)


@functools.cache
def _cpu_count() -> int:
    # os.cpu_count() reads /sys on every call: tens of microseconds, more than a short text's encode
    return os.cpu_count() or 1


def _file_digest(path: str, size: int) -> bytes | None:
    """SHA-256 of the file at ``path`` if it is a regular file of ``size`` bytes, else None."""
    try:
        if not os.path.isfile(path) or os.path.getsize(path) != size:
            return None
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
        return digest.digest()
    except OSError:
        return None


class Tokenizer:
    """Encode text to ids and back, exactly as HF ``tokenizers`` does for the same config.

    >>> tok = pymtok.load("Qwen3/tokenizer.json")          # doctest: +SKIP
    >>> tok.encode("Hello world")                           # doctest: +SKIP
    [9707, 1879]
    """

    def __init__(
        self,
        *,
        model: models.Model,
        normalizer: normalizers.Normalizer | None = None,
        pre_tokenizer: pre_tokenizers.PreTokenizer | None = None,
        decoder: decoders.Decoder | None = None,
        post_processor: processors.PostProcessor | None = None,
        added_tokens: Iterable[AddedToken] = (),
        meta: TokenizerMeta | None = None,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        self.model = model
        self._pure_normalizer = normalizer  # what encode_words runs: it tracks alignments
        self.normalizer = native.accelerate_normalizer(normalizer)
        self.pre_tokenizer = pre_tokenizer
        self._decoder = decoder
        self.post_processor = post_processor
        self.added = AddedVocabulary(
            added_tokens,
            token_to_model_id=model.token_to_id,
            model_vocab_size=model.vocab_size,
            normalizer=normalizer,
        )
        self.meta = meta if meta is not None else TokenizerMeta()
        # The HF-shaped configuration this pipeline was built from (what .mtok's extension stores)
        self.config: Mapping[str, Any] = _kept(config) if config is not None else {}
        self._chat: Any = None
        # the file a reader loaded this from, so that pickling sends the file, not the tables
        self.source: FileSource | None = None
        # HF's Metaspace "first" prepends to the piece from the text's start, which a normalizer
        # may have deleted or put characters before: the first segment is normalized with its
        # alignment then (only then: it costs more)
        self._normalize_first: Callable[[str], tuple[str, int]] | None = None
        if hasattr(normalizer, "aligned") and pre_tokenizers.metaspace_first(pre_tokenizer):
            self._normalize_first = functools.partial(normalizers.normalize_first, normalizer)
        self._native_segment = native.accelerate(self)
        self._native_text = native.accelerate_text(self)
        # encode_batch in one native call, on the native core's own threads (the encoder
        # accelerate_text set up)
        encoder = getattr(self._native_segment, "__self__", None)
        batched = self._native_text is not None and native.is_encoder(encoder)
        self._native_batch = encoder.encode_batch if batched else None
        # encode_to_numpy's common call: the ids as 4-byte unsigned ints, no int object an id
        self._native_u32 = functools.partial(encoder.encode_u32, self.normalizer) if batched else None
        self._native_arrow = encoder.encode_arrow if batched else None
        if batched:
            # the class's encode (native.fast_method) runs the common call, encode(text[,
            # add_special_tokens=flag]), with these in C, without the method's Python frame (which
            # costs more than encoding a word); every other call is the method's
            self._encode_fast = (encoder, self.normalizer)
        # Tokenizer.decode's native decoder, a callable taking (ids, skip_special_tokens), built on
        # first use (its table costs a pass over the vocabulary); None until then
        self._native_decode: Callable[[Any, Any], str | None] | None = None
        # what encoding.call works out per tokenizer (its post-processor, layouts, native
        # offsets), each with what it was made from: a short call costs less than working them out
        self._call_memo: dict[Any, Any] = {}

    @property
    def decoder(self) -> decoders.Decoder | None:
        return self._decoder

    @decoder.setter
    def decoder(self, decoder: decoders.Decoder | None) -> None:
        self._decoder = decoder
        self._native_decode = None  # its table holds the old decoder's steps

    @classmethod
    def from_config(cls, config: Mapping[str, Any], meta: TokenizerMeta | None = None) -> Tokenizer:
        """Build from a ``tokenizer.json``-shaped mapping (vocab tables may be any Mapping).

        Its numbers are taken as the floats they are. HF reads a file's numbers (``load``
        does too) otherwise than Python's ``json`` at times, by an ulp: where a Unigram's scores
        tie to the ulp, ``from_config(json.load(f))`` may then split a piece otherwise than
        ``load(f)`` and HF's ``Tokenizer.from_str(json.dumps(config))``.
        """
        if not isinstance(config, Mapping):
            raise FormatError(f"tokenizer config must be an object, got {type(config).__name__}")
        if "model" not in config:
            raise FormatError("tokenizer config has no 'model'")
        added = config.get("added_tokens") or []
        if not isinstance(added, list):
            raise FormatError("'added_tokens' must be a list")
        return cls(
            model=_built("model", models.from_config, config["model"]),
            normalizer=_built("normalizer", normalizers.from_config, config.get("normalizer")),
            pre_tokenizer=_built("pre_tokenizer", pre_tokenizers.from_config, config.get("pre_tokenizer")),
            decoder=_built("decoder", decoders.from_config, config.get("decoder")),
            post_processor=_built("post_processor", processors.from_config, config.get("post_processor")),
            added_tokens=[_built("added_tokens", AddedToken.from_config, t) for t in added],
            meta=meta,
            config=config,
        )

    # -- encoding -------------------------------------------------------------------------

    def encode(
        self,
        text: str,
        pair: str | None = None,
        *,
        add_special_tokens: bool = True,
        split_special_tokens: bool | None = None,
        allowed_special: AbstractSpecials | None = None,
        disallowed_special: AbstractSpecials | None = None,
    ) -> list[int]:
        """Token ids of ``text`` (and of ``pair`` after it, as HF ``tokenizers`` lays a pair out).

        ``add_special_tokens`` (keyword only) applies the post-processor (BOS, CLS, SEP, ...).
        Text spelling a special token becomes that token, as in HF. ``split_special_tokens=True``
        (transformers' keyword; ``meta.split_special_tokens`` is its default) encodes such text as
        ordinary text instead. tiktoken's ``allowed_special`` / ``disallowed_special`` take over
        when either is given, with tiktoken's defaults for the other (``set()`` and ``"all"``):
        allowed special tokens are matched, a disallowed one in the text raises ValueError, the
        rest are ordinary text.

        >>> tok.encode("Hello world")                           # doctest: +SKIP
        [9707, 1879]
        >>> tok.encode("<|im_end|>", split_special_tokens=True)       # doctest: +SKIP
        [27, 91, 318, 6213, 91, 29]
        """
        native_text = self._native_text
        if (
            native_text is not None
            and type(text) is str
            and pair is split_special_tokens is allowed_special is disallowed_special is None
            and type(add_special_tokens) is bool
            and not self.meta.split_special_tokens
        ):
            return native_text(text, add_special_tokens)  # the common call, with nothing to check
        if not isinstance(text, str):
            raise TypeError(f"encode() takes a str, got {type(text).__name__}")
        if pair is not None and not isinstance(pair, str):
            raise TypeError(
                f"encode(): pair must be a str or None, got {type(pair).__name__}"
                + ("; add_special_tokens is keyword-only" if isinstance(pair, bool) else "")
            )
        _check_flag("encode", "add_special_tokens", add_special_tokens)
        specials = (split_special_tokens, allowed_special, disallowed_special)
        if pair is None:
            return self._encode_ids(text, add_special_tokens, self._skipped_specials(text, *specials))
        ids = self._encode_ids(text, False, self._skipped_specials(text, *specials))
        pair_ids = self._encode_ids(pair, False, self._skipped_specials(pair, *specials))
        if add_special_tokens and self.post_processor is not None:
            return self.post_processor(ids, pair_ids)
        return ids + pair_ids

    def encode_to_numpy(
        self,
        text: str,
        *,
        add_special_tokens: bool = True,
        split_special_tokens: bool | None = None,
        allowed_special: AbstractSpecials | None = None,
        disallowed_special: AbstractSpecials | None = None,
    ) -> Any:
        """``encode``'s ids as a numpy array of ``uint32``, as tiktoken's ``encode_to_numpy`` gives
        them (needs numpy); the keywords are ``encode``'s.

        Where the native core runs ``encode_batch``, the ids go from it to the array without an
        int object each (the list ``encode`` returns costs a good part of a warm encode); elsewhere
        they are ``encode``'s list, converted.

        >>> tok.encode_to_numpy("Hello world")                  # doctest: +SKIP
        array([9707, 1879], dtype=uint32)
        """
        np, u32 = _numpy_u32()
        native_u32 = self._native_u32
        if (
            native_u32 is not None
            and type(text) is str
            and split_special_tokens is allowed_special is disallowed_special is None
            and type(add_special_tokens) is bool
            and not self.meta.split_special_tokens
        ):
            return np.frombuffer(native_u32(text, add_special_tokens), u32)
        if not isinstance(text, str):
            raise TypeError(f"encode_to_numpy() takes a str, got {type(text).__name__}")
        _check_flag("encode_to_numpy", "add_special_tokens", add_special_tokens)
        ids = self.encode(text, add_special_tokens=add_special_tokens, split_special_tokens=split_special_tokens,
                          allowed_special=allowed_special, disallowed_special=disallowed_special)
        return np.array(ids, u32)

    def __call__(self, text: Any = None, text_pair: Any = None, *, add_special_tokens: Any = True,
                 return_offsets_mapping: Any = False, **kwargs: Any) -> BatchEncoding:
        """transformers' ``__call__``: a ``BatchEncoding`` of ``input_ids``, ``attention_mask``, ...

        Takes transformers' keywords (``padding``, ``truncation``, ``max_length``, ``stride``,
        ``return_offsets_mapping``, ``return_tensors``, ...; see :func:`pymtok.encoding.call`);
        any other raises TypeError. Whether and how far to pad or truncate comes from the call
        only, as in transformers 5: of ``tokenizer.json``'s ``padding`` / ``truncation`` sections it
        takes the pad token and the padding and truncation sides (``direction``), each where
        ``tokenizer_config.json`` does not set it, and nothing else (their lengths, strategy,
        stride, ``pad_to_multiple_of`` and ``pad_type_id`` are not used). The special tokens
        ``tokenizer_config.json`` names and ``tokenizer.json`` lacks (or holds as unflagged or
        plain vocabulary tokens) are added tokens here, as transformers adds them
        (``meta.backend_added_tokens``); ``encode`` runs without them, as HF ``tokenizers`` does.
        The ids are ``tokenizer.json``'s, as ``PreTrainedTokenizerFast`` gives them; transformers 5's
        ``AutoTokenizer`` rebuilds some classes' pipelines (``LlamaTokenizer``, ``GPT2Tokenizer``,
        ``T5Tokenizer``) and then differs on some texts (README, "transformers' ``__call__``").

        >>> tok("Hello world")["input_ids"]                     # doctest: +SKIP
        [9707, 1879]
        """
        # the commonest calls: no keywords but these two, which are named so that such a call
        # makes no dict of them to look them up in
        if (text_pair is None and not kwargs and type(text) is str and type(add_special_tokens) is bool
                and type(return_offsets_mapping) is bool):
            meta = self.meta
            # _backend's answer where this tokenizer is its own backend (most), without its frame
            backend = (self if meta.backend_unmodeled is None and not meta.backend_added_tokens
                       and meta.backend_decoder is None else self._backend())
            plain = encoding._plain_call(backend, text, add_special_tokens, return_offsets_mapping)
            if plain is not None:
                return plain
        return encoding.call(self._backend(), text, text_pair, add_special_tokens=add_special_tokens,
                             return_offsets_mapping=return_offsets_mapping, **kwargs)

    def _backend(self) -> Tokenizer:
        """The pipeline transformers' tokenizer runs: this one, with ``meta.backend_added_tokens``
        added where there are any (built on first use, kept while the tokenizer keeps its meta)."""
        meta = self.meta
        if meta.backend_unmodeled is not None:
            raise FormatError(f"{meta.backend_unmodeled} (encode, id_to_token and HF tokenizers' other calls still work)")
        if not meta.backend_added_tokens and meta.backend_decoder is None:
            return self
        known = self._call_memo.get("backend")
        if known is not None and known[0] is meta:
            backend: Tokenizer = known[1] or self
            return backend
        added = [*(self.config.get("added_tokens") or []), *meta.backend_added_tokens]
        backend = Tokenizer(
            model=self.model,
            normalizer=self._pure_normalizer,
            pre_tokenizer=self.pre_tokenizer,
            decoder=self._decoder if meta.backend_decoder is None else _built(
                "decoder", decoders.from_config, meta.backend_decoder),
            post_processor=self.post_processor,
            added_tokens=[_built("added_tokens", AddedToken.from_config, t) for t in added],
            meta=meta,
            config={**self.config, "added_tokens": added},
        )
        # the backend is its own (None: no reference to itself, which only the cycle collector frees)
        backend._call_memo["backend"] = (meta, None)
        self._call_memo["backend"] = (meta, backend)
        return backend

    @property
    def truncation(self) -> dict[str, Any] | None:
        """``tokenizer.json``'s ``truncation`` object as the file has it (not applied by ``encode``;
        ``__call__`` takes its side)."""
        value = self.config.get("truncation")
        return dict(value) if isinstance(value, Mapping) else None

    @property
    def padding(self) -> dict[str, Any] | None:
        """``tokenizer.json``'s ``padding`` object as the file has it (not applied by ``encode``;
        ``__call__`` takes its pad token and side)."""
        value = self.config.get("padding")
        return dict(value) if isinstance(value, Mapping) else None

    def _encode_ids(self, text: str, add_special_tokens: bool, skip: frozenset[int] = frozenset()) -> list[int]:
        if self._native_text is not None and not skip:
            return self._native_text(text, add_special_tokens)  # checks for lone surrogates itself
        return self._encode_split(text, add_special_tokens, skip)

    def _encode_split(self, text: str, add_special_tokens: bool, skip: frozenset[int] = frozenset()) -> list[int]:
        """``_encode_ids`` by the added tokens' split in Python, each segment encoded alone."""
        _check_encodable(text)
        ids: list[int] = []
        for piece, offset, added_id in self.added.split(text, self.normalizer, skip, self._normalize_first):
            if added_id is not None:
                ids.append(added_id)
            elif piece:
                ids.extend(self._encode_segment(piece, offset))
        if add_special_tokens and self.post_processor is not None:
            ids = self.post_processor(ids)
        return ids

    def encode_words(self, text: str) -> list[WordToken]:
        """What ``encode(text, add_special_tokens=False)`` gives, token by token: the id, HF's
        token string, the span of ``text`` it covers (HF's offsets, in characters) and the index
        of the word (pre-tokenized piece, or added token) it belongs to.

        Always the pure-Python pipeline, which tracks where each character comes from.

        >>> tok.encode_words("Hi there")                        # doctest: +SKIP
        [(13347, 'Hi', 0, 2, 0), (1052, 'Ġthere', 2, 8, 1)]
        """
        if not isinstance(text, str):
            raise TypeError(f"encode_words() takes a str, got {type(text).__name__}")
        _check_encodable(text)
        normalizer = self._pure_normalizer
        out: list[WordToken] = []
        word = 0
        # special tokens stay text under split_special_tokens, as encode leaves them
        segments = self.added.split_aligned(
            text, lambda t, spans: normalizers.aligned(normalizer, t, spans) if normalizer is not None else (t, spans),
            self._skipped_specials(text, None, None, None),
        )
        for piece, offset, spans, added_id in segments:
            if not piece:
                continue
            if added_id is not None:
                out.append((added_id, piece, spans[0][0], spans[-1][1], word))
                word += 1
                continue
            pieces = [(piece, offset, spans)]
            if self.pre_tokenizer is not None:
                pieces = pre_tokenizers.pre_tokenize_aligned(self.pre_tokenizer, pieces)
            for sub, _, sub_spans in pieces:
                if not sub:
                    continue
                char_at = _char_at_byte(sub)
                # HF's Unigram names a token by the text it covers (unknown text included), except
                # byte-fallback tokens; the other models by their vocabulary string
                by_text = isinstance(self.model, models.Unigram)
                # encoded once: a sentencepiece source's piece is its whole text
                encoded = sub.encode("utf-8") if by_text else b""
                for id, start, end in self.model.tokenize_offsets(sub):
                    token = self.model.id_to_token(id) or ""
                    if by_text and not _BYTE_TOKEN.fullmatch(token):
                        token = encoded[start:end].decode("utf-8", "replace")
                    begin = sub_spans[char_at(start)][0]
                    # an empty span is a sentencepiece byte piece before a character's last one,
                    # which covers nothing at the character's start
                    out.append((id, token, begin, begin if end == start else sub_spans[char_at(end - 1)][1], word))
                word += 1
        return out

    def _skipped_specials(
        self,
        text: str,
        split: bool | None,
        allowed: AbstractSpecials | None,
        disallowed: AbstractSpecials | None,
    ) -> frozenset[int]:
        """The ids of the special tokens to leave as text in ``text`` (see ``encode``).

        The native text encoder matches every added token, so a call skipping some is split in
        Python (the segments still encode natively): one matcher, the same ids on both paths.
        """
        if allowed is None and disallowed is None:
            if split is None:
                split = self.meta.split_special_tokens
            if not isinstance(split, bool):
                raise TypeError(f"split_special_tokens must be a bool, got {type(split).__name__}")
            return self._special_id_set if split else frozenset()
        if split is not None:
            raise TypeError("give split_special_tokens= or allowed_special=/disallowed_special=, not both")
        specials = frozenset(self.added.special)
        allowed_set = specials if allowed == "all" else self._token_set(allowed, "allowed_special")
        if disallowed is None or disallowed == "all":
            disallowed_set = specials - allowed_set
        else:
            disallowed_set = self._token_set(disallowed, "disallowed_special")
        found = self.added.find_special(text, disallowed_set)
        if found is not None:
            # tiktoken's words, so that code written against tiktoken reads the same error
            raise ValueError(
                f"Encountered text corresponding to disallowed special token {found!r}.\n"
                "If you want this text to be encoded as a special token, "
                f"pass it to `allowed_special`, e.g. `allowed_special={{{found!r}, ...}}`.\n"
                "If you want this text to be encoded as normal text, disable the check for this token "
                f"by passing `disallowed_special=(enc.special_tokens_set - {{{found!r}}})`.\n"
                "To disable this check for all special tokens, pass `disallowed_special=()`.\n"
            )
        return frozenset(self.added.ids[t] for t in specials - allowed_set)

    def _token_set(self, tokens: AbstractSpecials | None, what: str) -> frozenset[str]:
        if tokens is None:
            return frozenset()
        if isinstance(tokens, str) or not isinstance(tokens, Iterable):
            raise TypeError(f'{what} must be "all" or a collection of token strings, got {tokens!r}')
        out = frozenset(tokens)
        unknown = sorted(t for t in out if not isinstance(t, str) or t not in self.added.ids)
        if unknown:
            raise ValueError(f"{what}: {unknown[:5]!r} are not added tokens of this tokenizer")
        return out

    @functools.cached_property
    def _special_id_set(self) -> frozenset[int]:
        return frozenset(self.added.ids[t] for t in self.added.special)

    def _encode_segment(self, normalized: str, offset: int) -> list[int]:
        if self._native_segment is not None:
            return self._native_segment(normalized, offset)
        if self.pre_tokenizer is None:
            return self.model.encode_pieces((normalized,))
        pieces = self.pre_tokenizer([(normalized, offset)])
        return self.model.encode_pieces([piece for piece, _ in pieces])

    @overload
    def encode_batch(
        self,
        texts: Sequence[str | tuple[str, str]],
        *,
        add_special_tokens: bool = ...,
        num_threads: int | None = ...,
        return_flat: Literal[False] = ...,
        **special: Any,
    ) -> list[list[int]]: ...

    @overload
    def encode_batch(
        self,
        texts: Sequence[str | tuple[str, str]],
        *,
        add_special_tokens: bool = ...,
        num_threads: int | None = ...,
        return_flat: Literal[True],
        **special: Any,
    ) -> FlatIds: ...

    @overload
    def encode_batch(
        self,
        texts: Sequence[str | tuple[str, str]],
        *,
        add_special_tokens: bool = ...,
        num_threads: int | None = ...,
        return_flat: bool,
        **special: Any,
    ) -> list[list[int]] | FlatIds: ...

    def encode_batch(
        self,
        texts: Sequence[str | tuple[str, str]],
        *,
        add_special_tokens: bool = True,
        num_threads: int | None = None,
        return_flat: bool = False,
        **special: Any,
    ) -> list[list[int]] | FlatIds:
        """``encode`` each text, or each ``(text, pair)`` tuple, spread over ``num_threads`` threads.

        By default one thread per CPU when the native core runs (it releases the GIL), else one:
        pure-Python encoding gains nothing from threads. ``special`` takes ``encode``'s
        special-token keywords. ``texts`` is a list or tuple (a sequence), as HF takes it: a
        generator is a TypeError.

        ``return_flat=True`` gives a :class:`FlatIds` instead of a list per text: all ids in one
        ``uint32`` array and where each text's begin and end, Arrow's list layout.

        >>> tok.encode_batch(["Hello world", "Hi"], return_flat=True)   # doctest: +SKIP
        FlatIds(ids=array('I', [9707, 1879, 13048]), offsets=array('q', [0, 2, 3]))
        """
        _check_flag("encode_batch", "return_flat", return_flat)
        if return_flat:
            return self._encode_flat(texts, add_special_tokens, num_threads, special, _FLAT)
        return self._encode_lists(texts, add_special_tokens, num_threads, special)

    def count_batch(
        self,
        texts: Sequence[str | tuple[str, str]],
        *,
        add_special_tokens: bool = True,
        num_threads: int | None = None,
        **special: Any,
    ) -> array[int]:
        """How many ids ``encode_batch`` gives each text (an ``int64`` array), without keeping the ids.

        >>> tok.count_batch(["Hello world", "Hi"])                      # doctest: +SKIP
        array('q', [2, 1])
        """
        counts: array[int] = self._encode_flat(texts, add_special_tokens, num_threads, special, _COUNT)
        return counts

    def encode_arrow(
        self, column: Any, *, add_special_tokens: bool = True, num_threads: int | None = None
    ) -> FlatIds:
        """``encode_batch(column.to_pylist(), return_flat=True)`` for a pyarrow ``string`` or
        ``large_string`` column (an ``Array``, sliced or not, or a ``ChunkedArray``), read by the
        native core from the column's buffers: no Python str per text.

        A null is a TypeError and bytes that are not UTF-8 a :class:`pymtok.TextError`, each
        naming its row; an array whose offsets leave its data buffer is a ValueError.

        >>> tok.encode_arrow(pa.array(["Hello world", "Hi"])).to_arrow()   # doctest: +SKIP
        """
        _check_flag("encode_arrow", "add_special_tokens", add_special_tokens)
        chunks = _arrow_chunks(column)
        if self._native_arrow is not None and not self.meta.split_special_tokens:
            buffers = tuple(
                (*chunk.buffers()[:3], len(chunk), chunk.offset, chunk.type == _pa().large_string()) for chunk in chunks
            )
            threads = self._threads(num_threads)
            ids, offsets = self._native_arrow(buffers, self.normalizer, add_special_tokens, threads, _FLAT)
            return FlatIds(array(_U32_CODE, ids), array("q", offsets))
        flat: FlatIds = self._encode_flat(_arrow_texts(chunks), add_special_tokens, num_threads, {}, _FLAT)
        return flat

    def _encode_flat(
        self, texts: Sequence[str | tuple[str, str]], add_special_tokens: bool, num_threads: int | None,
        special: dict[str, Any], mode: int,
    ) -> Any:
        if self._native_batch is not None and self._batch_is_plain(texts, special):
            _check_flag("encode_batch", "add_special_tokens", add_special_tokens)
            raw = self._native_batch(texts, self.normalizer, add_special_tokens, self._threads(num_threads), mode)
            if mode == _COUNT:
                return array("q", raw)
            return FlatIds(array(_U32_CODE, raw[0]), array("q", raw[1]))
        lists = self._encode_lists(texts, add_special_tokens, num_threads, special)
        if mode == _COUNT:
            return array("q", map(len, lists))
        ids = array(_U32_CODE)
        for one in lists:
            ids.extend(one)
        return FlatIds(ids, array("q", itertools.accumulate(map(len, lists), initial=0)))

    def _batch_is_plain(self, texts: Sequence[str | tuple[str, str]], special: dict[str, Any]) -> bool:
        """Whether the native batch encodes ``texts`` as encode would: no pairs, no special-token keywords."""
        return (
            isinstance(texts, Sequence)
            and not isinstance(texts, str)
            and not special
            and not self.meta.split_special_tokens
            # through map the per-text test stays in C: half the time of a generator expression
            and not any(map(isinstance, texts, itertools.repeat(tuple)))
        )

    def _threads(self, num_threads: int | None) -> int:
        if num_threads is None:
            return _cpu_count() if self._native_segment is not None else 1
        return num_threads

    def _encode_lists(
        self, texts: Sequence[str | tuple[str, str]], add_special_tokens: bool, num_threads: int | None,
        special: dict[str, Any],
    ) -> list[list[int]]:
        if isinstance(texts, str):
            raise TypeError("encode_batch() takes a list of str; use encode() for one string")
        if not isinstance(texts, Sequence):
            raise TypeError(f"encode_batch() takes a list or tuple of str, got {type(texts).__name__}")
        unknown = set(special) - {"split_special_tokens", "allowed_special", "disallowed_special"}
        if unknown:
            raise TypeError(f"encode_batch() got unexpected keyword arguments {sorted(unknown)}")
        _check_flag("encode_batch", "add_special_tokens", add_special_tokens)
        if any(isinstance(t, tuple) for t in texts):
            for t in texts:
                if isinstance(t, tuple) and len(t) != 2:
                    raise TypeError(f"encode_batch(): a pair must be a (text, pair) tuple, got {len(t)} items")
            return [
                self.encode(*t, add_special_tokens=add_special_tokens, **special) if isinstance(t, tuple)
                else self.encode(t, add_special_tokens=add_special_tokens, **special)
                for t in texts
            ]
        num_threads = self._threads(num_threads)
        if special or self.meta.split_special_tokens:
            return [self.encode(t, add_special_tokens=add_special_tokens, **special) for t in texts]
        if self._native_batch is not None:
            # the native core runs its own threads: no pool to start, texts handed out as they finish
            lists: list[list[int]] = self._native_batch(texts, self.normalizer, add_special_tokens, num_threads)
            return lists
        n = len(texts)

        def encode_share(share: Sequence[str]) -> list[list[int]]:
            return [self.encode(t, add_special_tokens=add_special_tokens) for t in share]

        if num_threads <= 1 or n < 2:
            return encode_share(texts)
        # Contiguous shares, a few per thread so that threads done early take more (batches are
        # often sorted, e.g. by language, and texts of one kind cost alike); a task per text would
        # cost more than short texts take.
        step = -(-n // (num_threads * _SHARES_PER_THREAD))
        shares = [texts[i : i + step] for i in range(0, n, step)]
        with ThreadPoolExecutor(max_workers=min(num_threads, len(shares))) as pool:
            parts = pool.map(encode_share, shares)
            return [ids for part in parts for ids in part]

    # -- decoding -------------------------------------------------------------------------

    @overload
    def decode(self, ids: list[list[int]] | tuple[list[int], ...], skip_special_tokens: bool = ...,
               clean_up_tokenization_spaces: bool | None = ...) -> list[str]: ...

    @overload
    def decode(self, ids: Any, skip_special_tokens: bool = ...,
               clean_up_tokenization_spaces: bool | None = ...) -> str: ...

    def decode(
        self,
        ids: Any,
        skip_special_tokens: bool = False,
        clean_up_tokenization_spaces: bool | None = None,
    ) -> str | list[str]:
        """The text of ``ids``, as ``transformers``' ``decode`` gives it for the same folder.

        ``ids`` is one id or a sequence of them: ints or anything with ``__index__`` (numpy
        integers), a numpy array or a torch tensor. Ids are u32 as in HF (others raise
        OverflowError); ids the vocabulary lacks are skipped, as HF skips them. A batch (a list of
        id lists, a 2-D array) gives a list of texts, as transformers 5's ``decode`` does.
        ``clean_up_tokenization_spaces`` overrides the folder's setting; ``False`` turns off every
        transformers text fix-up, giving exactly HF ``tokenizers``' decode.
        """
        if isinstance(ids, (list, tuple)):
            if ids and isinstance(ids[0], (list, tuple)):
                return self.batch_decode(ids, skip_special_tokens, clean_up_tokenization_spaces)
        elif getattr(ids, "ndim", 1) == 2:
            return self.batch_decode(ids, skip_special_tokens, clean_up_tokenization_spaces)
        # transformers decodes with its backend, whose special flags decide what is skipped
        tok = self if clean_up_tokenization_spaces is False else self._backend()
        # the native decoder takes a list or tuple of ints as it is, and says None to the rest
        text = (tok._native_decode or tok._native_decode_fn())(ids, skip_special_tokens)
        if text is None:
            text = tok._decode_checked(_token_ids(ids), skip_special_tokens)
        if clean_up_tokenization_spaces is False:
            return text
        meta = self.meta
        if meta.decode_suffix_as_space:
            text = text.replace(meta.decode_suffix_as_space, " ").strip()
        # transformers 5 leaves BPE output alone: the cleanup was made for WordPiece spacing
        if (clean_up_tokenization_spaces or meta.clean_up_tokenization_spaces) and not isinstance(
            self.model, models.BPE
        ):
            text = decoders.clean_up_tokenization(text)
        return text

    def _decode_checked(self, ids: list[int], skip_special_tokens: bool) -> str:
        text = (self._native_decode or self._native_decode_fn())(ids, skip_special_tokens)
        return text if text is not None else self._decode_tokens(ids, skip_special_tokens)

    def _native_decode_fn(self) -> Callable[[Any, Any], str | None]:
        """``_native_decode``, built on first use; for the pure path one that answers None."""
        fast = self._native_decode
        if fast is None:
            decoder = native.accelerate_decode(self)
            fast = self._native_decode = decoder.decode if decoder is not None else _no_native_decode
        return fast

    def _native_decoder(self) -> Any:
        """The native core's ``Decoder`` for this tokenizer (built on first use), None if none."""
        return getattr(self._native_decode_fn(), "__self__", None)

    def _decode_tokens(self, ids: list[int], skip_special_tokens: bool) -> str:
        tokens: list[str] = []
        special = self.added.special
        for id in ids:
            token = self.added.token_for_decode(id)
            if token is None:
                token = self.model.id_to_token(id)
                if token is None:
                    continue  # HF skips ids it does not know
            if skip_special_tokens and token in special:
                continue
            tokens.append(token)
        return self.convert_tokens_to_string(tokens)

    def batch_decode(
        self,
        sequences: Any,
        skip_special_tokens: bool = False,
        clean_up_tokenization_spaces: bool | None = None,
    ) -> list[str]:
        """``decode`` of each sequence (a list of id lists, a 2-D array or tensor); one sequence of
        ids gives a list of its one text, as in transformers."""
        tolist = getattr(sequences, "tolist", None)
        if tolist is not None:
            sequences = tolist()
        decode = self.decode
        if sequences and not hasattr(sequences[0], "__len__"):
            return [decode(sequences, skip_special_tokens, clean_up_tokenization_spaces)]
        return [decode(ids, skip_special_tokens, clean_up_tokenization_spaces) for ids in sequences]

    def decode_stream(self, skip_special_tokens: bool = False) -> DecodeStream:
        """An incremental decoder: feed ids one by one, get text as soon as it is complete."""
        return DecodeStream(self, skip_special_tokens)

    # -- vocabulary -----------------------------------------------------------------------

    def token_to_id(self, token: str) -> int | None:
        if not isinstance(token, str):
            raise TypeError(f"token_to_id() takes a str, got {type(token).__name__}")
        id = self.added.ids.get(token)
        return id if id is not None else self.model.token_to_id(token)

    def id_to_token(self, id: int) -> str | None:
        """The token of ``id``, None for an id the vocabulary lacks (u32 ids as in HF: an int
        outside that range is OverflowError, anything not an int TypeError)."""
        id = _token_id(id)
        # an added token HF matches in normalized text is named by its normalized form there
        token = self.added.token_for_decode(id)
        return token if token is not None else self.model.id_to_token(id)

    def get_vocab(self, with_added_tokens: bool = True) -> dict[str, int]:
        """The model's vocabulary, with the added tokens transformers' tokenizer holds (those of
        ``meta.backend_added_tokens`` too) unless ``with_added_tokens=False``."""
        vocab = self.model.get_vocab()
        if with_added_tokens:
            vocab.update(self._backend().added.ids)
        return vocab

    def __len__(self) -> int:
        """The vocabulary with the added tokens, as ``len()`` of a transformers tokenizer."""
        return self._backend().vocab_size

    def __bool__(self) -> bool:
        return True  # a tokenizer is never falsy for having an empty vocabulary (``__len__``)

    def convert_ids_to_tokens(self, ids: Any, skip_special_tokens: bool = False) -> Any:
        """transformers' ``convert_ids_to_tokens``: one id gives its token (or None), a sequence a
        list; ``skip_special_tokens`` leaves out ``all_special_ids``."""
        backend = self._backend()
        if _is_one_id(ids):
            return backend.id_to_token(ids)
        skip = set(self.all_special_ids) if skip_special_tokens else set()
        return [backend.id_to_token(id) for id in _token_ids(ids) if id not in skip]

    def convert_tokens_to_ids(self, tokens: str | Iterable[str]) -> Any:
        """transformers' ``convert_tokens_to_ids``: a token the vocabulary lacks gives ``unk_token_id``."""
        if isinstance(tokens, str):
            id = self._backend().token_to_id(tokens)
            return id if id is not None else self.unk_token_id
        return [self.convert_tokens_to_ids(token) for token in tokens]

    def convert_tokens_to_string(self, tokens: Sequence[str]) -> str:
        """The decoder's text for ``tokens`` (joined by spaces without a decoder), as transformers."""
        if self.decoder is not None:
            return "".join(self.decoder(list(tokens)))
        return " ".join(tokens)

    def num_special_tokens_to_add(self, pair: bool = False) -> int:
        """How many ids the post-processor adds to one sequence (or a pair)."""
        return self.post_processor.added_tokens(pair) if self.post_processor is not None else 0

    # -- special tokens (transformers' attributes, from tokenizer_config.json) ------------

    bos_token = _NamedToken()
    eos_token = _NamedToken()
    unk_token = _NamedToken()
    sep_token = _NamedToken()
    pad_token = _NamedToken()
    cls_token = _NamedToken()
    mask_token = _NamedToken()
    bos_token_id = _NamedToken(id=True)
    eos_token_id = _NamedToken(id=True)
    unk_token_id = _NamedToken(id=True)
    sep_token_id = _NamedToken(id=True)
    pad_token_id = _NamedToken(id=True)
    cls_token_id = _NamedToken(id=True)
    mask_token_id = _NamedToken(id=True)

    @property
    def split_special_tokens(self) -> bool:
        """``encode``'s default for ``split_special_tokens`` (transformers' attribute)."""
        return self.meta.split_special_tokens

    @split_special_tokens.setter
    def split_special_tokens(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise TypeError(f"split_special_tokens must be a bool, got {type(value).__name__}")
        self.meta.split_special_tokens = value

    @property
    def all_special_tokens(self) -> list[str]:
        """The named special tokens (bos, eos, unk, sep, pad, cls, mask), the model-specific ones
        (image_token, ...), then the extra ones, once each."""
        special = self.meta.special_tokens
        named = [special[key] for key in NAMED_SPECIAL_TOKENS if special.get(key) is not None]
        model_specific = [token for key, token in special.items() if key not in NAMED_SPECIAL_TOKENS]
        return list(dict.fromkeys([*named, *model_specific, *self.meta.extra_special_tokens]))

    @property
    def all_special_ids(self) -> list[int]:
        ids: list[int] = self.convert_tokens_to_ids(self.all_special_tokens)
        return ids

    # -- tiktoken's byte-level view -------------------------------------------------------

    def decode_single_token_bytes(self, token: int) -> bytes:
        """The bytes of one token, as tiktoken's ``decode_single_token_bytes`` (byte-level BPE only).

        A token with a character outside GPT-2's byte alphabet (an added token such as
        ``<|endoftext|>`` with a space, ...) is its UTF-8 text, as HF's ByteLevel decoder takes it.
        """
        self._need_byte_level("decode_single_token_bytes")
        id = _token_id(token)
        text = self.added.token_for_decode(id)
        if text is None:
            text = self.model.id_to_token(id)
        if text is None:
            raise KeyError(f"token id {id} is not in the vocabulary")
        return _token_bytes(text)

    def decode_bytes(self, tokens: Any) -> bytes:
        """The bytes of ``tokens`` joined, as tiktoken's ``decode_bytes`` (byte-level BPE only)."""
        return b"".join(self.decode_single_token_bytes(id) for id in _token_ids(tokens))

    def token_byte_values(self) -> list[bytes]:
        """The bytes of every model token (added tokens left out), sorted, as tiktoken gives them."""
        self._need_byte_level("token_byte_values")
        added = self.added.by_id
        return sorted(_token_bytes(token) for token, id in self.model.get_vocab().items() if id not in added)

    @property
    def n_vocab(self) -> int:
        """One more than the largest id (tiktoken's ``n_vocab``)."""
        return max((*self.added.by_id, self.model.vocab_size - 1)) + 1

    @property
    def eot_token(self) -> int:
        """The id of ``<|endoftext|>`` (tiktoken's ``eot_token``), else of the eos token."""
        id = self.token_to_id("<|endoftext|>")
        if id is None:
            id = self.eos_token_id
        if id is None:
            raise ValueError("this tokenizer has no <|endoftext|> and no eos token")
        return id

    def _need_byte_level(self, what: str) -> None:
        if not isinstance(self.decoder, decoders.ByteLevel):
            raise ValueError(
                f"{what}() needs a byte-level tokenizer (decoder ByteLevel); this one's decoder is "
                f"{type(self.decoder).__name__ if self.decoder is not None else 'none'}, whose tokens are not bytes"
            )

    @property
    def vocab_size(self) -> int:
        """Model vocabulary plus the added tokens it lacks (HF's ``get_vocab_size(True)``)."""
        extra = sum(1 for t in self.added.ids if self.model.token_to_id(t) is None)
        return self.model.vocab_size + extra

    @property
    def special_ids(self) -> list[int]:
        return list(self.meta.special_ids)

    @property
    def stop_ids(self) -> list[int]:
        return list(self.meta.stop_ids)

    @property
    def prefix_ids(self) -> list[int]:
        return list(self.meta.prefix_ids)

    # -- chat -----------------------------------------------------------------------------

    @property
    def chat_template(self) -> str | dict[str, str] | None:
        return self.meta.chat_template

    def set_chat_template(self, template: str | dict[str, str], eos_token: str | None = None) -> None:
        """Replace the chat template (and the ``eos_token`` text it sees), as MNN's override does."""
        self.meta.chat_template = template
        if eos_token is not None:
            self.meta.special_tokens["eos_token"] = eos_token
        self._chat = None

    def apply_chat_template(
        self,
        conversation: Any,
        tools: Sequence[Mapping[str, Any] | Callable[..., Any]] | None = None,
        documents: Sequence[Mapping[str, Any]] | None = None,
        chat_template: str | None = None,
        add_generation_prompt: bool = False,
        continue_final_message: bool | str = False,
        tokenize: bool = True,
        sanitize_control_tokens: bool = False,
        padding: bool | str = False,
        truncation: bool = False,
        max_length: int | None = None,
        return_tensors: str | None = None,
        return_dict: bool = True,
        return_assistant_tokens_mask: bool = False,
        tokenizer_kwargs: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        """Render a conversation (or a batch of them) with the chat template, as transformers 5's
        ``apply_chat_template`` does, with the same keywords and defaults.

        >>> tok.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=False,
        ...                         add_generation_prompt=True)            # doctest: +SKIP
        '<|im_start|>user\\nHi<|im_end|>\\n<|im_start|>assistant\\n'

        ``tokenize=False`` gives the prompt text (a list of them for a batch). Otherwise the prompt
        is encoded by ``__call__`` without adding special tokens (the template holds them), with
        ``padding``, ``truncation``, ``max_length``, ``return_tensors`` and ``tokenizer_kwargs``,
        and returned as its ``BatchEncoding`` (``return_dict``, the default) or its ``input_ids``.
        ``return_assistant_tokens_mask`` adds ``assistant_masks``: 1 for each token that overlaps
        the output of a ``{% generation %}`` block. ``chat_template`` names one of the model's
        templates or is a template itself; ``tools`` are JSON-schema dicts or Python functions;
        other keywords become template variables.

        ``sanitize_control_tokens=True`` (for untrusted input) encodes the control tokens that the
        strings of the messages, tools, documents and extra keywords spell as ordinary text, so
        that only the template's own are control tokens, as transformers does: the special added
        tokens and the other added tokens the template's literal text holds (dict keys, tools
        given as functions and tokens a template builds from pieces are not covered, as there).
        The result then holds ``input_ids`` and ``attention_mask`` only (padded and truncated);
        it needs ``tokenize=True``, and ``tokenizer_kwargs`` beyond the padding ones raise
        TypeError (transformers ignores them here).
        """
        from .chat import ChatTemplate
        from .encoding import _tensor
        from .errors import TemplateError

        if return_assistant_tokens_mask and not (tokenize and return_dict):
            raise ValueError("return_assistant_tokens_mask=True needs return_dict=True and tokenize=True")
        if continue_final_message and return_assistant_tokens_mask:
            raise ValueError("continue_final_message is not compatible with return_assistant_tokens_mask")
        _check_flag("apply_chat_template", "sanitize_control_tokens", sanitize_control_tokens)
        if sanitize_control_tokens and (not tokenize or return_assistant_tokens_mask):
            raise ValueError(
                "sanitize_control_tokens=True requires tokenize=True and is not compatible with "
                "return_assistant_tokens_mask=True"
            )
        if self.meta.chat_template is None and chat_template is None:
            raise TemplateError("this tokenizer has no chat template and none was passed")
        if self._chat is None:
            template = self.meta.chat_template
            self._chat = ChatTemplate(template if template is not None else "", special_tokens=self.meta.special_tokens)
        if isinstance(conversation, (list, tuple)) and not conversation:
            raise TemplateError("cannot apply a chat template to an empty conversation")
        batched = isinstance(conversation, (list, tuple)) and (
            isinstance(conversation[0], (list, tuple)) or hasattr(conversation[0], "messages")
        )
        prompts: list[str] = []
        spans: list[list[tuple[int, int]]] = []
        control = self._control_tokens(chat_template, tools) if sanitize_control_tokens else None
        for chat in conversation if batched else [conversation]:
            if control is not None:
                prompt = self._chat.render_marked(
                    chat, control, tools=tools, documents=documents, add_generation_prompt=add_generation_prompt,
                    continue_final_message=continue_final_message, chat_template=chat_template, **kwargs,
                )
            elif return_assistant_tokens_mask:
                prompt, chat_spans = self._chat.render_with_spans(
                    chat, tools=tools, documents=documents, add_generation_prompt=add_generation_prompt,
                    chat_template=chat_template, **kwargs,
                )
                spans.append(chat_spans)
            else:
                prompt = self._chat.render(
                    chat, tools=tools, documents=documents, add_generation_prompt=add_generation_prompt,
                    continue_final_message=continue_final_message, chat_template=chat_template, **kwargs,
                )
            prompts.append(prompt)
        if not tokenize:
            return prompts if batched else prompts[0]
        if control is not None:
            out = self._call_marked(
                prompts, batched, padding, truncation, max_length, return_tensors, dict(tokenizer_kwargs or {})
            )
            return out if return_dict else out["input_ids"]
        out = self(
            prompts if batched else prompts[0], padding=padding, truncation=truncation, max_length=max_length,
            add_special_tokens=False, return_tensors=return_tensors, **(tokenizer_kwargs or {}),
        )
        if not return_dict:
            return out["input_ids"]
        if return_assistant_tokens_mask:
            masks = [_assistant_mask(e.offsets, s) for e, s in zip(out.encodings, spans)]
            if return_tensors is not None:
                out["assistant_masks"] = _tensor("assistant_masks", masks, return_tensors)
            else:
                out["assistant_masks"] = masks if batched else masks[0]
        return out


    # -- pickling and saving --------------------------------------------------------------

    def __reduce__(self) -> tuple[Any, ...]:
        """A ``.mtok`` tokenizer pickles as its file (the path while the file still holds the
        bytes it was read from, else the bytes), any other as its config; either way unpickling
        is one load, and the meta (template, special tokens, ...) comes along as it is now."""
        if self.source is not None:
            return (_unpickle_file, (self.source.state(), self.meta))
        if not self.config:
            raise TypeError("cannot pickle a Tokenizer built from components: it has no config to rebuild it from")
        return (_unpickle_config, (self.to_dict(), self.meta))

    def to_dict(self) -> dict[str, Any]:
        """The pipeline's configuration (``tokenizer.json``'s shape) as plain, JSON-able dicts and
        lists: ``config`` itself may hold a ``.mtok``'s tables, read lazily from the file."""
        plain: dict[str, Any] = _plain(self.config)
        return plain

    def to_json(self) -> str:
        """``tokenizer.json`` for this pipeline, which HF ``tokenizers`` loads to the same ids."""
        from .export import tokenizer_json

        return tokenizer_json(self)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write ``tokenizer.json`` (a ``.json`` path) or ``.mtok`` (a ``.mtok`` path).

        MNN's legacy ``.txt`` holds only a few fixed pipelines, not this one's config: export it
        from the model folder (``pymtok export --format txt``).
        """
        from .mtok import dumps_mtok

        out = Path(path)
        if out.suffix == ".json":
            out.write_text(self.to_json(), encoding="utf-8")
        elif out.suffix == ".mtok":
            out.write_bytes(dumps_mtok(self.to_dict(), self.meta))
        elif out.suffix == ".txt":
            raise ValueError(
                f"{out}: a Tokenizer is not saved as MNN's legacy tokenizer.txt, whose fixed types "
                "cannot hold its pipeline; use `pymtok export --format txt` on the model folder"
            )
        else:
            raise ValueError(f"{out}: save() writes a .json or .mtok path, got suffix {out.suffix!r}")
        return out

    def save_pretrained(self, directory: str | os.PathLike[str]) -> tuple[Path, Path]:
        """Write ``tokenizer.json`` and ``tokenizer_config.json`` (chat template, special tokens,
        clean-up flag, ``model_max_length``, padding and truncation side, ``model_input_names``)
        that ``transformers.AutoTokenizer`` loads to the same ids, prompts and ``__call__`` output.
        Returns the two paths."""
        from .export import save_pretrained

        return save_pretrained(self, Path(directory))

    def _control_tokens(self, chat_template: str | None, tools: Any) -> re.Pattern[str]:
        """The pattern of transformers' control tokens for this template: the special added
        tokens, and those tokenizer_config.json's ``chat_control_tokens`` lists or, without that
        list, the other added tokens the template's literal text holds, whitespace ones (Gemma's
        "\\n") excepted, which templates hold as ordinary text."""
        from .chat import control_token_patterns

        listed = self.meta.call_settings.get("chat_control_tokens")
        if listed is not None:
            names = set(listed)
            chosen = (lambda content: content in names)
        else:
            literal = self._chat.literal_text(chat_template, tools)
            chosen = (lambda content: content in literal and not content.isspace())
        added = self._backend().added
        tokens = [token.content for _, token in sorted(added.by_id.items()) if token.special or chosen(token.content)]
        return control_token_patterns(tokens, ())[0]

    @functools.cached_property
    def _control_markers(self) -> re.Pattern[str]:
        from .chat import control_token_patterns

        return control_token_patterns((), self.added.ids)[1]

    def _encode_marked(self, prompt: str) -> list[int]:
        """transformers' ``encode_marked_chat``: the marked tokens of a prompt rendered from marked
        inputs as ordinary text, the rest (the template's own tokens included) as ``encode`` does.
        Each piece after the first is encoded after a newline whose ids are then dropped, so that a
        SentencePiece-style model does not prefix it as a text's start (unless the newline's ids
        do not lead the piece's, when it is encoded alone)."""
        from .chat import marked_pieces

        newline = self.encode("\n", add_special_tokens=False)
        ids: list[int] = []
        for n, (piece, as_text) in enumerate(marked_pieces(prompt, self._control_markers)):
            encode = self._encode_without_added if as_text else functools.partial(self.encode, add_special_tokens=False)
            if n == 0:
                ids += encode(piece)
                continue
            piece_ids = encode("\n" + piece)
            piece_ids = piece_ids[len(newline):] if piece_ids[: len(newline)] == newline else encode(piece)
            if as_text and self.added.ids[piece] in piece_ids:
                raise ValueError(
                    f"sanitize_control_tokens=True: can't sanitize {piece!r}: the tokenizer produces it from plain text"
                )
            ids += piece_ids
        return ids

    def _encode_without_added(self, text: str) -> list[int]:
        """The normalizer, pre-tokenizer and model on ``text``, matching no added token at all
        (``split_special_tokens`` leaves the other added tokens matched)."""
        _check_encodable(text)
        offset = 0
        if self._normalize_first is not None:
            text, offset = self._normalize_first(text)
        elif self.normalizer is not None:
            text = self.normalizer(text)
        return self._encode_segment(text, offset) if text else []

    def _call_marked(
        self, prompts: list[str], batched: bool, padding: Any, truncation: Any, max_length: int | None,
        return_tensors: str | None, options: dict[str, Any],
    ) -> BatchEncoding:
        """``__call__`` on marked prompts as transformers runs it: ``input_ids`` cut to
        ``max_length`` on the truncation side when truncating, then padded, and ``attention_mask``."""
        from .encoding import _DEFAULT_INPUT_NAMES, _SIDES, BatchEncoding, _check_int, _pad_token, _strategies, _tensor

        pad_to_multiple_of = options.pop("pad_to_multiple_of", None)
        padding_side = options.pop("padding_side", None)
        return_attention_mask = options.pop("return_attention_mask", None)
        options.pop("verbose", None)
        if options:
            raise TypeError(
                f"apply_chat_template(): tokenizer_kwargs {sorted(options)} are not supported with "
                "sanitize_control_tokens=True (transformers ignores them there)"
            )
        _check_int("max_length", max_length)
        _check_int("pad_to_multiple_of", pad_to_multiple_of)
        if return_attention_mask is not None and not isinstance(return_attention_mask, bool):
            raise TypeError(f"return_attention_mask must be True, False or None, got {return_attention_mask!r}")
        if return_tensors not in (None, "np", "pt"):
            raise ValueError(f"return_tensors={return_tensors!r}: pymtok gives 'np' or 'pt' tensors, or lists (None)")
        settings = self.meta.call_settings
        side = padding_side if padding_side is not None else settings.get("padding_side", "right")
        if side not in _SIDES:
            raise ValueError(f"padding_side must be 'left' or 'right', got {side!r}")
        pad, trunc, max_length = _strategies(self, padding, truncation, max_length, pad_to_multiple_of)
        backend = self._backend()
        rows = [backend._encode_marked(p) for p in prompts]
        if trunc != "do_not_truncate" and max_length is not None:
            cut_left = settings.get("truncation_side", "right") == "left"
            rows = [ids[-max_length:] if cut_left else ids[:max_length] for ids in rows]
        masks = [[1] * len(ids) for ids in rows]
        if pad != "do_not_pad":
            length = max_length if pad == "max_length" and max_length is not None else max(map(len, rows))
            if pad_to_multiple_of and length % pad_to_multiple_of:
                length += pad_to_multiple_of - length % pad_to_multiple_of
            pad_id = _pad_token(self)[1]
            for ids, mask in zip(rows, masks):
                fill = max(length - len(ids), 0)
                if side == "left":
                    ids[:0], mask[:0] = [pad_id] * fill, [0] * fill
                else:
                    ids += [pad_id] * fill
                    mask += [0] * fill
        if return_attention_mask is None:
            return_attention_mask = "attention_mask" in settings.get("model_input_names", _DEFAULT_INPUT_NAMES)
        data: dict[str, Any] = {"input_ids": rows}
        if return_attention_mask:
            data["attention_mask"] = masks
        if return_tensors is not None:
            data = {key: _tensor(key, value, return_tensors) for key, value in data.items()}
        elif not batched:
            data = {key: value[0] for key, value in data.items()}
        return BatchEncoding(data, _no_encodings, 1)



def _assistant_mask(offsets: Sequence[tuple[int, int]], spans: Sequence[tuple[int, int]]) -> list[int]:
    """1 for each token whose characters overlap a generation span, as transformers marks them (so a
    span cut by truncation keeps its remaining tokens); spans and offsets both run in order."""
    mask = [0] * len(offsets)
    span = 0
    for i, (start, end) in enumerate(offsets):
        while span < len(spans) and start >= spans[span][1]:
            span += 1
        if span == len(spans):
            break
        if end > spans[span][0]:
            mask[i] = 1
    return mask

# Tokenizers unpickled in this process, by their file's digest, newest last: an engine (Ray, Dask,
# datasets) sends the tokenizer with every task, and each worker process loads its file once.
_UNPICKLED: dict[tuple[bytes, bool], Tokenizer] = {}
_UNPICKLED_MAX = 4


def _unpickle_file(state: tuple[Any, ...], meta: TokenizerMeta) -> Tokenizer:
    from .mtok import loads_mtok

    kind, where, size, digest, use_extension = state
    if kind != "mtok":
        raise ValueError(f"cannot unpickle a tokenizer read from a {kind!r} file")
    path = None if size is None else where
    data = where
    if path is not None:
        # read and hashed even when the cache has the tokenizer: a changed file is refused as ever
        data = Path(path).read_bytes()
        if len(data) != size or hashlib.sha256(data).digest() != digest:
            raise FormatError(f"{path}: the file changed since this tokenizer was pickled (the pickle holds its path)")
    else:
        digest = hashlib.sha256(data).digest()
    key = (digest, use_extension)
    loaded = _UNPICKLED.pop(key, None)
    if loaded is None:
        loaded = loads_mtok(data, path or "<pickle>", use_extension=use_extension)
        if len(_UNPICKLED) >= _UNPICKLED_MAX:
            del _UNPICKLED[next(iter(_UNPICKLED))]
    _UNPICKLED[key] = loaded
    return _sharing(loaded, meta, path)


def _sharing(loaded: Tokenizer, meta: TokenizerMeta, path: str | None) -> Tokenizer:
    """A tokenizer sharing ``loaded``'s tables and encoders (which encoding never changes) with
    its own ``meta``, the part a user can change (chat template, special tokens)."""
    tok = object.__new__(Tokenizer)
    tok.__dict__.update(loaded.__dict__)
    tok.meta = meta
    tok._chat = None
    if loaded.source is not None:
        tok.source = dataclasses.replace(loaded.source, path=path)
    return tok


def _unpickle_config(config: dict[str, Any], meta: TokenizerMeta) -> Tokenizer:
    return Tokenizer.from_config(config, meta)


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _kept(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """``config`` as a tokenizer keeps it: a BPE model's merges as a tuple, pairs (HF's newer
    form, not "a b" strings) and ``[piece, score]`` vocabulary entries as tuples. Python's cyclic
    collector walks a list item by item at every full collection for as long as it lives, a
    tuple of strings and numbers only until it first looks at it: kept as JSON gave them, Qwen3's
    151k pairs cost every full collection of the process 8 ms, Llama 3's 280k strings 1.8 and
    T5's 32k entries 2.2. The vocabulary stays a list (a Unigram model's mark); ``to_dict()``
    gives lists back."""
    model = config.get("model")
    if not isinstance(model, Mapping):
        return config
    kept: dict[str, Any] = {}
    merges = model.get("merges")
    if type(merges) is list:
        if merges and type(merges[0]) is list:
            kept["merges"] = tuple([tuple(m) if type(m) is list else m for m in merges])
        else:
            kept["merges"] = tuple(merges)
    vocab = model.get("vocab")
    if type(vocab) is list and vocab and type(vocab[0]) is list:
        kept["vocab"] = [tuple(e) if type(e) is list else e for e in vocab]
    return {**config, "model": {**model, **kept}} if kept else config


def _plain(value: Any) -> Any:
    """``value`` with every Mapping a dict and every sequence (a ``.mtok``'s merges) a list."""
    if type(value) in _SCALARS:
        return value
    # scalars are taken inline and plain containers tested by type first: a vocabulary and its
    # merges are hundreds of thousands of them, and the ABC checks below cost more than the copy
    if type(value) is list or type(value) is tuple:
        return [v if type(v) in _SCALARS else _plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: v if type(v) in _SCALARS else _plain(v) for k, v in value.items()}
    if isinstance(value, models.IndexedMerges):
        value = value[:]  # one list, not an indexing call per merge
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        return [v if type(v) in _SCALARS else _plain(v) for v in value]
    raise TypeError(f"config holds a {type(value).__name__}, which has no JSON form")


def _token_bytes(token: str) -> bytes:
    """A byte-level token's bytes, as HF's ByteLevel decoder reads it: through GPT-2's byte map,
    or as UTF-8 text when any character is outside that alphabet."""
    try:
        return bytes(CHAR_TO_BYTE[c] for c in token)
    except KeyError:
        return token.encode("utf-8")


def _token_id(value: Any) -> int:
    """An id as HF's bindings take one: an int (or ``__index__``) that fits u32."""
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError(f"token ids must be int, got {type(value).__name__}")
    try:
        id = operator.index(value)
    except TypeError:  # an array of more than one element has __index__ and refuses it
        raise TypeError(f"token ids must be int, got {type(value).__name__}") from None
    if not 0 <= id < _U32:
        raise OverflowError(f"token id {id} is out of range: ids are unsigned 32-bit, as in HF")
    return id


def _is_one_id(ids: Any) -> bool:
    """Whether ``ids`` is a single id (an int, a numpy integer or a 0-d array) rather than many."""
    if isinstance(ids, int) and not isinstance(ids, bool):
        return True
    return hasattr(type(ids), "__index__") and getattr(ids, "ndim", 0) == 0 and not isinstance(ids, Iterable)


def _token_ids(ids: Any) -> list[int]:
    """``ids`` (one id, a sequence, a numpy array or a torch tensor) as a list of checked ids."""
    tolist = getattr(ids, "tolist", None)
    if tolist is not None and not isinstance(ids, (list, tuple)):
        ids = tolist()  # numpy and torch: their own integers become ints at C speed
    if isinstance(ids, int) and not isinstance(ids, bool):
        ids = [ids]
    elif isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
        if not _is_one_id(ids):
            raise TypeError(f"token ids must be an int or a sequence of ints, got {type(ids).__name__}")
        ids = [ids]
    if type(ids) is list and all(type(id) is int and 0 <= id < _U32 for id in ids):
        return ids
    return [_token_id(id) for id in ids]


_SHARES_PER_THREAD = 8
# the native encode_batch's modes (module.c): the ids flat with offsets, or their counts only
_FLAT, _COUNT = 1, 2
# array's typecode of a 4-byte unsigned int (the C unsigned int on every platform CPython runs on)
_U32_CODE = next(code for code in "IL" if array(code).itemsize == 4)


@functools.cache
def _numpy_u32() -> tuple[Any, Any]:
    """numpy (an optional dependency, imported on first use) and its uint32 dtype, which
    ``frombuffer`` takes in half the time it takes the type"""
    try:
        import numpy
    except ImportError:
        raise ImportError("encode_to_numpy needs numpy, which is not installed (pip install numpy)") from None
    return numpy, numpy.dtype(numpy.uint32)


class FlatIds(NamedTuple):
    """``encode_batch(..., return_flat=True)``: text ``i``'s ids are ``ids[offsets[i]:offsets[i+1]]``.

    The layout of an Arrow ``LargeListArray`` (``uint32`` values, ``int64`` offsets from 0), so
    that a batch becomes a list column without a Python list per text; both arrays export their
    buffers (``numpy.frombuffer``, ``pyarrow.py_buffer``).
    """

    ids: array[int]
    offsets: array[int]

    def to_arrow(self) -> Any:
        """The ids as a ``pyarrow.LargeListArray`` of ``uint32`` (needs pyarrow), sharing the buffers."""
        import pyarrow as pa

        values = pa.Array.from_buffers(pa.uint32(), len(self.ids), [None, pa.py_buffer(self.ids)])
        offsets = pa.Array.from_buffers(pa.int64(), len(self.offsets), [None, pa.py_buffer(self.offsets)])
        return pa.LargeListArray.from_arrays(offsets, values)


def _pa() -> Any:
    import pyarrow

    return pyarrow


def _arrow_chunks(column: Any) -> list[Any]:
    """The arrays of a pyarrow string column; TypeError for anything else."""
    pa = _pa()
    if not isinstance(column, (pa.Array, pa.ChunkedArray)):
        raise TypeError(f"encode_arrow() takes a pyarrow Array or ChunkedArray, got {type(column).__name__}")
    if column.type not in (pa.string(), pa.large_string()):
        raise TypeError(f"encode_arrow() takes a string or large_string column, got {column.type}")
    return column.chunks if isinstance(column, pa.ChunkedArray) else [column]


def _arrow_texts(chunks: list[Any]) -> list[str]:
    """The chunks' texts as str (the pure path), with encode_arrow's native errors."""
    pa = _pa()
    # bytes, so that text that is not UTF-8 is ours to report, with its row
    raws = [chunk.view(pa.large_binary() if chunk.type == pa.large_string() else pa.binary()) for chunk in chunks]
    for raw in raws:
        try:
            raw.validate(full=True)
        except pa.ArrowInvalid as e:
            raise ValueError(f"encode_arrow(): the Arrow array is malformed: {e}") from None
    texts: list[str] = []
    for raw in raws:
        for value in raw.to_pylist():
            row = len(texts)
            if value is None:
                raise TypeError(f"encode_arrow(): row {row} is null (encode() takes a str)")
            try:
                texts.append(value.decode("utf-8"))
            except UnicodeDecodeError as e:
                raise TextError(f"encode_arrow(): row {row} is not UTF-8 (byte {e.start})") from None
    return texts


_BYTE_TOKEN = re.compile("<0x[0-9A-F]{2}>")

WordToken = tuple[int, str, int, int, int]
"""(id, token string, start, end, word index): one token of ``Tokenizer.encode_words``."""


def _check_flag(method: str, name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{method}(): {name} must be True or False, got {type(value).__name__}")


def _char_at_byte(piece: str) -> Callable[[int], int]:
    """Maps a UTF-8 byte index of ``piece`` to the index of the character holding it."""
    if piece.isascii():
        last_char = len(piece) - 1
        return lambda i: min(i, last_char)
    table = [i for i, ch in enumerate(piece) for _ in range(len(ch.encode("utf-8")))]
    last = len(table) - 1
    return lambda i: table[min(i, last)]


def _built(section: str, build: Callable[[Any], T], cfg: Any) -> T:
    """``build(cfg)``; a config of the wrong shape deep inside a component (a number where a
    string belongs, ...) fails there with a Python error, which is reported as what it is: a
    malformed ``section``."""
    try:
        return build(cfg)
    except FormatError:
        raise
    except (TypeError, ValueError, AttributeError, KeyError, IndexError) as exc:
        raise FormatError(f"{section}: malformed config ({type(exc).__name__}: {exc})") from None
    except RecursionError:
        raise FormatError(f"{section}: nested too deeply") from None


def _check_encodable(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"text holds a lone surrogate {text[exc.start]!r} at index {exc.start}; "
            "it has no UTF-8 form to tokenize"
        ) from None


def _no_encodings() -> list[Any]:
    raise ValueError(
        "apply_chat_template(..., sanitize_control_tokens=True) gives ids without per-token encodings "
        "(tokens, word ids, offsets), as transformers does"
    )


# the common call in C, on the class: a tokenizer holding a callable bound to itself would be freed
# only by the cycle collector
Tokenizer.encode = native.fast_method(Tokenizer.encode)  # type: ignore[method-assign]
Tokenizer.encode_to_numpy = native.fast_method(Tokenizer.encode_to_numpy)  # type: ignore[method-assign]
Tokenizer.__call__ = native.fast_method(Tokenizer.__call__, encoding.BatchEncoding)  # type: ignore[method-assign]


def _no_native_decode(ids: Any, skip_special_tokens: Any) -> None:
    return None


class DecodeStream:
    """Incremental decoding with HF ``DecodeStream``'s semantics.

    ``step(id)`` returns the text the new id completes, or ``None`` while a character is still
    incomplete; the pieces joined equal ``decode(ids, clean_up_tokenization_spaces=False)`` of
    all ids (HF ``tokenizers``' decode, which its ``DecodeStream`` runs). Each step decodes only
    the ids since the last text that came out, so a step costs the same however long the stream.
    """

    def __init__(self, tokenizer: Tokenizer, skip_special_tokens: bool = False) -> None:
        self._tok = tokenizer
        self._skip = skip_special_tokens
        self._ids: list[int] = []
        self._prefix = ""
        self._prefix_index = 0
        decoder = tokenizer._native_decoder()
        if decoder is not None:
            # the same steps in C, which keeps the ids and texts as bytes between calls
            self.step = native.decode_stream(decoder, bool(skip_special_tokens)).step  # type: ignore[method-assign]

    def _decode(self, ids: list[int]) -> str:
        text = self._tok._native_decode_fn()(ids, self._skip)
        return text if text is not None else self._tok._decode_tokens(ids, self._skip)

    def step(self, id: int) -> str | None:
        if type(id) is not int or not 0 <= id < _U32:
            id = _token_id(id)  # raises before the stream takes the id in
        ids = self._ids
        if not self._prefix and ids:
            prefix = self._decode(ids)
            if not prefix.endswith("\ufffd"):
                self._prefix = prefix
                self._prefix_index = len(ids)
        ids.append(id)
        text = self._decode(ids)
        prefix = self._prefix
        if not (len(text) > len(prefix) and text.startswith(prefix)):
            # HF compares UTF-8 lengths: a text no longer than the prefix emits nothing
            if len(text.encode("utf-8")) <= len(prefix.encode("utf-8")) or text.endswith("\ufffd"):
                return None
            raise ValueError(f"decode stream: text {text!r} no longer starts with the emitted {prefix!r}")
        if text.endswith("\ufffd"):
            return None
        new_text = text[len(prefix) :]
        new_index = len(ids) - self._prefix_index
        del ids[: self._prefix_index]
        self._prefix = self._decode(ids)
        self._prefix_index = new_index
        return new_text
