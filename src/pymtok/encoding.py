"""transformers' ``__call__`` on a pymtok ``Tokenizer``: pairs, truncation, padding, masks, offsets.

A layer on top of the pipeline, as transformers keeps ``PreTrainedTokenizerBase`` apart from its
backend: the pipeline gives each text's tokens (``Tokenizer.encode`` for the ids; with offsets the
native core's ``native.accelerate_offsets`` where it knows them, else ``Tokenizer.encode_words``,
which also gives token strings and word ids, computed when first asked for), and this module
does what HF ``tokenizers`` does after that, step for step (``TokenizerImpl::post_process``):
truncate (with ``stride``, keeping the overflowing windows), lay the post-processor's special
tokens and type ids around the sequences, pad, and build the ``BatchEncoding``.

Padding and truncation follow transformers: they come from the call's arguments only. The
``padding`` / ``truncation`` settings a ``tokenizer.json`` carries (``Tokenizer.padding`` /
``Tokenizer.truncation``) are not applied, as transformers resets the backend's to its own
call arguments. ``max_length=None`` with truncation or ``padding="max_length"`` uses
``model_max_length`` from ``tokenizer_config.json`` (kept in a ``.mtok`` file; without one no
limit is known and, as in transformers, nothing is truncated). The padding and truncation side
and the returned fields (``model_input_names``) are ``tokenizer_config.json``'s, else those its
``tokenizer_class`` declares in transformers (``GemmaTokenizer`` and ``LlamaTokenizer`` pad on the
left, ``BertTokenizer`` returns ``token_type_ids``), as ``AutoTokenizer`` gives them.

>>> enc = tok(["Hello world", "Hi"], padding=True)             # doctest: +SKIP
>>> enc["input_ids"], enc["attention_mask"]                     # doctest: +SKIP
([[101, 7592, 2088, 102], [101, 7632, 102, 0]], [[1, 1, 1, 1], [1, 1, 1, 0]])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from . import native, processors

if TYPE_CHECKING:
    from .tokenizer import Tokenizer

# transformers' VERY_LARGE_INTEGER (no model_max_length) and LARGE_INTEGER (above it: no limit)
_VERY_LARGE_INTEGER = int(1e30)
_LARGE_INTEGER = int(1e20)
_DEFAULT_INPUT_NAMES = ("input_ids", "attention_mask")  # PreTrainedTokenizerFast's
_PADDING = ("longest", "max_length", "do_not_pad")
_TRUNCATION = ("longest_first", "only_first", "only_second", "do_not_truncate")
_SIDES = ("left", "right")
# Rust's char::is_whitespace and the GPT-2 character of the space, which ByteLevel trims
_TRIMMED = frozenset("\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
                     "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\u0120")
# transformers' keywords that pymtok does not implement: accepted at their default value only
_UNSUPPORTED_DEFAULTS: dict[str, Any] = {
    "text_target": None, "text_pair_target": None, "is_split_into_words": False,
    "tokenizer_kwargs": None, "split_special_tokens": False,
}


class Encoding:
    """One encoded sequence (or pair) as HF ``tokenizers``' ``Encoding`` holds it.

    ``sequence_ids`` is per token (0, 1, or None for special and padding tokens), which is what
    HF's sequence ranges amount to.
    """

    __slots__ = ("ids", "type_ids", "tokens", "words", "offsets", "special_tokens_mask",
                 "attention_mask", "sequence_ids", "overflowing", "sequences")

    def __init__(self, ids: list[int], type_ids: list[int], tokens: list[str], words: list[int | None],
                 offsets: list[tuple[int, int]], special_tokens_mask: list[int], attention_mask: list[int],
                 sequence_ids: list[int | None], overflowing: list[Encoding] | None = None,
                 sequences: int = 1) -> None:
        self.ids = ids
        self.type_ids = type_ids
        self.tokens = tokens
        self.words = words
        self.offsets = offsets
        self.special_tokens_mask = special_tokens_mask
        self.attention_mask = attention_mask
        self.sequence_ids = sequence_ids
        self.overflowing: list[Encoding] = overflowing if overflowing is not None else []
        # the sequences it was made from (2 for a pair), an empty one included: HF keeps a range
        # for each, which char_to_token searches
        self.sequences = sequences

    @classmethod
    def special(cls, ids: Sequence[int], tokens: Sequence[str], type_id: int) -> Encoding:
        n = len(ids)
        return cls(list(ids), [type_id] * n, list(tokens), [None] * n, [(0, 0)] * n, [1] * n, [1] * n, [None] * n)

    def __len__(self) -> int:
        return len(self.ids)

    def __repr__(self) -> str:
        return f"Encoding(num_tokens={len(self.ids)}, overflowing={len(self.overflowing)})"

    _FIELDS = ("ids", "type_ids", "tokens", "words", "offsets", "special_tokens_mask", "attention_mask",
               "sequence_ids")

    def _slice(self, start: int, stop: int) -> Encoding:
        return Encoding(*(getattr(self, f)[start:stop] for f in self._FIELDS), sequences=self.sequences)

    def copy(self) -> Encoding:
        return Encoding(*(list(getattr(self, f)) for f in self._FIELDS), [o.copy() for o in self.overflowing],
                        self.sequences)

    def set_type_ids(self, type_id: int) -> None:
        self.type_ids = [type_id] * len(self.ids)

    def truncate(self, max_len: int, stride: int, direction: str) -> None:
        """HF's ``Encoding::truncate``: keep ``max_len`` tokens, the rest as overflowing windows
        that overlap by ``stride`` tokens."""
        n = len(self.ids)
        if max_len >= n:
            return
        if max_len == 0:
            whole = self.copy()
            for f in self._FIELDS:
                setattr(self, f, [])
            self.overflowing = [whole]
            return
        if stride >= max_len:
            raise ValueError(
                f"stride ({stride}) must be strictly less than max_len={max_len} (note that max_len may "
                "be shorter than max_length, as it subtracts the number of special tokens)"
            )
        step = max_len - stride
        parts: list[tuple[int, int]] = []
        if direction == "right":
            for start in range(0, n, step):
                stop = min(start + max_len, n)
                parts.append((start, stop))
                if stop == n:
                    break
        else:
            for last in range(n - 1, -1, -step):
                stop = last + 1
                start = max(stop - max_len, 0)
                parts.append((start, stop))
                if start == 0:
                    break
        first = self._slice(*parts[0])
        overflowing = [self._slice(*part) for part in parts[1:]]
        for f in self._FIELDS:
            setattr(self, f, getattr(first, f))
        self.overflowing = overflowing

    def merge_with(self, pair: Encoding) -> None:
        """HF's ``Encoding::merge_with`` (offsets not shifted): every overflowing combination too."""
        overflowings: list[Encoding] = []
        for own in self.overflowing:
            merged = own.copy()
            merged.merge_with(pair.copy())
            overflowings.append(merged)
            for other in pair.overflowing:
                merged = own.copy()
                merged.merge_with(other.copy())
                overflowings.append(merged)
        for other in pair.overflowing:
            merged = self.copy()
            merged.overflowing = []
            merged.merge_with(other.copy())
            overflowings.append(merged)
        for f in self._FIELDS:
            getattr(self, f).extend(getattr(pair, f))
        self.overflowing = overflowings

    def pad(self, length: int, pad_id: int, pad_type_id: int, pad_token: str, side: str) -> None:
        for own in self.overflowing:
            own.pad(length, pad_id, pad_type_id, pad_token, side)
        n = length - len(self.ids)
        if n <= 0:
            return
        fill = {"ids": pad_id, "type_ids": pad_type_id, "tokens": pad_token, "words": None, "offsets": (0, 0),
                "special_tokens_mask": 1, "attention_mask": 0, "sequence_ids": None}
        for f in self._FIELDS:
            values = getattr(self, f)
            setattr(self, f, [fill[f]] * n + values if side == "left" else values + [fill[f]] * n)

    def char_to_token(self, char_index: int, sequence_index: int = 0) -> int | None:
        at = [i for i, s in enumerate(self.sequence_ids) if s == sequence_index]
        if not at and sequence_index < self.sequences:
            return None  # an empty sequence: HF's empty range
        start, stop = (at[0], at[-1] + 1) if at else (0, len(self.ids))
        for i in range(start, stop):
            s, e = self.offsets[i]
            if s <= char_index < e:
                return i
        return None


def _merge(encodings: list[Encoding]) -> Encoding:
    out = Encoding([], [], [], [], [], [], [], [])
    for encoding in encodings:
        out.merge_with(encoding)
    return out


def _sequences(tok: Tokenizer, texts: list[str], type_id: int, need: str, trim: int) -> list[Encoding]:
    """Each text's tokens before post-processing (HF's ``encode_single_sequence``): the ids alone
    (``need="ids"``, in one ``encode_batch``), with offsets already trimmed as ``trim`` says
    (``"offsets"``, see :func:`_offsets`), or with offsets, token strings and word ids
    (``"all"``)."""
    out: list[Encoding] = []
    if not texts:
        return out
    if need == "ids":
        for ids in tok.encode_batch(texts, add_special_tokens=False):
            n = len(ids)
            out.append(Encoding(ids, [type_id] * n, [""] * n, [None] * n, [(0, 0)] * n, [0] * n, [1] * n, [type_id] * n))
        return out
    if need == "offsets":
        for text in texts:
            ids, offsets = _offsets(tok, text, trim)
            n = len(ids)
            out.append(Encoding(ids, [type_id] * n, [""] * n, [None] * n, offsets, [0] * n, [1] * n, [type_id] * n))
        return out
    for text in texts:
        out.append(_words(tok, text, type_id))
    return out


def _words(tok: Tokenizer, text: str, type_id: int) -> Encoding:
    words = tok.encode_words(text)
    n = len(words)
    return Encoding([w[0] for w in words], [type_id] * n, [w[1] for w in words], [w[4] for w in words],
                    [(w[2], w[3]) for w in words], [0] * n, [1] * n, [type_id] * n)


def _offsets(tok: Tokenizer, text: str, trim: int, before: list[int] | None = None,
             after: list[int] | None = None) -> tuple[list[int], list[tuple[int, int]]]:
    """``text``'s ids (no special tokens) and offsets, trimmed as a ByteLevel post-processor
    does when ``trim`` >= 0 (1: with its add_prefix_space), within the ids ``before`` and
    ``after`` and as many ``(0, 0)``: from the native core where it knows them
    (:func:`pymtok.native.accelerate_offsets`), else from the pure pipeline."""
    before = before or []
    after = after or []
    native_offsets = _native_offsets(tok)
    # the native core matches every added token, as encode_words does, whose answer it is
    if native_offsets is not None and not tok.meta.split_special_tokens:
        found = native_offsets(text, trim, before, after)
        if found is not None:
            return found
    return _pure_offsets(tok, text, trim, before, after)


def _pure_offsets(tok: Tokenizer, text: str, trim: int, before: list[int],
                  after: list[int]) -> tuple[list[int], list[tuple[int, int]]]:
    """:func:`_offsets` from the pure pipeline."""
    encoding = _words(tok, text, 0)
    if trim >= 0:
        _trim_offsets(encoding, bool(trim))
    if not before and not after:
        return encoding.ids, encoding.offsets
    return before + encoding.ids + after, [(0, 0)] * len(before) + encoding.offsets + [(0, 0)] * len(after)


def _native_offsets(tok: Tokenizer) -> native.OffsetsEncoder | None:
    memo = tok._call_memo
    try:
        found: native.OffsetsEncoder | None = memo["offsets"]
    except KeyError:
        found = memo["offsets"] = native.accelerate_offsets(tok)
    return found


def _trim_mode(post: processors.PostProcessor | None) -> int | None:
    """How ``post`` trims offsets (ByteLevel's ``process_offsets``): -1 not at all, 0, or 1 with
    add_prefix_space's exception for a first token; None when it trims more than once."""
    modes: list[int] = []

    def walk(p: Any) -> None:
        kind = type(p)
        if kind is processors.Sequence:
            for member in p.processors:
                walk(member)
        elif kind in (processors.ByteLevel, processors.RobertaProcessing) and p.trim_offsets:
            modes.append(int(bool(p.add_prefix_space)))

    if post is not None:
        walk(post)
    if len(modes) > 1:
        return None
    return modes[0] if modes else -1


def _known_trim_mode(tok: Tokenizer, post: processors.PostProcessor | None) -> int | None:
    """``_trim_mode(post)``, kept per tokenizer while ``post`` stays the same object (as ``_layout``)."""
    known = tok._call_memo.get("trim")
    if known is not None and known[0] is post:
        found: int | None = known[1]
        return found
    mode = _trim_mode(post)
    tok._call_memo["trim"] = (post, mode)
    return mode


# -- post-processors on whole encodings (processors.py lays out ids only) ------------------------

def _trim_offsets(encoding: Encoding, add_prefix_space: bool) -> None:
    """HF ByteLevel's ``process_offsets``: offsets leave out a token's leading/trailing spaces."""
    for i, token in enumerate(encoding.tokens):
        lead = len(token) - len(token.lstrip(_SPACES))
        trail = len(token) - len(token.rstrip(_SPACES))
        if not lead and not trail:
            continue
        start, end = encoding.offsets[i]
        if lead:
            if (i == 0 or start == 0) and add_prefix_space and lead == 1:
                lead = 0
            start = min(start + lead, end)
        if trail and end >= trail:
            end = max(end - trail, start)
        encoding.offsets[i] = (start, end)


_SPACES = "".join(sorted(_TRIMMED))


def _trim_all(encodings: list[Encoding], add_prefix_space: bool) -> None:
    for encoding in encodings:
        _trim_offsets(encoding, add_prefix_space)
        for own in encoding.overflowing:
            _trim_offsets(own, add_prefix_space)


def _around(encoding: Encoding, before: list[Encoding], after: list[Encoding], type_ids: Callable[[Encoding], list[int]]) -> Encoding:
    """``before + encoding + after`` (special tokens), each overflowing window likewise."""
    def one(e: Encoding) -> Encoding:
        out = _merge([*(b.copy() for b in before), e, *(a.copy() for a in after)])
        out.type_ids = type_ids(e)
        return out

    overflowing = [one(own) for own in encoding.overflowing]
    encoding.overflowing = []
    result = one(encoding)
    result.overflowing = overflowing
    return result


def _process_encodings(post: processors.PostProcessor, encodings: list[Encoding], add: bool,
                       trimmed: bool) -> list[Encoding]:
    """``post`` on whole encodings; ``trimmed``: their offsets are trimmed already (_offsets)."""
    kind = type(post)
    if kind is processors.Sequence:
        for member in post.processors:  # type: ignore[attr-defined]
            encodings = _process_encodings(member, encodings, add, trimmed)
        return encodings
    if kind is processors.ByteLevel:
        if post.trim_offsets and not trimmed:  # type: ignore[attr-defined]
            _trim_all(encodings, post.add_prefix_space)  # type: ignore[attr-defined]
        return encodings
    if kind is processors.RobertaProcessing:
        rp: Any = post
        if rp.trim_offsets and not trimmed:
            _trim_all(encodings, rp.add_prefix_space)
        for e in encodings:
            e.set_type_ids(0)
        if not add:
            return encodings
        cls = Encoding.special([rp.cls[1]], [rp.cls[0]], 0)
        sep = Encoding.special([rp.sep[1]], [rp.sep[0]], 0)
        return [
            _around(e, [cls if i == 0 else sep], [sep], lambda x: [0] * (len(x) + 2)) for i, e in enumerate(encodings)
        ]
    if kind is processors.BertProcessing:
        bp: Any = post
        if not add:
            return encodings
        cls = Encoding.special([bp.cls[1]], [bp.cls[0]], 0)
        sep = Encoding.special([bp.sep[1]], [bp.sep[0]], 0)
        return [
            _around(e, [cls], [sep], lambda x: [0, *x.type_ids, 0]) if i == 0
            else _around(e, [], [sep], lambda x: [*x.type_ids, 1])
            for i, e in enumerate(encodings)
        ]
    if kind is processors.TemplateProcessing:
        tp: Any = post
        template = tp.single if len(encodings) == 1 else tp.pair
        out: list[Encoding] = []
        for item in template:
            ((piece, body),) = item.items()
            type_id = int(body.get("type_id", 0))
            if piece == "Sequence":
                e = encodings[0 if body["id"] == "A" else 1]
                e.set_type_ids(type_id)
                out.append(e.copy())
            elif add:
                special = tp.special_tokens[body["id"]]
                out.append(Encoding.special(special["ids"], special.get("tokens") or [""] * len(special["ids"]), type_id))
        return out
    raise TypeError(f"post-processor {kind.__name__} has no whole-encoding form")


def _call_post_processor(tok: Tokenizer) -> processors.PostProcessor | None:
    """The post-processor transformers runs: call_settings' ``add_bos_token`` / ``add_eos_token``
    (transformers' attributes of those names, which it does not take from tokenizer_config.json
    beside a tokenizer.json), or a tokenizer.json without a post-processor, have transformers
    replace it by ``[bos] $A [eos]`` / ``[bos] $A [eos] [bos] $B [eos]`` (type id 1 for the second)."""
    settings = tok.meta.call_settings
    if tok.post_processor is not None and "add_bos_token" not in settings and "add_eos_token" not in settings:
        return tok.post_processor
    # made once per tokenizer and settings: building the template costs more than a short call
    special = tok.meta.special_tokens
    key = (tok.post_processor, settings.get("add_bos_token"), settings.get("add_eos_token"),
           special.get("bos_token"), special.get("eos_token"))
    known = tok._call_memo.get("post")
    if known is not None and known[0] == key:
        post: processors.PostProcessor | None = known[1]
        return post
    post = _bos_eos_processor(tok)
    tok._call_memo["post"] = (key, post)
    return post


def _bos_eos_processor(tok: Tokenizer) -> processors.PostProcessor:
    settings = tok.meta.call_settings
    specials: dict[str, dict[str, Any]] = {}
    around: dict[str, str | None] = {}
    for name in ("bos", "eos"):
        token = tok.meta.special_tokens.get(f"{name}_token")
        around[name] = token if settings.get(f"add_{name}_token") and token is not None else None
        if around[name] is not None:
            id = tok.token_to_id(token)  # type: ignore[arg-type]
            if id is None:
                raise ValueError(f"{name}_token {token!r} is not in the vocabulary")
            specials[token] = {"id": token, "ids": [id], "tokens": [token]}  # type: ignore[index]

    def side(sequence: str, type_id: int) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if around["bos"] is not None:
            out.append({"SpecialToken": {"id": around["bos"], "type_id": type_id}})
        out.append({"Sequence": {"id": sequence, "type_id": type_id}})
        if around["eos"] is not None:
            out.append({"SpecialToken": {"id": around["eos"], "type_id": type_id}})
        return out

    return processors.TemplateProcessing(single=side("A", 0), pair=side("A", 0) + side("B", 1), special_tokens=specials)


def _post_process(post: processors.PostProcessor | None, encoding: Encoding, pair: Encoding | None,
                  add_special_tokens: bool, truncation: dict[str, Any] | None, padding: dict[str, Any] | None,
                  trimmed: bool) -> Encoding:
    """HF's ``TokenizerImpl::post_process``: truncate, add the special tokens, pad."""
    if truncation is not None:
        added = post.added_tokens(pair is not None) if post is not None else 0
        max_length = truncation["max_length"]
        if add_special_tokens and added:
            # HF subtracts unsigned: a max_length below the special tokens' count wraps round to
            # a length nothing reaches
            max_length = max_length - added if max_length >= added else _VERY_LARGE_INTEGER
        _truncate(encoding, pair, max_length, truncation["stride"], truncation["strategy"], truncation["direction"])
    encodings = [encoding] if pair is None else [encoding, pair]
    if post is not None:
        encodings = _process_encodings(post, encodings, add_special_tokens, trimmed)
    final = _merge(encodings)
    if pair is not None:
        for merged in (final, *final.overflowing):
            merged.sequences = 2
    if padding is not None:
        _pad([final], padding)
    return final


def _truncate(encoding: Encoding, pair: Encoding | None, max_length: int, stride: int, strategy: str,
              direction: str) -> None:
    """HF's ``truncate_encodings``."""
    if max_length == 0:
        encoding.truncate(0, stride, direction)
        if pair is not None:
            pair.truncate(0, stride, direction)
        return
    total = len(encoding) + (len(pair) if pair is not None else 0)
    if total <= max_length:
        return
    to_remove = total - max_length
    if strategy == "longest_first":
        if pair is None:
            encoding.truncate(total - to_remove, stride, direction)
            return
        n1, n2 = len(encoding), len(pair)
        swap = n1 > n2
        if swap:
            n1, n2 = n2, n1
        n2 = n1 if n1 > max_length else max(n1, max_length - n1)
        if n1 + n2 > max_length:
            n1 = max_length // 2
            n2 = n1 + max_length % 2
        if swap:
            n1, n2 = n2, n1
        encoding.truncate(n1, stride, direction)
        pair.truncate(n2, stride, direction)
        return
    if strategy == "only_first":
        target = encoding
    elif pair is not None:
        target = pair
    else:
        raise ValueError("Truncation error: Second sequence not provided")
    if len(target) <= to_remove:
        raise ValueError("Truncation error: Sequence to truncate too short to respect the provided max_length")
    target.truncate(len(target) - to_remove, stride, direction)


def _pad(encodings: list[Encoding], padding: dict[str, Any]) -> None:
    """HF's ``pad_encodings``: to a fixed length or the batch's longest, then a multiple."""
    if not encodings:
        return
    length = padding["length"] if padding["length"] is not None else max(len(e) for e in encodings)
    multiple = padding["pad_to_multiple_of"]
    if multiple and length % multiple:
        length += multiple - length % multiple
    for e in encodings:
        e.pad(length, padding["pad_id"], 0, padding["pad_token"], padding["direction"])


# -- BatchEncoding ------------------------------------------------------------------------------

class BatchEncoding(dict[str, Any]):
    """What ``tok(...)`` returns: a dict of model inputs, as transformers' ``BatchEncoding``.

    ``tokens()``, ``word_ids()``, ``sequence_ids()`` and ``char_to_token()`` read the per-sequence
    encodings (computed with offsets on first use when the call did not need them).
    """

    # slots: a dict subclass's attributes would otherwise make a __dict__ per instance, one more
    # object for the cyclic collector (__dict__ keeps other attributes settable)
    __slots__ = ("_get_encodings", "_encodings", "_n_sequences", "_tok", "_text", "_post", "_add", "__dict__")
    _tok: Tokenizer
    _text: str
    _post: processors.PostProcessor | None
    _add: bool

    def __init__(self, data: dict[str, Any], encodings: Callable[[], list[Encoding]] | None, n_sequences: int) -> None:
        super().__init__(data)
        self._get_encodings = encodings
        self._encodings: list[Encoding] | None = None
        self._n_sequences = n_sequences

    @property
    def encodings(self) -> list[Encoding]:
        if self._encodings is None:
            if self._get_encodings is None:
                self._encodings = [_post_process(self._post, e, None, self._add, None, None, False)
                                   for e in _sequences(self._tok, [self._text], 0, "all", 0)]
            else:
                self._encodings = self._get_encodings()
        return self._encodings

    @property
    def n_sequences(self) -> int:
        return self._n_sequences

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, key: str | int) -> Any:  # type: ignore[override]
        if isinstance(key, int):
            return self.encodings[key]
        return super().__getitem__(key)

    def __reduce__(self) -> Any:
        encodings = self.encodings
        return (_rebuilt, (dict(self), encodings, self._n_sequences))

    def tokens(self, batch_index: int = 0) -> list[str]:
        return list(self.encodings[batch_index].tokens)

    def word_ids(self, batch_index: int = 0) -> list[int | None]:
        return list(self.encodings[batch_index].words)

    def sequence_ids(self, batch_index: int = 0) -> list[int | None]:
        return list(self.encodings[batch_index].sequence_ids)

    def char_to_token(self, batch_or_char_index: int, char_index: int | None = None,
                      sequence_index: int = 0) -> int | None:
        if char_index is None:
            batch_index, char_index = 0, batch_or_char_index
        else:
            batch_index = batch_or_char_index
        return self.encodings[batch_index].char_to_token(char_index, sequence_index)


def _rebuilt(data: dict[str, Any], encodings: list[Encoding], n_sequences: int) -> BatchEncoding:
    return BatchEncoding(data, lambda: encodings, n_sequences)


# -- __call__ -----------------------------------------------------------------------------------

def _model_max_length(tok: Tokenizer) -> int:
    """tokenizer_config.json's ``model_max_length``, transformers' very large integer without one."""
    return int(tok.meta.call_settings.get("model_max_length", _VERY_LARGE_INTEGER))


def _strategies(tok: Tokenizer, padding: Any, truncation: Any, max_length: int | None,
                pad_to_multiple_of: int | None) -> tuple[str, str, int | None]:
    """transformers' ``_get_padding_truncation_strategies``."""
    if max_length is not None and padding is False and truncation is None:
        truncation = "longest_first"
    if padding is True:
        pad = "longest"
    elif padding is False or padding is None:
        pad = "do_not_pad"
    elif isinstance(padding, str) and padding in _PADDING:
        pad = padding
    else:
        raise ValueError(f"{padding!r} is not a valid PaddingStrategy, please select one of {list(_PADDING)}")
    if truncation is True:
        trunc = "longest_first"
    elif truncation is False or truncation is None:
        trunc = "do_not_truncate"
    elif isinstance(truncation, str) and truncation in _TRUNCATION:
        trunc = truncation
    else:
        raise ValueError(f"{truncation!r} is not a valid TruncationStrategy, please select one of {list(_TRUNCATION)}")
    model_max_length = _model_max_length(tok)
    if max_length is None:
        if pad == "max_length":
            if model_max_length > _LARGE_INTEGER:
                pad = "do_not_pad"
            else:
                max_length = model_max_length
        if trunc != "do_not_truncate":
            if model_max_length > _LARGE_INTEGER:
                trunc = "do_not_truncate"
            else:
                max_length = model_max_length
    if pad != "do_not_pad" and _pad_token(tok)[1] is None:
        raise ValueError(
            "Asking to pad but the tokenizer does not have a padding token. Please select a token to use "
            "as `pad_token` `(tokenizer.pad_token = tokenizer.eos_token e.g.)` or add a new pad token."
        )
    if (trunc != "do_not_truncate" and pad != "do_not_pad" and pad_to_multiple_of is not None
            and max_length is not None and max_length % pad_to_multiple_of != 0):
        raise ValueError(
            "Truncation and padding are both activated but truncation length "
            f"({max_length}) is not a multiple of pad_to_multiple_of ({pad_to_multiple_of})."
        )
    return pad, trunc, max_length


def _pad_token(tok: Tokenizer) -> tuple[str | None, int | None]:
    token = tok.meta.special_tokens.get("pad_token")
    if token is None:
        return None, None
    return token, tok.token_to_id(token)


def _check_int(name: str, value: Any, allow_none: bool = True) -> None:
    if value is None and allow_none:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise TypeError(f"{name} must be a non-negative int{' or None' if allow_none else ''}, got {value!r}")


def _texts(text: Any, text_pair: Any) -> tuple[list[str | tuple[str, str]], bool]:
    def valid(t: Any) -> bool:
        return isinstance(t, str) or (isinstance(t, (list, tuple)) and all(isinstance(x, str) for x in t))

    if text is None:
        raise ValueError("You need to specify either `text` or `text_target`.")
    if text_pair is None and isinstance(text, (list, tuple)) and any(isinstance(t, (list, tuple)) for t in text):
        # transformers' batch of texts and (text, pair) couples, which HF's encode_batch takes
        if not all(isinstance(t, str) or (isinstance(t, (list, tuple)) and len(t) == 2 and valid(t)) for t in text):
            raise TypeError(
                "a batch holds texts and (text, pair) couples of two str; pymtok does not take pre-tokenized input"
            )
        return [t if isinstance(t, str) else (t[0], t[1]) for t in text], True
    if not valid(text) or (text_pair is not None and not valid(text_pair)):
        raise ValueError(
            "text input must be of type `str` (single example) or `list[str]` (batch); pymtok does not "
            "take pre-tokenized input"
        )
    if isinstance(text, (list, tuple)):
        if isinstance(text_pair, str):
            raise TypeError(
                "when tokenizing batches of text, `text_pair` must be a list or tuple with the same length as `text`."
            )
        if text_pair is not None and len(text) != len(text_pair):
            raise ValueError(
                f"batch length of `text`: {len(text)} does not match batch length of `text_pair`: {len(text_pair)}."
            )
        if not text:
            raise ValueError("an empty batch of texts has nothing to encode")
        return (list(zip(text, text_pair)) if text_pair is not None else list(text)), True
    return ([(text, text_pair)] if text_pair else [text]), False


def call(
    tok: Tokenizer,
    text: str | Sequence[str] | None = None,
    text_pair: str | Sequence[str] | None = None,
    *,
    add_special_tokens: bool = True,
    padding: bool | str = False,
    truncation: bool | str | None = None,
    max_length: int | None = None,
    stride: int = 0,
    pad_to_multiple_of: int | None = None,
    padding_side: str | None = None,
    return_tensors: str | None = None,
    return_token_type_ids: bool | None = None,
    return_attention_mask: bool | None = None,
    return_overflowing_tokens: bool = False,
    return_special_tokens_mask: bool = False,
    return_offsets_mapping: bool = False,
    return_length: bool = False,
    verbose: bool = True,
    **kwargs: Any,
) -> BatchEncoding:
    """``tok(text, text_pair, ...)``: transformers' ``PreTrainedTokenizerFast.__call__``."""
    if (type(text) is str and text_pair is None and not kwargs and type(add_special_tokens) is bool
            and padding is False and truncation is None and max_length is None and type(stride) is int
            and not stride and pad_to_multiple_of is None and padding_side is None and return_tensors is None
            and return_token_type_ids is None and return_attention_mask is None
            and return_overflowing_tokens is False and return_special_tokens_mask is False
            and type(return_offsets_mapping) is bool and return_length is False and verbose is True):
        plain = _plain_call(tok, text, add_special_tokens, return_offsets_mapping)
        if plain is not None:
            return plain
    for name, value in kwargs.items():
        if name not in _UNSUPPORTED_DEFAULTS:
            raise TypeError(f"__call__() got an unexpected keyword argument {name!r}")
        if value != _UNSUPPORTED_DEFAULTS[name]:
            raise TypeError(f"__call__(): {name}={value!r} is not supported by pymtok")
    for name, flag in (("add_special_tokens", add_special_tokens), ("return_overflowing_tokens", return_overflowing_tokens),
                       ("return_special_tokens_mask", return_special_tokens_mask),
                       ("return_offsets_mapping", return_offsets_mapping), ("return_length", return_length),
                       ("verbose", verbose)):
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be True or False, got {flag!r}")
    for name, maybe in (("return_token_type_ids", return_token_type_ids), ("return_attention_mask", return_attention_mask)):
        if maybe is not None and not isinstance(maybe, bool):
            raise TypeError(f"{name} must be True, False or None, got {maybe!r}")
    _check_int("max_length", max_length)
    _check_int("stride", stride, allow_none=False)
    _check_int("pad_to_multiple_of", pad_to_multiple_of)
    settings = tok.meta.call_settings
    side = padding_side if padding_side is not None else settings.get("padding_side", "right")
    if side not in _SIDES:
        raise ValueError(f"padding_side must be 'left' or 'right', got {side!r}")
    truncation_side = settings.get("truncation_side", "right")
    if return_tensors not in (None, "np", "pt"):
        raise ValueError(f"return_tensors={return_tensors!r}: pymtok gives 'np' or 'pt' tensors, or lists (None)")
    batch, is_batched = _texts(text, text_pair)
    pad, trunc, max_length = _strategies(tok, padding, truncation, max_length, pad_to_multiple_of)
    truncation_params = None if trunc == "do_not_truncate" else {
        "max_length": max_length, "stride": stride, "strategy": trunc, "direction": truncation_side,
    }
    post = _call_post_processor(tok)
    if truncation_params is not None:
        added = post.added_tokens(False) if post is not None else 0
        assert max_length is not None
        # HF's with_truncation (its unsigned subtraction wrapping round likewise)
        if max_length >= added and max_length - added < stride:
            raise ValueError(
                f"tokenizer stride set to {stride}, which is greater than or equal to its effective max "
                f"length of {max_length - added} (= {max_length} original max length - {added} added "
                "special tokens)"
            )
    padding_params = None
    if pad != "do_not_pad":
        pad_token, pad_id = _pad_token(tok)
        padding_params = {"length": max_length if pad == "max_length" else None, "direction": side,
                          "pad_id": pad_id, "pad_token": pad_token, "pad_to_multiple_of": pad_to_multiple_of}
    trim = _trim_mode(post) if return_offsets_mapping else -1
    paired = any(isinstance(item, tuple) for item in batch)
    # Offsets trimmed before truncation equal HF's trimmed after it, but for add_prefix_space's
    # exception, which an overflowing window's first token also takes
    need = "ids"
    if return_offsets_mapping:
        need = "offsets" if trim is not None and not (trim == 1 and truncation_params is not None) else "all"

    def encode_all(need: str) -> list[Encoding]:
        firsts = _sequences(tok, [item[0] if isinstance(item, tuple) else item for item in batch], 0, need, trim or 0)
        seconds = iter(_sequences(tok, [item[1] for item in batch if isinstance(item, tuple)], 1, need, trim or 0))
        out = []
        for item, encoding in zip(batch, firsts):
            pair = next(seconds) if isinstance(item, tuple) else None
            out.append(_post_process(post, encoding, pair, add_special_tokens, truncation_params, padding_params,
                                     need == "offsets"))
        if padding_params is not None:
            _pad(out, padding_params)
        return out

    names = settings.get("model_input_names", _DEFAULT_INPUT_NAMES)
    if return_token_type_ids is None:
        return_token_type_ids = "token_type_ids" in names
    if return_attention_mask is None:
        return_attention_mask = "attention_mask" in names
    wanted = (return_token_type_ids, return_attention_mask, return_special_tokens_mask, return_offsets_mapping,
              return_length)

    def rows_of(encodings: list[Encoding]) -> list[Encoding]:
        return [r for e in encodings for r in ([e, *e.overflowing] if return_overflowing_tokens else [e])]

    layout = None
    if truncation_params is None and not return_overflowing_tokens and need != "all" and not paired:
        layout = _layout(tok, post, add_special_tokens)
    if layout is not None:
        # one sequence per text, nothing cut: the columns straight from the ids (and offsets)
        data = _columns(tok, batch, layout, trim or 0, padding_params, *wanted)  # type: ignore[arg-type]
        get_rows: Callable[[], list[Encoding]] = lambda: rows_of(encode_all("all"))  # noqa: E731
    else:
        encodings = encode_all(need)
        rows = rows_of(encodings)
        data = _rows_data(rows, *wanted)
        if return_overflowing_tokens:
            data["overflow_to_sample_mapping"] = [
                i for i, e in enumerate(encodings) for _ in range(1 + len(e.overflowing))]
        # token strings and word ids come from the aligned pipeline, on first use
        get_rows = (lambda: rows) if need == "all" else (lambda: rows_of(encode_all("all")))  # noqa: E731
    if return_tensors is not None:
        data = {key: _tensor(key, value, return_tensors) for key, value in data.items()}
    elif not is_batched and not return_overflowing_tokens:
        data = {key: value[0] if value and isinstance(value[0], list) else value for key, value in data.items()}
    return BatchEncoding(data, get_rows, 2 if paired else 1)


def _plain_call(tok: Tokenizer, text: str, add_special_tokens: bool, offsets: bool) -> BatchEncoding | None:
    """``call`` for one text with every other keyword at its default but ``return_offsets_mapping``,
    the commonest calls, without the general path's bookkeeping (a sixth of a 2 KB call's time):
    the same checks that can fail there, the same columns. None when the post-processor's layout
    (or offsets' trimming) needs the general path. On the native path ``Tokenizer.__call__`` is
    module.c's ``plain_call`` where this has kept its plan: the same fields and columns from it, in
    C (test_call's short-call test holds the two together)."""
    # _plain_plan's memo checked here, a frame less on every call
    meta = tok.meta
    known = tok._call_memo.get(_PLAIN_KEYS[2 * add_special_tokens + offsets])
    if (known is None or known[0] is not tok.post_processor or known[1] != meta.call_settings
            or known[2] != meta.special_tokens):
        known = _plain_plan(tok, add_special_tokens, offsets)
    plan: _PlainPlan | None = known[3]
    if plan is None:
        return None
    post, (before, before_types, type_id, after, after_types), trim, type_ids, attention, native_offsets = plan
    if not offsets:
        ids = tok.encode(text, add_special_tokens=False)
        if before or after:
            # into the list encode made for this call: before + ids + after would copy it whole
            ids[:0] = before
            ids += after
    elif native_offsets is not None and not meta.split_special_tokens:
        laid = native_offsets(text, trim, before, after)
        ids, spans = laid if laid is not None else _pure_offsets(tok, text, trim, before, after)
    else:
        ids, spans = _pure_offsets(tok, text, trim, before, after)
    # one text's BatchEncoding, its encodings made on first use from fields rather than a closure,
    # whose function, cells and tuple would be six more objects for the cyclic collector (a call's
    # allocations set off its collections, which walk every list the caller keeps); __init__'s
    # fields set here, without its frame and super(), nor a frame of a constructor of its own
    found = BatchEncoding.__new__(BatchEncoding)
    found._get_encodings = None
    found._encodings = None
    found._n_sequences = 1
    found._tok = tok
    found._text = text
    found._post = post
    found._add = add_special_tokens
    found["input_ids"] = ids
    if type_ids:
        # one list of the text's type id, the special tokens' written over its ends in place:
        # a + b + c would make and copy lists of the text's length twice more
        types = [type_id] * len(ids)
        if before_types:
            types[: len(before_types)] = before_types
        if after_types:
            types[len(types) - len(after_types):] = after_types
        found["token_type_ids"] = types
    if attention:
        found["attention_mask"] = [1] * len(ids)
    if offsets:
        found["offset_mapping"] = spans
    return found


# _plain_plan's keys in the call memo, by 2 * add_special_tokens + offsets: strings, whose hashes
# are kept, where a tuple's would be computed on every call
_PLAIN_KEYS = ("plain", "plain+offsets", "plain+special", "plain+special+offsets")
_PlainMemo = tuple["processors.PostProcessor | None", dict[str, Any], dict[str, str], "_PlainPlan | None"]


def _plain_plan(tok: Tokenizer, add: bool, offsets: bool) -> _PlainMemo:
    """What ``_plain_call`` needs of the tokenizer's settings and post-processor, after the
    snapshot of them it holds for: the post-processor transformers runs, its layout, the
    offsets' trimming, whether type ids and the attention mask are columns, the native offsets
    encoder; in place of those None for the general path. Kept per tokenizer while the
    post-processor, the call settings and the special tokens stay the same (each call compares
    them: they are plain attributes and dicts a caller may change)."""
    meta = tok.meta
    settings = meta.call_settings
    snapshot = (tok.post_processor, dict(settings), dict(meta.special_tokens))
    if settings.get("padding_side", "right") not in _SIDES:
        return (*snapshot, None)  # the general path raises; not kept, as it raises each time
    _model_max_length(tok)  # the one check of _strategies(tok, False, None, None, None) that can fail
    post = _call_post_processor(tok)
    layout = _layout(tok, post, add)
    trim = _known_trim_mode(tok, post) if offsets else -1
    names = settings.get("model_input_names", _DEFAULT_INPUT_NAMES)
    plan = None
    if layout is not None and trim is not None:
        plan = (post, layout, trim, "token_type_ids" in names, "attention_mask" in names,
                _native_offsets(tok) if offsets else None)
    known = tok._call_memo[_PLAIN_KEYS[2 * add + offsets]] = (*snapshot, plan)
    return known


def _rows_data(rows: list[Encoding], type_ids: bool, attention: bool, special: bool, offsets: bool,
               length: bool) -> dict[str, Any]:
    data: dict[str, Any] = {"input_ids": [r.ids for r in rows]}
    if type_ids:
        data["token_type_ids"] = [r.type_ids for r in rows]
    if attention:
        data["attention_mask"] = [r.attention_mask for r in rows]
    if special:
        data["special_tokens_mask"] = [r.special_tokens_mask for r in rows]
    if offsets:
        data["offset_mapping"] = [r.offsets for r in rows]
    if length:
        data["length"] = [len(r.ids) for r in rows]
    return data


Layout = tuple[list[int], list[int], int, list[int], list[int]]
_PlainPlan = tuple["processors.PostProcessor | None", Layout, int, bool, bool, "native.OffsetsEncoder | None"]


def _layout(tok: Tokenizer, post: processors.PostProcessor | None, add: bool) -> Layout | None:
    """What the post-processor lays around one sequence: the ids and type ids before it, the
    sequence's type id, the ids and type ids after it; None when it repeats or drops the
    sequence. Kept per tokenizer while the post-processor it is given stays the same object."""
    known = tok._call_memo.get(("layout", add))
    if known is not None and known[0] is post:
        found: Layout | None = known[1]
        return found
    layout: Layout | None = ([], [], 0, [], [])
    if post is not None:
        marker = Encoding([-1], [0], [""], [None], [(0, 0)], [0], [1], [0])
        laid = _merge(_process_encodings(post, [marker], add, True))
        at = [i for i, (id, seq) in enumerate(zip(laid.ids, laid.sequence_ids)) if id == -1 and seq == 0]
        if len(at) != 1 or len(laid.ids) != len(laid.sequence_ids):
            layout = None
        else:
            i = at[0]
            layout = (laid.ids[:i], laid.type_ids[:i], laid.type_ids[i], laid.ids[i + 1:], laid.type_ids[i + 1:])
    tok._call_memo[("layout", add)] = (post, layout)
    return layout


def _columns(tok: Tokenizer, batch: list[str], layout: Layout, trim: int, padding: dict[str, Any] | None,
             type_ids: bool, attention: bool, special: bool, offsets: bool, length: bool) -> dict[str, Any]:
    """The BatchEncoding columns of texts encoded alone, laid out as ``layout`` says and padded as
    HF's ``pad_encodings`` does: what ``encode_all`` gives them, without an Encoding per text."""
    before, before_types, type_id, after, after_types = layout
    nb, na = len(before), len(after)
    spans: list[list[tuple[int, int]]] = []
    if offsets:
        input_ids = []
        for text in batch:
            ids, found = _offsets(tok, text, trim, before, after)
            input_ids.append(ids)
            spans.append(found)
    else:
        if len(batch) == 1:
            seqs = [tok.encode(batch[0], add_special_tokens=False)]
        else:
            seqs = tok.encode_batch(batch, add_special_tokens=False)
        input_ids = [before + ids + after for ids in seqs] if nb or na else seqs
    lengths = [len(ids) for ids in input_ids]
    columns: dict[str, list[list[Any]]] = {"input_ids": input_ids}
    if type_ids:
        columns["token_type_ids"] = [before_types + [type_id] * (n - nb - na) + after_types for n in lengths]
    if attention:
        columns["attention_mask"] = [[1] * n for n in lengths]
    if special:
        columns["special_tokens_mask"] = [[1] * nb + [0] * (n - nb - na) + [1] * na for n in lengths]
    if offsets:
        columns["offset_mapping"] = spans
    if padding is not None:
        target = padding["length"] if padding["length"] is not None else max(lengths)
        multiple = padding["pad_to_multiple_of"]
        if multiple and target % multiple:
            target += multiple - target % multiple
        fill = {"input_ids": padding["pad_id"], "token_type_ids": 0, "attention_mask": 0, "special_tokens_mask": 1,
                "offset_mapping": (0, 0)}
        left = padding["direction"] == "left"
        for key, rows in columns.items():
            for i, row in enumerate(rows):
                if lengths[i] < target:
                    pad = [fill[key]] * (target - lengths[i])
                    rows[i] = pad + row if left else row + pad
        lengths = [max(n, target) for n in lengths]
    data: dict[str, Any] = dict(columns)
    if length:
        data["length"] = lengths
    return data


def _tensor(key: str, value: list[Any], kind: str) -> Any:
    """transformers' ``convert_to_tensors`` of one column: rows of different lengths become a
    numpy array of objects (each row its own array), which torch has no form for; a column with
    no values is int64."""
    ragged = bool(value) and isinstance(value[0], (list, tuple)) and len({len(v) for v in value}) > 1
    if kind == "pt":
        try:
            import torch
        except ImportError:
            raise ImportError("return_tensors='pt' needs PyTorch, which is not installed") from None
        if ragged:
            raise ValueError(
                f"Unable to create tensor for {key!r}: its rows have different lengths; use padding=True "
                "or truncation=True to have batched tensors with the same length."
            )
        return torch.tensor(value, dtype=torch.int64 if _is_empty(value) else None)
    import numpy as np

    if ragged:
        return np.asarray([np.asarray(row) for row in value], dtype=object)
    return np.asarray(value, dtype=np.int64 if _is_empty(value) else None)


def _is_empty(value: Any) -> bool:
    """Whether nested lists hold no value at all."""
    return not value or (isinstance(value[0], (list, tuple)) and all(_is_empty(row) for row in value))


__all__ = ["BatchEncoding", "Encoding", "call"]
