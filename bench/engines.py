"""pymtok in data engines against HF ``tokenizers`` and tiktoken in the same pipelines.

    PYMTOK_FIXTURES=/work/shared/fixtures PYMTOK_CORPUS=/work/shared/corpus \\
        python bench/engines.py [--mb 4] [--seconds 2] [--model llama3] [--json out.json]

The corpus files' lines (every file in turn), tokenized by one batch function per library
(pymtok's ``integrations.Tokenize``; HF ``encode_batch``; tiktoken ``encode_ordinary_batch``; each
on one thread, its ids as an Arrow list column) on each engine: HF ``datasets.map(batched=True,
num_proc=N)``, Ray Data ``map_batches`` (N actors) and Dask ``map_partitions`` (a ``LocalCluster``
of N worker processes), for N = 1 and 2. The tokenizer is llama3's (the same vocabulary in all
three: tiktoken's ranks are its ids); every pipeline's ids are checked against HF's.

Rates are MB of UTF-8 per CPU second, which a shared machine disturbs far less than wall time:
the baseline's is this process's CPU time for each library's batch function on one thread over
``--mb`` MB; an engine's is the CPU time its workers spent from each one's first batch's arrival
(before the texts leave Arrow) to its last batch's end, after a warm-up run (workers started,
tokenizer loaded) — the steady cost per batch that a large corpus sees, the engine's start-up
left out; the wall rate is kept in the JSON. An engine run is sized to about ``--seconds`` of
tokenizing per worker. ``engine/base`` is an engine's rate per core over the baseline's (1: no
engine overhead). Peak memory is the largest RSS a worker reached while tokenizing.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
# the peers on one thread per worker, as pymtok's batch function is: throughput per core
os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import pymtok  # noqa: E402
from pymtok.integrations import Tokenize  # noqa: E402

LIBS = ["pymtok", "hf", "tiktoken"]
ENGINES = ["datasets", "ray", "dask"]


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Measured(Tokenize):
    """A library's batch function as a ``Tokenize``: ``input_ids`` and the worker's peak RSS (MB)."""

    def __init__(self, lib: str, source: str) -> None:
        self.lib, self.source = lib, source
        self.column = "text"
        self._encode: Callable[[list[str]], Any] | None = None
        self._cpu_start = 0.0

    def __getstate__(self) -> dict[str, Any]:
        return {"lib": self.lib, "source": self.source, "column": self.column, "_encode": None, "_cpu_start": 0.0}

    def __call__(self, batch: Any) -> Any:
        self._cpu_start = time.process_time()
        return super().__call__(batch)

    def columns(self, texts: list[str]) -> dict[str, Any]:
        import pyarrow as pa

        if self._encode is None:
            self._encode = encoder(self.lib, self.source)
        ids = self._encode(texts)
        n = len(texts)
        # the worker's CPU time from the batch's arrival (before its texts leave Arrow) to here
        return {
            "input_ids": ids, "rss_mb": pa.array([_rss_mb()] * n, pa.float64()),
            "pid": pa.array([os.getpid()] * n, pa.int64()),
            "cpu_start": pa.array([self._cpu_start] * n, pa.float64()),
            "cpu_end": pa.array([time.process_time()] * n, pa.float64()),
        }


def encoder(lib: str, source: str) -> Callable[[list[str]], Any]:
    """texts -> Arrow list array of ids, on one thread, for one library (source: the tokenizer.json)."""
    import pyarrow as pa

    if lib == "pymtok":
        tok = pymtok.load(source)
        return lambda texts: tok.encode_batch(texts, add_special_tokens=False, num_threads=1, return_flat=True).to_arrow()
    if lib == "hf":
        from tokenizers import Tokenizer

        hf = Tokenizer.from_file(source)
        fast = getattr(hf, "encode_batch_fast", hf.encode_batch)
        return lambda texts: pa.array([e.ids for e in fast(texts, add_special_tokens=False)], pa.list_(pa.uint32()))
    import tiktoken
    from pymtok.byte_level import CHAR_TO_BYTE

    config = json.loads(Path(source).read_text(encoding="utf-8"))
    ranks = {bytes(CHAR_TO_BYTE[c] for c in token): i for token, i in config["model"]["vocab"].items()}
    pattern = next(p["pattern"]["Regex"] for p in config["pre_tokenizer"]["pretokenizers"] if p["type"] == "Split")
    enc = tiktoken.Encoding("bench", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    return lambda texts: pa.array(enc.encode_ordinary_batch(texts, num_threads=1), pa.list_(pa.uint32()))


def corpus(mb: float) -> list[str]:
    """Lines of every corpus file, taken in turn (each run sees every script), to ``mb`` MB."""
    files = sorted(Path(os.environ["PYMTOK_CORPUS"]).glob("*.txt"))
    per_file = [[line for line in f.read_text(encoding="utf-8").split("\n") if line.strip()] for f in files]
    lines = [line for row in itertools.zip_longest(*per_file) for line in row if line is not None]
    out: list[str] = []
    size = 0
    while size < mb * 1e6:
        for line in lines:
            out.append(line)
            size += len(line.encode("utf-8"))
            if size >= mb * 1e6:
                break
    return out


def worker_cpu(table: Any) -> float:
    """The CPU seconds the workers spent from their first batch's arrival to their last's end."""
    spans: dict[int, list[float]] = {}
    for pid, start, end in zip(table["pid"].to_pylist(), table["cpu_start"].to_pylist(), table["cpu_end"].to_pylist()):
        span = spans.setdefault(pid, [start, end])
        span[0], span[1] = min(span[0], start), max(span[1], end)
    return sum(end - start for start, end in spans.values())


def utf8_mb(texts: list[str]) -> float:
    return sum(len(t.encode("utf-8")) for t in texts) / 1e6


def best(rounds: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(rounds):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def run_engine(engine: str, fn: Measured, texts: list[str], workers: int, batch: int, rounds: int, ray: Any) -> tuple[float, Any]:
    """(best wall seconds, the output as a pyarrow Table) of one pipeline."""
    import pyarrow as pa

    table = pa.table({"text": texts})
    if engine == "datasets":
        import datasets

        datasets.disable_progress_bars()
        ds = datasets.Dataset(table).with_format("arrow")

        def go() -> Any:
            out = ds.map(fn, batched=True, batch_size=batch, num_proc=workers if workers > 1 else None,
                         keep_in_memory=True, load_from_cache_file=False)
            return out.data.table
    elif engine == "ray":
        blocks = [table.slice(k, batch * 4) for k in range(0, len(texts), batch * 4)]

        def go() -> Any:
            ds = ray.data.from_arrow(blocks).map_batches(
                Measured, fn_constructor_args=(fn.lib, fn.source), concurrency=workers, num_cpus=0.5,
                batch_size=batch, batch_format="pyarrow",
            )
            return pa.concat_tables(ray.get(list(ds.to_arrow_refs())))
    else:
        import dask.dataframe as dd
        import pandas as pd

        frame = dd.from_pandas(pd.DataFrame({"text": pd.array(texts, dtype="string[pyarrow]")}),
                               chunksize=batch)

        def go() -> Any:
            out = frame.map_partitions(fn, meta=fn(frame._meta)).compute()
            return pa.Table.from_pandas(out, preserve_index=False)

        from distributed import Client, LocalCluster

        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
                Client(cluster):
            go()
            return best(rounds, go)
    go()  # warm-up: workers started, tokenizer loaded
    return best(rounds, go)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=float, default=4.0, help="the baseline corpus (MB of UTF-8)")
    parser.add_argument("--model", default="llama3")
    parser.add_argument("--batch", type=int, default=1000, help="texts per batch")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=2.0, help="tokenizing time per worker of an engine run")
    parser.add_argument("--engines", nargs="*", default=ENGINES)
    parser.add_argument("--json")
    args = parser.parse_args()

    source = str(Path(os.environ["PYMTOK_FIXTURES"]) / "tokenizers" / args.model / "tokenizer.json")
    tmp = Path(tempfile.mkdtemp(prefix="pymtok-engines-"))
    mtok = str(pymtok.export(source, tmp))
    sources = {"pymtok": mtok, "hf": source, "tiktoken": source}
    texts = corpus(args.mb)
    mb = utf8_mb(texts)
    print(f"{len(texts)} texts, {mb:.2f} MB, batches of {args.batch}, {args.model}", flush=True)

    rows: list[dict[str, Any]] = []
    base: dict[str, float] = {}
    want: list[list[int]] | None = None
    for lib in ["hf", *(lib for lib in LIBS if lib != "hf")]:  # HF's ids first: the reference
        encode = encoder(lib, sources[lib])
        chunks = [texts[k : k + args.batch] for k in range(0, len(texts), args.batch)]
        rss_before = _rss_mb()
        cpu = time.process_time()
        _, outs = best(args.rounds, lambda: [encode(c) for c in chunks])
        seconds = (time.process_time() - cpu) / args.rounds
        ids = [row for out in outs for row in out.to_pylist()]
        want = ids if want is None else want
        base[lib] = mb / seconds
        rows.append({"engine": "single process", "lib": lib, "workers": 1, "mb_s_per_core": base[lib],
                     "ratio": 1.0, "peak_rss_mb": _rss_mb(), "rss_before_mb": rss_before,
                     "mismatches": sum(a != b for a, b in zip(ids, want))})
        print(rows[-1], flush=True)

    ray = None
    if "ray" in args.engines:
        import ray

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    for engine in args.engines:
        for workers in (1, 2):
            for lib in LIBS:
                # about --seconds of tokenizing per worker at the library's own rate
                texts_run = corpus(base[lib] * args.seconds * workers)
                fn = Measured(lib, sources[lib])
                seconds, table = run_engine(engine, fn, texts_run, workers, args.batch, args.rounds, ray)
                ids = table["input_ids"].to_pylist()
                mb_run = utf8_mb(texts_run)
                cpu = worker_cpu(table)
                # the engines may reorder the rows (Ray's blocks): HF's ids of the texts as they came out
                reference = encoder("hf", source)(table["text"].to_pylist()).to_pylist()
                rows.append({
                    "engine": engine, "lib": lib, "workers": workers, "mb": mb_run,
                    "wall_mb_s_per_core": mb_run / seconds / workers,
                    "mb_s_per_core": mb_run / cpu, "ratio": mb_run / cpu / base[lib],
                    "peak_rss_mb": max(table["rss_mb"].to_pylist()),
                    "mismatches": sum(a != b for a, b in zip(ids, reference)) + abs(len(ids) - len(texts_run)),
                })
                print(rows[-1], flush=True)
    if ray is not None:
        ray.shutdown()

    print(f"\n| engine | workers | {' | '.join(f'{lib} MB/s/core (engine/base)' for lib in LIBS)} | pymtok peak RSS/worker |")
    print("|---|---|" + "---|" * len(LIBS) + "---|")
    keys = sorted({(r["engine"], r["workers"]) for r in rows}, key=lambda k: (k[0] != "single process", k))
    for engine, workers in keys:
        cells = {r["lib"]: r for r in rows if r["engine"] == engine and r["workers"] == workers}
        line = " | ".join(
            f"{cells[lib]['mb_s_per_core']:.2f} ({cells[lib]['ratio']:.2f})" + ("" if not cells[lib]["mismatches"] else " WRONG IDS")
            for lib in LIBS
        )
        print(f"| {engine} | {workers} | {line} | {cells['pymtok']['peak_rss_mb']:.0f} MB |")
    print("\n(MB/s per CPU second of the workers; engine/base: over the single process's)")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
