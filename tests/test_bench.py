"""bench/bench.py runs end to end and checks ids: its --quick run on one small model completes, and
a library whose ids differ from HF's is reported as differing, never with a speed. Nothing here
asserts a speed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))
import bench  # noqa: E402

FIXTURES = Path(os.environ.get("PYMTOK_FIXTURES", "/work/shared/fixtures"))


@pytest.mark.skipif(not (FIXTURES / "tokenizers" / "all-minilm-l6-v2").is_dir(), reason="needs the fixtures")
@pytest.mark.slow
def test_quick_run_checks_ids(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    proc = subprocess.run(
        [sys.executable, str(BENCH / "bench.py"), "--quick", "--models", "all-minilm-l6-v2", "--libs", "pymtok",
         "--fixtures", str(FIXTURES), "--json", str(out), "--mtok-dir", str(tmp_path / "mtok")],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(out.read_text())["results"]["all-minilm-l6-v2"]
    ours, reference = results["pymtok"], results["hf"]
    for group in bench.GROUPS:
        ids, ref_ids = ours["groups"][group]["ids"], reference["groups"][group]["ids"]
        assert ids and ids == ref_ids, group
        assert ours["first"][group]["ids"] == reference["first"][group]["ids"], group
    assert ours["big"]["ids"] == reference["big"]["ids"]
    assert ours["decode"]["texts"] == reference["decode"]["texts"]
    assert "## Encode, warm" in proc.stdout and "| all-minilm-l6-v2 | en |" in proc.stdout


def entry(ids: list[str]) -> dict[str, object]:
    return {"load": {"seconds": 0.1}, "groups": {g: {"bytes": 1000, "new_bytes": 500, "warm": 0.01, "new": 0.01,
                                                     "ids": ids, "new_ids": ids[1::2]} for g in bench.GROUPS}}


def test_differing_ids_are_reported_not_timed() -> None:
    results = {"m": {"hf": entry(["a", "b", "c"]), "pymtok": entry(["a", "b", "c"]), "tokie": entry(["a", "x", "c"])}}
    table = bench.encode_table(results, ["pymtok", "hf", "tokie"], "warm")
    row = next(line for line in table if line.startswith("| m | en |"))
    assert "differ 1/3" in row
    assert "hf 0.1" in row  # the fastest exact peer is HF, tokie's speed is not counted
    assert bench.mismatches(results) == []
    results["m"]["pymtok"] = entry(["a", "b", "z"])
    assert len(bench.mismatches(results)) == len(bench.GROUPS)


def test_a_library_that_does_not_load_is_listed() -> None:
    results = {"m": {"hf": entry(["a"]), "fastokens": {"load": {"error": "fails to load: ValueError: no"}},
                     "tokie": {"load": {"error": "not installed"}}}}
    table = bench.encode_table(results, ["hf", "fastokens", "tokie"], "warm")
    assert all(line.split(" | ")[3:5] == ["-", "-"] for line in table[2:])
    results["n"] = {"hf": entry(["a"]), "fastokens": {"load": {"seconds": 0.1}}, "tokie": {"load": {"error": "not installed"}}}
    assert bench.not_loaded(results, ["fastokens", "tokie"]) == [
        "- fastokens on m: fails to load: ValueError: no", "- tokie: not installed"]


def test_in_turns_column_takes_the_exact_peer_pymtok_is_slowest_against() -> None:
    results = {"m": {"hf": entry(["a", "b"]), "pymtok": entry(["a", "b"]), "fastokens": entry(["a", "b"]),
                     "gigatoken": entry(["a", "b"]), "tokie": entry(["a", "x"])}}
    for lib, in_turns in (("fastokens", 1.7), ("gigatoken", 0.8), ("tokie", 0.1)):
        for found in results["m"][lib]["groups"].values():
            found["pymtok_in_turns"] = in_turns
    table = bench.encode_table(results, ["pymtok", "hf", "fastokens", "gigatoken", "tokie"], "warm")
    row = next(line for line in table if line.startswith("| m | en |"))
    # tokie's ids differ: its ratio is not counted; no array measured: the list's ratio stands
    assert row.endswith("| 0.80x gigatoken | 0.80x gigatoken |")
    for array_in_turns, same_output in ((1.2, "1.20x gigatoken"), (1.9, "1.70x fastokens")):
        for found in results["m"]["gigatoken"]["groups"].values():
            found["pymtok_array_in_turns"] = array_in_turns
        table = bench.encode_table(results, ["pymtok", "hf", "fastokens", "gigatoken", "tokie"], "warm")
        row = next(line for line in table if line.startswith("| m | en |"))
        assert row.endswith(f"| 0.80x gigatoken | {same_output} |")
    assert "in turns" not in bench.encode_table(results, ["pymtok", "fastokens"], "new")[0]
