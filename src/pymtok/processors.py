"""Post-processors: add the special tokens around encoded ids (``add_special_tokens=True``).

Like HF ``tokenizers``, each processor edits a list of sequences (the input and its pair), and
the result is their concatenation; a ``Sequence`` of processors passes that list along, so a
``TemplateProcessing`` splits it into one sequence per template piece.

>>> bert = from_config({"type": "BertProcessing", "sep": ["[SEP]", 102], "cls": ["[CLS]", 101]})
>>> bert([7592, 2088], [2129])
[101, 7592, 2088, 102, 2129, 102]
"""

from __future__ import annotations

import abc
from typing import Any

from .components import build_component
from .errors import FormatError

__all__ = [
    "BertProcessing", "ByteLevel", "PostProcessor", "RobertaProcessing", "Sequence",
    "TemplateProcessing", "from_config",
]


class PostProcessor(abc.ABC):
    """The shared entry point: process ``[ids]`` or ``[ids, pair_ids]`` and concatenate."""

    def __call__(self, ids: list[int], pair_ids: list[int] | None = None) -> list[int]:
        sequences = [list(ids)] if pair_ids is None else [list(ids), list(pair_ids)]
        return [i for sequence in self.process_encodings(sequences) for i in sequence]

    @abc.abstractmethod
    def process_encodings(self, sequences: list[list[int]]) -> list[list[int]]:
        """The edited sequences, in output order."""

    @abc.abstractmethod
    def added_tokens(self, is_pair: bool) -> int:
        """How many ids processing adds (HF's ``num_special_tokens_to_add``)."""


def _token_pair(component: str, field: str, value: object) -> tuple[str, int]:
    if (
        not isinstance(value, (list, tuple))
        or len(value) != 2
        or not isinstance(value[0], str)
        or not _is_id(value[1])
    ):
        raise FormatError(
            f"post_processor {component}: '{field}' must be [token, id], got {value!r}"
        )
    return value[0], value[1]


def _is_id(value: object) -> bool:
    # HF reads ids as u32: a larger one is a malformed file there, and no id decode takes
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**32


class BertProcessing(PostProcessor):
    """``[CLS] A [SEP]`` and ``[CLS] A [SEP] B [SEP]``.

    >>> BertProcessing(sep=("[SEP]", 102), cls=("[CLS]", 101))([5])
    [101, 5, 102]
    """

    def __init__(self, *, sep: tuple[str, int], cls: tuple[str, int]) -> None:
        self.sep = _token_pair("BertProcessing", "sep", sep)
        self.cls = _token_pair("BertProcessing", "cls", cls)

    def process_encodings(self, sequences: list[list[int]]) -> list[list[int]]:
        cls_id, sep_id = self.cls[1], self.sep[1]
        return [
            [cls_id, *seq, sep_id] if i == 0 else [*seq, sep_id] for i, seq in enumerate(sequences)
        ]

    def added_tokens(self, is_pair: bool) -> int:
        return 3 if is_pair else 2


class RobertaProcessing(PostProcessor):
    """``<s> A </s>`` and ``<s> A </s></s> B </s>``.

    ``trim_offsets`` and ``add_prefix_space`` only move offsets, which pymtok does not track.

    >>> RobertaProcessing(sep=("</s>", 2), cls=("<s>", 0))([5], [6])
    [0, 5, 2, 2, 6, 2]
    """

    def __init__(
        self,
        *,
        sep: tuple[str, int],
        cls: tuple[str, int],
        trim_offsets: bool = True,
        add_prefix_space: bool = True,
    ) -> None:
        self.sep = _token_pair("RobertaProcessing", "sep", sep)
        self.cls = _token_pair("RobertaProcessing", "cls", cls)
        self.trim_offsets = trim_offsets
        self.add_prefix_space = add_prefix_space

    def process_encodings(self, sequences: list[list[int]]) -> list[list[int]]:
        cls_id, sep_id = self.cls[1], self.sep[1]
        return [
            [cls_id if i == 0 else sep_id, *seq, sep_id] for i, seq in enumerate(sequences)
        ]

    def added_tokens(self, is_pair: bool) -> int:
        return 4 if is_pair else 2


class ByteLevel(PostProcessor):
    """Adds nothing: in HF it only trims offsets.

    >>> ByteLevel()([1, 2], [3])
    [1, 2, 3]
    """

    def __init__(
        self, *, add_prefix_space: bool = True, trim_offsets: bool = True, use_regex: bool = True
    ) -> None:
        self.add_prefix_space = add_prefix_space
        self.trim_offsets = trim_offsets
        self.use_regex = use_regex

    def process_encodings(self, sequences: list[list[int]]) -> list[list[int]]:
        return sequences

    def added_tokens(self, is_pair: bool) -> int:
        return 0


# A template piece: the index of an input sequence (0 for $A, 1 for $B), or a special token's ids.
Piece = int | tuple[int, ...]
_SEQUENCE_INDEX = {"A": 0, "B": 1}


class TemplateProcessing(PostProcessor):
    """Lay out the sequences and special tokens as the ``single`` / ``pair`` templates say.

    Templates are in ``tokenizer.json`` form: ``{"Sequence": {"id": "A", "type_id": 0}}`` and
    ``{"SpecialToken": {"id": "[CLS]", "type_id": 0}}``; ``special_tokens`` maps each name to
    ``{"id": name, "ids": [...], "tokens": [...]}``.

    >>> t = TemplateProcessing(
    ...     single=[{"SpecialToken": {"id": "<s>"}}, {"Sequence": {"id": "A"}}],
    ...     pair=[{"Sequence": {"id": "A"}}, {"SpecialToken": {"id": "<s>"}},
    ...           {"Sequence": {"id": "B"}}],
    ...     special_tokens={"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}})
    >>> t([5, 6]), t([5], [7])
    ([1, 5, 6], [5, 1, 7])
    """

    def __init__(
        self,
        *,
        single: list[dict[str, Any]],
        pair: list[dict[str, Any]],
        special_tokens: dict[str, dict[str, Any]],
    ) -> None:
        self.single = single
        self.pair = pair
        self.special_tokens = special_tokens
        ids_of = _special_token_ids(special_tokens)
        self._single = _parse_template("single", single, ids_of)
        self._pair = _parse_template("pair", pair, ids_of)
        if 1 in self._single:
            # HF would index a second sequence that a single input never has, and panic.
            raise FormatError("post_processor TemplateProcessing: 'single' must not use sequence B")

    def process_encodings(self, sequences: list[list[int]]) -> list[list[int]]:
        if len(sequences) not in (1, 2):
            raise FormatError(
                f"post_processor TemplateProcessing: got {len(sequences)} sequences from the "
                "previous processor, expected 1 or 2"
            )
        template = self._single if len(sequences) == 1 else self._pair
        return [
            list(piece) if isinstance(piece, tuple) else sequences[piece] for piece in template
        ]

    def added_tokens(self, is_pair: bool) -> int:
        template = self._pair if is_pair else self._single
        return sum(len(piece) for piece in template if isinstance(piece, tuple))


def _special_token_ids(special_tokens: object) -> dict[str, tuple[int, ...]]:
    if not isinstance(special_tokens, dict):
        raise FormatError("post_processor TemplateProcessing: 'special_tokens' must be an object")
    ids_of: dict[str, tuple[int, ...]] = {}
    for name, token in special_tokens.items():
        ids = token.get("ids") if isinstance(token, dict) else None
        if not isinstance(ids, list) or not all(_is_id(i) for i in ids):
            raise FormatError(
                f"post_processor TemplateProcessing: special_tokens[{name!r}] must have a list "
                f"of non-negative 'ids', got {token!r}"
            )
        ids_of[name] = tuple(ids)
    return ids_of


def _parse_template(
    field: str, template: object, ids_of: dict[str, tuple[int, ...]]
) -> list[Piece]:
    where = f"post_processor TemplateProcessing: '{field}'"
    if not isinstance(template, list):
        raise FormatError(f"{where} must be a list of pieces, got {template!r}")
    pieces: list[Piece] = []
    for item in template:
        kind, name = "", None
        if isinstance(item, dict) and len(item) == 1:
            ((kind, body),) = item.items()
            name = body.get("id") if isinstance(body, dict) else None
        if kind == "Sequence" and isinstance(name, str) and name in _SEQUENCE_INDEX:
            pieces.append(_SEQUENCE_INDEX[name])
        elif kind == "SpecialToken" and isinstance(name, str):
            if name not in ids_of:
                raise FormatError(
                    f"{where} uses special token {name!r}, which 'special_tokens' lacks"
                )
            pieces.append(ids_of[name])
        else:
            raise FormatError(
                f"{where}: expected {{'Sequence': {{'id': 'A' or 'B'}}}} or "
                f"{{'SpecialToken': {{'id': name}}}}, got {item!r}"
            )
    return pieces


class Sequence(PostProcessor):
    """Run ``processors`` one after the other on the list of sequences.

    >>> Sequence(processors=[ByteLevel(), BertProcessing(sep=("[SEP]", 2), cls=("[CLS]", 1))])([5])
    [1, 5, 2]
    """

    def __init__(self, *, processors: list[PostProcessor]) -> None:
        self.processors = processors

    def process_encodings(self, sequences: list[list[int]]) -> list[list[int]]:
        for processor in self.processors:
            sequences = processor.process_encodings(sequences)
        return sequences

    def added_tokens(self, is_pair: bool) -> int:
        return sum(processor.added_tokens(is_pair) for processor in self.processors)


_TYPES: dict[str, type[PostProcessor]] = {
    "BertProcessing": BertProcessing, "ByteLevel": ByteLevel,
    "RobertaProcessing": RobertaProcessing, "Sequence": Sequence,
    "TemplateProcessing": TemplateProcessing,
}


def from_config(cfg: dict[str, Any] | None) -> PostProcessor | None:
    """Build the post-processor a ``tokenizer.json`` ``"post_processor"`` entry describes."""
    return build_component("post_processor", cfg, _TYPES, "processors", from_config)

