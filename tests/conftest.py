"""Shared test plumbing: where the real-model fixtures live, the oracles, corpus sampling, tiers.

The fixtures are never part of the repository. ``PYMTOK_FIXTURES`` names the directory (``.ci/run``
points it at ``../shared/fixtures``); when it is unset the real-model tests are skipped with a
message saying how to get the files, and when it is set but files are missing the tests fail.

Two tiers. The default (fast) one runs every test but those marked ``slow``, each corpus sample
cut to a quarter (no fewer than 150 chunks) and each hypothesis test to a quarter of its examples
(no fewer than 20, or the count the test gives for the fast tier); ``--full`` runs everything,
samples at full size. ``.ci/run`` runs both.

A test stays cheap by naming its fixture among its parameters (the scheduler then runs it with
that model's other tests), taking the loaded tokenizers from ``ours``, ``hf_tokenizer``,
``auto_tokenizer``, ``exported_mtok`` and ``exported_tokenizer`` rather than loading its own,
and sizing its samples with ``corpus_chunks`` and ``examples``. The tests naming no fixture are
spread one by one over the workers, between other modules' tests: what they share is cached
for the session (a module-scoped fixture would be made again each time its module comes back).
"""

from __future__ import annotations

import functools
import itertools
import os
import random
from pathlib import Path
from typing import Any

import pytest

HOW_TO_GET = (
    "real-model fixtures not configured: set PYMTOK_FIXTURES to a directory laid out like "
    "README.md 'Test fixtures' describes (tokenizers/NAME/tokenizer.json downloaded from the "
    "Hugging Face Hub, legacy/, golden/llama.cpp/) and PYMTOK_CORPUS to a folder of UTF-8 text"
)

TOKENIZER_NAMES = [
    "albert-base-v2", "all-minilm-l6-v2", "bert-base-chinese", "chatglm3-6b", "clip-vit",
    "deepseek-v3", "falcon", "gemma-v1", "gpt-4o", "llama3", "mistral-7b-v0.1", "phi-3-mini",
    "qwen3", "roberta-base", "t5-small",
]

# llama.cpp golden vocab name -> fixture folder (see the fixtures README)
GOLDEN_FOR = {
    "phi-3-mini": ["phi-3", "llama-spm"], "llama3": ["llama-bpe"], "qwen3": ["qwen2"],
    "falcon": ["falcon"], "roberta-base": ["roberta-bpe"], "all-minilm-l6-v2": ["bert-bge"],
}


FULL_SAMPLES = False


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--full", action="store_true",
                     help="the full tier: also the tests marked slow, and full-size corpus samples")


def pytest_configure(config: pytest.Config) -> None:
    global FULL_SAMPLES
    FULL_SAMPLES = config.getoption("--full")


def model_of(nodeid: str) -> str | None:
    """The fixture a test runs on: the first of its parameters' ids that names one."""
    if "[" not in nodeid:
        return None
    params = "-" + nodeid[nodeid.index("[") + 1 : nodeid.rindex("]")] + "-"
    found = [(params.find(f"-{name}-"), name) for name in TOKENIZER_NAMES if f"-{name}-" in params]
    return min(found)[1] if found else None


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    # One worker runs all of a model's tests, one after another (``--dist loadgroup``, set in
    # pyproject.toml), module by module: a model's tokenizers and oracles are then loaded once a
    # run (the session caches below hold the last few), not once a module on each worker.
    # The groups are read off the test ids here, in the controller: xdist 3.8 tells it a worker's
    # xdist_group marks through the test ids, which pytest 9.2 no longer lets it rewrite
    # (pytest-dev/pytest-xdist#1386), so the marks alone leave every test a group of its own.
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class ByModel(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return model_of(nodeid) or super()._split_scope(nodeid)

    return ByModel(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--full"):
        return
    skip = pytest.mark.skip(reason="slow: run by the full tier (pytest --full)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def slow_for(names: list[str], *slow: str) -> list[Any]:
    """``names`` as parameters, those in ``slow`` marked slow (covered by other fast tests)."""
    return [pytest.param(name, marks=pytest.mark.slow) if name in slow else name for name in names]


def examples(count: int, fast: int | None = None) -> int:
    """A hypothesis test's ``max_examples``: ``count`` in the full tier; in the fast one ``fast``
    (for a test whose every example takes long), else a quarter, no fewer than 20."""
    if FULL_SAMPLES:
        return count
    return min(count, fast if fast is not None else max(count // 4, 20))


@pytest.fixture(scope="session")
def exported_mtok(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """NAME (, mnn_identical) -> the .mtok pymtok exports for the fixture folder, written once a
    worker for every module (a large vocabulary's export takes seconds, more on the pure path)."""
    from pymtok.export import export

    root = tmp_path_factory.mktemp("exported")

    @functools.cache
    def get(name: str, mnn_identical: bool = False) -> Path:
        out = root / f"{name}-{'identical' if mnn_identical else 'device'}"
        path = export(fixture_path("tokenizers", name), out, mnn_identical=mnn_identical)
        assert path == out / "tokenizer.mtok"
        return path

    return get


@pytest.fixture(scope="session")
def exported_tokenizer(exported_mtok: Any) -> Any:
    """NAME (, mnn_identical) -> pymtok's reading of ``exported_mtok``'s file, shared by the tests
    as ``ours`` is (a large vocabulary's reading takes seconds on the pure path)."""
    from pymtok.mtok import read_mtok

    @functools.lru_cache(maxsize=2)
    def get(name: str, mnn_identical: bool = False) -> Any:
        return read_mtok(exported_mtok(name, mnn_identical))

    return get


def full_tier() -> bool:
    """Whether this is the full tier (``--full``), for sizes ``examples`` and ``corpus_chunks`` do not set."""
    return FULL_SAMPLES


def fixtures_dir() -> Path:
    env = os.environ.get("PYMTOK_FIXTURES")
    if not env:
        pytest.skip(HOW_TO_GET)
    # absolute: tests hand these paths to subprocesses in other folders and make symlinks to them
    path = Path(env).resolve()
    if not (path / "tokenizers").is_dir():
        pytest.fail(f"PYMTOK_FIXTURES={env} has no tokenizers/ folder")
    return path


def fixture_path(*parts: str) -> Path:
    path = fixtures_dir().joinpath(*parts)
    if not path.exists():
        pytest.fail(f"fixture missing: {path}")
    return path


def corpus_dir() -> Path:
    env = os.environ.get("PYMTOK_CORPUS")
    path = Path(env).resolve() if env else fixtures_dir().parent / "corpus"
    if not path.is_dir():
        pytest.fail(f"corpus folder missing: {path} (set PYMTOK_CORPUS)")
    return path


@functools.lru_cache(maxsize=None)
def corpus_files() -> tuple[tuple[str, str], ...]:
    return tuple(
        (p.name, p.read_text(encoding="utf-8"))
        for p in sorted(corpus_dir().glob("*.txt"))
        if p.name != "README.md"
    )


def corpus_chunks(count: int, seed: int = 0) -> list[str]:
    """``count`` chunks drawn from every corpus file: whole lines, paragraphs, random windows.

    In the fast tier a quarter as many, but no fewer than 150 (some from every file, cut each
    way). Windows are cut at code point boundaries (Python strings cannot split a character).
    """
    rng = random.Random(seed)
    files = corpus_files()
    if not FULL_SAMPLES:
        count = min(count, max(count // 4, 150))
    out: list[str] = []
    per_file = -(-count // len(files))
    for _name, text in files:
        lines = text.split("\n")
        paras = text.split("\n\n")
        for k in range(per_file):
            kind = k % 3
            if kind == 0:
                out.append(rng.choice(lines))
            elif kind == 1:
                out.append(rng.choice(paras)[:4000])
            else:
                start = rng.randrange(len(text))
                out.append(text[start : start + rng.randint(1, 600)])
    return out


def golden_cases(fixture_name: str) -> list[tuple[str, list[int]]]:
    """(text, HF ids without special tokens) from the llama.cpp vocab tests for a fixture."""
    cases: list[tuple[str, list[int]]] = []
    for vocab in GOLDEN_FOR.get(fixture_name, []):
        base = fixture_path("golden", "llama.cpp", f"ggml-vocab-{vocab}.gguf.inp").with_suffix("")
        # .inp: strings each followed by the marker; .out: one line of ids per string
        inp = Path(str(base) + ".inp").read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")
        outs = Path(str(base) + ".out").read_text(encoding="utf-8").split("\n")
        inp, outs = inp[:-1], outs[: len(inp) - 1]
        assert len(inp) == len(outs), f"{base}: {len(inp)} inputs but {len(outs)} id lines"
        cases.extend((text, [int(x) for x in ids.split()]) for text, ids in zip(inp, outs))
    return cases


def sentencepiece_offsets(processor: Any, text: str) -> list[tuple[int, int, int]]:
    """The oracle's offsets: each piece ``sentencepiece`` gives ``text`` as its id and the span
    of its ``begin`` / ``end`` (UTF-8 byte offsets) in characters; an offset inside a character
    is a KeyError."""
    ends = itertools.accumulate((len(c.encode("utf-8")) for c in text), initial=0)
    char_at = dict(zip(ends, range(len(text) + 1)))
    return [(p.id, char_at[p.begin], char_at[p.end]) for p in processor.encode(text, return_type="proto").pieces]


def call_offsets(tok: Any, text: str) -> list[tuple[int, int, int]]:
    """pymtok's ``tok(text, return_offsets_mapping=True)`` as (id, start, end), no special tokens."""
    got = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    return [(id, start, end) for id, (start, end) in zip(got["input_ids"], got["offset_mapping"])]


# a large vocabulary takes a second to load, several on the pure path; one worker runs a model's
# tests in a row (see pytest_collection_modifyitems), so a few held serve every module
@functools.lru_cache(maxsize=3)
def ours(name: str) -> Any:
    """pymtok on the fixture's tokenizer.json, shared by the tests: one that changes a setting
    sets it back."""
    import pymtok

    return pymtok.load(fixture_path("tokenizers", name))


@functools.lru_cache(maxsize=None)
def hf_tokenizer(name: str):
    """The oracle: HF ``tokenizers`` on the fixture's own tokenizer.json, padding/truncation off."""
    from tokenizers import Tokenizer as HFTokenizer

    tok = HFTokenizer.from_file(str(fixture_path("tokenizers", name, "tokenizer.json")))
    tok.no_padding()
    tok.no_truncation()
    return tok


# with a model's tests in a row on one worker, the last two serve every module that compares
# against transformers; each is hundreds of MB for the large vocabularies
@functools.lru_cache(maxsize=2)
def auto_tokenizer(name: str) -> Any:
    """transformers' tokenizer for the fixture folder as ``AutoTokenizer`` loads it, shared by the
    tests (one that changes it works on a copy); a folder naming remote code (chatglm3-6b) loads
    in ``PreTrainedTokenizerFast``, as that code is not run."""
    import json

    os.environ["HF_HUB_OFFLINE"] = "1"
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    folder = fixture_path("tokenizers", name)
    config_file = folder / "tokenizer_config.json"
    if config_file.is_file() and "auto_map" in json.loads(config_file.read_text(encoding="utf-8")):
        return PreTrainedTokenizerFast.from_pretrained(str(folder))
    return AutoTokenizer.from_pretrained(str(folder))
