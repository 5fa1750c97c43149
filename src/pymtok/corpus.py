"""``pymtok tokenize``: corpus files (text, JSON Lines, Parquet) to Parquet shards of ``input_ids``.

Each input file is cut into shards of ``shard_size`` records; a worker process streams its shard
a batch at a time (memory bounded by the batch, not the corpus) and writes
``OUT/NAME.KKKKK.parquet`` (columns ``record``, the record's number in its file from 1, and
``input_ids``), with ``.bin`` (the ids as little-endian uint32) and ``.idx`` (int64 offsets from 0,
one per row and one more) when asked. Everything is written under a temporary name and renamed,
the Parquet file last: a shard is there whole or not at all, so a run killed at any point loses
nothing it wrote, and the next run skips the shards already written. Each shard records the
settings and the input file's size and time it was made from; a rerun with others refuses it
rather than mixing two runs. Records that cannot be tokenized (not UTF-8, not JSON, no such field,
not a string, a lone surrogate) are listed in ``NAME.KKKKK.bad.jsonl`` with their record numbers.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from .errors import PymtokError
from .tokenizer import FlatIds, Tokenizer

FORMATS = {".txt": "text", ".jsonl": "jsonl", ".parquet": "parquet"}
_FINGERPRINT_KEY = b"pymtok.tokenize"


@dataclass(frozen=True)
class Settings:
    tokenizer: str
    field: str = "text"
    add_special_tokens: bool = True
    batch_size: int = 1000
    shard_size: int = 100_000
    bin: bool = False
    tokenizer_digest: str = ""


@dataclass(frozen=True)
class Shard:
    source: str
    format: str
    index: int
    start: int  # records before the shard in its file
    stop: int
    offset: int  # the byte where the shard's first line starts (text and JSON Lines)
    stem: str  # OUT/NAME.KKKKK, without a suffix
    fingerprint: str

    def paths(self, settings: Settings) -> list[Path]:
        """The files a finished shard has, the Parquet one (written last) last."""
        suffixes = [".bin", ".idx"] if settings.bin else []
        return [Path(self.stem + s) for s in [*suffixes, ".parquet"]]


@dataclass
class ShardResult:
    shard: Shard
    records: int = 0
    tokens: int = 0
    bad: list[tuple[int, str]] = field(default_factory=list)
    skipped: bool = False


def tokenizer_digest(path: str) -> str:
    """SHA-256 of the tokenizer file, or of a folder's files: what a shard was tokenized with."""
    p = Path(path)
    digest = hashlib.sha256()
    for f in sorted(p.iterdir()) if p.is_dir() else [p]:
        if f.is_file():
            digest.update(f.name.encode() + b"\0" + f.read_bytes())
    return digest.hexdigest()


def input_format(path: str, forced: str | None) -> str:
    if forced is not None:
        return forced
    fmt = FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise PymtokError(
            f"{path}: cannot tell the format from the suffix {Path(path).suffix!r} "
            f"({', '.join(FORMATS)} are known): pass --format text, jsonl or parquet"
        )
    return fmt


def plan(inputs: Sequence[str], out: Path, settings: Settings, forced_format: str | None = None) -> list[Shard]:
    """The shards of every input, in order."""
    names: dict[str, str] = {}
    shards: list[Shard] = []
    for source in inputs:
        name = Path(source).name
        if name in names:
            raise PymtokError(f"{names[name]} and {source} share the name {name!r}, which their shards are named after")
        names[name] = source
        fmt = input_format(source, forced_format)
        stat = os.stat(source)
        fingerprint = json.dumps({
            "tokenizer": settings.tokenizer_digest, "field": settings.field if fmt != "text" else None,
            "format": fmt, "add_special_tokens": settings.add_special_tokens, "shard_size": settings.shard_size,
            "input_size": stat.st_size, "input_mtime_ns": stat.st_mtime_ns,
        }, sort_keys=True)
        starts = _parquet_starts(source, settings) if fmt == "parquet" else _line_starts(source, settings.shard_size)
        for k, (start, stop, offset) in enumerate(starts):
            shards.append(Shard(source, fmt, k, start, stop, offset, str(out / f"{name}.{k:05d}"), fingerprint))
    return shards


def _line_starts(path: str, shard_size: int) -> list[tuple[int, int, int]]:
    """(first record, end record, byte offset) of each shard of a line-per-record file."""
    bounds: list[tuple[int, int, int]] = []
    lines = 0
    at = 0
    with open(path, "rb") as f:
        for line in f:
            if lines % shard_size == 0:
                bounds.append((lines, lines, at))
            lines += 1
            at += len(line)
            first, _, offset = bounds[-1]
            bounds[-1] = (first, lines, offset)
    return bounds


def _parquet_starts(path: str, settings: Settings) -> list[tuple[int, int, int]]:
    pf = _parquet_file(path, settings.field)
    rows = pf.metadata.num_rows
    return [(start, min(start + settings.shard_size, rows), 0) for start in range(0, rows, settings.shard_size)]


def _parquet_file(path: str, column: str) -> Any:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise PymtokError(f"{path}: not a Parquet file ({exc})") from None
    schema = pf.schema_arrow
    if column not in schema.names:
        raise PymtokError(f"{path}: no column {column!r} (it has {schema.names}); pick one with --field")
    kind = schema.field(column).type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind)):
        raise PymtokError(f"{path}: column {column!r} holds {kind}, not strings")
    return pf


def done(shard: Shard, settings: Settings) -> bool:
    """Whether ``shard`` was written by an earlier run; an error if by a run with other settings."""
    import pyarrow.parquet as pq

    paths = shard.paths(settings)
    if not paths[-1].exists():
        return False
    try:
        meta = pq.read_schema(paths[-1]).metadata or {}
    except OSError as exc:
        raise PymtokError(f"{paths[-1]}: not a shard pymtok wrote ({exc}); remove it to redo the shard") from None
    if meta.get(_FINGERPRINT_KEY, b"").decode() != shard.fingerprint:
        raise PymtokError(
            f"{paths[-1]} was written with other settings, another tokenizer or another version of "
            f"{shard.source}: write to a new output folder, or remove the old shards"
        )
    return all(p.exists() for p in paths[:-1])


def bad_records(shard: Shard) -> list[tuple[int, str]]:
    path = Path(shard.stem + ".bad.jsonl")
    if not path.exists():
        return []
    return [tuple(json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines()]  # type: ignore[misc]


# -- reading records ----------------------------------------------------------------------

Batch = tuple[list[int], list[str], list[tuple[int, str]]]  # record numbers, texts, bad records


def _batches(shard: Shard, settings: Settings) -> Iterator[Batch]:
    if shard.format == "parquet":
        yield from _parquet_batches(shard, settings)
        return
    with open(shard.source, "rb") as f:
        f.seek(shard.offset)
        first = shard.start + 1
        while first <= shard.stop:
            raws = list(itertools.islice(f, min(settings.batch_size, shard.stop + 1 - first)))
            if not raws:
                break
            yield _text_batch(raws, first) if shard.format == "text" else _records(raws, first, shard.format, settings.field)
            first += len(raws)


def _text_batch(raws: list[bytes], first: int) -> Batch:
    """A text batch decoded whole: UTF-8 cannot run across a newline, so the lines decode at once
    exactly when each does (the line-by-line path finds the ones that do not)."""
    try:
        text = b"".join(raws).decode("utf-8")
    except UnicodeDecodeError:
        return _records(raws, first, "text", "")
    lines = text.replace("\r\n", "\n").split("\n")
    if raws[-1].endswith(b"\n"):
        lines.pop()
    elif lines[-1].endswith("\r"):
        lines[-1] = lines[-1][:-1]
    return list(range(first, first + len(lines))), lines, []


def _records(raws: list[bytes], first: int, fmt: str, field_name: str) -> Batch:
    numbers: list[int] = []
    texts: list[str] = []
    bad: list[tuple[int, str]] = []
    for number, raw in enumerate(raws, first):
        raw = raw[:-1] if raw.endswith(b"\n") else raw
        raw = raw[:-1] if raw.endswith(b"\r") else raw
        text, problem = _record(raw, fmt, field_name)
        if problem is None:
            numbers.append(number)
            texts.append(text)
        else:
            bad.append((number, problem))
    return numbers, texts, bad


def _record(raw: bytes, fmt: str, field_name: str) -> tuple[str, str | None]:
    """(text, None), or ("", why the record cannot be tokenized)."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return "", f"not UTF-8 at byte {exc.start}"
    if fmt == "text":
        return line, None
    if not line.strip():
        return "", "empty line"
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        return "", f"not JSON ({exc.msg} at column {exc.colno})"
    if not isinstance(value, dict):
        return "", f"a JSON {type(value).__name__}, not an object"
    if field_name not in value:
        return "", f"no field {field_name!r}"
    text = value[field_name]
    if not isinstance(text, str):
        return "", f"field {field_name!r} is a JSON {type(text).__name__}, not a string"
    return text, None


def _parquet_batches(shard: Shard, settings: Settings) -> Iterator[Batch]:
    pf = _parquet_file(shard.source, settings.field)
    groups: list[int] = []
    first = None
    row = 0
    for g in range(pf.metadata.num_row_groups):
        n = pf.metadata.row_group(g).num_rows
        if row + n > shard.start and row < shard.stop:
            groups.append(g)
            first = row if first is None else first
        row += n
    row = first or 0
    for batch in pf.iter_batches(batch_size=settings.batch_size, row_groups=groups, columns=[settings.field]):
        values = batch.column(0).to_pylist()
        lo, hi = max(shard.start - row, 0), min(shard.stop - row, len(values))
        numbers: list[int] = []
        texts: list[str] = []
        bad: list[tuple[int, str]] = []
        for k in range(lo, max(lo, hi)):
            if values[k] is None:
                bad.append((row + k + 1, "null"))
            else:
                numbers.append(row + k + 1)
                texts.append(values[k])
        row += len(values)
        if numbers or bad:
            yield numbers, texts, bad


# -- writing a shard ----------------------------------------------------------------------

_TOKENIZERS: dict[str, Tokenizer] = {}


def _tokenizer(path: str) -> Tokenizer:
    """The tokenizer at ``path``, loaded once per worker process."""
    if path not in _TOKENIZERS:
        from . import load

        _TOKENIZERS[path] = load(path)
    return _TOKENIZERS[path]


def _encode(
    tok: Tokenizer, numbers: list[int], texts: list[str], bad: list[tuple[int, str]], special: bool
) -> tuple[list[int], FlatIds]:
    """(the record numbers kept, their ids); a text encode refuses is moved to ``bad``."""
    try:
        return numbers, tok.encode_batch(texts, add_special_tokens=special, num_threads=1, return_flat=True)
    except (ValueError, TypeError):
        pass
    # a text encode refuses (a lone surrogate from a JSON escape): find it, keep the others
    kept_numbers: list[int] = []
    kept: list[str] = []
    for number, text in zip(numbers, texts):
        try:
            tok.encode(text, add_special_tokens=special)
        except (ValueError, TypeError) as exc:
            bad.append((number, str(exc)))
            continue
        kept_numbers.append(number)
        kept.append(text)
    bad.sort()
    return kept_numbers, tok.encode_batch(kept, add_special_tokens=special, num_threads=1, return_flat=True)


def write_shard(shard: Shard, settings: Settings) -> ShardResult:
    """Tokenize ``shard`` and write its files (temporary names, renamed when complete)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    tok = _tokenizer(settings.tokenizer)
    result = ShardResult(shard)
    finals = shard.paths(settings)
    bad_path = Path(shard.stem + ".bad.jsonl")
    tag = f".tmp-{os.getpid()}"
    temps = [Path(str(p) + tag) for p in [*finals, bad_path]]
    for stale in Path(shard.stem).parent.glob(Path(shard.stem).name + ".*.tmp-*"):
        stale.unlink(missing_ok=True)
    schema = pa.schema(
        [("record", pa.int64()), ("input_ids", pa.list_(pa.uint32()))],
        metadata={_FINGERPRINT_KEY: shard.fingerprint.encode()},
    )
    bin_file = idx_file = None
    try:
        if settings.bin:
            bin_file, idx_file = open(temps[0], "wb"), open(temps[1], "wb")
            idx_file.write((0).to_bytes(8, "little"))
        # ids have too many distinct values for a dictionary to pay: it only cost time (~40% of the writing)
        with pq.ParquetWriter(temps[len(finals) - 1], schema, use_dictionary=False) as writer:
            for numbers, texts, bad in _batches(shard, settings):
                numbers, flat = _encode(tok, numbers, texts, bad, settings.add_special_tokens)
                result.bad.extend(bad)
                ids = flat.to_arrow()
                offsets = pc.cast(ids.offsets, pa.int32())
                writer.write_table(pa.table(
                    [pa.array(numbers, pa.int64()), pa.ListArray.from_arrays(offsets, ids.values)], schema=schema
                ))
                if bin_file is not None and idx_file is not None:
                    _write_flat(bin_file, idx_file, flat, result.tokens)
                result.records += len(numbers)
                result.tokens += len(flat.ids)
        for f in (bin_file, idx_file):
            if f is not None:
                f.close()
        if result.bad:
            temps[-1].write_text("".join(json.dumps(b) + "\n" for b in result.bad), encoding="utf-8")
            os.replace(temps[-1], bad_path)
        else:
            bad_path.unlink(missing_ok=True)
        for temp, final in zip(temps, finals):
            os.replace(temp, final)
    finally:
        for f in (bin_file, idx_file):
            if f is not None:
                f.close()
        for temp in temps:
            temp.unlink(missing_ok=True)
    return result


def _write_flat(bin_file: Any, idx_file: Any, flat: FlatIds, base: int) -> None:
    ids, offsets = flat.ids, flat.offsets[1:]
    if base:
        offsets = type(offsets)("q", (base + o for o in offsets))
    if sys.byteorder == "big":
        ids, offsets = type(ids)(ids.typecode, ids), type(offsets)("q", offsets)
        ids.byteswap()
        offsets.byteswap()
    bin_file.write(ids)
    idx_file.write(offsets)


# -- a run --------------------------------------------------------------------------------


def run(
    shards: Sequence[Shard], settings: Settings, workers: int,
    progress: Callable[[str, int, int], None] | None = None,
) -> list[ShardResult]:
    """Write every shard not yet written, on ``workers`` processes; the results in shard order."""
    results: list[ShardResult | None] = [None] * len(shards)
    todo: list[int] = []
    for k, shard in enumerate(shards):
        if done(shard, settings):
            results[k] = ShardResult(shard, bad=bad_records(shard), skipped=True)
        else:
            todo.append(k)
    finished = len(shards) - len(todo)

    def advance() -> None:
        if progress is not None:
            progress("shards", finished, len(shards))

    advance()
    if workers <= 1:
        for k in todo:
            results[k] = write_shard(shards[k], settings)
            finished += 1
            advance()
    else:
        with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
            futures: list[tuple[int, Future[ShardResult]]] = [(k, pool.submit(write_shard, shards[k], settings)) for k in todo]
            try:
                for k, future in futures:
                    results[k] = future.result()
                    finished += 1
                    advance()
            except BaseException:
                for _, future in futures:
                    future.cancel()
                raise
    return [r for r in results if r is not None]
