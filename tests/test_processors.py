"""Post-processors against HF ``tokenizers`` (ids with ``add_special_tokens=True``)."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from conftest import TOKENIZER_NAMES, corpus_chunks, examples, fixture_path, hf_tokenizer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pymtok import processors
from pymtok.errors import FormatError

SETTINGS = settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def post_processor_config(name: str) -> dict | None:
    path = fixture_path("tokenizers", name, "tokenizer.json")
    return json.loads(path.read_text("utf-8"))["post_processor"]


WITH_PROCESSOR = [n for n in TOKENIZER_NAMES if n != "falcon" and n != "gpt-4o"]


def test_fixtures_without_processor_are_null() -> None:
    for name in set(TOKENIZER_NAMES) - set(WITH_PROCESSOR):
        assert post_processor_config(name) is None
        assert processors.from_config(None) is None


@pytest.mark.parametrize("name", WITH_PROCESSOR)
def test_fixture_processor_matches_hf(name: str) -> None:
    ours = processors.from_config(post_processor_config(name))
    assert ours is not None
    hf = hf_tokenizer(name)
    for is_pair in (False, True):
        assert ours.added_tokens(is_pair) == hf.num_special_tokens_to_add(is_pair)
    chunks = corpus_chunks(100, seed=11)
    raw = [e.ids for e in hf.encode_batch(chunks, add_special_tokens=False)]
    full = [e.ids for e in hf.encode_batch(chunks)]
    for ids, expected in zip(raw, full):
        assert ours(ids) == expected
    pairs = list(zip(chunks, chunks[1:] + chunks[:1]))
    full_pairs = [e.ids for e in hf.encode_batch(pairs)]
    for i, expected in enumerate(full_pairs):
        assert ours(raw[i], raw[(i + 1) % len(raw)]) == expected


# ---------------------------------------------------------------------------------------------
# hypothesis-built configs on a small WordLevel tokenizer, whose raw ids we know without HF

WORDS = [f"w{i}" for i in range(10)]
SPECIALS = {"[A]": [20], "[B]": [21, 22], "[C]": [], "<s>": [23, 24, 25]}


def oracle(post_processor: dict):
    from tokenizers import Tokenizer

    vocab = {w: i for i, w in enumerate(WORDS)} | {"<unk>": 30}
    doc = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
        "normalizer": None, "pre_tokenizer": {"type": "WhitespaceSplit"},
        "post_processor": post_processor, "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "<unk>"},
    }
    return Tokenizer.from_str(json.dumps(doc))


def special(name: str, type_id: int) -> dict:
    return {"SpecialToken": {"id": name, "type_id": type_id}}


def sequence(which: str, type_id: int) -> dict:
    return {"Sequence": {"id": which, "type_id": type_id}}


type_ids = st.integers(0, 2)
special_pieces = st.builds(special, st.sampled_from(sorted(SPECIALS)), type_ids)
single_templates = st.lists(st.one_of(special_pieces, st.builds(sequence, st.just("A"), type_ids)),
                            max_size=5)
pair_templates = st.lists(
    st.one_of(special_pieces, st.builds(sequence, st.sampled_from(["A", "B"]), type_ids)),
    max_size=6,
)
template_configs = st.builds(
    lambda single, pair: {
        "type": "TemplateProcessing", "single": single, "pair": pair,
        "special_tokens": {
            name: {"id": name, "ids": ids, "tokens": [f"{name}{k}" for k in range(len(ids))]}
            for name, ids in SPECIALS.items()
        },
    },
    single_templates, pair_templates,
)
token_pairs = st.tuples(st.sampled_from(["[S]", "</s>"]), st.integers(20, 29))
leaf_configs = st.one_of(
    template_configs,
    st.builds(lambda sep, cls: {"type": "BertProcessing", "sep": sep, "cls": cls},
              token_pairs, token_pairs),
    st.builds(lambda sep, cls, trim, prefix: {"type": "RobertaProcessing", "sep": sep, "cls": cls,
                                              "trim_offsets": trim, "add_prefix_space": prefix},
              token_pairs, token_pairs, st.booleans(), st.booleans()),
    st.builds(lambda prefix, trim: {"type": "ByteLevel", "add_prefix_space": prefix,
                                    "trim_offsets": trim, "use_regex": True},
              st.booleans(), st.booleans()),
)
texts = st.lists(st.sampled_from(WORDS), max_size=6)


def check(cfg: dict, a: list[str], b: list[str], defined: Callable[[int], bool] = lambda n: True) -> None:
    """Ours against HF on sequence a, and on the pair (a, b); where ``defined(number of
    sequences)`` says HF cannot run the config (it panics), ours must raise FormatError."""
    ours = processors.from_config(cfg)
    assert ours is not None
    hf = oracle(cfg)
    ids_a = [WORDS.index(w) for w in a]
    ids_b = [WORDS.index(w) for w in b]
    for is_pair in (False, True):
        assert ours.added_tokens(is_pair) == hf.num_special_tokens_to_add(is_pair)
    for args, texts_ in (((ids_a,), (" ".join(a),)), ((ids_a, ids_b), (" ".join(a), " ".join(b)))):
        if defined(len(args)):
            assert ours(*args) == hf.encode(*texts_).ids
        else:
            with pytest.raises(FormatError, match="sequences"):
                ours(*args)


@SETTINGS
@given(template_configs, texts, texts)
def test_template_processing(cfg: dict, a: list[str], b: list[str]) -> None:
    check(cfg, a, b)


@SETTINGS
@given(leaf_configs, texts, texts)
def test_leaf_processors(cfg: dict, a: list[str], b: list[str]) -> None:
    check(cfg, a, b)


def sequence_is_defined(members: list[dict], n: int) -> bool:
    """Whether HF can run the chain on n input sequences (a template wants 1 or 2, else panics)."""
    for member in members:
        if member["type"] == "TemplateProcessing":
            if n not in (1, 2):
                return False
            n = len(member["single"] if n == 1 else member["pair"])
    return True


@SETTINGS
@given(st.lists(leaf_configs, max_size=3), texts, texts)
def test_sequence_processors(members: list[dict], a: list[str], b: list[str]) -> None:
    check({"type": "Sequence", "processors": members}, a, b, lambda n: sequence_is_defined(members, n))


# ---------------------------------------------------------------------------------------------
# from_config errors

TEMPLATE = {"type": "TemplateProcessing", "single": [sequence("A", 0)], "pair": [],
            "special_tokens": {}}


@pytest.mark.parametrize(
    "cfg, words",
    [
        ({"type": "Nope"}, "Nope"),
        ("x", "object"),
        ({"type": "BertProcessing", "sep": ["[SEP]", 102]}, "cls"),
        ({"type": "BertProcessing", "sep": ["[SEP]"], "cls": ["[CLS]", 101]}, "sep"),
        ({"type": "RobertaProcessing", "sep": ["</s>", -2], "cls": ["<s>", 0]}, "sep"),
        (TEMPLATE | {"single": [special("[X]", 0)]}, r"\[X\]"),
        (TEMPLATE | {"single": [sequence("B", 0)]}, "sequence B"),
        (TEMPLATE | {"pair": [sequence("C", 0)]}, "pair"),
        (TEMPLATE | {"pair": [{"Sequence": {"id": "A"}, "SpecialToken": {"id": "x"}}]}, "pair"),
        (TEMPLATE | {"special_tokens": {"x": {"id": "x", "ids": "1"}}}, "special_tokens"),
        ({"type": "TemplateProcessing", "single": [], "pair": []}, "special_tokens"),
        (TEMPLATE | {"pair": [{"Sequence": {"id": ["A"]}}]}, "pair"),
        ({"type": "Sequence", "processors": [None]}, "null"),
        ({"type": "Sequence"}, "processors"),
    ],
)
def test_from_config_errors(cfg: object, words: str) -> None:
    with pytest.raises(FormatError, match=words):
        processors.from_config(cfg)  # type: ignore[arg-type]
