"""Forged and contradictory ``.mtok`` files: the native and the pure reader are one contract.

Real files are exported from the fixtures, then edited as an attacker would (tests/mtok_mutations.py).
Both readers must then reach the same decision (load, or FormatError naming section and byte), and
a file both load must give the same ids. Each batch runs in a child process, so that a crash or a
hang fails the test instead of killing the run.
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


# The child: read each mutant with both readers, report every disagreement and anything that is
# neither ids nor FormatError.
DIFFERENTIAL = """
import json, sys
sys.path.insert(0, sys.argv[1])
import mtok_mutations as mm
source = open(sys.argv[2], "rb").read()
kinds = {"records": mm.RECORD_MUTATIONS, "index": mm.INDEX_MUTATIONS}
report = {"bad": [], "loaded": 0, "refused": 0}
reference = mm.verdict(source, pure=False)
for what, data in mm.mutants(source, kinds[sys.argv[3]], int(sys.argv[4]), int(sys.argv[5])):
    native, pure = mm.verdict(data, pure=False), mm.verdict(data, pure=True)
    if sys.argv[3] == "index" and native != reference:
        report["bad"].append([what, "a stored index changed the ids", str(native)[:300]])
    if native[0] not in ("ids", "FormatError") or native[0] != pure[0] or (native[0] == "ids" and native[1] != pure[1]):
        report["bad"].append([what, str(native)[:300], str(pure)[:300]])
    elif native[0] == "FormatError" and not all(" at byte " in v[1] and "mutated.mtok" in v[1] for v in (native, pure)):
        report["bad"].append([what, "message names no file, section or byte", native[1], pure[1]])
    report["loaded" if native[0] == "ids" else "refused"] += 1
print(json.dumps(report))
"""


def _wide_bpe() -> dict:
    """A byte-level BPE of 12,000 tokens and merges, ids shuffled: with results no guess finds,
    so that both readers look them up in the token table."""
    import random

    from pymtok.byte_level import bytes_to_chars

    rng = random.Random(5)
    tokens = [bytes_to_chars(bytes([b])) for b in range(256)]
    known, merges, lefts = set(tokens), [], list(tokens)
    while len(merges) < 12000:
        a, b = rng.choice(lefts), rng.choice(tokens[:256])
        if a + b not in known:
            known.add(a + b)
            tokens.append(a + b)
            merges.append([a, b])
            if len(a + b) < 8:
                lefts.append(a + b)
    ids = list(range(len(tokens)))
    rng.shuffle(ids)
    step = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    return {"normalizer": None, "pre_tokenizer": step, "decoder": step, "post_processor": None,
            "added_tokens": [], "model": {"type": "BPE", "vocab": dict(zip(tokens, ids)), "merges": merges}}


@cache
def _source(name: str) -> bytes:
    """A real file as pymtok exports it: a fixture tokenizer, one of MNN's own toy files, or the
    wide BPE above."""
    from pymtok.tokenizer import TokenizerMeta

    if name == "wide-bpe":
        return dumps_mtok(_wide_bpe(), TokenizerMeta())
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


# (source, mutations per kind): MNN's toys are small, so many; fewer for the wide BPE and
# Mistral (a real 32k char-level model, whose pure reading takes most of a second).
SOURCES = [("mnn-toy/llama.mtok", 150), ("mnn-toy/bytebpe.mtok", 150), ("wide-bpe", 40), ("mistral-7b-v0.1", 8)]


@pytest.mark.parametrize("name,n", SOURCES)
def test_contradictory_records_get_one_verdict(tmp_path: Path, name: str, n: int) -> None:
    report = _differential(tmp_path, name, "records", n, seed=11)
    # the mutations make both kinds of file: ones the readers refuse and legal ones they load
    assert report["refused"] and report["loaded"]


@pytest.mark.parametrize("name,n", SOURCES)
def test_a_stored_index_of_any_content_is_skipped(tmp_path: Path, name: str, n: int) -> None:
    # earlier pymtok versions stored an index; whatever one holds (issue 11's tag-only slots
    # included), both readers skip it and read the records
    report = _differential(tmp_path, name, "index", n, seed=12)
    assert report["refused"] == 0 and report["loaded"] == n


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


def test_two_faults_close_together_report_the_reader_order() -> None:
    # The native reader reads a record and gives its id and token AHEAD (16) records later
    # (mtok_tables.c scan_vocab): faults in one window must still be reported as a record by
    # record reading reports them, the first bad UTF-8 or id given twice in the file, and a
    # token listed twice only when there is neither. The pure reader refuses each file too.
    import struct

    import mtok_mutations as mm

    source = _source("mnn-toy/bytebpe.mtok")
    lay = mm.layout(source)
    recs = [r for r in lay.records if r[1] >= 2]
    same = next((a, b) for a in range(len(recs)) for b in range(a + 1, len(recs)) if recs[a][1] == recs[b][1])

    def give_id(data: bytearray, k: int, of: int) -> str:
        struct.pack_into("<I", data, recs[k][0] + 2 + recs[k][1], recs[of][2])
        return f"model vocabulary at byte {recs[k][0]}: vocabulary id {recs[of][2]} is given to two tokens"

    def break_utf8(data: bytearray, k: int) -> str:
        data[recs[k][0] + 2] = 0xFF
        return f"model vocabulary at byte {recs[k][0] + 2}: vocabulary token is not valid UTF-8"

    def copy_token(data: bytearray) -> str:
        a, b = recs[same[0]], recs[same[1]]
        data[b[0] + 2 : b[0] + 2 + b[1]] = source[a[0] + 2 : a[0] + 2 + a[1]]
        return f"model vocabulary at byte {b[0]}: the vocabulary lists a token twice"

    cases = []
    for near in (1, 2, 15, 16, 17, 40):
        data = bytearray(source)
        first = give_id(data, 10, 3)
        break_utf8(data, 10 + near)
        cases.append((data, first))
        data = bytearray(source)
        first = break_utf8(data, 10)
        give_id(data, 10 + near, 3)
        cases.append((data, first))
    data = bytearray(source)
    copy_token(data)
    cases.append((data, break_utf8(data, min(same[1] + 3, len(recs) - 1))))
    data = bytearray(source)
    cases.append((data, copy_token(data)))
    for data, message in cases:
        native, pure = mm.verdict(bytes(data), pure=False), mm.verdict(bytes(data), pure=True)
        assert native == ("FormatError", f"mutated.mtok: {message}")
        assert pure[0] == "FormatError"
