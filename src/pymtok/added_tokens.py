"""Added tokens: strings matched in the text before the model ever sees it.

HF matches tokens flagged ``normalized: false`` on the raw text first, then normalizes each
remaining segment and matches the ``normalized: true`` tokens (in their normalized form) there.
Both passes take the leftmost-longest match and honour ``single_word``, ``lstrip`` and ``rstrip``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import regex

from .errors import FormatError
from .normalizers import first_offset
from .onig import FLAGS, unicode_16_set

# HF decides these with Rust's `regex` crate, whose Unicode \w and \s are spelled out here.
# Compiled on first use: only single_word, lstrip and rstrip tokens need them.
@functools.cache
def _word_char() -> regex.Pattern[str]:
    return regex.compile(unicode_16_set(r"[\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}]"), FLAGS)


@functools.cache
def _trailing_space() -> regex.Pattern[str]:
    return regex.compile(r"\p{White_Space}*$")


@functools.cache
def _leading_space() -> regex.Pattern[str]:
    return regex.compile(r"\p{White_Space}*")


@dataclass(frozen=True)
class AddedToken:
    content: str
    special: bool = False
    single_word: bool = False
    lstrip: bool = False
    rstrip: bool = False
    normalized: bool = True

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> AddedToken:
        """An ``added_tokens`` entry, every field required and typed as HF's loader reads it.

        The ``id`` must be a u32 but is otherwise not used: ids are assigned as HF assigns them
        (see :class:`AddedVocabulary`).
        """
        if type(cfg) is dict:
            # the common entry, a JSON object of exactly typed fields, checked at once (a .mtok of
            # Llama 3 holds 256 of them); any other goes through the checks that name its fault
            try:
                id, content = cfg["id"], cfg["content"]
                special, single_word, lstrip = cfg["special"], cfg["single_word"], cfg["lstrip"]
                rstrip, normalized = cfg["rstrip"], cfg["normalized"]
            except KeyError:
                pass
            else:
                if (
                    type(id) is int and 0 <= id < 2**32 and type(content) is str and type(special) is bool
                    and type(single_word) is bool and type(lstrip) is bool and type(rstrip) is bool
                    and type(normalized) is bool
                ):
                    return cls(content, special, single_word, lstrip, rstrip, normalized)
        if not isinstance(cfg, Mapping):
            raise FormatError(f"added token {cfg!r:.80} is not an object")
        missing = [name for name in _FIELDS if name not in cfg]
        if missing:
            raise FormatError(f"added token {cfg!r:.80} lacks {', '.join(missing)}")
        id, content = cfg["id"], cfg["content"]
        if type(id) is not int or not 0 <= id < 2**32:
            raise FormatError(f"added token {content!r:.80}: id must be an integer 0..2**32-1, got {id!r}")
        if not isinstance(content, str):
            raise FormatError(f"added token {cfg!r:.80}: content must be a string")
        flags = {name: cfg[name] for name in _FIELDS[2:]}
        for name, value in flags.items():
            if not isinstance(value, bool):
                raise FormatError(f"added token {content!r:.80}: {name} must be true or false, got {value!r}")
        return cls(content=content, **flags)


_FIELDS = ("id", "content", "special", "single_word", "lstrip", "rstrip", "normalized")


def _trie_pattern(strings: Iterable[str]) -> str:
    """A regex matching any of ``strings``, longest alternative first at each position.

    A plain alternation of hundreds of literals is tried alternative by alternative at every
    position; a trie-shaped pattern shares prefixes, and greedy optional tails make the
    leftmost match the longest one (HF's LeftmostLongest).
    """
    trie: dict[str, Any] = {}
    for s in strings:
        node = trie
        for ch in s:
            node = node.setdefault(ch, {})
        node[""] = True

    def emit(node: dict[str, Any]) -> str:
        branches = [regex.escape(ch) + emit(child) for ch, child in sorted(node.items()) if ch]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        if "" in node:
            return "(?:" + body + ")?"
        return body

    return emit(trie)


Segment = tuple[str, int, int | None]
"""(text, offset in the original input, added-token id or None for text the model encodes)."""

AlignedSegment = tuple[str, int, list[tuple[int, int]], int | None]
"""A ``Segment`` with, per character of its text, the span of the input it comes from."""


class AddedVocabulary:
    """The ``added_tokens`` of a tokenizer: id assignment, matching and lookup.

    Ids follow HF's loader rather than the file's ``id`` fields: a token already in the model
    vocabulary keeps the model's id, any other gets the next id after the largest one so far.
    """

    def __init__(
        self,
        tokens: Iterable[AddedToken],
        *,
        token_to_model_id: Callable[[str], int | None],
        model_vocab_size: int,
        normalizer: Callable[[str], str] | None,
    ) -> None:
        self.by_id: dict[int, AddedToken] = {}
        self.ids: dict[str, int] = {}
        self.special: set[str] = set()
        self._normalized_form: dict[int, str] = {}
        self._top = -1  # the largest id given so far (Llama 3 adds 256 tokens: no max() per token)
        for token in tokens:
            if not token.content:
                continue
            id = self.ids.get(token.content)
            if id is not None and self.by_id.get(id) == token:
                continue
            if id is None:
                id = token_to_model_id(token.content)
            if id is None:
                id = self._next_id(model_vocab_size)
            if token.normalized and normalizer is not None:
                form = normalizer(token.content)
                if form != token.content:
                    self._normalized_form[id] = form
            self.ids[token.content] = id
            if token.special:
                self.special.add(token.content)
            self.by_id[id] = token
            self._top = max(self._top, id)

    def _next_id(self, model_vocab_size: int) -> int:
        if self._top < 0:
            return model_vocab_size
        top = self._top
        return top + 1 if top >= model_vocab_size or model_vocab_size == 0 else model_vocab_size

    # The matchers are built on the pure path's first split: the native core matches added
    # tokens itself, and building and compiling the trie is most of a large vocabulary's load.
    @functools.cached_property
    def _raw(self) -> tuple[regex.Pattern[str], dict[str, int]] | None:
        return self._matcher({t.content: i for i, t in self.by_id.items() if not t.normalized})

    @functools.cached_property
    def _norm(self) -> tuple[regex.Pattern[str], dict[str, int]] | None:
        return self._matcher({self._normalized_form.get(i, t.content): i for i, t in self.by_id.items() if t.normalized})

    @staticmethod
    def _matcher(table: dict[str, int]) -> tuple[regex.Pattern[str], dict[str, int]] | None:
        if not table:
            return None
        return regex.compile(_trie_pattern(table)), table

    def __len__(self) -> int:
        return len(self.by_id)

    def token_for_decode(self, id: int) -> str | None:
        """The text HF's decoder receives for an added token (its normalized form if it has one)."""
        token = self.by_id.get(id)
        if token is None:
            return None
        return self._normalized_form.get(id, token.content)

    def split(
        self,
        text: str,
        normalizer: Callable[[str], str] | None,
        skip: frozenset[int] = frozenset(),
        first: Callable[[str], tuple[str, int]] | None = None,
    ) -> list[Segment]:
        """Cut ``text`` into added tokens and normalized text segments for the model.

        Tokens whose id is in ``skip`` are still matched but then left in the text, as HF's
        ``encode_special_tokens`` leaves them: a shorter token inside a skipped match does not
        match there either. ``first`` (``normalizers.normalize_first``) normalizes the segment at
        the text's start, giving the offset its characters count from.
        """
        out: list[Segment] = []
        for piece, offset, id in self._find(text, 0, self._raw, skip):
            if id is not None:
                out.append((piece, offset, id))
                continue
            if first is not None and offset == 0:
                normalized, offset = first(piece)
            elif normalizer is not None:
                normalized = normalizer(piece)
            else:
                normalized = piece
            out.extend(self._find(normalized, offset, self._norm, skip))
        return out

    def split_aligned(
        self,
        text: str,
        normalize: Callable[[str, list[tuple[int, int]]], tuple[str, list[tuple[int, int]]]],
        skip: frozenset[int] = frozenset(),
    ) -> list[AlignedSegment]:
        """``split``, each segment with the span of ``text`` each of its characters comes from.

        ``normalize(text, spans)`` is the normalizer's aligned form; the offsets are ``split``'s
        with ``normalizers.normalize_first``'s for the text's first segment.
        """
        out: list[AlignedSegment] = []
        for piece, offset, id in self._find(text, 0, self._raw, skip):
            spans = [(i, i + 1) for i in range(offset, offset + len(piece))]
            if id is not None:
                out.append((piece, offset, spans, id))
                continue
            normalized, spans = normalize(piece, spans)
            base = first_offset(spans) if offset == 0 else offset
            for sub, sub_offset, sub_id in self._find(normalized, base, self._norm, skip):
                at = sub_offset - base
                out.append((sub, sub_offset, spans[at : at + len(sub)], sub_id))
        return out

    def find_special(self, text: str, contents: frozenset[str]) -> str | None:
        """The leftmost (then longest) of ``contents`` that occurs in ``text``, or None."""
        found = _literal_matcher(contents).search(text) if contents else None
        return found.group() if found is not None else None

    def _find(
        self,
        text: str,
        base: int,
        matcher: tuple[regex.Pattern[str], dict[str, int]] | None,
        skip: frozenset[int] = frozenset(),
    ) -> list[Segment]:
        if matcher is None or not text:
            return [(text, base, None)]
        pattern, table = matcher
        out: list[Segment] = []
        done = 0
        for m in pattern.finditer(text):
            start, stop = m.span()
            id = table[m.group()]
            if id in skip:
                continue
            token = self.by_id[id]
            if token.single_word and (
                (start > 0 and _word_char().match(text, start - 1))
                or (stop < len(text) and _word_char().match(text, stop))
            ):
                continue
            if token.lstrip:
                # spaces already taken by the previous match's rstrip stay there
                start = max(_trailing_space().search(text, 0, start).start(), done)  # type: ignore[union-attr]
            if token.rstrip:
                stop = _leading_space().match(text, stop).end()  # type: ignore[union-attr]
            if done < start:
                out.append((text[done:start], base + done, None))
            out.append((text[start:stop], base + start, id))
            done = stop
        if done < len(text):
            out.append((text[done:], base + done, None))
        return out


@functools.lru_cache(maxsize=16)
def _literal_matcher(contents: frozenset[str]) -> regex.Pattern[str]:
    return regex.compile(_trie_pattern(contents))
