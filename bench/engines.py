"""pymtok in data engines, run as a user runs them on a corpus, against HF ``tokenizers`` and
tiktoken in the same pipelines.

    PYMTOK_FIXTURES=/work/shared/fixtures PYMTOK_CORPUS=/work/shared/corpus \\
        python bench/engines.py [--mb 64] [--peer-mb 16] [--model llama3] [--json out.json]

The corpus files' lines (every file in turn, empty lines left out) are written once to a temporary
folder as ``--part-mb`` MB parts, both Parquet (columns ``id``: the row's number in the corpus,
``text``) and text (a record per line), repeated to ``--mb`` MB for pymtok and identity and ``--peer-mb`` MB
for the peers (several times slower: the same number of parts would take most of an hour). Each
pipeline reads the parts with the engine's own reader, tokenizes them with one batch function per
library and writes the ids (with ``id``, without the text) to Parquet:

- HF ``datasets``: ``load_dataset("parquet")``, ``map(batched=True, num_proc=N,
  remove_columns=["text"])`` over Arrow batches;
- Ray Data: ``ray.init(num_cpus=N)``, ``read_parquet``, ``map_batches`` of the batch function
  (tasks, fused with the read), ``write_parquet``;
- Dask: a ``LocalCluster`` of N single-threaded worker processes, ``dd.read_parquet``,
  ``map_partitions``, ``to_parquet``;
- ``pymtok tokenize --workers N`` over the text parts (pymtok only).

The batch functions are pymtok's ``integrations.Tokenize`` (given the Arrow batches, or the
pyarrow-backed ``str`` column of Dask's pandas partitions, it reads the texts from the column's
buffers with ``encode_arrow``, as a user following the README gets it); HF's ``encode_batch`` (one thread) with
its ids made an Arrow list column; tiktoken's ``encode_ordinary_batch`` (one thread) on an
``Encoding`` built from the same tokenizer.json (its ranks are the model's ids, its pattern the
pre-tokenizer's) — both given the texts as a list (``to_pylist``), which their APIs take; and
"identity", the text column taken out of the batch (as Arrow) and nothing tokenized: the engine's
own cost, the floor under every library's row. The tokenizer is llama3's (any byte-level
BPE model with a Split pre-tokenizer works: ``--model gpt-4o``).

Every run is a fresh process. Its engine is started first (``ray.init``, the ``LocalCluster``:
"cluster"), then the pipeline runs over a small corpus of two parts twice ("first": imports,
workers spawned, the tokenizer loaded; "fixed": what every pipeline pays again) and then over the
corpus. The steady rates are the corpus's MB beyond the small corpus's over the time beyond the
second small run's: per core, ``MB / (wall * N)``; per CPU second, over the CPU time of the run's
process and all its descendants (the engine's driver, scheduler and workers; an ended process
counted by its parent). ``engine/base`` is a rate over the library's single-process one (the same
batch function over the same corpus's batches in one fresh process, the texts already in memory):
1 is no engine overhead at all. Peak RSS per worker is ``ru_maxrss`` read in the worker at the end
of each batch (the largest over batches and workers; ``pymtok tokenize``: the largest of its
processes): pages of a memory-mapped Arrow file (``datasets``) or of Ray's object store count in
it, so the largest anonymous resident memory (``RssAnon``: the worker's heap) read at the same
points is shown beside it. pymtok's and identity's runs are repeated on a corpus twice as large:
what of the peak grows with the corpus shows there. pymtok's ids are checked against ``tok.encode``
record by record, the peers' against HF's; a wrong id, a lost or a duplicated record is a mismatch.

On a shared machine the wall rates follow the other jobs' load; the CPU rates far less so
(though an engine's idle polling counts in them): compare ratios within one run.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
# the peers on one thread per worker, as pymtok's batch function is: throughput per core
os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import pymtok  # noqa: E402
from pymtok.integrations import Tokenize  # noqa: E402

LIBS = ["pymtok", "hf", "tiktoken", "identity"]
ENGINES = ["datasets", "ray", "dask", "tokenize"]


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _anon_mb() -> float:
    """The worker's anonymous resident memory now (its heap: what it holds itself), which leaves
    out the pages of mapped files and of shared memory that its RSS counts."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Measured(Tokenize):
    """A library's batch function as a ``Tokenize``, with the worker's pid and peak RSS (MB)."""

    def __init__(self, lib: str, tokenizer: pymtok.Tokenizer, source: str) -> None:
        super().__init__(tokenizer, add_special_tokens=False)
        self.lib, self.source = lib, source
        self._encode: Callable[[list[str]], Any] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_encode": None}

    def columns(self, texts: Any) -> dict[str, Any]:
        import pyarrow as pa

        if self.lib == "pymtok":
            out = super().columns(texts)
        elif self.lib == "identity":
            out = {}
        else:
            if self._encode is None:
                # once per worker process, as pymtok's tokenizer is: Dask unpickles the function per task
                key = (self.lib, self.source)
                self._encode = _ENCODERS[key] if key in _ENCODERS else _ENCODERS.setdefault(key, encoder(*key))
            # the peers take lists of str
            listed = texts.to_pylist() if isinstance(texts, (pa.Array, pa.ChunkedArray)) else texts
            out = {"input_ids": self._encode(listed)}
        out["pid"] = pa.repeat(pa.scalar(os.getpid(), pa.int64()), len(texts))
        out["rss_mb"] = pa.repeat(pa.scalar(_rss_mb(), pa.float64()), len(texts))
        out["anon_mb"] = pa.repeat(pa.scalar(_anon_mb(), pa.float64()), len(texts))
        return out


_ENCODERS: dict[tuple[str, str], Callable[[list[str]], Any]] = {}


def encoder(lib: str, source: str) -> Callable[[list[str]], Any]:
    """texts -> Arrow list array of ids, on one thread, for a peer (source: the tokenizer.json)."""
    import pyarrow as pa

    if lib == "hf":
        from tokenizers import Tokenizer

        hf = Tokenizer.from_file(source)
        fast = getattr(hf, "encode_batch_fast", hf.encode_batch)
        return lambda texts: pa.array([e.ids for e in fast(texts, add_special_tokens=False)], pa.list_(pa.uint32()))
    import tiktoken
    from pymtok.byte_level import CHAR_TO_BYTE

    config = json.loads(Path(source).read_text(encoding="utf-8"))
    ranks = {bytes(CHAR_TO_BYTE[c] for c in token): i for token, i in config["model"]["vocab"].items()}
    pre = config["pre_tokenizer"]
    pattern = next(p["pattern"]["Regex"] for p in pre.get("pretokenizers", [pre]) if p["type"] == "Split")
    enc = tiktoken.Encoding("bench", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    return lambda texts: pa.array(enc.encode_ordinary_batch(texts, num_threads=1), pa.list_(pa.uint32()))


# -- the corpus ---------------------------------------------------------------------------


def corpus_lines() -> list[str]:
    """Lines of every corpus file, taken in turn (each part sees every script)."""
    files = sorted(Path(os.environ["PYMTOK_CORPUS"]).glob("*.txt"))
    per_file = [[line for line in f.read_text(encoding="utf-8").split("\n") if line.strip()] for f in files]
    return [line for row in itertools.zip_longest(*per_file) for line in row if line is not None]


def write_parts(folder: Path, lines: list[str], mb: float, part_mb: float, batch: int) -> list[int]:
    """``folder/{parquet,text}/part-KKKK.*`` over the lines repeated to ``mb`` MB: each part's first
    row's id, and the number of rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    (folder / "parquet").mkdir(parents=True)
    (folder / "text").mkdir()
    starts: list[int] = []
    cycle = itertools.cycle(lines)
    row = 0
    total = 0.0
    while total < mb * 1e6:
        texts: list[str] = []
        size = 0
        while size < part_mb * 1e6:
            texts.append(next(cycle))
            size += len(texts[-1].encode("utf-8"))
        name = f"part-{len(starts):04d}"
        starts.append(row)
        pq.write_table(pa.table({"id": pa.array(range(row, row + len(texts)), pa.int64()), "text": texts}),
                       folder / "parquet" / f"{name}.parquet", row_group_size=batch)
        (folder / "text" / f"{name}.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
        row += len(texts)
        total += size
    return [*starts, row]


def parts(folder: Path, kind: str) -> list[str]:
    return sorted(str(p) for p in (folder / kind).iterdir())


def corpus_mb(folder: Path) -> float:
    return sum(Path(p).stat().st_size for p in parts(folder, "text")) / 1e6 - len(parts(folder, "text")) / 1e6


# -- one run (a fresh process) ------------------------------------------------------------


def pipeline(engine: str, fn: Measured, mtok: str, workers: int, batch: int, scratch: Path) -> Callable[[Path, Path], None]:
    """The engine's pipeline: (corpus folder, output folder) -> ids written there as Parquet."""
    if engine == "datasets":
        import datasets

        datasets.disable_progress_bars()

        def go(corpus: Path, out: Path) -> None:
            ds = datasets.load_dataset("parquet", data_files=parts(corpus, "parquet"), split="train",
                                       cache_dir=str(scratch / f"cache-{out.name}"))
            mapped = ds.with_format("arrow").map(fn, batched=True, batch_size=batch, num_proc=workers if workers > 1 else None,
                                                 remove_columns=["text"])
            mapped.to_parquet(str(out / "ids.parquet"))
        return go
    if engine == "ray":
        import ray

        def go(corpus: Path, out: Path) -> None:
            ds = ray.data.read_parquet(parts(corpus, "parquet"))
            ds.map_batches(fn, batch_size=batch, batch_format="pyarrow").drop_columns(["text"]).write_parquet(str(out))
        return go
    if engine == "dask":
        import dask.dataframe as dd

        def go(corpus: Path, out: Path) -> None:
            frame = dd.read_parquet(parts(corpus, "parquet"))
            # dask_tokenize(frame, tok) with the measured batch function: map_partitions and its meta
            mapped = frame.map_partitions(fn, meta=fn(frame._meta)).drop(columns="text")
            mapped.to_parquet(str(out), write_index=False)
        return go

    def go(corpus: Path, out: Path) -> None:
        subprocess.run([sys.executable, "-m", "pymtok", "tokenize", *parts(corpus, "text"), "-o", str(out),
                        "--tokenizer", mtok, "--workers", str(workers), "--batch-size", str(batch), "--no-special"],
                       check=True, stdout=subprocess.DEVNULL)
    return go


def one_run(args: argparse.Namespace) -> dict[str, Any]:
    engine, lib, workers = args.run, args.lib, args.workers
    tok = pymtok.load(args.mtok)
    out = Path(args.out)
    if engine == "base":
        import pyarrow.parquet as pq

        texts = [t for p in parts(Path(args.corpus), "parquet") for t in pq.read_table(p, columns=["text"])["text"].to_pylist()]
        chunks = [texts[k : k + args.batch] for k in range(0, len(texts), args.batch)]
        if lib == "pymtok":
            encode = lambda c: tok.encode_batch(c, add_special_tokens=False, num_threads=1, return_flat=True).to_arrow()  # noqa: E731
        else:
            encode = encoder(lib, args.source)
        wall, cpu = time.perf_counter(), time.process_time()
        for c in chunks:
            encode(c)
        return {"cluster_s": 0.0, "first_s": 0.0, "fixed_s": 0.0, "fixed_cpu_s": 0.0,
                "wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu}
    start = time.perf_counter()
    if engine == "ray":
        import ray

        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False, configure_logging=False)
        ray.data.DataContext.get_current().enable_progress_bars = False
    elif engine == "dask":
        from distributed import Client, LocalCluster

        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)
    cluster_s = time.perf_counter() - start
    go = pipeline(engine, Measured(lib, tok, args.source), args.mtok, workers, args.batch, out.parent)
    timed: dict[str, tuple[float, float]] = {}
    for name, corpus in (("warm-up", args.small), ("small", args.small), ("corpus", args.corpus)):
        wall, cpu = time.perf_counter(), cpu_seconds()
        go(Path(corpus), out if name == "corpus" else out.parent / f"{out.name}-{name}")
        timed[name] = (time.perf_counter() - wall, cpu_seconds() - cpu)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024 if engine == "tokenize" else None
    if engine == "dask":
        client.close()
        cluster.close()
    return {"cluster_s": cluster_s, "first_s": timed["warm-up"][0], "fixed_s": timed["small"][0],
            "fixed_cpu_s": timed["small"][1], "wall_s": timed["corpus"][0], "cpu_s": timed["corpus"][1],
            "peak_rss_mb": peak}


def cpu_seconds() -> float:
    """The CPU time of this process and all its descendants, live or ended (a process that ended
    was waited by its parent, which counts it among its children's times)."""
    import psutil

    me = psutil.Process()
    total = sum(me.cpu_times()[:4])
    for child in me.children(recursive=True):
        try:
            total += sum(child.cpu_times()[:4])
        except psutil.NoSuchProcess:
            pass
    return total


# -- checking the output ------------------------------------------------------------------


class Reference:
    """Each distinct line's ids (the corpus repeats them), flat: the ids of the row with id k are
    line ``k % len(lines)``'s."""

    def __init__(self, ids: list[list[int]]) -> None:
        self.lengths = np.array([len(i) for i in ids], np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.lengths)])
        self.values = np.fromiter(itertools.chain.from_iterable(ids), np.uint32, int(self.offsets[-1]))

    def mismatches(self, rows: Any, values: Any, lengths: Any, total: int) -> int:
        """Rows whose ids differ, plus records lost or written twice."""
        line = rows % len(self.lengths)
        want = self.lengths[line]
        bad = lengths != want
        keep = ~bad
        # the values of the rows of the right length, against the reference's, all at once
        ends = np.cumsum(lengths)
        starts = ends - lengths
        n = int(want[keep].sum())
        got = values[np.repeat(starts[keep], want[keep]) + _ramp(want[keep], n)]
        expected = self.values[np.repeat(self.offsets[line][keep], want[keep]) + _ramp(want[keep], n)]
        row_of = np.repeat(np.flatnonzero(keep), want[keep])
        bad[np.unique(row_of[got != expected])] = True
        counts = np.bincount(rows, minlength=total)
        return int(bad.sum()) + int((counts != 1).sum()) + int((rows >= total).sum())


def _ramp(lengths: Any, n: int) -> Any:
    """0..len-1 for each length, concatenated."""
    return np.arange(n) - np.repeat(np.cumsum(lengths) - lengths, lengths)


def read_output(engine: str, out: Path, starts: list[int]) -> tuple[Any, Any, Any, dict[str, float]]:
    """(row ids, flat ids, lengths, peak RSS and anonymous memory per worker) of a run's Parquet
    output."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = []
    for f in sorted(out.rglob("*.parquet")):
        table = pq.read_table(f)
        if engine == "tokenize":  # shards NAME.KKKKK.parquet: records from 1 of part NAME
            part = int(f.name.split(".")[0].split("-")[1])
            table = table.append_column("id", pa.compute.add(table["record"], starts[part] - 1))
        tables.append(table)
    table = pa.concat_tables(tables, promote_options="permissive")
    ids = table["input_ids"].combine_chunks() if "input_ids" in table.column_names else None
    rows = table["id"].to_numpy()
    peak = {name: float(pa.compute.max(table[column]).as_py()) for name, column in
            (("peak_rss_mb", "rss_mb"), ("peak_anon_mb", "anon_mb")) if column in table.column_names}
    if ids is None:
        return rows, None, None, peak
    return rows, ids.flatten().to_numpy(), ids.value_lengths().to_numpy().astype(np.int64), peak


# -- the driver ---------------------------------------------------------------------------


def spawn(args: argparse.Namespace, engine: str, lib: str, workers: int, corpus: Path, small: Path, out: Path) -> dict[str, Any]:
    command = [sys.executable, __file__, "--run", engine, "--lib", lib, "--workers", str(workers),
               "--corpus", str(corpus), "--small", str(small), "--out", str(out), "--mtok", args.mtok,
               "--source", args.source, "--batch", str(args.batch)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{engine} {lib} {workers} failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=float, default=64.0, help="pymtok's corpus (MB of UTF-8); its doubling is run too")
    parser.add_argument("--peer-mb", type=float, default=16.0, help="the peers' corpus (MB)")
    parser.add_argument("--part-mb", type=float, default=4.0, help="the size of one corpus file (MB)")
    parser.add_argument("--model", default="llama3")
    parser.add_argument("--batch", type=int, default=1000, help="texts per batch (and per Parquet row group)")
    parser.add_argument("--engines", nargs="*", default=ENGINES, choices=ENGINES)
    parser.add_argument("--libs", nargs="*", default=LIBS, choices=LIBS)
    parser.add_argument("--json")
    for name in ("run", "lib", "corpus", "small", "out", "mtok", "source"):
        parser.add_argument(f"--{name}", help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:
        print(json.dumps(one_run(args)))
        return

    args.source = str(Path(os.environ["PYMTOK_FIXTURES"]) / "tokenizers" / args.model / "tokenizer.json")
    tmp = Path(tempfile.mkdtemp(prefix="pymtok-engines-"))
    try:
        run_all(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_all(args: argparse.Namespace, tmp: Path) -> None:
    args.mtok = str(pymtok.export(args.source, tmp / "tok"))
    tok = pymtok.load(args.mtok)
    lines = corpus_lines()
    # the small corpus: two parts, so that both workers of a run start in it
    sizes = {"small": (args.part_mb / 4, args.part_mb / 8), "peers": (args.peer_mb, args.part_mb),
             "pymtok": (args.mb, args.part_mb), "double": (2 * args.mb, args.part_mb)}
    corpora: dict[str, tuple[Path, list[int]]] = {}
    for name, (mb, part) in sizes.items():
        corpora[name] = (tmp / name, write_parts(tmp / name, lines, mb, part, args.batch))
    print(f"{args.model}; {len(lines)} distinct lines; corpora (MB): "
          + ", ".join(f"{name} {corpus_mb(folder):.1f}" for name, (folder, _) in corpora.items())
          + f"; batches of {args.batch}", flush=True)
    ours = Reference([tok.encode(line, add_special_tokens=False) for line in lines])
    hf = Reference(encoder("hf", args.source)(lines).to_pylist())
    agree = int((ours.lengths != hf.lengths).sum()) + int((ours.values != hf.values).sum() if len(ours.values) == len(hf.values) else 1)
    print(f"tok.encode against HF on the distinct lines: {'equal' if not agree else 'DIFFERENT'}", flush=True)

    rows: list[dict[str, Any]] = []
    base: dict[str, float] = {}
    base_cpu: dict[str, float] = {}
    small_mb = corpus_mb(corpora["small"][0])

    def measure(engine: str, lib: str, workers: int, corpus: str) -> None:
        folder, starts = corpora[corpus]
        out = tmp / "out" / f"{engine}-{lib}-{workers}-{corpus}"
        out.mkdir(parents=True)
        result = spawn(args, engine, lib, workers, folder, corpora["small"][0], out)
        # the steady rates: the corpus's MB beyond the small run's over the time beyond it
        mb = corpus_mb(folder) - (small_mb if engine != "base" else 0.0)
        row = {"engine": engine, "lib": lib, "workers": workers, "corpus": corpus, "mb": round(corpus_mb(folder), 2),
               **result, "mb_s_per_core": mb / ((result["wall_s"] - result["fixed_s"]) * workers),
               "mb_per_cpu_s": mb / (result["cpu_s"] - result["fixed_cpu_s"])}
        if engine == "base":
            base[lib] = row["mb_s_per_core"]
            base_cpu[lib] = row["mb_per_cpu_s"]
        else:
            ids, values, lengths, peak = read_output(engine, out, starts)
            row["peak_rss_mb"] = row.get("peak_rss_mb") or peak.get("peak_rss_mb")
            row["peak_anon_mb"] = peak.get("peak_anon_mb")
            total = starts[-1]
            if lib == "identity":
                row["mismatches"] = int((np.bincount(ids, minlength=total) != 1).sum())
            else:
                row["mismatches"] = (ours if lib == "pymtok" else hf).mismatches(ids, values, lengths, total)
            row["ratio"] = row["mb_s_per_core"] / base[lib] if lib in base else None
            row["cpu_ratio"] = row["mb_per_cpu_s"] / base_cpu[lib] if lib in base_cpu else None
        shutil.rmtree(out, ignore_errors=True)
        rows.append(row)
        print(json.dumps(row), flush=True)

    for lib in args.libs:
        if lib != "identity":
            measure("base", lib, 1, "pymtok" if lib == "pymtok" else "peers")
    for engine in args.engines:
        for workers in (1, 2):
            for lib in args.libs:
                if engine == "tokenize" and lib != "pymtok":
                    continue
                measure(engine, lib, workers, "peers" if lib in ("hf", "tiktoken") else "pymtok")
            # the engine's own memory at both sizes, beside pymtok's: what pymtok adds to it
            for lib in ("pymtok", "identity"):
                if lib in args.libs and not (engine == "tokenize" and lib == "identity"):
                    measure(engine, lib, workers, "double")
    table(rows, args.libs)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


def table(rows: list[dict[str, Any]], libs: list[str]) -> None:
    peers = [lib for lib in libs if lib != "identity"]
    print("\n| engine | workers | " + " | ".join(f"{lib}: MB/s/core (wall ratio; CPU ratio)" for lib in peers)
          + " | identity MB/s/core | start-up s (cluster + first run; fixed per run) | pymtok peak RSS/worker (corpus, x2) |")
    print("|---|---|" + "---|" * len(peers) + "---|---|---|")
    keys = sorted({(r["engine"], r["workers"]) for r in rows}, key=lambda k: (k[0] != "base", k[0], k[1]))
    for engine, workers in keys:
        here = [r for r in rows if r["engine"] == engine and r["workers"] == workers]
        found = {r["lib"]: r for r in here if r["corpus"] != "double"}
        cells = []
        for lib in peers:
            r = found.get(lib)
            if r is None:
                cells.append("–")
            elif engine == "base":
                cells.append(f"{r['mb_s_per_core']:.2f}")
            else:
                cells.append(f"{r['mb_s_per_core']:.2f} ({r['ratio']:.2f}; {r['cpu_ratio']:.2f})"
                             + (f" {r['mismatches']} WRONG" if r["mismatches"] else ""))
        ident = found.get("identity")
        cells.append(f"{ident['mb_s_per_core']:.1f}" if ident else "–")
        ours = sorted((r for r in here if r["lib"] == "pymtok"), key=lambda r: r["mb"])
        if engine == "base" or not ours:
            cells += ["–", "–"]
        else:
            cells.append(f"{ours[0]['cluster_s']:.1f} + {ours[0]['first_s']:.1f}; {ours[0]['fixed_s']:.1f}")
            idents = sorted((r for r in here if r["lib"] == "identity"), key=lambda r: r["mb"])
            cell = " / ".join(f"{r['peak_rss_mb']:.0f}" for r in ours) + " MB"
            if all(r.get("peak_anon_mb") for r in ours):
                cell += "; anon " + " / ".join(f"{r['peak_anon_mb']:.0f}" for r in ours)
                if len(idents) == len(ours) and all(r.get("peak_anon_mb") for r in idents):
                    cell += " (identity " + " / ".join(f"{r['peak_anon_mb']:.0f}" for r in idents) + ")"
                cell += " MB"
            cells.append(cell)
        print(f"| {'single process' if engine == 'base' else engine} | {workers} | " + " | ".join(cells) + " |")
    print("\n(wall ratio: MB/s per core over the single process's; CPU ratio: MB per CPU second of all the"
          " run's processes over the single process's)")


if __name__ == "__main__":
    main()
