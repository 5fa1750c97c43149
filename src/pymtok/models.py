"""Models: turn one pre-tokenized piece into token ids (BPE, WordPiece, Unigram).

Each class is built 1:1 from the ``model`` object of a ``tokenizer.json``; ``from_config`` picks
the class from ``type`` (or, for old files without it, from the fields present, as HF does).
"""

from __future__ import annotations

import functools
import heapq
import re
import sys
from abc import abstractmethod
from array import array
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain, repeat
from operator import itemgetter
from typing import Any, Protocol

from .byte_level import byte_token
from .errors import FormatError

# Pieces longer than this (in characters) are not cached: they are rare and would bloat memory.
_CACHE_MAX_PIECE = 256
_CACHE_MAX_ENTRIES = 100_000
# BPE merges words of up to this many symbols by scanning all pairs per merge (a few C-level
# passes over a short list); longer pieces go through a priority queue. Measured crossover.
_SHORT_WORD = 16
_NO_RANK = sys.maxsize
_NO_MERGE = (_NO_RANK, -1)
_RANK = itemgetter(0)
# C's FLT_MAX: the largest float32
_FLT_MAX = 3.4028234663852886e38


class Model(Protocol):
    def __call__(self, piece: str) -> list[int]: ...
    def encode_pieces(self, pieces: Iterable[str]) -> list[int]: ...
    def tokenize_offsets(self, piece: str) -> list[TokenSpan]: ...
    def token_to_id(self, token: str) -> int | None: ...
    def id_to_token(self, id: int) -> str | None: ...
    def get_vocab(self) -> dict[str, int]: ...
    @property
    def vocab_size(self) -> int: ...


class IndexedVocab(Mapping[str, int]):
    """A vocabulary that finds a token by id itself (a ``.mtok``'s native tables, read in place).

    Models given one build no inverse, and build a dict of it only when their pure-Python
    encoding runs.
    """

    tables: Any  # the native core's MtokTables the tokens are read from
    hidden: frozenset[int]  # ids of the tables that are no token of this vocabulary

    @abstractmethod
    def token_of(self, id: int) -> str | None: ...


class _VocabModel:
    """Shared plumbing: the token -> id map, its lazily built inverse, and a per-piece cache.

    Subclasses implement ``_tokenize(piece)`` for a non-empty piece; ``encode_pieces`` caches it.
    """

    def __init__(self, vocab: Mapping[str, int]) -> None:
        self.vocab = vocab
        self._inverse: dict[int, str] | None = None
        self._cache: dict[str, list[int]] = {}

    def _tokenize(self, piece: str) -> list[int]:
        raise NotImplementedError

    def __call__(self, piece: str) -> list[int]:
        return self.encode_pieces((piece,))

    def encode_pieces(self, pieces: Iterable[str]) -> list[int]:
        """The ids of every piece in turn (what the tokenizer asks for a whole segment).

        Words recur, so short pieces are remembered: a text seen before costs one lookup per
        piece. Once the cache is full it keeps what it has (as HF's does), so a long run of
        new words cannot evict the common ones.
        """
        cache = self._cache
        cached = cache.get
        out: list[int] = []
        for piece in pieces:
            ids = cached(piece)
            if ids is None:
                if not piece:
                    continue
                ids = self._tokenize(piece)
                if len(piece) <= _CACHE_MAX_PIECE and len(cache) < _CACHE_MAX_ENTRIES:
                    cache[piece] = ids
            out += ids
        return out

    def token_to_id(self, token: str) -> int | None:
        return self.vocab.get(token)

    @functools.cached_property
    def _lookup(self) -> Mapping[str, int]:
        """The vocabulary for the pure-Python loops: a dict, built on first use from a lazy one."""
        return dict(self.vocab) if isinstance(self.vocab, IndexedVocab) else self.vocab

    def id_to_token(self, id: int) -> str | None:
        if isinstance(self.vocab, IndexedVocab):
            return self.vocab.token_of(id)
        if self._inverse is None:
            self._inverse = {i: t for t, i in self.vocab.items()}
        return self._inverse.get(id)

    def get_vocab(self) -> dict[str, int]:
        return dict(self.vocab)

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)


TokenSpan = tuple[int, int, int]
"""A token id and the UTF-8 byte span ``[start, end)`` of the piece it covers."""


def _byte_spans(piece: str, char_spans: Iterable[tuple[int, int, int]]) -> list[TokenSpan]:
    """Character spans ``(id, start, end)`` of ``piece`` as UTF-8 byte spans."""
    if piece.isascii():
        return list(char_spans)
    at = [0]
    for ch in piece:
        at.append(at[-1] + len(ch.encode("utf-8")))
    return [(id, at[s], at[e]) for id, s, e in char_spans]


MergeTable = dict[tuple[int, int], tuple[int, int]]
"""(left id, right id) -> (rank, merged id)."""


class IndexedMerges(Sequence[tuple[str, str]]):
    """BPE merges a reader already holds as token ids (a ``.mtok``'s merge records).

    As a sequence they are the ``(left, right)`` token pairs in rank order, like
    ``tokenizer.json``'s; ``merge_table()`` gives the :data:`MergeTable` from the ids without
    looking strings up, and ``BPE`` asks for it only when its pure-Python encoding runs.
    """

    @abstractmethod
    def merge_table(self) -> MergeTable: ...

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and len(self) == len(other) and all(
            tuple(a) == tuple(b) for a, b in zip(self, other)
        )

    __hash__ = None  # type: ignore[assignment]

METASPACE = "\u2581"
# Words of a SentencePiece-style text: cut before each ▁ that follows another character.
_METASPACE_WORDS = re.compile(f"{METASPACE}*[^{METASPACE}]+|{METASPACE}+")


def merges_stop_at_metaspace(vocab: Mapping[str, int]) -> bool:
    """Whether no token has ``▁`` right after another character (Llama 2, Mistral, Gemma).

    Then no merge can join the symbols on either side of such a point, since its result would
    be such a token, and BPE may encode the words between them one at a time (and cache them).
    """
    return METASPACE in vocab and not any(METASPACE in token.lstrip(METASPACE) for token in vocab)


class BPE(_VocabModel):
    """Byte-pair encoding: start from characters (or byte-fallback pieces), apply merges by rank.

    >>> bpe = BPE(vocab={"a": 0, "b": 1, "ab": 2}, merges=["a b"])
    >>> bpe("abab")
    [2, 2]
    """

    def __init__(
        self,
        *,
        vocab: Mapping[str, int],
        merges: Sequence[str | Sequence[str]] | IndexedMerges | None = None,
        merge_table: MergeTable | None = None,
        dropout: float | None = None,
        unk_token: str | None = None,
        continuing_subword_prefix: str | None = None,
        end_of_word_suffix: str | None = None,
        fuse_unk: bool = False,
        byte_fallback: bool = False,
        ignore_merges: bool = False,
    ) -> None:
        super().__init__(vocab)
        if dropout:
            raise FormatError(
                f"BPE dropout={dropout} is randomised; pymtok only tokenizes deterministically"
            )
        self.unk_token = unk_token
        self.continuing_subword_prefix = continuing_subword_prefix or None
        self.end_of_word_suffix = end_of_word_suffix or None
        self.fuse_unk = fuse_unk
        self.byte_fallback = byte_fallback
        self.ignore_merges = ignore_merges
        self._indexed_merges: IndexedMerges | None = None
        if isinstance(merges, IndexedMerges) and merge_table is None:
            self._indexed_merges = merges  # the table is made when the pure path first needs it
        else:
            self.merges = merge_table if merge_table is not None else self._merge_table(merges or [])

    @functools.cached_property
    def merges(self) -> MergeTable:
        assert self._indexed_merges is not None
        return self._indexed_merges.merge_table()

    @functools.cached_property
    def _by_metaspace_words(self) -> bool:
        # ignore_merges looks the whole piece up first, and a subword prefix or suffix marks
        # a piece's ends, so cutting the piece would change the ids in those cases
        return (
            not self.ignore_merges
            and self.continuing_subword_prefix is None
            and self.end_of_word_suffix is None
            and merges_stop_at_metaspace(self._lookup)
        )

    def _merge_table(self, merges: Iterable[str | Sequence[str]]) -> MergeTable:
        vocab = self._lookup
        skip = len(self.continuing_subword_prefix or "")
        table: MergeTable = {}
        for rank, merge in enumerate(merges):
            if isinstance(merge, str):
                parts = merge.split(" ")
                if len(parts) != 2:
                    raise FormatError(f"BPE merge #{rank} {merge!r} is not 'left right'")
                left, right = parts
            elif len(merge) == 2 and all(isinstance(m, str) for m in merge):
                left, right = merge
            else:
                raise FormatError(f"BPE merge #{rank} {merge!r} is not a pair of strings")
            a, b = vocab.get(left), vocab.get(right)
            # HF drops the continuing-subword prefix of the right side, whether or not it has one
            merged = vocab.get(left + right[skip:])
            if a is None or b is None or merged is None:
                missing = next(t for t, i in ((left, a), (right, b), (left + right[skip:], merged)) if i is None)
                raise FormatError(f"BPE merge #{rank} ({left!r}, {right!r}): {missing!r} is not in the vocabulary")
            table[(a, b)] = (rank, merged)
        return table

    def encode_pieces(self, pieces: Iterable[str]) -> list[int]:
        if self._by_metaspace_words:
            # no merge joins two words, so each is encoded (and remembered) on its own
            pieces = chain.from_iterable(map(_METASPACE_WORDS.findall, pieces))
        return super().encode_pieces(pieces)

    def _tokenize(self, piece: str) -> list[int]:
        if self.ignore_merges:
            whole = self._lookup.get(piece)
            if whole is not None:
                return [whole]
        return self._merge(self._initial_symbols(piece))

    def _initial_symbols(self, piece: str) -> list[int]:
        vocab = self._lookup
        prefix, suffix = self.continuing_subword_prefix, self.end_of_word_suffix
        if prefix is None and suffix is None:
            ids = list(map(vocab.get, piece))
            if None not in ids:
                return ids  # type: ignore[return-value]  # every character is a token
        out: list[int] = []
        unk: int | None = None  # a pending (possibly fused) unknown run
        last = len(piece) - 1
        for i, ch in enumerate(piece):
            s = ch
            if prefix and i:
                s = prefix + s
            if suffix and i == last:
                s = s + suffix
            id = vocab.get(s)
            if id is not None:
                if unk is not None:
                    out.append(unk)
                    unk = None
                out.append(id)
                continue
            if self.byte_fallback:
                byte_ids = [vocab.get(byte_token(b)) for b in s.encode("utf-8")]
                if None not in byte_ids:
                    # HF leaves a pending unknown run open across byte-fallback pieces
                    out.extend(byte_ids)  # type: ignore[arg-type]
                    continue
            if self.unk_token is not None:
                unk_id = vocab.get(self.unk_token)
                if unk_id is None:
                    raise FormatError(f"BPE unk_token {self.unk_token!r} is not in the vocabulary")
                if unk is not None and not self.fuse_unk:
                    out.append(unk)
                unk = unk_id
        if unk is not None:
            out.append(unk)
        return out

    def _merge(self, ids: list[int]) -> list[int]:
        """Apply merges to the symbols ``ids`` (edited in place): lowest rank first, then leftmost."""
        if len(ids) > _SHORT_WORD:
            return self._merge_long(ids)
        table = self.merges
        merge = table.get
        # ranks[i]: the rank of the merge of ids[i] and ids[i + 1]; min and index run in C
        ranks = list(map(_RANK, map(merge, zip(ids, ids[1:]), repeat(_NO_MERGE))))
        while ranks:
            best = min(ranks)
            if best == _NO_RANK:
                break
            i = ranks.index(best)
            new = ids[i] = table[ids[i], ids[i + 1]][1]
            del ids[i + 1], ranks[i]
            if i < len(ranks):
                ranks[i] = merge((new, ids[i + 1]), _NO_MERGE)[0]
            if i:
                ranks[i - 1] = merge((ids[i - 1], new), _NO_MERGE)[0]
        return ids

    def _merge_long(self, ids: list[int]) -> list[int]:
        """``_merge`` for long pieces: a priority queue of pairs instead of a scan per merge."""
        return [id for id in self._merge_in_place(ids) if id >= 0]

    def _merge_in_place(self, ids: list[int]) -> list[int]:
        """``ids`` merged where they stand: each result at its first symbol's place, -1 elsewhere.

        Each queued pair is one int ``rank << shift | pos`` (ints order like (rank, position)
        pairs, and compare faster than tuples). A symbol is known by the position of its first
        character; a merged-away one gets ``nxt`` -2 and id -1.
        """
        n = len(ids)
        merge = self.merges.get
        shift = n.bit_length()
        mask = (1 << shift) - 1
        queue = [m[0] << shift | i for i, m in enumerate(map(merge, zip(ids, ids[1:]))) if m is not None]
        heapq.heapify(queue)
        nxt = list(range(1, n + 1))
        nxt[-1] = -1
        prv = list(range(-1, n - 1))
        push, pop = heapq.heappush, heapq.heappop
        while queue:
            key = pop(queue)
            pos = key & mask
            j = nxt[pos]
            if j < 0:
                continue  # merged away, or the last symbol
            m = merge((ids[pos], ids[j]))
            if m is None or m[0] != key >> shift:
                continue  # stale: a side has merged since it was queued (a rank names one pair)
            new = ids[pos] = m[1]
            ids[j] = -1
            k = nxt[pos] = nxt[j]
            nxt[j] = -2
            if k != -1:
                prv[k] = pos
                m = merge((new, ids[k]))
                if m is not None:
                    push(queue, m[0] << shift | pos)
            p = prv[pos]
            if p != -1:
                m = merge((ids[p], new))
                if m is not None:
                    push(queue, m[0] << shift | p)
        return ids

    def tokenize_offsets(self, piece: str) -> list[TokenSpan]:
        """The ids of ``piece`` with the UTF-8 byte span each covers, as HF's BPE lays them out:
        a byte-fallback token covers one byte, a pending unknown run follows them."""
        if not piece:
            return []
        if self.ignore_merges:
            whole = self._lookup.get(piece)
            if whole is not None:
                return [(whole, 0, len(piece.encode("utf-8")))]
        vocab = self._lookup
        prefix, suffix = self.continuing_subword_prefix, self.end_of_word_suffix
        ids: list[int] = []
        lengths: list[int] = []
        unk: list[int] | None = None  # [id, byte length] of a pending unknown run
        last = len(piece) - 1
        for i, ch in enumerate(piece):
            size = len(ch.encode("utf-8"))
            s = (prefix + ch if prefix and i else ch) + (suffix if suffix and i == last else "")
            id = vocab.get(s)
            if id is not None:
                if unk is not None:
                    ids.append(unk[0])
                    lengths.append(unk[1])
                    unk = None
                ids.append(id)
                lengths.append(size)
                continue
            if self.byte_fallback:
                byte_ids = [vocab.get(byte_token(b)) for b in s.encode("utf-8")]
                if None not in byte_ids:
                    ids.extend(byte_ids)  # type: ignore[arg-type]
                    lengths.extend([1] * len(byte_ids))
                    continue
            if self.unk_token is not None:
                unk_id = vocab.get(self.unk_token)
                if unk_id is None:
                    raise FormatError(f"BPE unk_token {self.unk_token!r} is not in the vocabulary")
                if unk is not None and self.fuse_unk:
                    unk[1] += size
                    continue
                if unk is not None:
                    ids.append(unk[0])
                    lengths.append(unk[1])
                unk = [unk_id, size]
        if unk is not None:
            ids.append(unk[0])
            lengths.append(unk[1])
        merged = self._merge_in_place(ids) if ids else ids
        out: list[TokenSpan] = []
        at = 0
        for id, size in zip(merged, lengths):
            if id >= 0:
                out.append((id, at, at + size))
            elif out:
                last_id, start, end = out[-1]
                out[-1] = (last_id, start, end + size)
            at += size
        return out


class WordPiece(_VocabModel):
    """Greedy longest-match-first subwords with a continuation prefix (BERT).

    >>> WordPiece(vocab={"[UNK]": 0, "un": 1, "##aff": 2, "##able": 3})("unaffable")
    [1, 2, 3]
    """

    def __init__(
        self,
        *,
        vocab: Mapping[str, int],
        unk_token: str = "[UNK]",
        continuing_subword_prefix: str = "##",
        max_input_chars_per_word: int = 100,
    ) -> None:
        super().__init__(vocab)
        self.unk_token = unk_token
        self.continuing_subword_prefix = continuing_subword_prefix
        self.max_input_chars_per_word = max_input_chars_per_word

    def _unk_id(self) -> int:
        # HF loads a vocabulary without its unk token and fails only at a word it cannot cut
        unk = self._lookup.get(self.unk_token)
        if unk is None:
            raise FormatError(f"WordPiece unk_token {self.unk_token!r} is not in the vocabulary")
        return unk

    def _subwords(self, piece: str) -> list[tuple[int, int, int]] | None:
        """Greedy longest-match-first subwords of ``piece`` as (id, start, end) in characters, or
        None when the word is unknown (too long, or a part no token matches)."""
        n = len(piece)
        if n > self.max_input_chars_per_word:
            return None
        vocab, prefix = self._lookup, self.continuing_subword_prefix
        out: list[tuple[int, int, int]] = []
        start = 0
        while start < n:
            end = n
            found = None
            while start < end:
                sub = piece[start:end]
                found = vocab.get(prefix + sub if start else sub)
                if found is not None:
                    break
                end -= 1
            if found is None:
                return None
            out.append((found, start, end))
            start = end
        return out

    def _tokenize(self, piece: str) -> list[int]:
        subwords = self._subwords(piece)
        return [self._unk_id()] if subwords is None else [id for id, _, _ in subwords]

    def tokenize_offsets(self, piece: str) -> list[TokenSpan]:
        """The ids of ``piece`` with the UTF-8 byte span each covers (an unknown word: all of it)."""
        if not piece:
            return []
        subwords = self._subwords(piece)
        return _byte_spans(piece, [(self._unk_id(), 0, len(piece))] if subwords is None else subwords)


class WordLevel(_VocabModel):
    """A whole piece is one token, or the unknown token.

    >>> WordLevel(vocab={"<unk>": 0, "hello": 1}, unk_token="<unk>")("hello")
    [1]
    """

    def __init__(self, *, vocab: Mapping[str, int], unk_token: str) -> None:
        super().__init__(vocab)
        self.unk_token = unk_token

    def _unk_id(self) -> int:
        # HF loads a vocabulary without its unk token and fails only at an unknown piece
        unk = self._lookup.get(self.unk_token)
        if unk is None:
            raise FormatError(f"WordLevel unk_token {self.unk_token!r} is not in the vocabulary")
        return unk

    def _tokenize(self, piece: str) -> list[int]:
        found = self._lookup.get(piece)
        return [self._unk_id() if found is None else found]

    def tokenize_offsets(self, piece: str) -> list[TokenSpan]:
        """The id of ``piece`` with the UTF-8 byte span it covers: all of it."""
        if not piece:
            return []
        return [(self._tokenize(piece)[0], 0, len(piece.encode("utf-8")))]


def absent_prefix(vocab: Iterable[str]) -> str | None:
    """A character no token of ``vocab`` starts with (None if they start with nearly all).

    A WordPiece model whose continuation prefix is such a character is a WordLevel model: a piece
    that is not one token has no continuation to match, so it is the unknown token whole. The
    native core and a ``.mtok`` (MNN has no WordLevel) run WordLevel that way.
    """
    firsts = {token[:1] for token in vocab}
    return next((c for c in map(chr, range(0x10FFFF, 0xDFFF, -1)) if c not in firsts), None)


class Unigram(_VocabModel):
    """SentencePiece's unigram language model: the best-scoring segmentation (Viterbi).

    Pieces are scored by their log-probability; a character no piece covers becomes the unknown
    piece scored ``min_score - 10``, and adjacent unknowns fuse into one, as in HF.
    """

    _UNK_PENALTY = 10.0

    def __init__(
        self,
        *,
        vocab: Sequence[Sequence[Any]],
        unk_id: int | None = None,
        byte_fallback: bool = False,
    ) -> None:
        token_ids: dict[str, int] = {}
        scores: list[float] = []
        if not isinstance(vocab, Sequence) or isinstance(vocab, str):
            raise FormatError(f"Unigram vocab must be a list of [piece, score], got {type(vocab).__name__}")
        for i, entry in enumerate(vocab):
            # HF reads a score as f64: a JSON number, integer or not, and no bool or string
            # lists and tuples (what the readers give) before the slower check of the ABC
            if (not (type(entry) in (list, tuple) or isinstance(entry, Sequence)) or len(entry) != 2
                    or type(entry[0]) is not str and not isinstance(entry[0], str)
                    or type(entry[1]) not in (int, float)):
                raise FormatError(f"Unigram vocab entry #{i} {entry!r:.80} is not [piece, score]")
            token_ids[entry[0]] = i  # HF keeps the last id of a duplicated piece
            scores.append(float(entry[1]))
        super().__init__(token_ids)
        # tuples: the cyclic collector stops walking a tuple of strings or floats (see _kept)
        self.pieces = tuple([entry[0] for entry in vocab])
        self.scores = tuple(scores)
        if unk_id is not None and not 0 <= unk_id < len(scores):
            raise FormatError(f"Unigram unk_id {unk_id} is outside the vocabulary (size {len(scores)})")
        self.unk_id = unk_id
        self.byte_fallback = byte_fallback
        self.min_score = min(scores) if scores else 0.0

    @functools.cached_property
    def _prefixes(self) -> dict[str, int]:
        """Every prefix of every piece, mapped to the piece's id, or -1 if it is only a prefix.

        The lattice stops extending a path at the first substring no piece starts with (HF
        walks a trie for the same effect); one lookup tells both that and the piece's id.
        """
        table = dict.fromkeys((p[:k] for p in self.vocab for k in range(1, len(p))), -1)
        table.update(self.vocab)
        return table

    def id_to_token(self, id: int) -> str | None:
        return self.pieces[id] if 0 <= id < len(self.pieces) else None

    @property
    def vocab_size(self) -> int:
        return len(self.pieces)

    def _tokenize(self, piece: str) -> list[int]:
        start_of, node_id = self._best_path(piece)
        unk_id = self.unk_id
        out: list[int] = []  # the best path's ids, last first
        end = len(piece)
        while end > 0:
            start, id = start_of[end], node_id[end]
            if id != unk_id:
                out.append(id)
            else:
                # adjacent unknown nodes fuse into one piece, as in HF
                while start and node_id[start] == unk_id:
                    start = start_of[start]
                out += reversed(self._unknown(piece[start:end]))
            end = start
        out.reverse()
        return out

    def tokenize_offsets(self, piece: str) -> list[TokenSpan]:
        """The ids of ``piece`` with the UTF-8 byte span each covers; the byte-fallback ids of an
        unknown run all cover the whole run, as in HF."""
        if not piece:
            return []
        start_of, node_id = self._best_path(piece)
        unk_id = self.unk_id
        out: list[tuple[int, int, int]] = []  # last first
        end = len(piece)
        while end > 0:
            start, id = start_of[end], node_id[end]
            if id != unk_id:
                out.append((id, start, end))
            else:
                while start and node_id[start] == unk_id:
                    start = start_of[start]
                out += [(i, start, end) for i in reversed(self._unknown(piece[start:end]))]
            end = start
        out.reverse()
        return _byte_spans(piece, out)

    def _unknown(self, text: str) -> list[int]:
        """The ids of a run of unknown nodes: its piece if it is one, else its bytes, else unk."""
        id = self.vocab.get(text)
        if id is not None:
            return [id]
        if self.byte_fallback:
            byte_ids = [self.vocab.get(byte_token(b)) for b in text.encode("utf-8")]
            if None not in byte_ids:
                return byte_ids  # type: ignore[return-value]
        if self.unk_id is None:
            raise FormatError(f"Unigram model has no unk_id but {text!r} is not in its vocabulary")
        return [self.unk_id]

    def _best_path(self, text: str) -> tuple[list[int], list[int]]:
        """Viterbi: for each end position in ``text``, the start and id of the last node of the
        best path to it. Ties keep the node that starts first, as HF's lattice does."""
        n = len(text)
        prefixes, scores, unk_id = self._prefixes, self.scores, self.unk_id
        unk_score = self.min_score - self._UNK_PENALTY
        best = [0.0] * (n + 1)
        start_of = [-1] * (n + 1)  # -1: no path reaches this position yet
        node_id = [0] * (n + 1)
        for i in range(n):
            here = best[i]
            first = prefixes.get(text[i])
            if first is not None and first >= 0:
                id, cand = first, here + scores[first]
            elif unk_id is None:
                raise FormatError(f"Unigram model has no unk_id but {text[i]!r} is not in its vocabulary")
            else:
                id, cand = unk_id, here + unk_score
            if cand > best[i + 1] or start_of[i + 1] < 0:
                best[i + 1], start_of[i + 1], node_id[i + 1] = cand, i, id
            if first is None:
                continue  # no piece starts with this character
            for end in range(i + 2, n + 1):
                id = prefixes.get(text[i:end])
                if id is None:
                    break
                if id >= 0:
                    cand = here + scores[id]
                    if cand > best[end] or start_of[end] < 0:
                        best[end], start_of[end], node_id[end] = cand, i, id
        return start_of, node_id


def _piece_types(model: str, piece_types: Any, count: int) -> list[int]:
    """SentencePiece's piece type codes, one per vocabulary entry."""
    if not isinstance(piece_types, Sequence) or len(piece_types) != count:
        raise FormatError(f"{model} needs one piece type per piece ({count}), got {piece_types!r:.80}")
    return list(piece_types)


class SentencePieceUnigram(Unigram):
    """The ``sentencepiece`` library's own unigram Viterbi, for pieces kept with SentencePiece types.

    It differs from HF's ``Unigram`` exactly where the library does (``unigram_model.cc``,
    ``EncodeOptimized``; ``sentencepiece_processor.cc``): scores and path sums are float32;
    only NORMAL and USER_DEFINED pieces are matched in text (control, unknown, byte and unused
    pieces never are); a user-defined piece of ``n`` UTF-8 bytes scores ``0.1 * (n - 1)``; the
    unknown score is ``min(NORMAL scores) - 10`` (``FLT_MAX`` without NORMAL pieces); once the
    best path to a character start passes 100000 in either direction, the sums from there on
    are taken relative to it; with byte fallback every unknown character becomes its
    ``<0xXX>`` pieces, without it a run of unknown characters is one unknown id.
    ``piece_types`` are SentencePiece's codes (1 NORMAL, 2 UNKNOWN, 3 CONTROL, 4 USER_DEFINED,
    5 UNUSED, 6 BYTE), one per vocabulary entry.

    >>> m = SentencePieceUnigram(vocab=[["<unk>", 0.0], ["<s>", 0.0], ["\u2581a", -1.0], ["b", -2.0]],
    ...                          unk_id=0, piece_types=[2, 3, 1, 1])
    >>> m("\u2581ab<s>")
    [2, 3, 0]
    """

    _NORMAL, _USER_DEFINED = 1, 4
    # the float32 0.1 a user-defined piece scores per UTF-8 byte past its first
    _USER_DEFINED_STEP = array("f", [0.1])[0]
    # the library's kScoreResetThreshold: float32 sums this far from 0 have lost the precision
    # its ties are decided in, so it moves the origin to the start reached
    _SCORE_RESET = 100000.0

    def __init__(
        self,
        *,
        vocab: Sequence[Sequence[Any]],
        piece_types: Sequence[int],
        unk_id: int,
        byte_fallback: bool = False,
    ) -> None:
        super().__init__(vocab=vocab, unk_id=unk_id, byte_fallback=byte_fallback)
        if unk_id is None:
            raise FormatError("SentencePieceUnigram needs the id of its UNKNOWN piece (unk_id)")
        f32 = array("f", self.scores)  # the library keeps scores as float32
        self.piece_types = _piece_types("SentencePieceUnigram", piece_types, len(self.pieces))
        # min_score_ starts at FLT_MAX in the library: without NORMAL pieces an unknown
        # character outscores every piece
        min_score = min((f32[i] for i, t in enumerate(piece_types) if t == self._NORMAL), default=_FLT_MAX)
        self._unk_score = array("f", [min_score - self._UNK_PENALTY])[0]
        self._matchable: dict[str, int] = {}
        for i, t in enumerate(piece_types):
            if t in (self._NORMAL, self._USER_DEFINED):
                self._matchable.setdefault(self.pieces[i], i)
        self._f32_scores = list(f32)
        # what a piece scores in the lattice; a user-defined one's own score is never read
        lattice = array("f", f32)
        for i, t in enumerate(piece_types):
            if t == self._USER_DEFINED:
                lattice[i] = self._USER_DEFINED_STEP * (len(self.pieces[i].encode("utf-8")) - 1)
        self._lattice_scores = list(lattice)

    def _tokenize(self, piece: str) -> list[int]:
        out: list[int] = []
        previous_unk = False
        for text, id in self._viterbi(piece):
            if id != self.unk_id:
                out.append(id)
                previous_unk = False
                continue
            if self.byte_fallback:
                for b in text.encode("utf-8"):
                    # the library falls back to the unknown id for a missing byte piece
                    byte_id = self.vocab.get(byte_token(b))
                    out.append(byte_id if byte_id is not None else id)
            elif not previous_unk:
                out.append(id)  # a run of unknown characters is one unknown piece
            previous_unk = True
        return out

    def tokenize_offsets(self, piece: str) -> list[TokenSpan]:
        """``_tokenize``'s ids with the UTF-8 byte span each covers, as the library reports them
        (see :func:`_byte_pieces`)."""
        out: list[tuple[int, int, int]] = []
        previous_unk = False
        at = 0
        for text, id in self._viterbi(piece):
            start, at = at, at + len(text)
            if id != self.unk_id:
                out.append((id, start, at))
                previous_unk = False
                continue
            if self.byte_fallback:
                out += _byte_pieces(self.vocab, text, id, start, at)
            elif previous_unk:
                out[-1] = (id, out[-1][1], at)
            else:
                out.append((id, start, at))
            previous_unk = True
        return _byte_spans(piece, out)

    def _viterbi(self, text: str) -> list[tuple[str, int]]:
        n = len(text)
        matchable, prefixes, scores = self._matchable, self._prefixes, self._lattice_scores
        unk_id, unk_score, reset = self.unk_id, self._unk_score, self._SCORE_RESET
        best = array("f", bytes(4 * (n + 1)))  # float32 path scores, as in the library
        start_of = [-1] * (n + 1)
        node_id = [0] * (n + 1)
        frontier = 0  # the farthest end a node has reached
        rounded = array("f", [0.0])
        for i in range(n):
            here = best[i]
            if here < -reset or here > reset:  # a NaN sum is never reset
                for j in range(i + 1, frontier + 1):
                    if start_of[j] != -1:
                        best[j] -= here
                here = 0.0
            single = False
            end = i + 1
            while end <= n:
                sub = text[i:end]
                if sub not in prefixes:
                    break
                id = matchable.get(sub)
                if id is not None:
                    # every candidate is a float32 sum, compared as one: ties break the
                    # library's way (measured on exact ties such as "--"+"-" vs "-"+"--")
                    rounded[0] = here + scores[id]
                    cand = rounded[0]
                    if start_of[end] == -1 or cand > best[end]:
                        best[end], start_of[end], node_id[end] = cand, i, id
                    if end == i + 1:
                        single = True
                    if end > frontier:
                        frontier = end
                end += 1
            if not single:
                rounded[0] = unk_score + here
                cand = rounded[0]
                if start_of[i + 1] == -1 or cand > best[i + 1]:
                    best[i + 1], start_of[i + 1], node_id[i + 1] = cand, i, unk_id
                if i + 1 > frontier:
                    frontier = i + 1
        nodes: list[tuple[str, int]] = []
        end = n
        while end > 0:
            start = start_of[end]
            nodes.append((text[start:end], node_id[end]))
            end = start
        nodes.reverse()
        return nodes


class SentencePieceBPE(_VocabModel):
    """The ``sentencepiece`` library's BPE (``bpe_model.cc``): merges chosen by piece score.

    The text is cut into characters (a user-defined piece is one symbol that never merges);
    then, repeatedly, the adjacent pair whose concatenation is a NORMAL, USER_DEFINED or UNUSED
    piece with the highest float32 score is merged, the leftmost on ties. An UNUSED result is
    split back into the two symbols that made it (100 levels deep at most, as the library). A
    symbol that is no NORMAL or USER_DEFINED piece is the unknown id (a run of them one id), or
    with byte fallback its ``<0xXX>`` pieces: a character that is a CONTROL or UNUSED piece too.
    ``vocab`` and ``piece_types`` are as in :class:`SentencePieceUnigram`.

    >>> m = SentencePieceBPE(vocab=[["<unk>", 0.0], ["a", 0.0], ["b", 0.0], ["ab", -1.0]],
    ...                      piece_types=[2, 1, 1, 1], unk_id=0)
    >>> m("abxyb")
    [3, 0, 2]
    """

    _NORMAL, _UNKNOWN, _CONTROL, _USER_DEFINED, _UNUSED, _BYTE = 1, 2, 3, 4, 5, 6
    # bpe_model.cc's kMaxBpeResegmentDepth: deeper than this a symbol is taken as it is
    _MAX_RESEGMENT_DEPTH = 100

    def __init__(
        self,
        *,
        vocab: Sequence[Sequence[Any]],
        piece_types: Sequence[int],
        unk_id: int,
        byte_fallback: bool = False,
    ) -> None:
        pieces: list[str] = []
        scores: list[float] = []
        for i, entry in enumerate(vocab):
            if len(entry) != 2 or not isinstance(entry[0], str) or not isinstance(entry[1], (int, float)):
                raise FormatError(f"SentencePieceBPE vocab entry #{i} {entry!r:.80} is not [piece, score]")
            pieces.append(entry[0])
            scores.append(float(entry[1]))
        piece_types = _piece_types("SentencePieceBPE", piece_types, len(pieces))
        if not isinstance(unk_id, int) or not 0 <= unk_id < len(pieces) or piece_types[unk_id] != self._UNKNOWN:
            raise FormatError(f"SentencePieceBPE unk_id {unk_id!r} is not the id of an UNKNOWN piece")
        # The library refuses a BPE model with a piece spelled twice; a vocabulary from elsewhere
        # may have one: an id lookup then finds the reserved piece (control, unknown, byte), as
        # sentencepiece's Unigram does, and text only ever the mergeable one.
        ids: dict[str, int] = {}
        symbols: dict[str, int] = {}
        for i, (piece, kind) in enumerate(zip(pieces, piece_types)):
            if kind in (self._NORMAL, self._USER_DEFINED, self._UNUSED):
                symbols.setdefault(piece, i)
            else:
                ids.setdefault(piece, i)
        for piece, i in symbols.items():
            ids.setdefault(piece, i)
        super().__init__(ids)
        self.pieces = pieces
        self.piece_types = piece_types
        self.unk_id = unk_id
        self.byte_fallback = byte_fallback
        self._mergeable = symbols
        self._scores = list(array("f", scores))  # the library keeps scores as float32
        self._user = {p for p, t in zip(pieces, piece_types) if t == self._USER_DEFINED}
        self._user_lengths = sorted({len(p) for p in self._user}, reverse=True)

    def id_to_token(self, id: int) -> str | None:
        return self.pieces[id] if 0 <= id < len(self.pieces) else None

    @property
    def vocab_size(self) -> int:
        return len(self.pieces)

    def _split(self, text: str) -> tuple[list[str], list[bool]]:
        """Characters, or user-defined pieces (longest first), and whether each is frozen."""
        parts: list[str] = []
        frozen: list[bool] = []
        i, n = 0, len(text)
        lengths, user = self._user_lengths, self._user
        while i < n:
            for length in lengths:
                if text[i : i + length] in user:
                    parts.append(text[i : i + length])
                    frozen.append(True)
                    i += length
                    break
            else:
                parts.append(text[i])
                frozen.append(False)
                i += 1
        return parts, frozen

    def _symbols(self, piece: str) -> list[tuple[str, int]]:
        """The piece's symbols once merged, in order, each UNUSED one split back into its two,
        with their ids (``resegment`` in ``bpe_model.cc``)."""
        parts, frozen = self._split(piece)
        symbols, scores, types, unused = self._mergeable, self._scores, self.piece_types, self._UNUSED
        n = len(parts)
        prev = list(range(-1, n - 1))
        nxt = [*range(1, n), -1]
        agenda: list[tuple[float, int, int, int]] = []
        rev_merge: dict[str, tuple[str, str]] = {}

        def push(left: int, right: int) -> None:
            if left < 0 or right < 0 or frozen[left] or frozen[right]:
                return
            merged = parts[left] + parts[right]
            id = symbols.get(merged)
            if id is None:
                return
            heapq.heappush(agenda, (-scores[id], left, right, len(merged)))
            if types[id] == unused:
                rev_merge[merged] = (parts[left], parts[right])

        for i in range(1, n):
            push(i - 1, i)
        while agenda:
            _, left, right, size = heapq.heappop(agenda)
            if not parts[left] or not parts[right] or len(parts[left]) + len(parts[right]) != size:
                continue  # stale: one side was merged since
            parts[left] += parts[right]
            parts[right] = ""
            nxt[left] = nxt[right]
            if nxt[right] >= 0:
                prev[nxt[right]] = left
            push(prev[left], left)
            push(left, nxt[left])

        out: list[tuple[str, int]] = []
        unk_id = self.unk_id

        def resegment(word: str, depth: int) -> None:
            if depth > self._MAX_RESEGMENT_DEPTH:
                out.append((word, self.vocab.get(word, unk_id)))
                return
            # only what could have been merged is a piece here: a control, unknown or byte
            # piece of the same spelling is the unknown id
            id = symbols.get(word)
            if id is not None and types[id] == unused:
                if word in rev_merge:
                    left, right = rev_merge[word]
                    resegment(left, depth + 1)
                    resegment(right, depth + 1)
                    return
                id = None  # an UNUSED character, never merged into
            out.append((word, unk_id if id is None else id))

        i = 0 if n else -1
        while i >= 0:
            resegment(parts[i], 0)
            i = nxt[i]
        return out

    def _tokenize(self, piece: str) -> list[int]:
        out: list[int] = []
        previous_unk = False
        for word, id in self._symbols(piece):
            unknown = self.piece_types[id] == self._UNKNOWN
            if unknown and self.byte_fallback:
                out.extend(self.vocab.get(byte_token(b), id) for b in word.encode("utf-8"))
            elif not (unknown and previous_unk):
                out.append(id)  # a run of unknown symbols is one unknown piece
            previous_unk = unknown
        return out

    def tokenize_offsets(self, piece: str) -> list[TokenSpan]:
        """``_tokenize``'s ids with the UTF-8 byte span each covers, as the library reports them:
        a run of unknown symbols spans all of them, byte pieces as :func:`_byte_pieces` says."""
        out: list[TokenSpan] = []
        previous_unk = False
        at = 0
        for word, id in self._symbols(piece):
            start, at = at, at + len(word.encode("utf-8"))
            unknown = self.piece_types[id] == self._UNKNOWN
            if unknown and self.byte_fallback:
                out += _byte_pieces(self.vocab, word, id, start, at)
            elif unknown and previous_unk:
                out[-1] = (id, out[-1][1], at)
            else:
                out.append((id, start, at))
            previous_unk = unknown
        return out


def _byte_pieces(vocab: Mapping[str, int], text: str, unk_id: int, start: int, end: int) -> list[TokenSpan]:
    """The byte-fallback pieces of an unknown character at ``[start, end)``, spanned as the
    library spans them: the last covers the character, the others nothing at its start (the
    library's own missing byte piece is the unknown id)."""
    encoded = text.encode("utf-8")
    last = len(encoded) - 1
    return [(vocab.get(byte_token(b), unk_id), start, end if k == last else start) for k, b in enumerate(encoded)]


def _model_type(cfg: Mapping[str, Any]) -> str:
    kind = cfg.get("type")
    if kind is not None:
        return str(kind)
    # Old tokenizer.json files omit "type"; HF tells the models apart by their fields.
    if isinstance(cfg.get("vocab"), list):
        return "Unigram"
    if "merges" in cfg:
        return "BPE"
    if "continuing_subword_prefix" in cfg or "max_input_chars_per_word" in cfg:
        return "WordPiece"
    if isinstance(cfg.get("vocab"), Mapping):
        return "WordLevel"
    raise FormatError(f"model without 'type' whose fields {sorted(cfg)} match no known model")


U32_MAX = 2**32 - 1


def check_vocab_ids(kind: str, vocab: Any) -> None:
    """HF reads a vocabulary as ``{token: u32}``: JSON integers 0..2**32-1 and nothing else
    (``1.0``, ``true`` and ``-0`` are refused as well). A reader's own tables were checked by it."""
    if isinstance(vocab, IndexedVocab):
        return
    if not isinstance(vocab, Mapping):
        raise FormatError(f"{kind} model: vocab must be an object of token: id, got {type(vocab).__name__}")
    ids = vocab.values()
    # whole-table passes in C: a 150k vocabulary costs a few milliseconds
    if set(map(type, vocab)) <= {str} and set(map(type, ids)) <= {int} and (
        not ids or (min(ids) >= 0 and max(ids) <= U32_MAX)
    ):
        return
    for token, id in vocab.items():
        if not isinstance(token, str):
            raise FormatError(f"{kind} model: vocab token {token!r} is not a string")
        if type(id) is not int or not 0 <= id <= U32_MAX:
            raise FormatError(f"{kind} model: vocab id of {token!r} must be an integer 0..2**32-1, got {id!r}")


# Fields HF reads as JSON booleans (for BPE a null is its default, false)
_FLAGS = {
    "BPE": ("fuse_unk", "byte_fallback", "ignore_merges"),
    "Unigram": ("byte_fallback",),
    "SentencePieceUnigram": ("byte_fallback",),
}


# Fields HF's loader requires besides the vocabulary
_REQUIRED = {
    "BPE": ("merges",),
    "WordLevel": ("unk_token",),
    "WordPiece": ("unk_token", "continuing_subword_prefix", "max_input_chars_per_word"),
}


def from_config(cfg: Mapping[str, Any]) -> Model:
    """Build the model described by a ``tokenizer.json`` ``model`` object."""
    if not isinstance(cfg, Mapping):
        raise FormatError(f"model config must be an object, got {type(cfg).__name__}")
    kind = _model_type(cfg)
    vocab = cfg.get("vocab")
    if vocab is None:
        raise FormatError(f"{kind} model has no 'vocab'")
    for field in ("unk_token", "continuing_subword_prefix", "end_of_word_suffix"):
        if cfg.get(field) is not None and not isinstance(cfg[field], str):
            raise FormatError(f"{kind} model: {field} must be a string or null, got {cfg[field]!r}")
    for field in ("unk_id", "max_input_chars_per_word"):
        value = cfg.get(field)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise FormatError(f"{kind} model: {field} must be a non-negative integer, got {value!r}")
    for field in _FLAGS.get(kind, ()):
        value = cfg.get(field)
        if field in cfg and not isinstance(value, bool) and not (kind == "BPE" and value is None):
            raise FormatError(f"{kind} model: {field} must be true or false, got {value!r}")
    missing = [field for field in _REQUIRED.get(kind, ()) if field not in cfg]
    if missing:
        raise FormatError(f"{kind} model lacks {', '.join(missing)}")
    if kind == "BPE":
        dropout = cfg.get("dropout")
        if dropout is not None and (type(dropout) not in (int, float)):
            raise FormatError(f"BPE model: dropout must be a number or null, got {dropout!r}")
        if "merges" in cfg and not isinstance(cfg["merges"], (list, tuple, IndexedMerges)):
            raise FormatError(f"BPE model: merges must be a list, got {type(cfg['merges']).__name__}")
    if kind in ("BPE", "WordPiece", "WordLevel"):
        check_vocab_ids(kind, vocab)
    try:
        if kind == "BPE":
            return BPE(
                vocab=vocab,
                merges=cfg.get("merges") or [],
                dropout=cfg.get("dropout"),
                unk_token=cfg.get("unk_token"),
                continuing_subword_prefix=cfg.get("continuing_subword_prefix"),
                end_of_word_suffix=cfg.get("end_of_word_suffix"),
                fuse_unk=bool(cfg.get("fuse_unk", False)),
                byte_fallback=bool(cfg.get("byte_fallback", False)),
                ignore_merges=bool(cfg.get("ignore_merges", False)),
            )
        if kind == "WordPiece":
            for field in ("unk_token", "continuing_subword_prefix"):
                if field in cfg and not isinstance(cfg[field], str):
                    raise FormatError(f"WordPiece model: {field} must be a string, got {cfg[field]!r}")
            return WordPiece(
                vocab=vocab,
                unk_token=cfg.get("unk_token", "[UNK]"),
                continuing_subword_prefix=cfg.get("continuing_subword_prefix", "##"),
                max_input_chars_per_word=int(cfg.get("max_input_chars_per_word", 100)),
            )
        if kind == "WordLevel":
            if not isinstance(cfg["unk_token"], str):
                raise FormatError(f"WordLevel model: unk_token must be a string, got {cfg['unk_token']!r}")
            return WordLevel(vocab=vocab, unk_token=cfg["unk_token"])
        if kind == "Unigram":
            return Unigram(
                vocab=vocab,
                unk_id=cfg.get("unk_id"),
                byte_fallback=bool(cfg.get("byte_fallback", False)),
            )
        if kind == "SentencePieceBPE":
            return SentencePieceBPE(
                vocab=vocab,
                piece_types=cfg.get("piece_types"),
                unk_id=cfg.get("unk_id"),
                byte_fallback=bool(cfg.get("byte_fallback", False)),
            )
        if kind == "SentencePieceUnigram":
            return SentencePieceUnigram(
                vocab=vocab,
                piece_types=cfg.get("piece_types"),
                unk_id=cfg.get("unk_id"),
                byte_fallback=bool(cfg.get("byte_fallback", False)),
            )
    except (TypeError, AttributeError, OverflowError) as exc:
        raise FormatError(f"{kind} model config is malformed: {exc}") from exc
    raise FormatError(f"unknown model type {kind!r} (expected BPE, WordPiece, WordLevel or Unigram)")
