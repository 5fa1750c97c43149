"""The stage classes as build_component reads them, against what inspect and typing say."""

from __future__ import annotations

import inspect
import typing
from typing import Any

import pytest

from pymtok import decoders, normalizers, pre_tokenizers, processors
from pymtok.components import _hints, _parameters

CLASSES = [
    pytest.param(cls, id=f"{module.__name__.rsplit('.', 1)[1]}.{name}")
    for module in (normalizers, pre_tokenizers, decoders, processors)
    for name, cls in module._TYPES.items()
]


@pytest.mark.parametrize("cls", CLASSES)
def test_parameters_as_inspect_reads_them(cls: Any) -> None:
    expected = {name: p.default is p.empty for name, p in inspect.signature(cls).parameters.items()}
    kinds = {p.kind for p in inspect.signature(cls).parameters.values()}
    assert kinds <= {inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY}
    assert _parameters(cls) == expected


@pytest.mark.parametrize("cls", CLASSES)
def test_annotations_as_typing_reads_them(cls: Any) -> None:
    init = cls.__init__
    expected = {} if init is object.__init__ else typing.get_type_hints(init)
    assert _hints(cls) == expected
