"""Forged and contradictory ``.mtok`` files: the native and the pure reader are one contract.

Real files are exported from the fixtures, then edited as an attacker would (tests/mtok_mutations.py)
with the stored index's CRC-32 recomputed, so that each edit gets past the checksum to the checks
behind it. Both readers must then reach the same decision (load, or FormatError naming section and
byte), and a file both load must give the same ids. The one exception is written down in
docs/FORMAT_EXTENSION.md: the stored join filter (and its ▁ flag) is taken on trust, so a forged
one may change ids, but never the decision. Each batch runs in a child process, so that a crash
or a hang fails the test instead of killing the run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
from conftest import fixture_path

import pymtok
from pymtok.mtok import dumps_mtok, read_mtok

pytest.importorskip("pymtok._native")

TESTS = Path(__file__).parent


@pytest.fixture(autouse=True)
def _native_writer(monkeypatch: pytest.MonkeyPatch) -> None:
    # the native core writes the stored index; the children pick each reader themselves
    monkeypatch.setenv("PYMTOK_PURE", "0")

# The child: read each mutant with both readers, report every disagreement and anything that is
# neither ids nor FormatError.
DIFFERENTIAL = """
import json, sys
sys.path.insert(0, sys.argv[1])
import mtok_mutations as mm
from pymtok.mtok import loads_mtok
source = open(sys.argv[2], "rb").read()
kinds = {"records": mm.RECORD_MUTATIONS, "index": mm.INDEX_MUTATIONS, "trusted": mm.TRUSTED_MUTATIONS}
report = {"bad": [], "loaded": 0, "refused": 0, "adopted": 0}
for what, data in mm.mutants(source, kinds[sys.argv[3]], int(sys.argv[4]), int(sys.argv[5])):
    native, pure = mm.verdict(data, pure=False), mm.verdict(data, pure=True)
    same_ids = native[1] == pure[1] or sys.argv[3] == "trusted"
    if native[0] not in ("ids", "FormatError") or native[0] != pure[0] or (native[0] == "ids" and not same_ids):
        report["bad"].append([what, str(native)[:300], str(pure)[:300]])
    elif native[0] == "FormatError" and not all(" at byte " in v[1] and "mutated.mtok" in v[1] for v in (native, pure)):
        report["bad"].append([what, "message names no file, section or byte", native[1], pure[1]])
    report["loaded" if native[0] == "ids" else "refused"] += 1
    if native[0] == "ids":
        report["adopted"] += loads_mtok(data).model.vocab.tables.stored_index
print(json.dumps(report))
"""


@cache
def _source(name: str) -> bytes:
    """A real file as pymtok exports it: a fixture tokenizer, or one of MNN's own toy files."""
    if name.startswith("mnn-toy/"):
        tok = read_mtok(fixture_path("mnn-toy", name.split("/")[1]))
    else:
        tok = pymtok.load(fixture_path("tokenizers", name, "tokenizer.json"))
    return dumps_mtok(tok.config, tok.meta)


def _differential(tmp_path: Path, name: str, kind: str, n: int, seed: int) -> dict:
    source = tmp_path / "source.mtok"
    source.write_bytes(_source(name))
    proc = subprocess.run(
        [sys.executable, "-c", DIFFERENTIAL, str(TESTS), str(source), kind, str(n), str(seed)],
        capture_output=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    report: dict = json.loads(proc.stdout)
    assert report["bad"] == [], "\n".join(map(str, report["bad"][:10]))
    return report


# (source, mutations per kind): MNN's toys are small, so many; Mistral is a real 32k char-level
# model (its index holds the per-character tables), whose pure reading takes most of a second.
SOURCES = [("mnn-toy/llama.mtok", 150), ("mnn-toy/bytebpe.mtok", 150), ("mistral-7b-v0.1", 8)]


@pytest.mark.parametrize("name,n", SOURCES)
def test_contradictory_records_get_one_verdict(tmp_path: Path, name: str, n: int) -> None:
    report = _differential(tmp_path, name, "records", n, seed=11)
    # the mutations make both kinds of file: ones the readers refuse and legal ones they load
    assert report["refused"] and report["loaded"]


@pytest.mark.parametrize("name,n", SOURCES)
def test_forged_index_never_changes_the_verdict_or_the_ids(tmp_path: Path, name: str, n: int) -> None:
    report = _differential(tmp_path, name, "index", n, seed=12)
    # the records are untouched: every file loads, through its index where that is still sound
    assert report["refused"] == 0 and report["loaded"] == n
    if n > 50:
        assert report["adopted"], "no forged index passed the checks: the test exercises only the fallback"


def test_forged_join_filter_never_changes_the_verdict(tmp_path: Path) -> None:
    report = _differential(tmp_path, "mistral-7b-v0.1", "trusted", 3, seed=13)
    assert report["loaded"] == 3


def test_sources_adopt_their_index() -> None:
    # otherwise the forgeries above would only ever test the rebuild
    from pymtok.mtok import loads_mtok

    for name, _ in SOURCES:
        assert loads_mtok(_source(name)).model.vocab.tables.stored_index, name


# Issue 11's reproductions, each in a child process with a time limit: a merge slot holding
# only tag bits (read as merge 0xFFFFFFFF), and every empty merge or token slot holding tag bits
# (a probe that never ends, in encode or already in load).
ISSUE_CASES = """
import sys
sys.path.insert(0, sys.argv[1])
import random, struct
import mtok_mutations as mm
from pymtok.mtok import loads_mtok
source = open(sys.argv[2], "rb").read()
reference = loads_mtok(source)
lay = mm.layout(source)
h = lay.head(source)
for table, mask in (("mslots", h[8]), ("slots", h[5])):
    lo, hi = lay.regions(source)[table]
    words = [struct.unpack_from("<I", source, lay.index_word(k))[0] for k in range(lo, hi)]
    empty = [k for k, w in zip(range(lo, hi), words) if not w & mask]
    for chosen in (empty[:1], empty):
        data = bytearray(source)
        for k in chosen:
            struct.pack_into("<I", data, lay.index_word(k), ~mask & 0xFFFFFFFF)
        mm.recompute_crc(data, lay)
        tok = loads_mtok(bytes(data))
        for text in ("qz", "Hello world, qz", "日本語 ▁x"):
            assert tok.encode(text) == reference.encode(text), (table, len(chosen), text)
print("ok")
"""


@pytest.mark.parametrize("name", ["mnn-toy/llama.mtok", "mistral-7b-v0.1"])
def test_tag_only_slots_are_empty_slots(tmp_path: Path, name: str) -> None:
    source = tmp_path / "source.mtok"
    source.write_bytes(_source(name))
    proc = subprocess.run(
        [sys.executable, "-c", ISSUE_CASES, str(TESTS), str(source)], capture_output=True, timeout=300
    )
    assert proc.returncode == 0 and proc.stdout.strip() == b"ok", proc.stderr.decode(errors="replace")[-2000:]


# Inputs the fuzz harness (fuzz/mtok_fuzz.py) found against earlier versions, and issue 11's
# cases, all made from a tokenizer of our own: each read by both readers in a child process.
REGRESSIONS = sorted((TESTS.parent / "fuzz" / "regressions").glob("*.mtok"))
REPLAY = """
import json, sys
sys.path.insert(0, sys.argv[1])
import mtok_mutations as mm
bad = []
for name in sys.argv[2:]:
    data = open(name, "rb").read()
    native, pure = mm.verdict(data, pure=False), mm.verdict(data, pure=True)
    if native[0] not in ("ids", "FormatError") or native != pure and not (native[0] == pure[0] == "FormatError"):
        bad.append([name, str(native)[:300], str(pure)[:300]])
print(json.dumps(bad))
"""


def test_fuzz_regressions_get_one_verdict() -> None:
    assert REGRESSIONS
    proc = subprocess.run(
        [sys.executable, "-c", REPLAY, str(TESTS), *map(str, REGRESSIONS)], capture_output=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    assert json.loads(proc.stdout) == []
