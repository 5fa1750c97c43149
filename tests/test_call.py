"""``tok(...)`` (transformers' ``__call__``) and pair encoding, against transformers on every fixture.

The oracle is transformers' ``PreTrainedTokenizerFast`` built from the fixture's ``tokenizer.json``
and its ``tokenizer_config.json`` settings (the class chatglm3's remote code would pick is not
loaded: offline, no remote code). Where transformers raises, pymtok must raise too.
"""

from __future__ import annotations

import functools
import json
import warnings
from typing import Any

import numpy as np
import pytest

import pymtok

from conftest import TOKENIZER_NAMES, auto_tokenizer, corpus_chunks, examples, fixture_path, full_tier, hf_tokenizer, ours, slow_for

# settings the oracle takes from tokenizer_config.json; the class and remote code are left out
# AutoTokenizer.from_pretrained drops add_bos_token / add_eos_token beside a tokenizer.json (its
# post-processor is the one that runs): passed to the class, they would rebuild it
_SKIPPED_CONFIG = ("tokenizer_class", "auto_map", "added_tokens_decoder", "add_bos_token", "add_eos_token")


# a few fixtures at a time: every oracle and tokenizer held at once would take gigabytes
@functools.lru_cache(maxsize=3)
def hf_call(name: str) -> Any:
    return hf_built(name)


def hf_built(name: str, **overrides: Any) -> Any:
    """hf_call's oracle, made anew (a test may change it), with ``overrides`` over its settings"""
    from transformers import PreTrainedTokenizerFast
    from transformers.utils import logging

    logging.set_verbosity_error()
    folder = fixture_path("tokenizers", name)
    config_file = folder / "tokenizer_config.json"
    config = json.loads(config_file.read_text(encoding="utf-8")) if config_file.is_file() else {}
    kwargs = {k: _added_token(v) for k, v in config.items() if k not in _SKIPPED_CONFIG}
    return PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"),
                                   **{**auto_settings(name), **kwargs, **overrides})


@functools.lru_cache(maxsize=None)
def auto_settings(name: str) -> dict[str, Any]:
    """The __call__ settings ``AutoTokenizer`` gives the fixture (its class's defaults under the
    folder's config); none for remote code, which is not run."""
    folder = fixture_path("tokenizers", name)
    config_file = folder / "tokenizer_config.json"
    if config_file.is_file() and "auto_map" in json.loads(config_file.read_text(encoding="utf-8")):
        return {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        auto = auto_tokenizer(name)
    return {"padding_side": auto.padding_side, "truncation_side": auto.truncation_side,
            "model_input_names": list(auto.model_input_names)}


def _added_token(value: Any) -> Any:
    """A config's ``{"__type": "AddedToken", ...}`` as the AddedToken from_pretrained makes of it."""
    if isinstance(value, dict) and value.get("__type") == "AddedToken":
        from tokenizers import AddedToken

        return AddedToken(**{k: v for k, v in value.items() if k != "__type"})
    return value


def _plain(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        # rows of different lengths: an array of objects, each row an array of its own
        rows = [_plain(row) for row in value] if value.dtype == object else value.tolist()
        return ("array", value.dtype.kind, value.shape, rows)
    return value


def check(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """``tok(*args, **kwargs)`` equals transformers' (keys, values, tokens, words) or both raise."""
    hf, tok = hf_call(name), ours(name)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = hf(*args, **kwargs)
    except BaseException as exc:  # tokenizers' Rust panics are BaseExceptions
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        with pytest.raises((ValueError, TypeError)):
            tok(*args, **kwargs)
        return
    got = tok(*args, **kwargs)
    assert list(got.keys()) == list(want.keys()), (name, kwargs)
    for key in want:
        assert _plain(got[key]) == _plain(want[key]), (name, key, kwargs, args)
    assert len(got.encodings) == len(want.encodings), (name, kwargs)
    for row in range(len(want.encodings)):
        assert got.tokens(row) == want.tokens(row), (name, row, kwargs)
        assert got.word_ids(row) == want.word_ids(row), (name, row, kwargs)
        assert got.sequence_ids(row) == want.sequence_ids(row), (name, row, kwargs)
    first = args[0] if isinstance(args[0], str) else args[0][-1]
    first = first[0] if isinstance(first, tuple) else first  # a batch's (text, pair) couple
    for char in range(0, len(first), max(1, len(first) // 7)):
        for sequence in (0, 1):
            assert got.char_to_token(0, char, sequence) == want.char_to_token(0, char, sequence), (name, char, kwargs)


GRID: list[dict[str, Any]] = [
    {},
    {"return_tensors": "np", "return_offsets_mapping": True, "return_length": True},  # batches: ragged
    {"return_offsets_mapping": True, "return_special_tokens_mask": True, "return_length": True},
    {"add_special_tokens": False, "return_offsets_mapping": True, "return_token_type_ids": True},
    {"add_special_tokens": False, "return_offsets_mapping": True},  # the short path's keywords
    {"add_special_tokens": False},
    {"truncation": True, "max_length": 24, "stride": 4, "return_overflowing_tokens": True,
     "return_offsets_mapping": True},
    {"padding": True, "return_attention_mask": True, "return_token_type_ids": True},
    {"padding": "max_length", "truncation": "longest_first", "max_length": 48, "pad_to_multiple_of": 16,
     "padding_side": "left"},
    {"truncation": "only_second", "max_length": 30, "return_overflowing_tokens": True, "stride": 2},
    {"truncation": "only_first", "max_length": 40},
]

SLOW_GRID: list[dict[str, Any]] = [
    {"truncation": True},  # model_max_length from tokenizer_config.json
    {"padding": "longest", "pad_to_multiple_of": 8, "return_offsets_mapping": True},
    {"padding": "max_length", "max_length": 20},  # no truncation: longer rows stay longer
    {"truncation": "longest_first", "max_length": 9, "stride": 8, "return_overflowing_tokens": True},
    {"truncation": "only_first", "max_length": 3, "return_overflowing_tokens": True},
    {"truncation": True, "max_length": 64, "stride": 16, "return_overflowing_tokens": True,
     "padding": True, "return_offsets_mapping": True, "return_special_tokens_mask": True},
    {"max_length": 12},  # max_length alone truncates
    {"truncation": "longest_first", "max_length": 0},
    {"padding": True, "return_tensors": "np"},
    {"truncation": True, "max_length": 16, "padding": "max_length", "return_tensors": "np"},
]


def _cases(chunks: list[str]) -> list[tuple[Any, ...]]:
    a, b = chunks[: len(chunks) // 2], chunks[len(chunks) // 2 :]
    # the last: transformers' batch of a (text, pair) couple and a lone text
    return [(a[0],), (a[0], b[0]), (a,), (a, b), ([(a[0], b[0]), a[-1]],)]


@pytest.mark.parametrize("name", slow_for(TOKENIZER_NAMES, "gemma-v1"))
def test_call_matches_transformers(name: str) -> None:
    # batches of two in the fast tier (three in the full one): still rows of different lengths
    chunks = [c[:300] for c in corpus_chunks(6, seed=13)[: 6 if full_tier() else 4]]
    for kwargs in GRID:
        for args in _cases(chunks):
            check(name, args, kwargs)


@pytest.mark.slow
@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_call_matches_transformers_full_grid(name: str) -> None:
    chunks = [c[:1000] for c in corpus_chunks(18, seed=29)[::3]]
    for kwargs in GRID + SLOW_GRID:
        for args in _cases(chunks):
            check(name, args, kwargs)


@pytest.mark.parametrize("name", slow_for(TOKENIZER_NAMES, "gemma-v1"))
def test_offsets_match_transformers_on_corpus(name: str) -> None:
    """Offsets, tokens and word ids of whole corpus chunks, one text at a time."""
    for text in corpus_chunks(30, seed=3):
        check(name, (text,), {"return_offsets_mapping": True})


EDGE_TEXTS = [
    "", " ", "  Hello  world\t\n", "é\u0301 e\u0301 ÅÉ ﬁ ① ½", "Ω ΣΑΣ İstanbul ǅ", "\u200b\u00ad x\x00y",
    "<|im_end|> <s></s><unk>[CLS] [SEP]<mask>", "日本語のテキスト、中文。", "🤗👩‍👩‍👧 a\r\nb",
]


@pytest.mark.parametrize("name", slow_for(TOKENIZER_NAMES, "gemma-v1"))
def test_edge_texts(name: str) -> None:
    for text in EDGE_TEXTS:
        check(name, (text,), {"return_offsets_mapping": True, "return_special_tokens_mask": True})
    check(name, (EDGE_TEXTS, EDGE_TEXTS[::-1]), {"return_offsets_mapping": True, "padding": True})
    for texts in ("", [""], ["", ""]):  # no values at all: int64 arrays
        check(name, (texts,), {"return_tensors": "np", "add_special_tokens": False})


@pytest.mark.parametrize("name", ["all-minilm-l6-v2", "llama3", "t5-small", "roberta-base"])
def test_encode_pairs(name: str) -> None:
    hf, tok = hf_tokenizer(name), ours(name)
    a, b = corpus_chunks(2, seed=5)[:2]
    for special in (True, False):
        want = hf.encode(a, b, add_special_tokens=special).ids
        assert tok.encode(a, b, add_special_tokens=special) == want
        assert tok.encode(a, pair=b, add_special_tokens=special) == want
        batch = tok.encode_batch([(a, b), a, (b, a)], add_special_tokens=special)
        assert batch == [e.ids for e in hf.encode_batch([(a, b), a, (b, a)], add_special_tokens=special)]


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_padding_side_and_fields_as_auto_tokenizer(name: str) -> None:
    """The side ``padding=True`` pads on and the fields returned, as ``AutoTokenizer`` loads the
    folder: a tokenizer_class's declared defaults (Gemma's and Llama's left padding, Bert's
    token_type_ids) unless tokenizer_config.json says otherwise."""
    settings = auto_settings(name)
    if not settings:
        pytest.skip(f"{name}: AutoTokenizer runs remote code")
    tok = ours(name)
    assert {key: tok.meta.call_settings.get(key, default) for key, default in
            (("padding_side", "right"), ("truncation_side", "right"),
             ("model_input_names", ["input_ids", "attention_mask"]))} == settings
    texts = ["hi", "a longer text, which pads the other"]
    for kwargs in ({"padding": True}, {"padding": True, "truncation": True, "max_length": 4}):
        want = {key: list(map(list, value)) for key, value in hf_call(name)(texts, **kwargs).items()} \
            if tok.pad_token is not None else None
        if want is None:
            with pytest.raises(ValueError):
                tok(texts, **kwargs)
        else:
            assert dict(tok(texts, **kwargs)) == want


def test_class_call_settings_are_transformers() -> None:
    """pymtok's table of class defaults against every tokenizer class transformers exports."""
    import transformers
    from transformers.models.auto.tokenization_auto import tokenizer_class_from_name
    from transformers.tokenization_utils_base import PreTrainedTokenizerBase

    from pymtok.hf_json import class_call_settings

    checked = 0
    for name in dir(transformers):
        if not name.endswith(("Tokenizer", "TokenizerFast")):
            continue
        klass = tokenizer_class_from_name(name.removesuffix("Fast"))
        if not (isinstance(klass, type) and issubclass(klass, PreTrainedTokenizerBase)):
            continue
        want = {"padding_side": klass.padding_side, "truncation_side": klass.truncation_side,
                "model_input_names": list(klass.model_input_names)}
        got = {"padding_side": "right", "truncation_side": "right", "model_input_names": ["input_ids", "attention_mask"],
               **class_call_settings({"tokenizer_class": name}, {})}
        assert got == want, name
        checked += 1
    assert checked > 100


def test_short_call_follows_the_tokenizer_after_load() -> None:
    """tok(text[, add_special_tokens=..., return_offsets_mapping=...]) runs in C from the plan kept
    per tokenizer (module.c plain_call): its settings, post-processor and split_special_tokens
    changed after the first calls, special tokens in the text, and a subclass's own encode still
    get transformers' answers."""
    name = "all-minilm-l6-v2"  # type ids, an attention mask, a post-processor with tokens at both ends
    tok = pymtok.load(fixture_path("tokenizers", name, "tokenizer.json"))
    texts = [*corpus_chunks(6), "hello [SEP] world [CLS]", "", "[UNK]"]

    def same(hf: Any, **kwargs: Any) -> None:
        for text in texts:
            for flags in ({}, {"add_special_tokens": False}, {"return_offsets_mapping": True},
                          {"add_special_tokens": False, "return_offsets_mapping": True}):
                got, want = tok(text, **flags), hf(text, **flags, **kwargs)
                assert list(got.keys()) == list(want.keys()), (text, flags, kwargs)
                for key in want:
                    assert _plain(got[key]) == _plain(want[key]), (text, flags, key, kwargs)
                assert got.tokens() == want.tokens(), (text, flags, kwargs)

    hf = hf_built(name)
    same(hf)
    settings = dict(tok.meta.call_settings)
    tok.meta.call_settings["model_input_names"] = ["input_ids", "attention_mask"]
    same(hf_built(name, model_input_names=["input_ids", "attention_mask"]))
    tok.meta.call_settings.clear()
    tok.meta.call_settings.update(settings)
    tok.meta.split_special_tokens = True
    same(hf, split_special_tokens=True)
    tok.meta.split_special_tokens = False
    other = hf_built(name)
    from tokenizers import processors as hf_processors

    other.backend_tokenizer.post_processor = hf_processors.TemplateProcessing(
        single="[SEP] $A:1", pair="$A $B:1", special_tokens=[("[SEP]", 102)])
    tok.post_processor = pymtok.processors.from_config(json.loads(other.backend_tokenizer.to_str())["post_processor"])
    same(other)

    class Greeting(pymtok.Tokenizer):
        def encode(self, text: str, *args: Any, **kwargs: Any) -> list[int]:
            return super().encode("hi " + text, *args, **kwargs)

    greeting = Greeting.from_config(ours(name).config, ours(name).meta)
    for _ in range(2):  # the first call makes the plan the next ones run
        assert greeting("there")["input_ids"] == hf("hi there")["input_ids"]


def test_encode_rejects_misplaced_arguments() -> None:
    tok = ours("all-minilm-l6-v2")
    with pytest.raises(TypeError, match="keyword-only"):
        tok.encode("hi", False)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        tok.encode("hi", add_special_tokens="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        tok.encode_batch(["a"], False)  # type: ignore[misc]
    with pytest.raises(TypeError):
        tok.encode_batch([("a", "b", "c")])  # type: ignore[list-item]


def test_unsupported_keywords_raise() -> None:
    tok = ours("qwen3")
    for kwargs in ({"foo": 1}, {"is_split_into_words": True}, {"text_target": "x"},
                   {"split_special_tokens": True}, {"return_tensors": "tf"}, {"stride": -1},
                   {"padding": "sideways"}, {"truncation": "middle"}, {"padding_side": "up"}):
        with pytest.raises((TypeError, ValueError)):
            tok("hello", **kwargs)
    with pytest.raises(ValueError):
        tok(None)
    with pytest.raises(TypeError):
        tok(["a", "b"], "c")
    # a batch's couples are two texts each, as HF's encode_batch takes them
    for batch in ([("a", "b", "c")], [["a"]], [("a", 1)], ["a", [["b"], ["c"]]]):
        with pytest.raises(TypeError):
            tok(batch)


def test_offsets_through_a_normalizer_without_alignment_raise() -> None:
    """A Tokenizer built around any callable normalizer encodes, but pymtok cannot say where its
    output comes from: offsets and what is built on them raise a pymtok error naming it."""
    from pymtok.errors import PymtokError

    tok = pymtok.Tokenizer(model=pymtok.models.WordPiece(vocab={"[UNK]": 0, "a": 1}, unk_token="[UNK]"),
                           normalizer=str.lower)
    assert tok.encode("A") == [1]
    for call in (lambda: tok("A", return_offsets_mapping=True), lambda: tok("A").word_ids(), lambda: tok.encode_words("A")):
        with pytest.raises(PymtokError, match="normalizer lower keeps no alignment"):
            call()


def test_return_tensors_pt_when_torch_is_installed() -> None:
    torch = pytest.importorskip("torch")
    got = ours("qwen3")(["a b", "c"], padding=True, return_tensors="pt")
    want = hf_call("qwen3")(["a b", "c"], padding=True, return_tensors="pt")
    assert isinstance(got["input_ids"], torch.Tensor)
    assert torch.equal(got["input_ids"], want["input_ids"])


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_file_padding_and_truncation_exposed_not_applied(name: str) -> None:
    folder = fixture_path("tokenizers", name)
    config = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    tok = ours(name)
    assert tok.truncation == config.get("truncation")
    assert tok.padding == config.get("padding")
    text = "hi"
    assert tok(text)["input_ids"] == hf_call(name)(text)["input_ids"]


_TRICKY = list("aAbé\u0301\u0308e\u0327 \t\n\r\u3000ﬁ①½ΣİǅẞДж日本語のテ한국\u200b\u00ad\x00\ufffd🤗👩\u200d👧'\",.!?-_") + [
    "<s>", "</s>", "<unk>", "[CLS]", "<mask>", "<|endoftext|>", "\u1100\u1161\u11a8", "\u0915\u094d\u0937", "Å", "  ",
]


@pytest.mark.parametrize("name", ["all-minilm-l6-v2", "albert-base-v2", "t5-small", "roberta-base", "llama3",
                                  "gemma-v1", "deepseek-v3"])
def test_offsets_property(name: str) -> None:
    """Offsets, tokens and word ids of text made of normalization edge cases equal transformers'."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=examples(60), deadline=None, database=None)
    @given(st.lists(st.sampled_from(_TRICKY), max_size=12).map("".join))
    def prop(text: str) -> None:
        check(name, (text,), {"return_offsets_mapping": True})

    prop()


def test_call_result_pickles_and_takes_attributes() -> None:
    """The short path's BatchEncoding (its encodings made on first use) survives pickle and copy
    with its tokens, and takes attributes of the caller's own as a dict subclass does."""
    import copy
    import pickle

    name = "llama3"
    text = corpus_chunks(1, seed=5)[0][:300]
    got = ours(name)(text, add_special_tokens=False, return_offsets_mapping=True)
    want = hf_call(name)(text, add_special_tokens=False)
    for result in (pickle.loads(pickle.dumps(got)), copy.copy(got), copy.deepcopy(got), got):
        assert result.tokens() == want.tokens()
        assert dict(result) == dict(got)
    got.mine = 1
    assert got.mine == 1 and vars(got) == {"mine": 1}



def test_split_special_tokens_from_the_config_splits_tokens_and_offsets_too(tmp_path) -> None:
    """tokenizer_config.json's split_special_tokens leaves special tokens as text in every output
    of the call (ids, tokens, offsets, word ids), with offsets asked for or not, as transformers."""
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers
    from transformers import AutoTokenizer

    hf = Tokenizer(models.WordPiece({"<unk>": 0, "a": 1, "b": 2, "<": 3, ">": 4, "x": 5}, unk_token="<unk>"))
    hf.pre_tokenizer = pre_tokenizers.Whitespace()
    hf.add_special_tokens(["<unk>"])
    hf.add_tokens([AddedToken("<x>", special=True)])
    hf.save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"unk_token": "<unk>", "split_special_tokens": True}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = AutoTokenizer.from_pretrained(str(tmp_path))
    tok = pymtok.load(tmp_path)
    for text in ["a <x> b", "<unk>", "b<x>"]:
        for keywords in ({}, {"return_offsets_mapping": True}, {"add_special_tokens": False}):
            want, got = theirs(text, **keywords), tok(text, **keywords)
            assert dict(got) == dict(want), (text, keywords)
            assert got.tokens() == want.tokens() and got.word_ids() == want.word_ids(), (text, keywords)


def _tiny_folder(folder: Any, config: dict[str, Any], *, padding: bool = False,
                 special_tokens_map: dict[str, Any] | None = None) -> tuple[Any, Any, Any]:
    """A small BPE tokenizer.json ("hello" a non-special added token) with ``config`` as its
    tokenizer_config.json (and ``special_tokens_map`` as special_tokens_map.json): (AutoTokenizer's
    tokenizer, HF tokenizers', pymtok's) of the folder."""
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers
    from transformers import AutoTokenizer

    hf = Tokenizer(models.BPE({"<unk>": 0, "a": 1, "b": 2, "ab": 3, "<pad>": 4, "c": 5}, [("a", "b")], unk_token="<unk>"))
    hf.pre_tokenizer = pre_tokenizers.Whitespace()
    hf.add_special_tokens(["<unk>"])
    hf.add_tokens([AddedToken("hello", special=False)])
    if padding:
        hf.enable_padding(direction="left", pad_id=7, pad_token="<new-pad>", pad_type_id=1, pad_to_multiple_of=4, length=9)
        hf.enable_truncation(max_length=2, stride=1, direction="left")
    hf.save(str(folder / "tokenizer.json"))
    if "added_tokens_decoder" in config:
        # the file's added tokens, as transformers writes them, but for those the test leaves out
        added = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))["added_tokens"]
        config = {**config, "added_tokens_decoder": {
            str(t["id"]): {k: v for k, v in t.items() if k != "id"} for t in added
            if t["content"] not in config["added_tokens_decoder"]}}
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    if special_tokens_map is not None:
        (folder / "special_tokens_map.json").write_text(json.dumps(special_tokens_map), encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = AutoTokenizer.from_pretrained(str(folder))
    return theirs, Tokenizer.from_file(str(folder / "tokenizer.json")), pymtok.load(folder)


# tokenizer_config.json's special tokens that tokenizer.json lacks ("<pad>" is a model token, "<s>"
# and "<img>" new ones), holds as plain vocabulary tokens ("a", "ab") or as a non-special added
# token ("hello": special once named as a role, unless added_tokens_decoder leaves it out; not as
# an extra one)
_CONFIG_SPECIALS: list[dict[str, Any]] = [
    {"unk_token": "<unk>", "pad_token": "<pad>"},
    {"unk_token": "<unk>", "pad_token": "<new-pad>"},
    {"unk_token": "<unk>", "sep_token": "a", "cls_token": "ab"},
    {"unk_token": "<unk>", "bos_token": "<s>", "eos_token": "<s>", "extra_special_tokens": ["<e1>", "b", "<e2>"]},
    {"unk_token": "<unk>", "additional_special_tokens": ["hello", "<e1>"]},
    {"unk_token": "<unk>", "mask_token": "hello"},
    {"unk_token": "<unk>", "mask_token": "hello", "added_tokens_decoder": ["hello"]},
    {"unk_token": "<unk>", "image_token": "<img>", "extra_special_tokens": {"audio_token": "c"}},
    {"unk_token": "<unk>", "pad_token": {"__type": "AddedToken", "content": "<p2>", "lstrip": True, "rstrip": False,
                                         "single_word": False, "normalized": False, "special": False}},
]


@pytest.mark.parametrize("config", _CONFIG_SPECIALS)
def test_config_special_tokens_become_added_tokens_as_in_transformers(config: dict[str, Any], tmp_path: Any) -> None:
    """transformers adds the special tokens tokenizer_config.json names to its backend: __call__,
    decode, len, the vocabulary and the special-token ids see them; encode, as HF tokenizers'
    encode of tokenizer.json, does not. A .mtok keeps them."""
    _assert_special_tokens_as_transformers(tmp_path, *_tiny_folder(tmp_path, config))


def _assert_special_tokens_as_transformers(folder: Any, theirs: Any, raw: Any, tok: Any) -> None:
    tok.save(folder / "tokenizer.mtok")
    texts = ["a hello b", "ab <pad> c<s>", "<new-pad> <e1>ab<e2>", "x <img> c  <p2>  a", "hello<unk>ab", "<m> <v> <i0>"]
    assert tok.meta.special_tokens == {k: v for k, v in theirs.special_tokens_map.items() if isinstance(v, str)}
    for ours_ in (tok, pymtok.load(folder / "tokenizer.mtok")):
        assert len(ours_) == len(theirs)
        assert ours_.get_vocab() == theirs.get_vocab()
        assert ours_.all_special_tokens == theirs.all_special_tokens
        assert ours_.all_special_ids == theirs.all_special_ids
        for key in pymtok.tokenizer.NAMED_SPECIAL_TOKENS:
            assert (getattr(ours_, key), getattr(ours_, key + "_id")) == (getattr(theirs, key), getattr(theirs, key + "_id"))
        for kwargs in ({}, {"return_special_tokens_mask": True, "return_offsets_mapping": True},
                       {"add_special_tokens": False}):
            want, got = theirs(texts, **kwargs), ours_(texts, **kwargs)
            assert dict(got) == dict(want), kwargs
            assert [got.tokens(i) for i in range(len(texts))] == [want.tokens(i) for i in range(len(texts))]
        if theirs.pad_token is not None:
            assert dict(ours_(texts, padding=True)) == dict(theirs(texts, padding=True))
        ids = list(range(len(theirs) + 1))
        for skip in (False, True):
            assert ours_.decode(ids, skip_special_tokens=skip) == theirs.decode(ids, skip_special_tokens=skip)
            assert ours_.convert_ids_to_tokens(ids, skip_special_tokens=skip) == theirs.convert_ids_to_tokens(
                ids, skip_special_tokens=skip)
            # transformers' fix-ups off, decode is HF tokenizers' of tokenizer.json, without them
            assert ours_.decode(ids, skip_special_tokens=skip, clean_up_tokenization_spaces=False) == raw.decode(
                ids, skip_special_tokens=skip)
        for text in texts:
            assert ours_.encode(text) == raw.encode(text).ids


_ADDED_TOKEN = {"content": "<s>", "lstrip": True, "normalized": False, "rstrip": False, "single_word": False}


@pytest.mark.parametrize("decoder", [False, True], ids=["legacy", "added_tokens_decoder"])
@pytest.mark.parametrize("config,special_tokens_map", [
    ({"unk_token": "<unk>", "pad_token": "<pad>"}, {"pad_token": "<new-pad>"}),
    ({"unk_token": "<unk>", "pad_token": "<pad>"}, {"pad_token": "a", "mask_token": "<m>", "bos_token": _ADDED_TOKEN}),
    ({"unk_token": "<unk>", "additional_special_tokens": ["<e2>"]}, {"additional_special_tokens": ["<e1>", "hello"]}),
    ({"unk_token": "<unk>"}, {"additional_special_tokens": ["<e1>", "hello"]}),
    ({"unk_token": "<unk>", "extra_special_tokens": []}, {"additional_special_tokens": ["<e1>"]}),
    ({"unk_token": "<unk>", "extra_special_tokens": ["<e2>"]}, {"extra_special_tokens": ["<e1>", "<e2>"]}),
    ({"unk_token": "<unk>", "extra_special_tokens": ["<e2>"]}, {"extra_special_tokens": {"video_token": "<v>"}}),
    ({"unk_token": "<unk>", "image_token": "<i0>"}, {"image_token": "<img>", "video_token": "<v>"}),
    ({"unk_token": "<unk>", "extra_special_tokens": {"image_token": "<i0>"}}, {"image_token": "<img>", "video_token": "<v>"}),
    ({"unk_token": "<unk>", "extra_special_tokens": {"image_token": "<i0>"}}, {"extra_special_tokens": ["<e1>"]}),
    ({"unk_token": "<unk>", "image_token": {"__type": "AddedToken", "content": "<i0>", "special": True}},
     {"image_token": "<img>"}),
    ({}, {"unk_token": "<unk>", "eos_token": {"content": "</s>", "special": False}, "extra_special_tokens": [
        {"content": "<e1>", "lstrip": True, "rstrip": False, "normalized": False, "single_word": False}]}),
])
def test_special_tokens_map_as_in_transformers(config: dict[str, Any], special_tokens_map: dict[str, Any],
                                               decoder: bool, tmp_path: Any) -> None:
    """special_tokens_map.json counts only beside a tokenizer_config.json without
    added_tokens_decoder, and then over it, as transformers 5 reads the two."""
    if decoder:
        config = {**config, "added_tokens_decoder": []}
    _assert_special_tokens_as_transformers(
        tmp_path, *_tiny_folder(tmp_path, config, special_tokens_map=special_tokens_map))


@pytest.mark.parametrize("config", [{"unk_token": "<unk>"}, {"unk_token": "<unk>", "padding_side": "right"},
                                    {"unk_token": "<unk>", "truncation_side": "right", "pad_token": "b"},
                                    {"unk_token": "<unk>", "pad_token": None}])
def test_file_padding_and_truncation_give_pad_token_and_sides_as_in_transformers(
    config: dict[str, Any], tmp_path: Any
) -> None:
    """tokenizer.json's padding and truncation give transformers 5 its pad token (here one the
    vocabulary lacks, which it then adds) and its padding and truncation sides, where
    tokenizer_config.json does not set them; their lengths, stride and pad type id it leaves."""
    theirs, _, tok = _tiny_folder(tmp_path, config, padding=True)
    assert (tok.pad_token, tok.pad_token_id, len(tok)) == (theirs.pad_token, theirs.pad_token_id, len(theirs))
    assert tok.meta.call_settings.get("padding_side", "right") == theirs.padding_side
    assert tok.meta.call_settings.get("truncation_side", "right") == theirs.truncation_side
    texts = ["a b a hello c", "a", "<new-pad> b"]
    for kwargs in ({"padding": True, "return_token_type_ids": True}, {"truncation": True}, {"padding": "max_length"},
                   {"truncation": True, "max_length": 2}, {"padding": "max_length", "max_length": 6},
                   {"truncation": True, "max_length": 3, "stride": 1, "return_overflowing_tokens": True}):
        try:
            want = dict(theirs(texts, **kwargs))
        except ValueError:
            with pytest.raises(ValueError):
                tok(texts, **kwargs)
            continue
        assert dict(tok(texts, **kwargs)) == want, kwargs


def _flags(special: bool, strip: bool = False) -> dict[str, Any]:
    return {"single_word": False, "lstrip": strip, "rstrip": strip, "normalized": False, "special": special}


@pytest.mark.parametrize("file_flags,config_flags", [
    (_flags(True), _flags(True, strip=True)),   # tokenizer_config.json adds lstrip and rstrip
    (_flags(True, strip=True), _flags(True)),   # or takes them away
    (_flags(False), _flags(True)),              # or makes the token special
    (_flags(True), _flags(False)),              # or not
])
def test_config_added_tokens_decoder_flags_as_in_transformers(file_flags: dict[str, Any], config_flags: dict[str, Any],
                                                             tmp_path: Any) -> None:
    """An added token no special-token name touches, which tokenizer_config.json's
    added_tokens_decoder holds with other flags than tokenizer.json: transformers adds it again
    with the config's; HF tokenizers' encode keeps the file's."""
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    vocab = {"<pad>": 0, "<s>": 1, "<x>": 2, "<": 3, ">": 4, "x": 5, "a": 6, "b": 7, " ": 8, "s": 9}
    added = [{"id": 0, "content": "<pad>", **_flags(True)}, {"id": 2, "content": "<x>", **file_flags}]
    (tmp_path / "tokenizer.json").write_text(json.dumps({
        "version": "1.0", "added_tokens": added, "normalizer": None, "pre_tokenizer": None, "post_processor": None,
        "decoder": None, "model": {"type": "BPE", "vocab": vocab, "merges": [], "unk_token": None}}), encoding="utf-8")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "pad_token": "<pad>",
        "added_tokens_decoder": {"2": {"content": "<x>", **config_flags}}}), encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = AutoTokenizer.from_pretrained(str(tmp_path))
    hf = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    folder = pymtok.load(tmp_path)
    for tok in (folder, pymtok.load(folder.save(tmp_path / "saved.mtok"))):
        for text in ("a<x>b", "a <x> b", " <x> ", "<s>ab"):
            ids = theirs(text)["input_ids"]
            assert tok(text)["input_ids"] == ids, text
            assert tok.decode(ids, skip_special_tokens=True) == theirs.decode(ids, skip_special_tokens=True), text
            assert tok.encode(text) == hf.encode(text).ids, text


@pytest.mark.parametrize("config", [
    # added_tokens_decoder holds a named token other than tokenizer.json does (lstrip), or one it lacks
    {"mask_token": "hello", "added_tokens_decoder": {"6": {"content": "hello", "lstrip": True, "rstrip": False,
                                                           "single_word": False, "normalized": True, "special": False}}},
    {"mask_token": "<m>", "added_tokens_decoder": {"7": {"content": "<m>", "lstrip": False, "rstrip": False,
                                                         "single_word": False, "normalized": False, "special": True}}},
    # one token named twice, with different flags
    {"pad_token": "<x>", "extra_special_tokens": [{"__type": "AddedToken", "content": "<x>", "lstrip": False,
                                                   "rstrip": False, "single_word": False, "normalized": True}]},
])
def test_config_special_tokens_pymtok_does_not_model_raise(config: dict[str, Any], tmp_path: Any) -> None:
    """transformers' side of the API raises; HF tokenizers' runs tokenizer.json as it is, a .mtok too."""
    from tokenizers import AddedToken, Tokenizer, models

    hf = Tokenizer(models.BPE({"<unk>": 0, "a": 1}, [], unk_token="<unk>"))
    hf.add_tokens([AddedToken("hello", special=False)])
    hf.save(str(tmp_path / "tokenizer.json"))
    hf = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    folder = pymtok.load(tmp_path)
    for tok in (folder, pymtok.load(folder.save(tmp_path / "saved.mtok"))):
        assert tok.encode("a hello a") == hf.encode("a hello a").ids
        assert tok.id_to_token(2) == hf.id_to_token(2)
        for call in (lambda: tok("a"), lambda: tok.decode([1]), lambda: len(tok)):
            with pytest.raises(pymtok.FormatError, match="does not model"):
                call()
