"""Malformed tokenizer.json configs: a real config with fields deleted or replaced by values of the
wrong shape either loads and works, or raises FormatError (at load, or at encode where HF also
fails then, e.g. a Unigram model without unk_id meeting an unknown character). Never another
exception."""

from __future__ import annotations

import copy
import functools
import json
import random
from collections.abc import Iterator
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import examples, fixture_path
from pymtok.errors import FormatError
from pymtok.tokenizer import Tokenizer

NAMES = ["all-minilm-l6-v2", "t5-small", "mistral-7b-v0.1", "clip-vit", "falcon", "albert-base-v2"]
JUNK: list[Any] = [None, 0, -1, 1.5, "", "x", [], {}, [None], {"type": "Nope"}, True, 2**40]


@functools.lru_cache(maxsize=None)
def small_config(name: str) -> str:
    """The fixture's config with its vocabulary cut to 3,000 entries (and no merges): the
    components are what is being mutated, and a small model keeps each example fast."""
    cfg = json.loads(fixture_path("tokenizers", name, "tokenizer.json").read_text(encoding="utf-8"))
    model = cfg["model"]
    if isinstance(model["vocab"], dict):
        model["vocab"] = dict(list(model["vocab"].items())[:3000])
        model["merges"] = []
    else:
        model["vocab"] = model["vocab"][:3000]
    return json.dumps(cfg)


def paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if prefix:
        yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            if not (prefix == ("model",) and key in ("vocab", "merges")):
                yield from paths(value, prefix + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node[:5]):
            yield from paths(value, prefix + (i,))


@settings(max_examples=examples(400), deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(NAMES), st.randoms(use_true_random=False))
def test_mutated_config_loads_or_raises_format_error(name: str, rnd: random.Random) -> None:
    cfg = json.loads(small_config(name))
    candidates = list(paths(cfg))
    for _ in range(rnd.randint(1, 3)):
        path = rnd.choice(candidates)
        parent = cfg
        try:
            for key in path[:-1]:
                parent = parent[key]
            if isinstance(parent, dict) and rnd.random() < 0.3:
                parent.pop(path[-1], None)
            else:
                parent[path[-1]] = copy.deepcopy(rnd.choice(JUNK))
        except (KeyError, IndexError, TypeError):
            pass  # an earlier mutation removed this path
    try:
        tok = Tokenizer.from_config(cfg)
    except FormatError:
        return
    for text in ("Hello world!", "héllo  wörld 123 你好 😀", ""):
        try:
            ids = tok.encode(text)
        except FormatError:
            continue
        tok.decode(ids)
