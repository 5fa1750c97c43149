"""Pickling, copying and saving: every tokenizer survives pickle, deepcopy and a spawn pool with
the same ids, a ``.mtok`` pickles as its file, and ``save``/``save_pretrained`` give files that
HF ``tokenizers`` and ``transformers.AutoTokenizer`` load to the same ids and prompts."""

from __future__ import annotations

import copy
import functools
import json
import multiprocessing
import operator
import os
import pickle
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import TOKENIZER_NAMES, corpus_chunks, fixture_path, hf_tokenizer, ours, slow_for

import pymtok
from pymtok import legacy
from pymtok.cli import main as cli_main
from pymtok.errors import FormatError

CHUNKS = 40
TEMPLATED = {"chatglm3-6b", "deepseek-v3", "gemma-v1", "llama3", "phi-3-mini", "qwen3"}
REMOTE_CODE = {"chatglm3-6b"}  # AutoTokenizer needs remote code the fixture lacks
CONVERSATIONS: list[list[dict[str, str]]] = [
    [{"role": "user", "content": "Hello!"}],
    [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "Grüße 😀 <|im_end|> & 你好"},
    ],
    [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello, how can I help?"}],
]


@functools.lru_cache(maxsize=None)
def chunks() -> tuple[str, ...]:
    return tuple(corpus_chunks(CHUNKS, seed=7))


def transformers_from(folder: Path, remote_code: bool = False) -> Any:
    os.environ["HF_HUB_OFFLINE"] = "1"
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    if remote_code:
        return transformers.PreTrainedTokenizerFast.from_pretrained(str(folder))
    return transformers.AutoTokenizer.from_pretrained(str(folder))


def ids_of(tok: Any, texts: tuple[str, ...] | list[str]) -> list[list[int]]:
    return [tok.encode(t) for t in texts]


# -- pickle, deepcopy, spawn -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["t5-small", "all-minilm-l6-v2", "mistral-7b-v0.1"])
def test_pickle_and_deepcopy_keep_the_ids(name: str, exported_mtok: Any) -> None:
    expected = [hf_tokenizer(name).encode(t).ids for t in chunks()]
    for tok in (pymtok.load(fixture_path("tokenizers", name)), pymtok.load(exported_mtok(name))):
        assert ids_of(tok, chunks()) == expected
        for again in (pickle.loads(pickle.dumps(tok)), copy.deepcopy(tok)):
            assert type(again.model) is type(tok.model)
            assert ids_of(again, chunks()) == expected
            assert again.meta == tok.meta
            assert again.decode(expected[3]) == tok.decode(expected[3])


def test_legacy_txt_pickles() -> None:
    tok = legacy.read_txt(fixture_path("mnn-toy", "tt.txt"))
    again = pickle.loads(pickle.dumps(tok))
    assert again.encode("xabcdx<|end|>") == tok.encode("xabcdx<|end|>") == [120, 256, 257, 120, 260]


def test_meta_changes_after_load_come_along(tmp_path: Path) -> None:
    tok = pymtok.load(fixture_path("tokenizers", "phi-3-mini"))
    tok.set_chat_template("{{ messages[0]['content'] }}!")
    tok.split_special_tokens = True
    again = pickle.loads(pickle.dumps(tok))
    assert again.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False) == "hi!"
    assert again.encode("<|end|>", add_special_tokens=False) == tok.encode("<|end|>", add_special_tokens=False)
    assert len(again.encode("<|end|>", add_special_tokens=False)) > 1


# the tests naming a model below run with its group (conftest.py), which has exported or loaded it
@pytest.mark.parametrize("name", ["all-minilm-l6-v2"])
def test_a_mtok_pickles_as_its_path_while_the_file_holds_its_bytes(name: str, exported_mtok: Any, tmp_path: Path) -> None:
    path = tmp_path / "tokenizer.mtok"
    shutil.copyfile(exported_mtok(name), path)
    size = path.stat().st_size
    tok = pymtok.load(path)
    ids = ids_of(tok, chunks()[:30])
    by_path = pickle.dumps(tok)
    assert len(by_path) < 2_000  # a path, a digest and the meta ...
    assert ids_of(pickle.loads(by_path), chunks()[:30]) == ids
    # ... until the file changes: then the tokenizer pickles as the bytes it was read from
    moved = tmp_path / "moved.mtok"
    path.rename(moved)
    by_bytes = pickle.dumps(tok)
    assert size <= len(by_bytes) < size + 20_000  # about the file, not a graph of per-token objects
    assert ids_of(pickle.loads(by_bytes), chunks()[:30]) == ids
    # a path pickle whose file has changed since refuses to load rather than read other bytes
    moved.rename(path)
    by_path = pickle.dumps(tok)
    with open(path, "r+b") as f:
        f.seek(size // 2)
        byte = f.read(1)[0]
        f.seek(size // 2)
        f.write(bytes([byte ^ 0xFF]))  # a changed byte, whatever the file holds there
    with pytest.raises(FormatError, match="changed since"):
        pickle.loads(by_path)


@pytest.mark.parametrize("name", ["all-minilm-l6-v2"])
def test_loads_mtok_pickles_as_its_bytes(name: str, exported_mtok: Any) -> None:
    data = exported_mtok(name).read_bytes()
    tok = pymtok.mtok.loads_mtok(data)
    blob = pickle.dumps(tok)
    assert len(data) <= len(blob) < len(data) + 20_000
    assert ids_of(pickle.loads(blob), chunks()[:30]) == ids_of(tok, chunks()[:30])


def test_spawned_workers_get_the_same_ids(exported_mtok: Any) -> None:
    texts = list(chunks()[:40])
    toks = [pymtok.load(fixture_path("tokenizers", "llama3")), pymtok.load(exported_mtok("t5-small"))]
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        results = [pool.apply(operator.methodcaller("encode_batch", texts), (tok,)) for tok in toks]
    for tok, got in zip(toks, results):
        assert got == tok.encode_batch(texts)


@pytest.mark.parametrize("name", ["qwen3"])
def test_components_only_tokenizer_refuses_to_pickle(name: str) -> None:
    tok = ours(name)
    bare = pymtok.Tokenizer(model=tok.model, pre_tokenizer=tok.pre_tokenizer, decoder=tok.decoder)
    with pytest.raises(TypeError, match="built from components"):
        pickle.dumps(bare)


# -- to_dict, save, save_pretrained ------------------------------------------------------------


# MNN's exporter could not export chatglm3-6b (its AutoTokenizer needs remote code)
MNN_EXPORTED = [n for n in TOKENIZER_NAMES if n not in REMOTE_CODE]
# gemma-v1's 256k vocabulary in the full tier; test_mtok.py reads its MNN file in both
@pytest.mark.parametrize("name", slow_for(MNN_EXPORTED, "gemma-v1"))
def test_mnn_exported_files_go_back_to_tokenizer_json(name: str) -> None:
    """MNN's own files (no pymtok extension): the tokenizer.json gives what pymtok reads from them."""
    tokenizers = pytest.importorskip("tokenizers")
    tok = pymtok.load(fixture_path("mnn-exported", name, "tokenizer.mtok"))
    hf = tokenizers.Tokenizer.from_str(tok.to_json())
    hf.no_padding()
    hf.no_truncation()
    for text in chunks():
        assert hf.encode(text).ids == tok.encode(text)


@pytest.mark.parametrize("name", ["roberta-base", "t5-small", "all-minilm-l6-v2"])
def test_save_mtok_round_trips(name: str, exported_mtok: Any, tmp_path: Path) -> None:
    tok = pymtok.load(exported_mtok(name))
    again = pymtok.load(tok.save(tmp_path / "tokenizer.mtok"))
    assert ids_of(again, chunks()) == ids_of(tok, chunks())
    assert again.meta == tok.meta


@pytest.mark.parametrize("name", ["qwen3"])
def test_save_refuses_what_it_cannot_write(name: str, tmp_path: Path) -> None:
    tok = ours(name)
    with pytest.raises(ValueError, match="legacy"):
        tok.save(tmp_path / "tokenizer.txt")
    with pytest.raises(ValueError, match="suffix"):
        tok.save(tmp_path / "tokenizer.bin")


@pytest.mark.parametrize("name", slow_for(TOKENIZER_NAMES, "gemma-v1", "gpt-4o", "llama3", "qwen3", "deepseek-v3"))
def test_save_pretrained_loads_in_transformers(name: str, exported_mtok: Any, tmp_path: Path) -> None:
    """.mtok -> save_pretrained -> AutoTokenizer: HF's ids for the original tokenizer.json, and
    transformers' prompts and special tokens for the original folder."""
    tokenizers = pytest.importorskip("tokenizers")
    tok = pymtok.load(exported_mtok(name))
    json.dumps(tok.to_dict())
    tok.save_pretrained(tmp_path)
    backend = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    backend.no_padding()
    backend.no_truncation()
    saved = transformers_from(tmp_path)
    oracle = hf_tokenizer(name)
    for text in chunks():
        expected = oracle.encode(text).ids
        assert backend.encode(text).ids == expected
        assert saved.encode(text) == expected
        assert saved.encode(text, add_special_tokens=False) == oracle.encode(text, add_special_tokens=False).ids
    original = transformers_from(fixture_path("tokenizers", name), remote_code=name in REMOTE_CODE)
    for text in chunks()[:15]:
        ids = oracle.encode(text).ids
        assert saved.decode(ids) == tok.decode(ids)
        assert saved.decode(ids, skip_special_tokens=True) == tok.decode(ids, skip_special_tokens=True)
    if name not in REMOTE_CODE:
        for key in ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "model_max_length"):
            assert getattr(saved, key) == getattr(original, key), key
    if name in TEMPLATED:
        for messages in CONVERSATIONS:
            for add_generation_prompt in (True, False):
                assert render(saved, messages, add_generation_prompt) == render(original, messages, add_generation_prompt)


def render(hf: Any, messages: list[dict[str, str]], add_generation_prompt: bool) -> str | tuple[str, str]:
    """The prompt, or the error the template raises (Gemma's refuses a system turn)."""
    try:
        prompt: str = hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt)
    except Exception as exc:  # jinja2's TemplateError, whatever the template raises
        return type(exc).__name__, str(exc)
    return prompt


@pytest.mark.parametrize("name", ["qwen3"])
def test_cli_convert_to_json(name: str, exported_mtok: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["convert", str(exported_mtok(name)), "-o", str(tmp_path), "--to", "json"]) == 0
    assert "tokenizer_config.json" in capsys.readouterr().out
    saved = transformers_from(tmp_path)
    oracle = hf_tokenizer(name)
    for text in chunks()[:50]:
        assert saved.encode(text) == oracle.encode(text).ids
