"""pymtok against its peers: throughput, batch throughput, load time, memory, worst cases.

One command:

    PYMTOK_FIXTURES=/work/shared/fixtures python3 bench/bench.py [--quick] [--json out.json]

For each model (llama3, qwen3, gpt-4o, gemma-v1, mistral-7b-v0.1, all-minilm-l6-v2, t5-small)
and corpus group (English prose, code, CJK, other scripts) it times pymtok's native path,
pymtok's pure-Python path (``PYMTOK_PURE=1``), HF ``tokenizers`` and, where the vocabulary
allows, ``tiktoken`` (an ``Encoding`` built from the same byte-level vocab and pattern) and
``sentencepiece`` (Mistral's own ``.model``). Every library runs in its own subprocess so that
its load time and peak RSS are its own. Every run checks that the ids equal HF's.

Texts are documents of about 2 KB cut at line ends, encoded one by one (single thread) and
as one batch on 2 threads. MB/s counts UTF-8 bytes; times are the best of several rounds, as
the machine may be shared. Every library, the pure-Python path included, gets the same texts and
rounds. The best round runs with whatever the earlier rounds left in the caches (HF's BPE cache,
pymtok's per-piece caches), so the first round is reported too, for pymtok's pure path and HF:
the first pass over the group's texts, caches cold (but for one warm-up document).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from array import array
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MODELS = ["llama3", "qwen3", "gpt-4o", "gemma-v1", "mistral-7b-v0.1", "all-minilm-l6-v2", "t5-small"]
GROUPS = {
    "en": ["en_prose_sherlock_holmes.txt", "en_prose_botchan.txt"],
    "code": ["code_python_cpython_stdlib.txt", "code_cpp_sentencepiece.txt",
             "code_js_huggingface_tokenizers.txt", "latex_math_hott_book.txt"],
    "cjk": ["zh_fortunes_debian_quotes.txt", "zh_classical_poetry_tang300_song100.txt",
            "ja_wagahaiwa_nekodearu.txt", "ko_konlpy_law_bills.txt"],
    "other": ["ru_fortunes.txt", "ar_quran_tanzil.txt", "hi_udhr.txt", "ar_udhr.txt",
              "emoji_unicode_emoji_test.txt"],
}
TIKTOKEN_MODELS = ("llama3", "gpt-4o", "qwen3")
SPM_MODEL = {"mistral-7b-v0.1": "legacy/sentencepiece/mistral-7b-v0.1.model"}
DOC_CHARS = 2000

Encode = Callable[[str], list[int]]
EncodeBatch = Callable[[list[str]], list[list[int]]]


# ---- corpus ------------------------------------------------------------------------------

def corpus_dir(fixtures: Path) -> Path:
    env = os.environ.get("PYMTOK_CORPUS")
    return Path(env) if env else fixtures.parent / "corpus"


def documents(fixtures: Path, group: str, budget: int) -> list[str]:
    """About ``budget`` UTF-8 bytes of the group's files, in documents cut at line ends."""
    files = GROUPS[group]
    share = budget // len(files)
    docs: list[str] = []
    for name in files:
        text = (corpus_dir(fixtures) / name).read_text(encoding="utf-8")
        used = 0
        lines = text.split("\n")
        doc: list[str] = []
        size = 0
        for line in lines:
            doc.append(line)
            size += len(line) + 1
            if size >= DOC_CHARS:
                chunk = "\n".join(doc) + "\n"
                docs.append(chunk)
                used += len(chunk.encode("utf-8"))
                doc, size = [], 0
                if used >= share:
                    break
    return docs


def worst_cases() -> dict[str, str]:
    rng = random.Random(0)
    no_space = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789.,;-_") for _ in range(1_000_000))
    code_points = (rng.randrange(0x20, 0x30000) for _ in range(300_000))
    return {
        "1MB no spaces": no_space,
        "1MB one char": "a" * 1_000_000,
        "random code points": "".join(chr(c) for c in code_points if not 0xD800 <= c < 0xE000),
    }


# ---- one library in one process ------------------------------------------------------------

def digest(all_ids: Sequence[Sequence[int]]) -> str:
    h = hashlib.blake2b(digest_size=12)
    for ids in all_ids:
        h.update(array("q", ids).tobytes())
        h.update(b"|")
    return h.hexdigest()


def best_time(fn: Callable[[], Any], rounds: int) -> tuple[float, Any]:
    times, result = round_times(fn, rounds)
    return min(times), result


def round_times(fn: Callable[[], Any], rounds: int) -> tuple[list[float], Any]:
    """The seconds of each of ``rounds`` calls of ``fn``, in order, and the last result."""
    times, result = [], None
    for _ in range(rounds):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return times, result


def tiktoken_encoding(tokenizer_json: Path) -> Callable[[], Any]:
    """A constructor of a tiktoken Encoding with the HF file's byte-level vocab and pattern."""
    import tiktoken

    config = json.loads(tokenizer_json.read_text(encoding="utf-8"))
    sys.path.insert(0, str(ROOT / "src"))
    from pymtok.byte_level import CHAR_TO_BYTE

    ranks = {bytes(CHAR_TO_BYTE[c] for c in token): id for token, id in config["model"]["vocab"].items()}
    pattern = next(p["pattern"]["Regex"] for p in config["pre_tokenizer"]["pretokenizers"] if p["type"] == "Split")
    return lambda: tiktoken.Encoding("bench", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})


def load_library(lib: str, model: str, fixtures: Path, mtok_dir: Path) -> tuple[Encode, EncodeBatch, dict[str, float]]:
    """The library's encode and 2-thread batch encode, and its load times in seconds."""
    tokenizer_json = fixtures / "tokenizers" / model / "tokenizer.json"
    loads: dict[str, float] = {}
    if lib in ("pymtok", "pymtok-pure"):
        import pymtok

        seconds, tok = best_time(lambda: pymtok.load(tokenizer_json), 1)
        loads["tokenizer.json"] = seconds
        mtok = mtok_dir / model / "tokenizer.mtok"
        if mtok.is_file():
            loads[".mtok"], _ = best_time(lambda: pymtok.load(mtok), 1)
        if lib == "pymtok" and tok._native_segment is None:
            raise SystemExit(f"{model}: the native core does not accelerate this tokenizer")
        return (lambda t: tok.encode(t, add_special_tokens=False),
                lambda ts: tok.encode_batch(ts, add_special_tokens=False, num_threads=2), loads)
    if lib == "hf":
        from tokenizers import Tokenizer

        def hf_load() -> Any:
            tok = Tokenizer.from_file(str(tokenizer_json))
            tok.no_padding()
            tok.no_truncation()
            return tok

        loads["tokenizer.json"], hf = best_time(hf_load, 1)
        # HF's batch runs on its rayon pool: RAYON_NUM_THREADS=2 is set by the parent
        return (lambda t: hf.encode(t, add_special_tokens=False).ids,
                lambda ts: [e.ids for e in hf.encode_batch(ts, add_special_tokens=False)], loads)
    if lib == "tiktoken":
        construct = tiktoken_encoding(tokenizer_json)
        loads["construct"], enc = best_time(construct, 1)
        return enc.encode_ordinary, lambda ts: enc.encode_ordinary_batch(ts, num_threads=2), loads
    if lib == "sentencepiece":
        import sentencepiece

        path = fixtures / SPM_MODEL[model]
        loads[".model"], sp = best_time(lambda: sentencepiece.SentencePieceProcessor(model_file=str(path)), 1)
        return sp.encode, lambda ts: sp.encode(ts, num_threads=2), loads
    raise SystemExit(f"unknown library {lib}")


def rss_mb() -> float:
    """This process's current resident set (VmRSS), mapped file pages included."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def best_load(load: Callable[[], Any], rounds: int) -> float:
    """The best time of ``rounds`` loads, each timed alone: the previous tokenizer is freed (and
    cyclic garbage collected) before the clock starts, not inside the next load's time."""
    best = float("inf")
    for _ in range(rounds):
        gc.collect()
        start = time.perf_counter()
        tok = load()
        best = min(best, time.perf_counter() - start)
        del tok
    return best


def mtok_load(model: str, mtok_dir: Path, rounds: int) -> None:
    """The .mtok load alone, in a fresh process: seconds until ready to encode, RSS growth."""
    import pymtok

    path = mtok_dir / model / "tokenizer.mtok"
    base = rss_mb()
    seconds, tok = best_time(lambda: pymtok.load(path), 1)  # first load: what a user waits for
    grown = rss_mb() - base
    tok.encode("warm")
    native = tok._native_segment is not None
    del tok
    best = best_load(lambda: pymtok.load(path), rounds)
    print(json.dumps({"first": seconds, "best": best, "rss_mb": grown, "file_mb": path.stat().st_size / 2**20,
                      "native": native}))


def hf_load(model: str, fixtures: Path, rounds: int) -> None:
    from tokenizers import Tokenizer

    path = fixtures / "tokenizers" / model / "tokenizer.json"
    base = rss_mb()
    seconds, tok = best_time(lambda: Tokenizer.from_file(str(path)), 1)
    grown = rss_mb() - base
    del tok
    best = best_load(lambda: Tokenizer.from_file(str(path)), rounds)
    print(json.dumps({"first": seconds, "best": best, "rss_mb": grown}))


def peak_rss_mb() -> float:
    """This process's peak resident set (VmHWM). Unlike ru_maxrss it is not inherited across
    exec, so the driver's own memory does not leak into a worker's figure."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def worker(lib: str, model: str, fixtures: Path, mtok_dir: Path, budget: int, rounds: int, worst: bool) -> None:
    groups = {g: documents(fixtures, g, budget) for g in GROUPS}
    cases = worst_cases() if worst else {}
    base_rss = peak_rss_mb()
    encode, encode_batch, loads = load_library(lib, model, fixtures, mtok_dir)
    out: dict[str, Any] = {"load": loads, "groups": {}, "worst": {}}
    all_docs: list[str] = []
    for group, docs in groups.items():
        size = sum(len(d.encode("utf-8")) for d in docs)
        encode(docs[0])  # warm-up (first-call costs such as compiling patterns)
        times, ids = round_times(lambda: [encode(d) for d in docs], rounds)
        out["groups"][group] = {"bytes": size, "seconds": min(times), "first_seconds": times[0],
                                "digest": digest(ids)}
        all_docs += docs
    if lib != "pymtok-pure":  # pure-Python encoding gains nothing from threads: no batch figure
        size = sum(len(d.encode("utf-8")) for d in all_docs)
        seconds, ids = best_time(lambda: encode_batch(all_docs), rounds)
        out["batch"] = {"bytes": size, "seconds": seconds, "digest": digest(ids)}
    for case, text in cases.items():
        seconds, ids = best_time(lambda: encode(text), 1)
        out["worst"][case] = {"seconds": seconds, "digest": digest([ids])}
    peak = peak_rss_mb()
    out["rss_mb"] = {"peak": peak, "over_baseline": peak - base_rss}
    print(json.dumps(out))


# ---- the driver ------------------------------------------------------------------------------

def libraries(model: str) -> list[str]:
    libs = ["pymtok", "pymtok-pure", "hf"]
    if model in TIKTOKEN_MODELS:
        libs.append("tiktoken")
    if model in SPM_MODEL:
        libs.append("sentencepiece")
    return libs


def run_worker(lib: str, model: str, args: argparse.Namespace, mtok_dir: Path) -> dict[str, Any] | None:
    env = dict(os.environ, RAYON_NUM_THREADS="2", TOKENIZERS_PARALLELISM="true")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    if lib == "pymtok-pure":
        env["PYMTOK_PURE"] = "1"
    else:
        env.pop("PYMTOK_PURE", None)
    worst = lib in ("pymtok", "hf") and not args.no_worst
    cmd = [sys.executable, __file__, "--worker", lib, model, "--fixtures", str(args.fixtures),
           "--mtok-dir", str(mtok_dir), "--bytes", str(args.bytes), "--rounds", str(args.rounds)]
    if worst:
        cmd.append("--worst")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"  {lib} on {model} failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


LOAD_MODELS = ("qwen3", "gemma-v1", "llama3", "gpt-4o")


def run_load(model: str, args: argparse.Namespace, mtok_dir: Path) -> dict[str, Any]:
    """.mtok load (native reader) against HF's from_file, each in fresh processes."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    env.pop("PYMTOK_PURE", None)
    out: dict[str, Any] = {}
    for what in ("mtok", "hf"):
        cmd = [sys.executable, __file__, "--load-worker", what, model, "--fixtures", str(args.fixtures),
               "--mtok-dir", str(mtok_dir), "--rounds", str(max(args.rounds, 5))]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"  {what} load of {model} failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
            continue
        out[what] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def load_report(loads: dict[str, dict[str, Any]]) -> list[str]:
    lines = ["## .mtok load (native reader) vs HF Tokenizer.from_file(tokenizer.json)",
             "Targets: ready to encode in <= 10 ms and <= 1/50 of HF's time; RSS growth <= 2x the file.",
             "| model | .mtok first (ms) | .mtok best (ms) | HF first (ms) | HF best (ms) | HF/.mtok (best) | "
             "file (MB) | RSS .mtok (MB) | RSS/file | RSS HF (MB) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for model, entry in loads.items():
        m, h = entry.get("mtok"), entry.get("hf")
        ms = (lambda d, k: fmt(d[k] * 1000 if d else None, ".1f"))
        lines.append(
            f"| {model} | {ms(m, 'first')} | {ms(m, 'best')} | {ms(h, 'first')} | {ms(h, 'best')} | "
            f"{ratio(h['best'] if h else None, m['best'] if m else None)} | {fmt(m['file_mb'] if m else None)} | "
            f"{fmt(m['rss_mb'] if m else None)} | {ratio(m['rss_mb'] if m else None, m['file_mb'] if m else None)} | "
            f"{fmt(h['rss_mb'] if h else None)} |")
    return lines


def export_mtok(model: str, fixtures: Path, mtok_dir: Path) -> None:
    sys.path.insert(0, str(ROOT / "src"))
    try:
        from pymtok.export import export
    except ImportError:
        return  # no .mtok support yet: its load time is skipped
    # written afresh every run: a file from an older pymtok would time that version's reader path
    export(fixtures / "tokenizers" / model, mtok_dir / model)


def mbps(entry: dict[str, Any] | None, seconds: str = "seconds") -> float | None:
    """MB/s of a timed entry: of its best round, or of the round ``seconds`` names."""
    if not entry or not entry.get(seconds):
        return None
    return entry["bytes"] / 1e6 / entry[seconds]


def fmt(x: float | None, spec: str = ".1f") -> str:
    return "-" if x is None else format(x, spec)


def ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None or b == 0 else f"{a / b:.1f}x"


def report(results: dict[str, dict[str, Any]]) -> list[str]:
    lines = ["## Single-thread throughput (MB/s); ids == HF on every run",
             "| model | group | pymtok | pure | HF | peer | peer MB/s | pymtok/HF | pymtok/peer | pure/HF | ids==HF |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for model, per_lib in results.items():
        hf = per_lib.get("hf")
        peer_name = next((lib for lib in ("tiktoken", "sentencepiece") if lib in per_lib), None)
        peer = per_lib.get(peer_name) if peer_name else None
        for group in GROUPS:
            native = mbps(per_lib["pymtok"]["groups"][group]) if per_lib.get("pymtok") else None
            pure = mbps(per_lib["pymtok-pure"]["groups"][group]) if per_lib.get("pymtok-pure") else None
            h = mbps(hf["groups"][group]) if hf else None
            p = mbps(peer["groups"][group]) if peer else None
            same = all(
                per_lib[lib]["groups"][group]["digest"] == hf["groups"][group]["digest"]
                for lib in ("pymtok", "pymtok-pure") if per_lib.get(lib) and hf
            )
            peer_same = "" if not peer or not hf else (
                " (peer ids " + ("equal" if peer["groups"][group]["digest"] == hf["groups"][group]["digest"]
                                 else "differ") + ")")
            lines.append(f"| {model} | {group} | {fmt(native)} | {fmt(pure)} | {fmt(h)} | {peer_name or '-'} | "
                         f"{fmt(p)} | {ratio(native, h)} | {ratio(native, p)} | {ratio(pure, h)} | "
                         f"{'yes' if same else 'NO'}{peer_same} |")
    lines += ["", "## Pure-Python path against HF: best round and first pass (MB/s)",
              "The first pass is the first round over a group's texts, caches cold; "
              "the best round may reuse what earlier rounds cached.",
              "| model | group | pure | HF | pure/HF | pure first | HF first | pure/HF first |",
              "|---|---|---|---|---|---|---|---|"]
    for model, per_lib in results.items():
        pure, hf = per_lib.get("pymtok-pure"), per_lib.get("hf")
        if not pure or not hf:
            continue
        for group in GROUPS:
            u, h = pure["groups"][group], hf["groups"][group]
            best, first = (mbps(u), mbps(h)), (mbps(u, "first_seconds"), mbps(h, "first_seconds"))
            lines.append(f"| {model} | {group} | {fmt(best[0])} | {fmt(best[1])} | {ratio(*best)} | "
                         f"{fmt(first[0])} | {fmt(first[1])} | {ratio(*first)} |")
    lines += ["", "## Batch on 2 threads (MB/s), load time (s), peak RSS (MB over the process baseline)",
              "| model | pymtok batch | HF batch | peer batch | pymtok/HF | pymtok/peer | load json | load .mtok | "
              "HF load | peer load | RSS pymtok | RSS pure | RSS HF | RSS peer |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for model, per_lib in results.items():
        nat, pure, hf = per_lib.get("pymtok"), per_lib.get("pymtok-pure"), per_lib.get("hf")
        peer = next((per_lib[lib] for lib in ("tiktoken", "sentencepiece") if per_lib.get(lib)), None)
        b = {k: mbps(v["batch"]) if v else None for k, v in (("n", nat), ("h", hf), ("p", peer))}
        peer_load = next(iter(peer["load"].values())) if peer else None
        rss = {k: v["rss_mb"]["over_baseline"] if v else None for k, v in (("n", nat), ("u", pure), ("h", hf), ("p", peer))}
        lines.append(
            f"| {model} | {fmt(b['n'])} | {fmt(b['h'])} | {fmt(b['p'])} | {ratio(b['n'], b['h'])} | "
            f"{ratio(b['n'], b['p'])} | {fmt(nat['load'].get('tokenizer.json') if nat else None, '.2f')} | "
            f"{fmt(nat['load'].get('.mtok') if nat else None, '.2f')} | "
            f"{fmt(hf['load']['tokenizer.json'] if hf else None, '.2f')} | {fmt(peer_load, '.2f')} | "
            f"{fmt(rss['n'], '.0f')} | {fmt(rss['u'], '.0f')} | {fmt(rss['h'], '.0f')} | {fmt(rss['p'], '.0f')} |")
    lines += ["", "## Worst cases (seconds, one encode call)", "| model | case | pymtok | HF | ids==HF |",
              "|---|---|---|---|---|"]
    for model, per_lib in results.items():
        nat, hf = per_lib.get("pymtok"), per_lib.get("hf")
        if not nat or not hf:
            continue
        for case, entry in nat["worst"].items():
            theirs = hf["worst"].get(case)
            same = theirs is not None and theirs["digest"] == entry["digest"]
            lines.append(f"| {model} | {case} | {entry['seconds']:.2f} | "
                         f"{fmt(theirs['seconds'] if theirs else None, '.2f')} | {'yes' if same else 'NO'} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fixtures", type=Path, default=Path(os.environ.get("PYMTOK_FIXTURES", ROOT.parent / "shared" / "fixtures")))
    parser.add_argument("--models", nargs="+", default=MODELS, choices=MODELS)
    parser.add_argument("--bytes", type=int, default=400_000, help="corpus bytes per group")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="small sample, one round, no worst cases")
    parser.add_argument("--no-worst", action="store_true")
    parser.add_argument("--json", type=Path, default=ROOT / "bench" / "results.json")
    parser.add_argument("--mtok-dir", type=Path, default=Path(tempfile.gettempdir()) / "pymtok-bench")
    parser.add_argument("--worker", nargs=2, metavar=("LIBRARY", "MODEL"), help=argparse.SUPPRESS)
    parser.add_argument("--worst", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--load-worker", nargs=2, metavar=("WHAT", "MODEL"), help=argparse.SUPPRESS)
    parser.add_argument("--load-only", action="store_true", help="only the .mtok load table")
    args = parser.parse_args()
    if args.worker:
        worker(*args.worker, args.fixtures, args.mtok_dir, args.bytes, args.rounds, args.worst)
        return
    if args.load_worker:
        what, model = args.load_worker
        if what == "mtok":
            mtok_load(model, args.mtok_dir, args.rounds)
        else:
            hf_load(model, args.fixtures, args.rounds)
        return
    loads: dict[str, dict[str, Any]] = {}
    for model in (m for m in args.models if m in LOAD_MODELS):
        export_mtok(model, args.fixtures, args.mtok_dir)
        print(f"{model}: load ...", file=sys.stderr, flush=True)
        loads[model] = run_load(model, args, args.mtok_dir)
    if args.load_only:
        print("\n".join(load_report(loads)))
        return
    if args.quick:
        args.bytes, args.rounds, args.no_worst = 100_000, 1, True
    results: dict[str, dict[str, Any]] = {}
    for model in args.models:
        export_mtok(model, args.fixtures, args.mtok_dir)
        results[model] = {}
        for lib in libraries(model):
            print(f"{model}: {lib} ...", file=sys.stderr, flush=True)
            results[model][lib] = run_worker(lib, model, args, args.mtok_dir)
    lines = report(results) + [""] + load_report(loads)
    print("\n".join(lines))
    args.json.write_text(json.dumps({"machine": os.uname().nodename, "cpus": os.cpu_count(),
                                     "results": results, "loads": loads, "table": lines}, indent=1))
    print(f"\nJSON: {args.json}", file=sys.stderr)
    mismatched = [line for line in lines if "| NO" in line]
    if mismatched:
        raise SystemExit(f"ids differ from HF in {len(mismatched)} rows")


if __name__ == "__main__":
    main()
