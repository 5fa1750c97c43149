"""pymtok against the exact tokenizers one can install: encode warm and cold, big strings, decode,
per-call cost, offsets, batch, peak memory, load time, worst cases.

One command (the peers come with the ``bench`` extra: ``pip install -e ".[bench]"``):

    PYMTOK_FIXTURES=/work/shared/fixtures python3 bench/bench.py [--quick] [--json out.json]

Libraries: pymtok on ``tokenizer.json`` ("pymtok"), on the ``.mtok`` exported from it ("pymtok-mtok")
and its pure-Python path ("pymtok-pure", ``PYMTOK_PURE=1``); HF ``tokenizers``, the reference
every id is checked against; and the peers of ``peers.py`` (tiktoken, sentencepiece, fastokens,
gigatoken, tuetoken, quicktok, splintr, tokie). Each runs in processes of its own, so that its
load, its caches and its memory are its own. A peer that is not installed, or refuses a model, is
listed as such; a peer whose ids differ from HF's on some documents of a row is reported as
"differ n/N" instead of its speed, and is not counted as a peer to beat on that row.

Texts are documents of about 2 KB cut at line ends, from the corpus groups en, code, cjk, other
and mixed (every corpus file, taken from its second half, interleaved). Encode rows are single
thread and timed in CPU time (``time.process_time``: the machine may be shared), in three states:
warm (the documents encoded before: best of ``--rounds``), new text in a warmed process (warm up on
every other document of the group, time the ones between, once) and first pass in a fresh process
(a new process loads the library and encodes the group once). MB/s counts UTF-8 bytes.
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import gc
import hashlib
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from array import array
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import peers

ROOT = Path(__file__).resolve().parent.parent
MODELS = ["llama3", "qwen3", "gpt-4o", "gemma-v1", "mistral-7b-v0.1", "all-minilm-l6-v2", "t5-small"]
GROUPS: dict[str, list[str] | None] = {
    "en": ["en_prose_sherlock_holmes.txt", "en_prose_botchan.txt"],
    "code": ["code_python_cpython_stdlib.txt", "code_cpp_sentencepiece.txt",
             "code_js_huggingface_tokenizers.txt", "latex_math_hott_book.txt"],
    "cjk": ["zh_fortunes_debian_quotes.txt", "zh_classical_poetry_tang300_song100.txt",
            "ja_wagahaiwa_nekodearu.txt", "ko_konlpy_law_bills.txt"],
    "other": ["ru_fortunes.txt", "ar_quran_tanzil.txt", "hi_udhr.txt", "ar_udhr.txt",
              "emoji_unicode_emoji_test.txt"],
    "mixed": None,  # every corpus file
}
LIBRARIES = list(peers.LOADERS)
REFERENCE = "hf"
DOC_CHARS = 2000
# RSS on a 50 MB text: pymtok on every model, every library on these
RSS_ALL_MODELS = ("llama3",)
# not the pure path (minutes on 50 MB), nor HF, whose Encoding keeps every token's string and
# offsets: some 130 bytes per input byte, gigabytes on 50 MB on a machine that may be shared
RSS_LIBRARIES = [lib for lib in LIBRARIES if lib not in ("pymtok-pure", REFERENCE)]
LOAD_MODELS = ("qwen3", "gemma-v1", "llama3", "gpt-4o")
# rounds of the sections that are ratios of two short ones (offsets, batch), per --rounds
SHORT_ROUNDS = 3
WORKER_TIMEOUT = 1800


# ---- corpus ------------------------------------------------------------------------------

def corpus_dir(fixtures: Path) -> Path:
    env = os.environ.get("PYMTOK_CORPUS")
    return Path(env) if env else fixtures.parent / "corpus"


def _corpus_files(fixtures: Path, group: str) -> list[Path]:
    names = GROUPS[group]
    if names is None:
        return sorted(corpus_dir(fixtures).glob("*.txt"))
    return [corpus_dir(fixtures) / name for name in names]


def _cut(text: str, budget: int) -> list[str]:
    """Documents of about DOC_CHARS characters cut at line ends, up to ``budget`` UTF-8 bytes."""
    docs: list[str] = []
    used, size, doc = 0, 0, []
    for line in text.split("\n"):
        doc.append(line)
        size += len(line) + 1
        if size >= DOC_CHARS:
            chunk = "\n".join(doc) + "\n"
            docs.append(chunk)
            used += len(chunk.encode("utf-8"))
            doc, size = [], 0
            if used >= budget:
                break
    return docs


def documents(fixtures: Path, group: str, budget: int) -> list[str]:
    """About ``budget`` UTF-8 bytes of the group's files, in documents cut at line ends. The mixed
    group takes each file from a line end past its middle, text the other groups do not hold,
    and interleaves the files so that the stream changes language at every document."""
    files = _corpus_files(fixtures, group)
    share = budget // len(files)
    per_file = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        if GROUPS[group] is None:
            text = text[text.find("\n", len(text) // 2) + 1:]
        per_file.append(_cut(text, share))
    if GROUPS[group] is not None:
        return [doc for docs in per_file for doc in docs]
    longest = max(map(len, per_file))
    return [docs[i] for i in range(longest) for docs in per_file if i < len(docs)]


def big_documents(fixtures: Path, size: int) -> list[str]:
    """About ``size`` UTF-8 bytes of documents: every corpus file's, interleaved."""
    files = _corpus_files(fixtures, "mixed")
    per_file = [_cut(path.read_text(encoding="utf-8"), size // len(files)) for path in files]
    longest = max(map(len, per_file))
    return [docs[i] for i in range(longest) for docs in per_file if i < len(docs)]


def big_string(fixtures: Path, size: int) -> str:
    """One string of about ``size`` UTF-8 bytes: ``big_documents`` joined."""
    return "".join(big_documents(fixtures, size))


def repeated_corpus(fixtures: Path, size: int) -> str:
    """About ``size`` UTF-8 bytes: the whole corpus, repeated."""
    whole = "".join(path.read_text(encoding="utf-8") for path in _corpus_files(fixtures, "mixed"))
    whole_bytes = len(whole.encode("utf-8"))
    return whole * (size // whole_bytes) + whole[: len(whole) * (size % whole_bytes) // whole_bytes]


def worst_cases() -> dict[str, str]:
    rng = random.Random(0)
    no_space = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789.,;-_") for _ in range(1_000_000))
    code_points = (rng.randrange(0x20, 0x30000) for _ in range(300_000))
    return {
        "1MB no spaces": no_space,
        "1MB one char": "a" * 1_000_000,
        "random code points": "".join(chr(c) for c in code_points if not 0xD800 <= c < 0xE000),
        # one run of combining marks out of canonical order, which NFC and BERT's accent stripping sort
        "1MB of marks": "a" + "\u0301\u0323" * 250_000,
    }


def utf8_size(texts: Iterable[str]) -> int:
    return sum(len(t.encode("utf-8")) for t in texts)


# ---- measuring, inside a worker ------------------------------------------------------------

def digest(ids: Iterable[int]) -> str:
    return hashlib.blake2b(array("q", peers.as_list(ids)).tobytes(), digest_size=8).hexdigest()


def text_digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def cpu(fn: Callable[[], Any]) -> tuple[float, Any]:
    """CPU seconds of one call of ``fn`` (every thread of the process), and its result."""
    gc.collect()
    start = time.process_time()
    result = fn()
    return time.process_time() - start, result


def best_cpu(fn: Callable[[], Any], rounds: int) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(rounds):
        seconds, result = cpu(fn)
        best = min(best, seconds)
    return best, result


def wall(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Wall seconds of one call of ``fn``, for the threaded batch calls: CPU time would add the
    threads up."""
    gc.collect()
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def best_in_turns(calls: dict[str, Callable[[], Any]], rounds: int,
                  measure: Callable[[Callable[[], Any]], tuple[float, Any]]) -> dict[str, tuple[float, Any]]:
    """The best of ``rounds`` rounds of each call, the calls taken in turns within a round: the
    rows that compare two of them are ratios of sections a few milliseconds long, which a slow
    spell of the machine would otherwise tilt by falling on one of them."""
    best: dict[str, tuple[float, Any]] = {name: (float("inf"), None) for name in calls}
    for _ in range(rounds):
        for name, fn in calls.items():
            seconds, result = measure(fn)
            best[name] = (min(best[name][0], seconds), result)
    return best


def status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def each(fn: Callable[[str], Any], docs: list[str]) -> list[Any]:
    return [fn(d) for d in docs]


def bare(text: str) -> str:
    return text


def per_call_seconds(encode: Callable[[str], Any], calls: int) -> float:
    """Seconds of one ``encode("Hello")`` over a call of a bare Python function, best of 5."""
    def loop(fn: Callable[[str], Any]) -> float:
        best = float("inf")
        for _ in range(5):
            start = time.process_time()
            for _ in range(calls):
                fn("Hello")
            best = min(best, time.process_time() - start)
        return best
    return (loop(encode) - loop(bare)) / calls


def section(out: dict[str, Any], name: str, fn: Callable[[], Any]) -> None:
    """Run one measurement; a library that fails in it has the error recorded, not the run."""
    try:
        out[name] = fn()
    except Exception as error:  # a peer's failure is a finding to report, whatever its type
        out[name] = {"error": f"{type(error).__name__}: {str(error)[:300]}"}
        traceback.print_exc()


def load(lib: str, model: str, fixtures: Path, mtok_dir: Path) -> tuple[peers.Library | None, dict[str, Any]]:
    try:
        seconds, library = cpu(lambda: peers.LOADERS[lib](fixtures / "tokenizers" / model, mtok_dir))
    except ImportError as error:
        return None, {"error": "not installed", "detail": str(error)[:200]}
    except Exception as error:  # whatever a peer raises on a file it cannot read
        message = (str(error).strip().splitlines() or [""])[0]
        return None, {"error": f"fails to load: {type(error).__name__}: {message[:300]}"}
    if lib in ("pymtok", "pymtok-mtok") and not library.native:
        return None, {"error": "the native core does not accelerate this tokenizer"}
    return library, {"seconds": seconds}


def worker(lib: str, model: str, args: argparse.Namespace) -> dict[str, Any]:
    """Every in-process measurement of one library on one model."""
    groups = {g: documents(args.fixtures, g, args.bytes) for g in GROUPS}
    big_docs = big_documents(args.fixtures, args.big_bytes)
    big = "".join(big_docs)
    library, loaded = load(lib, model, args.fixtures, args.mtok_dir)
    out: dict[str, Any] = {"load": loaded}
    if library is None:
        return out
    encode = library.encode
    all_ids: dict[str, list[Any]] = {}
    # the .mtok's rate against the tokenizer.json it was exported from, warm, taken in turns in
    # this process: two workers' rates differ by more than the two paths do (by up to a tenth
    # from one run to the next)
    twin = load("pymtok", model, args.fixtures, args.mtok_dir)[0] if lib == "pymtok-mtok" else None
    # a peer's warm rate against pymtok's (tokenizer.json) likewise taken in turns in the peer's
    # process: the workers run minutes apart, and a shared machine's slow spells last as long
    ours = load("pymtok", model, args.fixtures, args.mtok_dir)[0] if lib not in (*peers.PYMTOK, REFERENCE) else None

    def in_turns(other: Callable[[str], Any], docs: list[str]) -> tuple[float, float]:
        """This library's and other's best warm seconds on docs, the two taken in turns."""
        each(other, docs)
        turns = best_in_turns({"this": functools.partial(each, encode, docs),
                               "other": functools.partial(each, other, docs)}, SHORT_ROUNDS * args.rounds, cpu)
        return turns["this"][0], turns["other"][0]

    def group(docs: list[str], name: str) -> dict[str, Any]:
        warm_half, new_half = docs[0::2], docs[1::2]
        for doc in warm_half:
            encode(doc)
        new_seconds, new_ids = cpu(lambda: [encode(d) for d in new_half])
        warm_seconds, ids = best_cpu(lambda: [encode(d) for d in docs], args.rounds)
        all_ids[name] = ids
        found = {"bytes": utf8_size(docs), "new_bytes": utf8_size(new_half), "warm": warm_seconds,
                 "new": new_seconds, "ids": [digest(i) for i in ids], "new_ids": [digest(i) for i in new_ids]}
        if twin is not None:
            mtok, json = in_turns(twin.encode, docs)
            found["json_in_turns"] = json / mtok
        if ours is not None:
            peer, pymtok = in_turns(ours.encode, docs)
            found["pymtok_in_turns"] = peer / pymtok
            if library.array and ours.encode_array is not None:
                # a peer that returns a numpy array against pymtok's array: the same output, the
                # same work for the caller; checked to be pymtok's list's ids
                arrays = [ours.encode_array(d) for d in docs]
                if [peers.as_list(a) for a in arrays] != [peers.as_list(i) for i in (ours.encode(d) for d in docs)]:
                    raise AssertionError("pymtok's encode_to_numpy differs from its encode")
                peer, pymtok = in_turns(ours.encode_array, docs)
                found["pymtok_array_in_turns"] = peer / pymtok
        return found

    out["groups"] = {}
    for name, docs in groups.items():
        section(out["groups"], name, lambda: group(docs, name))
    twin = ours = None

    def big_runs() -> dict[str, Any]:
        first, ids = cpu(lambda: encode(big))
        warm, _ = best_cpu(lambda: encode(big), args.rounds)
        found = {"bytes": utf8_size([big]), "new": first, "warm": warm, "ids": [digest(ids)], "n": len(ids)}
        if lib in peers.PYMTOK and lib != "pymtok-pure":
            # the target is the big string at its own documents' rate: both warm, in turns
            each(encode, big_docs)
            turns = best_in_turns({"big": lambda: encode(big), "docs": functools.partial(each, encode, big_docs)},
                                  SHORT_ROUNDS * args.rounds, cpu)
            found["docs_in_turns"] = turns["docs"][0] / turns["big"][0]
        return found

    section(out, "big", big_runs)

    if library.decode is not None:
        decode = library.decode

        def decode_runs() -> dict[str, Any]:
            ids = [peers.as_list(i) for name in GROUPS if name in all_ids for i in all_ids[name]]
            seconds, texts = best_cpu(lambda: [decode(i) for i in ids], args.rounds)
            big_ids = peers.as_list(encode(big))
            big_seconds, big_text = best_cpu(lambda: decode(big_ids), args.rounds)
            return {"bytes": utf8_size(texts), "seconds": seconds, "texts": [text_digest(t) for t in texts],
                    "big_bytes": utf8_size([big_text]), "big_seconds": big_seconds, "big_text": text_digest(big_text)}

        section(out, "decode", decode_runs)
    if library.stream is not None:
        stream = library.stream

        def stream_runs() -> dict[str, Any]:
            ids, total = [], 0
            for doc_ids in all_ids.get("mixed", []):
                if total >= args.stream_ids:
                    break
                ids.append(peers.as_list(doc_ids))
                total += len(ids[-1])
            seconds, texts = best_cpu(lambda: [stream(i) for i in ids], args.rounds)
            return {"bytes": utf8_size(texts), "seconds": seconds, "ids_count": total,
                    "texts": [text_digest(t) for t in texts]}

        section(out, "stream", stream_runs)

    section(out, "per_call", lambda: {"seconds": per_call_seconds(encode, args.calls)})

    def offsets_runs() -> dict[str, Any]:
        docs = groups["mixed"]
        calls = {name: functools.partial(each, fn, docs) for name, fn in
                 (("encode", encode), ("offsets", library.offsets), ("call", library.call)) if fn is not None}
        best = best_in_turns(calls, SHORT_ROUNDS * args.rounds, cpu)
        return {"bytes": utf8_size(docs), **{name: seconds for name, (seconds, _) in best.items()}}

    section(out, "offsets", offsets_runs)

    if library.batch is not None and lib != "pymtok-pure":
        batch = library.batch
        docs = [d for name in GROUPS for d in groups[name]]

        def batch_runs() -> dict[str, Any]:
            best = best_in_turns({"batch": lambda: batch(docs), "one": functools.partial(each, encode, docs)},
                                 SHORT_ROUNDS * args.rounds, wall)
            (seconds, ids), (one, _) = best["batch"], best["one"]
            return {"bytes": utf8_size(docs), "seconds": seconds, "one_thread": one, "ids": [digest(i) for i in ids]}

        section(out, "batch", batch_runs)

    if lib in (REFERENCE, "pymtok") and not args.no_worst:
        def worst_runs() -> dict[str, Any]:
            return {case: {"seconds": cpu(lambda: encode(text))[0], "ids": digest(encode(text))}
                    for case, text in worst_cases().items()}
        section(out, "worst", worst_runs)
    return out


def first_worker(lib: str, model: str, group: str, args: argparse.Namespace) -> dict[str, Any]:
    """The first pass of a fresh process: load, then encode the group (or the big string) once."""
    texts = [big_string(args.fixtures, args.big_bytes)] if group == "big" else documents(args.fixtures, group, args.bytes)
    library, loaded = load(lib, model, args.fixtures, args.mtok_dir)
    if library is None:
        return {"load": loaded}
    encode = library.encode
    seconds, ids = cpu(lambda: [encode(t) for t in texts])
    return {"bytes": utf8_size(texts), "seconds": seconds, "ids": [digest(i) for i in ids]}


def rss_worker(lib: str, model: str, args: argparse.Namespace) -> dict[str, Any]:
    """Peak RSS while encoding one text of ``--rss-bytes``: over the RSS before the call, and
    against what the returned ids themselves hold (the RSS they keep after the call)."""
    text = repeated_corpus(args.fixtures, args.rss_bytes)
    library, loaded = load(lib, model, args.fixtures, args.mtok_dir)
    if library is None:
        return {"load": loaded}
    library.encode("warm up")
    gc.collect()
    # memory freed before the call goes back to the system, or the call would reuse it unseen
    ctypes.CDLL(None).malloc_trim(0)
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM from here: the load's peak is not the call's
    base = status_mb("VmRSS")
    seconds, ids = cpu(lambda: library.encode(text))
    peak = status_mb("VmHWM")
    kept = status_mb("VmRSS")
    return {"bytes": utf8_size([text]), "seconds": seconds, "n": len(ids), "peak_mb": peak - base,
            "kept_mb": kept - base}


# ---- .mtok and HF load time ----------------------------------------------------------------

def timed_load(load_fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """CPU seconds (every thread of the process) and wall seconds
    of one load, and the tokenizer: wall time is how long the caller waits."""
    gc.collect()
    cpu_start, wall_start = time.process_time(), time.perf_counter()
    tok = load_fn()
    return time.process_time() - cpu_start, time.perf_counter() - wall_start, tok


def best_load(load_fn: Callable[[], Any], rounds: int) -> tuple[float, float]:
    """The best CPU and the best wall time of ``rounds`` loads, each timed alone: the previous
    tokenizer is freed (and cyclic garbage collected) before the clock starts."""
    best_cpu, best_wall = float("inf"), float("inf")
    for _ in range(rounds):
        cpu_seconds, wall_seconds, tok = timed_load(load_fn)
        best_cpu, best_wall = min(best_cpu, cpu_seconds), min(best_wall, wall_seconds)
        del tok
    return best_cpu, best_wall


def load_worker(what: str, model: str, args: argparse.Namespace) -> dict[str, Any]:
    """The .mtok load (or HF's from_file) alone, in a fresh process: CPU and wall seconds until
    ready to encode, RSS growth."""
    if what == "mtok":
        import pymtok

        path = args.mtok_dir / model / "tokenizer.mtok"
        load_fn: Callable[[], Any] = lambda: pymtok.load(path)
    else:
        from tokenizers import Tokenizer

        path = args.fixtures / "tokenizers" / model / "tokenizer.json"
        load_fn = lambda: Tokenizer.from_file(str(path))
    base = status_mb("VmRSS")
    first, first_wall, tok = timed_load(load_fn)
    grown = status_mb("VmRSS") - base
    del tok
    best, best_wall = best_load(load_fn, args.rounds)
    return {"first": first, "first_wall": first_wall, "best": best, "best_wall": best_wall, "rss_mb": grown,
            "file_mb": path.stat().st_size / 2**20}


# ---- the driver ------------------------------------------------------------------------------

def run(kind: str, operands: Sequence[str], lib: str, args: argparse.Namespace) -> dict[str, Any]:
    """One worker process; its last stdout line is its JSON result."""
    cmd = [sys.executable, __file__, kind, *operands, "--fixtures", str(args.fixtures),
           "--mtok-dir", str(args.mtok_dir), "--bytes", str(args.bytes), "--rounds", str(args.rounds),
           "--big-bytes", str(args.big_bytes), "--rss-bytes", str(args.rss_bytes),
           "--stream-ids", str(args.stream_ids), "--calls", str(args.calls)]
    if args.no_worst:
        cmd.append("--no-worst")
    try:
        proc = subprocess.run(cmd, env=peers.environment(lib), capture_output=True, text=True,
                              timeout=WORKER_TIMEOUT)
    except subprocess.TimeoutExpired:
        return {"load": {"error": f"timed out after {WORKER_TIMEOUT} s"}}
    if proc.stderr.strip() and args.verbose:
        print(proc.stderr[-3000:], file=sys.stderr)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = proc.stderr.strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
        return {"load": {"error": f"worker failed: {tail[0][:300]}"}}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def export_mtok(model: str, fixtures: Path, mtok_dir: Path) -> None:
    sys.path.insert(0, str(ROOT / "src"))
    from pymtok.export import export

    # written afresh every run: a file from an older pymtok would time that version's reader path
    export(fixtures / "tokenizers" / model, mtok_dir / model)


def machine() -> dict[str, Any]:
    cpu_model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                      if line.startswith("model name")), platform.processor())
    return {"host": platform.node(), "cpu": cpu_model, "cpus": os.cpu_count(), "python": platform.python_version(),
            "system": f"{platform.system()} {platform.release()}", "load_average": os.getloadavg(),
            "versions": {lib: peers.version(lib) for lib in LIBRARIES}}


def collect(args: argparse.Namespace) -> dict[str, Any]:
    libs = [lib for lib in LIBRARIES if lib in args.libs or lib == REFERENCE]
    shutil.rmtree(args.mtok_dir / "quicktok", ignore_errors=True)
    results: dict[str, Any] = {}
    for model in args.models:
        export_mtok(model, args.fixtures, args.mtok_dir)
        per_lib: dict[str, Any] = {}
        for lib in libs:
            start = time.perf_counter()
            entry = run("--worker", [lib, model], lib, args)
            if "error" not in entry["load"]:
                entry["first"] = {g: run("--first-worker", [lib, model, g], lib, args) for g in [*GROUPS, "big"]}
                if lib in RSS_LIBRARIES and (lib.startswith("pymtok") or model in RSS_ALL_MODELS):
                    entry["rss"] = run("--rss-worker", [lib, model], lib, args)
            per_lib[lib] = entry
            print(f"{model}: {lib} {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
        results[model] = per_lib
    return results


def collect_loads(args: argparse.Namespace) -> dict[str, Any]:
    loads: dict[str, Any] = {}
    rounds = argparse.Namespace(**{**vars(args), "rounds": max(args.rounds, 5)})
    for model in (m for m in args.models if m in LOAD_MODELS):
        export_mtok(model, args.fixtures, args.mtok_dir)
        print(f"{model}: load ...", file=sys.stderr, flush=True)
        loads[model] = {what: run("--load-worker", [what, model], "pymtok", rounds) for what in ("mtok", "hf")}
    return loads


# ---- the report ------------------------------------------------------------------------------

def fmt(x: float | None, spec: str = ".1f") -> str:
    return "-" if x is None else format(x, spec)


def ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None or b == 0 else f"{a / b:.2f}x"


Cell = tuple[float | None, str]  # (MB/s when exact, what the cell says)


def rate(size: int, seconds: float) -> float:
    return size / 1e6 / seconds if seconds > 0 else float("inf")


def compare(ours: Sequence[str], reference: Sequence[str] | None) -> int | None:
    """How many of the documents' digests differ from the reference's (None: no reference)."""
    if reference is None or len(reference) != len(ours):
        return None
    return sum(a != b for a, b in zip(ours, reference))


def cell(entry: dict[str, Any] | None, ids: Sequence[str] | None, reference: Sequence[str] | None,
         size_key: str, seconds_key: str) -> Cell:
    if not entry:
        return None, "-"
    if "error" in entry:
        return None, "error"
    differ = compare(ids or [], reference)
    if differ is None:
        return None, "no reference"
    speed = rate(entry[size_key], entry[seconds_key])
    if differ:
        return None, f"differ {differ}/{len(reference or [])}"
    return speed, f"{speed:.1f}"


def best_peer(cells: dict[str, Cell]) -> tuple[str | None, float | None]:
    exact = [(speed, lib) for lib, (speed, _) in cells.items() if speed is not None and lib not in peers.PYMTOK]
    if not exact:
        return None, None
    speed, lib = max(exact)
    return lib, speed


def loaded(entry: dict[str, Any] | None) -> bool:
    return bool(entry) and "error" not in entry.get("load", {"error": ""})


def turns_vs_peers(per_lib: dict[str, Any], group: str, cells: dict[str, Cell], same_output: bool = False) -> str:
    """pymtok's warm rate over the exact peer it is slowest against, each pair taken in turns in
    the peer's process, and that peer. With ``same_output``, against a peer that returns a numpy
    array pymtok's rate is that of its own array (``encode_to_numpy``), not of its list."""
    def measured(lib: str) -> float | None:
        found = per_lib[lib].get("groups", {}).get(group, {})
        return found.get("pymtok_array_in_turns", found.get("pymtok_in_turns")) if same_output \
            else found.get("pymtok_in_turns")

    found = [(value, lib) for lib, (speed, _) in cells.items()
             if speed is not None and lib not in peers.PYMTOK and (value := measured(lib)) is not None]
    if not found:
        return "-"
    worst, lib = min(found)
    return f"{worst:.2f}x {lib}"


def encode_table(results: dict[str, Any], libs: list[str], state: str) -> list[str]:
    header = ["model", "group", *libs, "fastest exact peer", "pymtok/peer", ".mtok/peer", ".mtok/json"]
    if state == "warm":
        header += ["pymtok/peer in turns", "in turns, same output"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for model, per_lib in results.items():
        ref = per_lib.get(REFERENCE)
        for group in GROUPS:
            cells: dict[str, Cell] = {}
            for lib in libs:
                entry = per_lib.get(lib)
                if not loaded(entry):
                    cells[lib] = (None, "-")
                    continue
                if state == "first":
                    first = entry.get("first", {}).get(group)
                    ref_first = ref.get("first", {}).get(group) if loaded(ref) else None
                    cells[lib] = cell(first, (first or {}).get("ids"), (ref_first or {}).get("ids"), "bytes", "seconds")
                    continue
                g = entry.get("groups", {}).get(group)
                ref_g = ref.get("groups", {}).get(group) if loaded(ref) else None
                ids_key, size_key = ("ids", "bytes") if state == "warm" else ("new_ids", "new_bytes")
                cells[lib] = cell(g, (g or {}).get(ids_key), (ref_g or {}).get(ids_key), size_key, state)
            peer, speed = best_peer(cells)
            json_speed, mtok_speed = (cells.get(lib, (None, ""))[0] for lib in ("pymtok", "pymtok-mtok"))
            vs_json = ratio(mtok_speed, json_speed)
            in_turns = (per_lib.get("pymtok-mtok") or {}).get("groups", {}).get(group, {}).get("json_in_turns")
            if state == "warm" and in_turns is not None and mtok_speed is not None:
                vs_json = f"{in_turns:.2f}x"
            row = [model, group, *(cells[lib][1] for lib in libs), f"{peer} {speed:.1f}" if peer else "-",
                   ratio(json_speed, speed), ratio(mtok_speed, speed), vs_json]
            if state == "warm":
                row += [turns_vs_peers(per_lib, group, cells), turns_vs_peers(per_lib, group, cells, same_output=True)]
            lines.append("| " + " | ".join(row) + " |")
    return lines


def big_vs_documents_rows(results: dict[str, Any]) -> list[str]:
    lines = ["| model | pymtok | pymtok-mtok |", "|---|---|---|"]
    for model, per_lib in results.items():
        row = [model]
        for lib in ("pymtok", "pymtok-mtok"):
            value = (per_lib.get(lib) or {}).get("big", {}).get("docs_in_turns") if loaded(per_lib.get(lib)) else None
            row.append(f"{value:.2f}x" if value is not None else "-")
        lines.append("| " + " | ".join(row) + " |")
    return lines


def simple_table(results: dict[str, Any], libs: list[str], pick: Callable[[dict[str, Any], dict[str, Any] | None], Cell],
                 ratio_to_peer: bool = True, higher_is_better: bool = True) -> list[str]:
    """One row per model, one cell per library; ``pick`` gives a loaded library's cell from its
    entry and the reference's."""
    header = ["model", *libs] + (["fastest exact peer", "pymtok/peer", ".mtok/peer"] if ratio_to_peer else [])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for model, per_lib in results.items():
        ref = per_lib.get(REFERENCE) if loaded(per_lib.get(REFERENCE)) else None
        cells = {lib: pick(per_lib[lib], ref) if loaded(per_lib.get(lib)) else (None, "-") for lib in libs}
        row = [model, *(cells[lib][1] for lib in libs)]
        if ratio_to_peer:
            exact = [(v, lib) for lib, (v, _) in cells.items() if v is not None and lib not in peers.PYMTOK]
            best = (max(exact) if higher_is_better else min(exact)) if exact else None
            def vs(lib: str) -> str:
                mine = cells.get(lib, (None, ""))[0]
                if best is None or mine is None:
                    return "-"
                return ratio(mine, best[0]) if higher_is_better else ratio(best[0], mine)
            row += [f"{best[1]} {best[0]:.{1 if higher_is_better else 2}f}" if best else "-", vs("pymtok"), vs("pymtok-mtok")]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def big_pick(entry: dict[str, Any], ref: dict[str, Any] | None, state: str) -> Cell:
    source = entry.get("first", {}).get("big") if state == "cold" else entry.get("big")
    ref_source = (ref or {}).get("first", {}).get("big") if state == "cold" else (ref or {}).get("big")
    if not source or "error" in source or "load" in source:
        return None, "error" if source else "-"
    return cell(source, source["ids"], (ref_source or {}).get("ids"), "bytes", "seconds" if state == "cold" else state)


def decode_pick(entry: dict[str, Any], ref: dict[str, Any] | None, which: str) -> Cell:
    d = entry.get("decode")
    ref_d = (ref or {}).get("decode")
    if not d:
        return None, "-"
    if "error" in d:
        return None, "error"
    if which == "docs":
        return cell(d, d["texts"], (ref_d or {}).get("texts"), "bytes", "seconds")
    return cell(d, [d["big_text"]], [ref_d["big_text"]] if ref_d and "big_text" in ref_d else None,
                "big_bytes", "big_seconds")


def stream_pick(entry: dict[str, Any], ref: dict[str, Any] | None) -> Cell:
    s = entry.get("stream")
    if not s:
        return None, "-"
    if "error" in s:
        return None, "error"
    # HF's DecodeStream is the reference: its joined pieces are not always its decode (WordPiece)
    return cell(s, s["texts"], ((ref or {}).get("stream") or {}).get("texts"), "bytes", "seconds")


def per_call_pick(entry: dict[str, Any], ref: dict[str, Any] | None) -> Cell:
    p = entry.get("per_call")
    if not p or "error" in p:
        return None, "-" if not p else "error"
    micro = p["seconds"] * 1e6
    return micro, f"{micro:.2f}"


def batch_pick(entry: dict[str, Any], ref: dict[str, Any] | None) -> Cell:
    b = entry.get("batch")
    if not b:
        return None, "-"
    if "error" in b:
        return None, "error"
    return cell(b, b["ids"], ((ref or {}).get("batch") or {}).get("ids"), "bytes", "seconds")


def rss_rows(results: dict[str, Any]) -> list[str]:
    lines = ["| model | library | text (MB) | ids | encode (s) | peak over start (MB) | kept by the ids (MB) | "
             "peak/kept | ids as 4-byte ints (MB) | peak/4-byte ids |", "|---|---|---|---|---|---|---|---|---|---|"]
    for model, per_lib in results.items():
        for lib, entry in per_lib.items():
            r = (entry or {}).get("rss")
            if not r:
                continue
            if "error" in r.get("load", {}) or "n" not in r:
                lines.append(f"| {model} | {lib} | " + " | ".join(["-"] * 8) + " |")
                continue
            ids_mb = r["n"] * 4 / 2**20
            lines.append(f"| {model} | {lib} | {r['bytes'] / 2**20:.0f} | {r['n']} | {r['seconds']:.1f} | "
                         f"{r['peak_mb']:.0f} | {r['kept_mb']:.0f} | {ratio(r['peak_mb'], r['kept_mb'])} | "
                         f"{ids_mb:.0f} | {ratio(r['peak_mb'], ids_mb)} |")
    return lines


def offsets_rows(results: dict[str, Any]) -> list[str]:
    lines = ["| model | library | encode (MB/s) | tok(...) (MB/s) | with offsets (MB/s) | encode/offsets |",
             "|---|---|---|---|---|---|"]
    for model, per_lib in results.items():
        for lib, entry in per_lib.items():
            o = (entry or {}).get("offsets") if loaded(entry) else None
            if not o or "error" in o or "offsets" not in o:
                continue
            speeds = {k: rate(o["bytes"], o[k]) if k in o else None for k in ("encode", "call", "offsets")}
            lines.append(f"| {model} | {lib} | {fmt(speeds['encode'])} | {fmt(speeds['call'])} | "
                         f"{fmt(speeds['offsets'])} | {ratio(speeds['encode'], speeds['offsets'])} |")
    return lines


def batch_threads_rows(results: dict[str, Any]) -> list[str]:
    lines = ["| model | library | one thread, one call per document (MB/s) | batch on 2 threads (MB/s) | 2 threads / 1 |",
             "|---|---|---|---|---|"]
    for model, per_lib in results.items():
        for lib in ("pymtok", "pymtok-mtok"):
            b = (per_lib.get(lib) or {}).get("batch")
            if b and "error" not in b:
                one, two = rate(b["bytes"], b["one_thread"]), rate(b["bytes"], b["seconds"])
                lines.append(f"| {model} | {lib} | {one:.1f} | {two:.1f} | {ratio(two, one)} |")
    return lines


def worst_rows(results: dict[str, Any]) -> list[str]:
    lines = ["| model | case | pymtok (s) | HF (s) | ids==HF |", "|---|---|---|---|---|"]
    for model, per_lib in results.items():
        ours = (per_lib.get("pymtok") or {}).get("worst")
        theirs = (per_lib.get(REFERENCE) or {}).get("worst")
        if not ours or not theirs or "error" in ours or "error" in theirs:
            continue
        for case, entry in ours.items():
            other = theirs.get(case)
            same = other is not None and other["ids"] == entry["ids"]
            lines.append(f"| {model} | {case} | {entry['seconds']:.2f} | {fmt(other['seconds'] if other else None, '.2f')} | "
                         f"{'yes' if same else 'NO'} |")
    return lines


def load_report(loads: dict[str, dict[str, Any]]) -> list[str]:
    lines = ["| model | .mtok first (ms) | .mtok best (ms) | .mtok best wall (ms) | HF first (ms) | HF best (ms) | "
             "HF best wall (ms) | HF/.mtok (best wall) | file (MB) | RSS .mtok (MB) | RSS/file | RSS HF (MB) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for model, entry in loads.items():
        m = entry.get("mtok") if "first" in entry.get("mtok", {}) else None
        h = entry.get("hf") if "first" in entry.get("hf", {}) else None
        ms = (lambda d, k: fmt(d[k] * 1000 if d else None, ".1f"))
        lines.append(
            f"| {model} | {ms(m, 'first')} | {ms(m, 'best')} | {ms(m, 'best_wall')} | {ms(h, 'first')} | "
            f"{ms(h, 'best')} | {ms(h, 'best_wall')} | "
            f"{ratio(h['best_wall'] if h else None, m['best_wall'] if m else None)} | {fmt(m['file_mb'] if m else None)} | "
            f"{fmt(m['rss_mb'] if m else None)} | {ratio(m['rss_mb'] if m else None, m['file_mb'] if m else None)} | "
            f"{fmt(h['rss_mb'] if h else None)} |")
    return lines


def not_loaded(results: dict[str, Any], libs: list[str]) -> list[str]:
    """One line per library and error, naming the models it failed on."""
    lines = []
    for lib in libs:
        by_error: dict[str, list[str]] = {}
        for model, per_lib in results.items():
            if lib in per_lib and "error" in per_lib[lib]["load"]:
                by_error.setdefault(per_lib[lib]["load"]["error"], []).append(model)
        for error, models in by_error.items():
            where = "" if len(models) == len(results) else f" on {', '.join(models)}"
            lines.append(f"- {lib}{where}: {error}")
    return lines


def report(info: dict[str, Any], results: dict[str, Any], loads: dict[str, Any], args: argparse.Namespace) -> list[str]:
    libs = [lib for lib in LIBRARIES if any(lib in per_lib for per_lib in results.values())]
    versions = ", ".join(f"{peers.DISTRIBUTIONS[lib]} {v}" for lib, v in info["versions"].items()
                         if v and lib in libs and lib not in ("pymtok-mtok", "pymtok-pure"))
    lines = [f"Machine: {info['cpu']}, {info['cpus']} cores, {info['system']}, Python {info['python']}; "
             f"load average at the start {', '.join(f'{x:.1f}' for x in info['load_average'])} "
             "(the machine may be shared: single-thread rows are CPU time, batch rows wall time).",
             f"Versions: {versions}.",
             f"Documents of ~2 KB, {args.bytes // 1000} KB per group, best of {args.rounds} rounds; "
             "a cell is MB/s, or 'differ n/N' when the ids of n of the row's N documents differ from HF's, "
             "or '-' when the library did not load the model (listed at the end).", ""]
    titles = {"warm": "Encode, warm (the documents encoded before), single thread, MB/s "
                      "(.mtok/json: the two taken in turns in the .mtok's process; pymtok/peer in turns: "
                      "pymtok's tokenizer.json against each exact peer in turns in the peer's process, "
                      "the lowest ratio shown; in turns, same output: likewise, with pymtok's "
                      "encode_to_numpy against a peer whose encode returns a numpy array)",
              "new": "Encode, new text in a warmed process (warmed on every other document, timed on the rest), MB/s",
              "first": "Encode, first pass in a fresh process, MB/s"}
    for state, title in titles.items():
        lines += [f"## {title}", *encode_table(results, libs, state), ""]
    lines += ["## One big string (~%.1f MB, all corpus files), MB/s" % (args.big_bytes / 1e6),
              "Cold: the first encode of a fresh process; warm: the same string again.", "",
              "### cold", *simple_table(results, libs, lambda e, r: big_pick(e, r, "cold")), "",
              "### new text in a warmed process (after the groups' documents)",
              *simple_table(results, libs, lambda e, r: big_pick(e, r, "new")), "",
              "### warm", *simple_table(results, libs, lambda e, r: big_pick(e, r, "warm")), "",
              "### warm, against the same text as its 2 KB documents (their time over the string's, "
              "in turns in one process)", *big_vs_documents_rows(results), ""]
    lines += ["## Decode (ids to text), MB/s of text", "Every group's documents, one call per document; "
              "the text is checked against HF's decode of the same documents.", "",
              *simple_table(results, libs, lambda e, r: decode_pick(e, r, "docs")), "",
              "### Decode of the big string's ids in one call (linear in the ids: near the row above)",
              *simple_table(results, libs, lambda e, r: decode_pick(e, r, "big")), "",
              f"### decode_stream (ids fed one at a time; ~{args.stream_ids} ids of the mixed group), MB/s",
              *simple_table(results, libs, stream_pick), ""]
    lines += ["## Per call: `encode(\"Hello\")`, µs over a call of a bare Python function",
              *simple_table(results, libs, per_call_pick, higher_is_better=False), ""]
    lines += ["## Offsets: `tok(text, return_offsets_mapping=True)` against `encode` (mixed group, warm)",
              *offsets_rows(results), ""]
    lines += ["## Batch: every group's documents in one call on 2 threads, MB/s (wall time)",
              *simple_table(results, libs, batch_pick), "",
              "### pymtok's batch on 2 threads against one thread", *batch_threads_rows(results), ""]
    lines += [f"## Peak RSS encoding one {args.rss_bytes / 1e6:.0f} MB text (the corpus repeated)",
              "Peak: the highest RSS during the call over the RSS before it; kept: the RSS the returned ids "
              "still hold after it.", *rss_rows(results), ""]
    if not args.no_worst:
        lines += ["## Worst cases (CPU seconds, one encode call)", *worst_rows(results), ""]
    if loads:
        lines += ["## .mtok load (native reader) vs HF Tokenizer.from_file(tokenizer.json)",
                  "CPU time of every thread, and wall time: how long the caller "
                  "waits. Targets: ready to encode in <= 10 ms and <= 1/50 of HF's time; RSS growth <= 2x the file.",
                  *load_report(loads), ""]
    failures = not_loaded(results, libs)
    if failures:
        lines += ["## Not loaded", *failures]
    # a blank line before every table and after every heading: Markdown needs them to see a table
    spaced: list[str] = []
    for line in lines:
        if spaced and spaced[-1] and (line.startswith("| model") or spaced[-1].startswith("#")):
            spaced.append("")
        spaced.append(line)
    return spaced


def mismatches(results: dict[str, Any]) -> list[str]:
    """pymtok's rows whose ids differ from HF's: the run fails on them."""
    bad = []
    for model, per_lib in results.items():
        ref = per_lib.get(REFERENCE)
        if not loaded(ref):
            continue
        for lib in peers.PYMTOK:
            entry = per_lib.get(lib)
            if not loaded(entry):
                continue
            for group in GROUPS:
                g, r = entry["groups"].get(group, {}), ref["groups"].get(group, {})
                if "error" in g or compare(g.get("ids", []), r.get("ids")):
                    bad.append(f"{model} {group} {lib}")
    return bad


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fixtures", type=Path, default=Path(os.environ.get("PYMTOK_FIXTURES", ROOT.parent / "shared" / "fixtures")))
    parser.add_argument("--models", nargs="+", default=MODELS, choices=MODELS)
    parser.add_argument("--libs", nargs="+", default=LIBRARIES, choices=LIBRARIES,
                        help="libraries to run (HF, the reference, always runs)")
    parser.add_argument("--bytes", type=int, default=400_000, help="corpus bytes per group")
    parser.add_argument("--big-bytes", type=int, default=3_000_000, help="bytes of the one big string")
    parser.add_argument("--rss-bytes", type=int, default=50_000_000, help="bytes of the text the peak RSS is measured on")
    parser.add_argument("--stream-ids", type=int, default=20_000, help="ids fed to decode_stream")
    parser.add_argument("--calls", type=int, default=20_000, help="calls of encode(\"Hello\") per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="small sample, one round, no worst cases (seconds)")
    parser.add_argument("--no-worst", action="store_true")
    parser.add_argument("--verbose", action="store_true", help="show the workers' stderr")
    parser.add_argument("--json", type=Path, default=ROOT / "bench" / "results.json")
    parser.add_argument("--mtok-dir", type=Path, default=Path(tempfile.gettempdir()) / "pymtok-bench")
    parser.add_argument("--load-only", action="store_true", help="only the .mtok load table")
    for kind, metavar in (("--worker", ("LIBRARY", "MODEL")), ("--first-worker", ("LIBRARY", "MODEL", "GROUP")),
                          ("--rss-worker", ("LIBRARY", "MODEL")), ("--load-worker", ("WHAT", "MODEL"))):
        parser.add_argument(kind, nargs=len(metavar), metavar=metavar, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.bytes, args.rounds, args.no_worst = 40_000, 1, True
        args.big_bytes, args.rss_bytes, args.stream_ids, args.calls = 300_000, 2_000_000, 2_000, 2_000
    for kind, fn in (("worker", worker), ("first_worker", first_worker), ("rss_worker", rss_worker),
                     ("load_worker", load_worker)):
        operands = getattr(args, kind)
        if operands:
            print(json.dumps(fn(*operands, args)))
            return
    info = machine()
    print(f"{info['cpu']} x{info['cpus']}, Python {info['python']}, versions: {info['versions']}", file=sys.stderr)
    args.mtok_dir.mkdir(parents=True, exist_ok=True)
    loads = collect_loads(args)
    if args.load_only:
        print("\n".join(load_report(loads)))
        return
    results = collect(args)
    lines = report(info, results, loads, args)
    print("\n".join(lines))
    args.json.write_text(json.dumps({"machine": info, "results": results, "loads": loads, "table": lines}, indent=1))
    print(f"\nJSON: {args.json}", file=sys.stderr)
    bad = mismatches(results)
    if bad:
        raise SystemExit(f"pymtok's ids differ from HF in {len(bad)} rows: {', '.join(bad)}")


if __name__ == "__main__":
    main()
