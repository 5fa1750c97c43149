"""Hostile files and hostile input (issue 11): a clear pymtok exception, never a crash, a hang, a
foreign exception or a wrong id; the native and pure paths (the suite runs on both) answer alike.

Each case is compared with HF ``tokenizers`` on the same ``tokenizer.json`` text where HF has an
answer: it loads and gives these ids, or it refuses the file.
"""

from __future__ import annotations

import copy
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from tokenizers import Tokenizer as HFTokenizer

import pymtok
from conftest import fixture_path
from pymtok import backtracking
from pymtok.errors import FormatError
from pymtok.legacy import read_txt
from pymtok.mtok import dumps_mtok, read_mtok
from pymtok.tokenizer import TokenizerMeta

TEXTS = ["a", "a b", " a  b c ", "zz a", "ab ba", ""]


def wordpiece(**fields: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
        "normalizer": None, "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": None,
        "decoder": None,
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": {"[UNK]": 0, "a": 1, "b": 2, "##b": 3}},
    }
    config.update(fields)
    return config


def bpe(**fields: Any) -> dict[str, Any]:
    model = {"type": "BPE", "vocab": {"<unk>": 0, "a": 1, "b": 2, "ab": 3, "z": 4}, "merges": ["a b"],
             "unk_token": "<unk>", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False}
    return wordpiece(model=model, **fields)


def unigram(**fields: Any) -> dict[str, Any]:
    model = {"type": "Unigram", "vocab": [["<unk>", 0.0], ["a", -1.0], ["b", -2.0], ["ab", -1.5]],
             "unk_id": 0, "byte_fallback": False}
    return wordpiece(model=model, **fields)


def added(id: Any = 5, **fields: Any) -> dict[str, Any]:
    token = {"id": id, "content": "<x>", "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True}
    token.update(fields)
    return token


def hf_answer(text: str) -> HFTokenizer | None:
    """HF's tokenizer for a tokenizer.json text, or None when HF refuses it."""
    try:
        return HFTokenizer.from_str(text)
    except Exception:
        return None


def load(tmp_path: Path, text: str | bytes) -> pymtok.Tokenizer:
    path = tmp_path / "tokenizer.json"
    if isinstance(text, str):
        path.write_text(text, encoding="utf-8")
    else:
        path.write_bytes(text)
    return pymtok.load(path)


def check(tmp_path: Path, text: str, texts: list[str] = TEXTS) -> None:
    """Ours and HF agree on ``text``: both refuse it (ours with a FormatError naming the file),
    or both load it and give the same ids for each of ``texts`` (or both fail on it)."""
    hf = hf_answer(text)
    if hf is None:
        with pytest.raises(FormatError, match="tokenizer.json"):
            load(tmp_path, text)
        return
    ours = load(tmp_path, text)
    for t in texts:
        try:
            expected = hf.encode(t).ids
        except Exception:  # HF fails on this text (a missing unk token)
            with pytest.raises(FormatError):
                ours.encode(t)
            continue
        assert ours.encode(t) == expected, t


# -- Metaspace: U+0000 is a replacement like any other -------------------------------------------

@pytest.mark.parametrize("scheme", ["always", "first", "never"])
@pytest.mark.parametrize("replacement", ["\u0000", "\u2581", "_"])
def test_metaspace_replacement(tmp_path: Path, replacement: str, scheme: str) -> None:
    vocab = {"<unk>": 0, "a": 5, replacement: 2, "b": 3, replacement + "a": 6}
    model = {"type": "BPE", "vocab": vocab, "merges": [f"{replacement} a"], "unk_token": "<unk>",
             "fuse_unk": False, "byte_fallback": False, "ignore_merges": False}
    pre = {"type": "Metaspace", "replacement": replacement, "prepend_scheme": scheme, "split": True}
    text = json.dumps(wordpiece(model=model, pre_tokenizer=pre))
    assert hf_answer(text) is not None
    check(tmp_path, text, ["a", "a b", " a", "b a  a", ""])


# -- JSON: nesting, numbers, text ---------------------------------------------------------------

def nested_sequence(depth: int) -> str:
    # built as text: json.dumps itself recurses too deeply for the deepest cases
    inner = '{"type": "Sequence", "normalizers": [' * depth + '{"type": "Lowercase"}' + "]}" * depth
    return json.dumps(wordpiece(normalizer="N")).replace('"N"', inner)


@pytest.mark.parametrize("depth", [62, 63, 450, 900, 5000])
def test_deeply_nested_sequence(tmp_path: Path, depth: int) -> None:
    check(tmp_path, nested_sequence(depth))


@pytest.mark.parametrize("depth", [125, 126, 2000])
def test_deeply_nested_array_in_ignored_field(tmp_path: Path, depth: int) -> None:
    text = json.dumps(wordpiece(normalizer={"type": "Lowercase", "note": "N"}))
    check(tmp_path, text.replace('"N"', "[" * depth + "]" * depth))


@pytest.mark.parametrize("literal", [
    "1" + "0" * 5000, "1" + "0" * 30, "1e400", "-1e400", "1e-400", "1e" + "9" * 5000, "1e-" + "9" * 5000,
    "NaN", "Infinity", "-Infinity", "-0", r'"\ud800"', r'"\udc00x"', r'"\ud83d\ude00"', r'"\\ud800"',
])
def test_json_values_in_ignored_field(tmp_path: Path, literal: str) -> None:
    text = json.dumps(wordpiece(normalizer={"type": "Lowercase", "note": "N"}))
    check(tmp_path, text.replace('"N"', literal))


def test_lone_surrogate_in_vocabulary(tmp_path: Path) -> None:
    check(tmp_path, json.dumps(wordpiece()).replace('"##b"', r'"\udfff"'))


@pytest.mark.parametrize("base", ["\u65e5", "\U0001f600"], ids=["2-byte str", "4-byte str"])
def test_lone_surrogate_in_text_is_named_where_it_is(base: str) -> None:
    """The native core looks for surrogates a block of code units at a time: one at any place in a
    block, or after a whole number of blocks, is the one reported, as the pure path reports it."""
    tok = pymtok.Tokenizer.from_config(bpe(normalizer={"type": "NFC"}))
    for at in [*range(0, 40), 63, 64, 65, 127, 128, 129]:
        for surrogate in ("\ud800", "\udbff", "\udc00", "\udfff"):
            text = base * at + surrogate + base * 3
            with pytest.raises(ValueError, match=f"lone surrogate '\\\\u{ord(surrogate):x}' at index {at};"):
                tok.encode(text)
    # the code points around the surrogates are text
    assert tok.encode("\ud7ff\ue000" * 40)


@pytest.mark.parametrize("base", ["ab \u65e5 ", "ab \U0001f600 "], ids=["2-byte str", "4-byte str"])
def test_lone_surrogate_in_a_long_text_is_named_where_it_is(base: str) -> None:
    """A text long enough to be encoded a part at a time, each part looked at for surrogates as
    it is read: the first surrogate is the one named, in whichever part it is, after parts
    encoded with none, as the pure path names it; the same text without it encodes."""
    tok = pymtok.Tokenizer.from_config(bpe(normalizer={"type": "NFC"}))
    text = base * 20_000
    assert tok.encode(text)
    for at in (0, 5, 8191, 8192, 8193, 50_000, len(text) - 1):
        for second in (at + 1, at + 30_000):
            spoilt = text[:at] + "\udc00" + text[at + 1:second] + "\ud800" + text[second + 1:]
            with pytest.raises(ValueError, match=f"lone surrogate '\\\\udc00' at index {at};"):
                tok.encode(spoilt)


def test_not_utf8(tmp_path: Path) -> None:
    data = json.dumps(wordpiece()).encode("utf-8").replace(b'"##b"', b'"\xff"')
    with pytest.raises(FormatError, match="tokenizer.json.*not UTF-8"):
        load(tmp_path, data)


# -- ids: u32, as HF reads them -------------------------------------------------------------------

ID_LITERALS = ["-7", "1.5", "1e100", str(2**63), str(2**32), str(2**32 - 1), str(2**31), "3.0", "-0",
               "true", '"3"', "null", "[3]"]


@pytest.mark.parametrize("literal", ID_LITERALS)
@pytest.mark.parametrize("make", [wordpiece, bpe])
def test_vocabulary_id(tmp_path: Path, make: Any, literal: str) -> None:
    text = json.dumps(make()).replace('"b": 2', '"b": ' + literal)
    check(tmp_path, text)


@pytest.mark.parametrize("literal", ID_LITERALS)
def test_added_token_id(tmp_path: Path, literal: str) -> None:
    text = json.dumps(wordpiece(added_tokens=[added(id="ID")])).replace('"ID"', literal)
    check(tmp_path, text, [*TEXTS, "a<x>b", "<x>"])


@pytest.mark.parametrize("field", ["id", "content", "special", "single_word", "lstrip", "rstrip", "normalized"])
@pytest.mark.parametrize("value", ["DROP", None, 1, "x"])
def test_added_token_fields(tmp_path: Path, field: str, value: Any) -> None:
    token = added()
    if value == "DROP":
        del token[field]
    else:
        token[field] = value
    check(tmp_path, json.dumps(wordpiece(added_tokens=[token])), [*TEXTS, "a<x>b"])


JUNK: list[Any] = ["DROP", None, -1, 0, 1, 1.5, "", "x", [], {}, True, False, 2**40]
MODEL_FIELDS = [
    (bpe, "dropout"), (bpe, "unk_token"), (bpe, "continuing_subword_prefix"), (bpe, "end_of_word_suffix"),
    (bpe, "fuse_unk"), (bpe, "byte_fallback"), (bpe, "ignore_merges"), (bpe, "merges"),
    (wordpiece, "unk_token"), (wordpiece, "continuing_subword_prefix"), (wordpiece, "max_input_chars_per_word"),
    (unigram, "unk_id"), (unigram, "byte_fallback"),
]


@pytest.mark.parametrize(("make", "field"), MODEL_FIELDS)
def test_model_fields(tmp_path: Path, make: Any, field: str) -> None:
    """Every junk value of a model field: refused where HF refuses it, the same ids elsewhere.

    Refused on purpose where HF loads: ``dropout`` 1 (dropout is random)."""
    for value in JUNK:
        config = make()
        if value == "DROP":
            config["model"].pop(field, None)
        else:
            config["model"][field] = value
        if field == "dropout" and value == 1:
            with pytest.raises(FormatError, match="dropout"):
                load(tmp_path, json.dumps(config))
            continue
        check(tmp_path, json.dumps(config))


@pytest.mark.parametrize("entry", [["a", "1"], ["a", True], ["a", None], ["a", 1], ["a", 2**70], ["a"],
                                   ["a", 1, 2], "a", 5, [5, 1.0], {"a": 1}, ["a", [1.0]]])
def test_unigram_entry(tmp_path: Path, entry: Any) -> None:
    config = unigram()
    config["model"]["vocab"][1] = entry
    check(tmp_path, json.dumps(config))


@pytest.mark.parametrize("merge", [["a", "b"], "a b", "a  b", " a b", "a b c", ["a"], ["a", "b", "c"], [1, 2],
                                   "zz b", "a z", "a", 5, None, [["a"], ["b"]]])
def test_bpe_merge(tmp_path: Path, merge: Any) -> None:
    config = bpe()
    config["model"]["merges"] = [merge]
    check(tmp_path, json.dumps(config))


def test_more_steps_than_the_native_core_holds(tmp_path: Path) -> None:
    pre = {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}] * 40}
    check(tmp_path, json.dumps(wordpiece(pre_tokenizer=pre)))


# -- WordPiece without its unk token ----------------------------------------------------------------

def test_wordpiece_unk_not_in_vocabulary(tmp_path: Path) -> None:
    """A tokenizer.json loads as in HF, which fails at the first word it cannot cut; a .mtok is
    refused at load, and not written: MNN's runtime would give such a word the id -1."""
    config = wordpiece()
    config["model"]["unk_token"] = "<nope>"
    hf = hf_answer(json.dumps(config))
    assert hf is not None
    with pytest.raises(Exception, match="Missing \\[UNK\\] token"):
        hf.encode("zz")
    check(tmp_path, json.dumps(config), ["a b ab", "zz", "a zz"])
    with pytest.raises(FormatError, match="'<nope>' is not in the vocabulary"):
        dumps_mtok(config, TokenizerMeta())
    # the same file as a writer that checked nothing would write it: its unk token renamed
    config["model"]["unk_token"] = "[UNK]"
    data = dumps_mtok(config, TokenizerMeta())
    at = data.index(b"[UNK]")
    path = tmp_path / "tokenizer.mtok"
    path.write_bytes(data[:at] + b"<NOP>" + data[at + 5:])
    with pytest.raises(FormatError, match="tokenizer.mtok.*'<NOP>' is not in the vocabulary"):
        pymtok.load(path)


# -- files that are not regular files ----------------------------------------------------------------

def refused_at_once(call: Any, path: Path, match: str) -> None:
    """``call(path)`` raises FormatError naming the path; a thread, so that a regression (an open
    that blocks on a FIFO) fails the test instead of hanging the suite."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            call(path)
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(120)
    assert outcome, f"{call.__name__}({path}) blocked"
    assert isinstance(outcome[0], FormatError), outcome[0]
    assert str(path) in str(outcome[0]) and match in str(outcome[0])


@pytest.mark.parametrize("call", [pymtok.load, read_mtok, read_txt])
def test_fifo_and_directory(tmp_path: Path, call: Any) -> None:
    fifo = tmp_path / "tokenizer.mtok"
    os.mkfifo(fifo)
    refused_at_once(call, fifo, "is a FIFO")
    if call is not pymtok.load:  # load() searches a folder
        refused_at_once(call, tmp_path, "is a directory")
    if Path("/dev/zero").exists():
        refused_at_once(call, Path("/dev/zero"), "is a character device")
    with pytest.raises(FileNotFoundError):
        call(tmp_path / "missing.mtok")


def test_folder_skips_what_is_not_a_file(tmp_path: Path) -> None:
    (tmp_path / "tokenizer.json").mkdir()
    os.mkfifo(tmp_path / "tokenizer.mtok")
    (tmp_path / "additional_chat_templates").mkdir()
    os.mkfifo(tmp_path / "additional_chat_templates" / "x.jinja")
    (tmp_path / "tokenizer.txt").write_text("not a tokenizer\n")
    with pytest.raises(FormatError, match="tokenizer.txt"):
        pymtok.load(tmp_path)


# -- patterns that backtrack catastrophically ------------------------------------------------------------

HOSTILE = "(a|aa)+$"
# Backtracking of the order of fib(80) steps: any bound trips, however fast the machine
HOSTILE_TEXT = "a" * 80 + "b"


@pytest.fixture
def short_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    # the bound's value is not under test; a short one keeps the test fast
    monkeypatch.setattr(backtracking, "TIMEOUT", 0.01)


@pytest.mark.parametrize("behavior", ["Isolated", "Removed", "MergedWithPrevious"])
def test_split_pattern_backtracking(short_bound: None, behavior: str) -> None:
    pre = {"type": "Split", "pattern": {"Regex": HOSTILE}, "behavior": behavior, "invert": False}
    tok = pymtok.Tokenizer.from_config(wordpiece(pre_tokenizer=pre))
    hf = HFTokenizer.from_str(json.dumps(wordpiece(pre_tokenizer=pre)))
    for text in ("a b", "aab ab", "a" * 12):  # short enough for HF's Oniguruma
        assert tok.encode(text) == hf.encode(text).ids
    with pytest.raises(FormatError, match=r"Split pattern '\(a\|aa\)\+\$' backtracks"):
        tok.encode(HOSTILE_TEXT)
    with pytest.raises(FormatError, match="backtracks"):
        tok.encode_batch(["a", HOSTILE_TEXT])


def test_replace_pattern_backtracking(short_bound: None) -> None:
    norm = {"type": "Replace", "pattern": {"Regex": HOSTILE}, "content": "b"}
    tok = pymtok.Tokenizer.from_config(wordpiece(normalizer=norm))
    hf = HFTokenizer.from_str(json.dumps(wordpiece(normalizer=norm)))
    for text in ("a b", "aab ab", "a" * 12):
        assert tok.encode(text) == hf.encode(text).ids
    with pytest.raises(FormatError, match=r"normalizer Replace pattern '\(a\|aa\)\+\$' backtracks"):
        tok.encode(HOSTILE_TEXT)
    with pytest.raises(FormatError, match="backtracks"):
        tok.encode_batch(["a", HOSTILE_TEXT])


def test_decoder_replace_pattern_backtracking(short_bound: None) -> None:
    config = wordpiece(decoder={"type": "Replace", "pattern": {"Regex": HOSTILE}, "content": "b"})
    config["model"]["vocab"][HOSTILE_TEXT] = 9
    tok = pymtok.Tokenizer.from_config(config)
    hf = HFTokenizer.from_str(json.dumps(config))
    assert tok.decode([1, 2, 1]) == hf.decode([1, 2, 1])
    with pytest.raises(FormatError, match=r"decoder Replace pattern '\(a\|aa\)\+\$' backtracks"):
        tok.decode([9])


@pytest.mark.parametrize("pattern", [HOSTILE, r"(a+)+$", r"(?:a*)*b", r"(\w+\s?)+$", r"a*a*a*b", r"(a)\1",
                                     r"(?<n>a)\k<n>", r"(a|b){2,}", r"(?x) a", r"(a?a?)+", "(", ")", "[a"])
def test_patterns_that_get_the_bound(pattern: str) -> None:
    assert backtracking.may_backtrack(pattern)


def test_shipped_patterns_run_unbounded() -> None:
    """Every Split and Replace pattern of the real tokenizers runs without the bound (whose clock
    read per match would slow it down), as do the patterns pymtok writes itself."""
    from pymtok.native import SCANNERS

    found = list(SCANNERS)
    for path in sorted((fixture_path("tokenizers")).glob("*/tokenizer.json")):
        found += _regexes(json.loads(path.read_text(encoding="utf-8")))
    found += [" {2,}", r"(?<![\s\S]) +", r"[^(\s|[.,!?…。，、।۔،])]+", r"\p{N}{1,3}", r"[[:alpha:]]+"]
    assert len(found) > 15
    assert [p for p in found if backtracking.may_backtrack(p)] == []


def _regexes(node: Any) -> list[str]:
    if isinstance(node, dict):
        own = [node["pattern"]["Regex"]] if isinstance(node.get("pattern"), dict) and "Regex" in node["pattern"] else []
        return own + [p for k, v in node.items() if k not in ("vocab", "merges") for p in _regexes(v)]
    if isinstance(node, list):
        return [p for v in node for p in _regexes(v)]
    return []


def test_deep_config_dict_is_a_format_error() -> None:
    config = copy.deepcopy(wordpiece())
    inner: dict[str, Any] = {"type": "Lowercase"}
    for _ in range(2000):
        inner = {"type": "Sequence", "normalizers": [inner]}
    config["normalizer"] = inner
    with pytest.raises(FormatError):
        pymtok.Tokenizer.from_config(config)
