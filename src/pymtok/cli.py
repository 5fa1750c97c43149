"""The ``pymtok`` command: export, inspect, encode, decode, chat, count, verify, tokenize, convert."""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from . import __version__
from .errors import PymtokError

T = TypeVar("T")

# Short texts in several scripts for export's self-check: enough to exercise normalizers,
# splitting, byte fallback and added tokens without needing a corpus.
SAMPLE_TEXTS = [
    "Hello world! It's a test of the tokenizer, isn't it?",
    "  leading and trailing spaces  \n\ttabs\tand\r\nnewlines\n\n",
    "def f(x):\n    return x ** 2  # 12345 + 3.14159",
    "你好，世界！这是一个测试。",
    "吾輩は猫である。名前はまだ無い。",
    "대한민국 헌법 제1조",
    "Привет, мир! Ёжик в тумане.",
    "مرحبا بالعالم",
    "नमस्ते दुनिया",
    "Emoji: 😀👍🏽 👨‍👩‍👧 🇯🇵 ✅",
    "Accents: café naïve Ångström résumé e\u0301",
    "Math: $\\int_0^1 x^2\\,dx = \\frac{1}{3}$",
    "URL https://example.com/a?b=c&d=e#f and email a.b@example.org",
    "ALL CAPS AND MiXeD CaSe DON'T I'M WE'LL",
    "\u00a0non-breaking\u3000ideographic\u2028line separator",
]


def _load(path: str) -> Any:
    from . import load

    return load(path)


def _rich_progress() -> Any:
    """A rich progress display on a terminal (the cli extra); None when piped or without rich."""
    if not sys.stderr.isatty():
        return None
    try:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
    except ImportError:
        return None
    return Progress(
        SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(), transient=True, console=Console(stderr=True),
    )


def _track(items: Sequence[T], description: str) -> Iterator[T]:
    """``items``, with a progress bar on a terminal."""
    progress = _rich_progress()
    if progress is None:
        yield from items
        return
    with progress:
        task = progress.add_task(description, total=len(items))
        for item in items:
            yield item
            progress.advance(task)


class _Steps:
    """A progress bar over the steps of one long call, driven by its ``progress(step, done, total)``."""

    def __init__(self, description: str) -> None:
        self._description = description
        self._progress = _rich_progress()
        self._task: Any = None

    def __enter__(self) -> _Steps:
        if self._progress is not None:
            self._progress.start()
            self._task = self._progress.add_task(self._description, total=1)
        return self

    def __call__(self, step: str, done: int, total: int) -> None:
        if self._progress is not None:
            description = f"{self._description}: {step}"
            # a new step is drawn at once, not at the next timed refresh: every step is seen
            new = self._progress.tasks[0].description != description
            self._progress.update(self._task, description=description, completed=done, total=total)
            if new:
                self._progress.refresh()

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()


STDIN = "-"


def _utf8(data: bytes, name: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = data[exc.start : exc.start + 4]
        raise PymtokError(f"{name}: not UTF-8 at byte {exc.start} ({bad!r})") from None


def _read_input(path: str) -> tuple[str, str]:
    """(name, text) of a file, or of standard input for ``-``: strict UTF-8, errors name the byte."""
    if path == STDIN:
        return "<stdin>", _utf8(sys.stdin.buffer.read(), "<stdin>")
    return path, _utf8(Path(path).read_bytes(), path)


def _argument_text(value: str, what: str) -> str:
    """A command-line argument as text: the OS hands undecodable bytes over as lone surrogates."""
    return _utf8(os.fsencode(value), f"argument {what}")


def _read_text_inputs(paths: Sequence[str]) -> Iterator[tuple[str, str]]:
    for p in paths or [STDIN]:
        yield _read_input(p)


def _summary(tok: Any, path: Path) -> dict[str, Any]:
    config = tok.config
    model = config.get("model") or {}

    def kind(c: Any) -> str | None:
        return c.get("type") if isinstance(c, dict) else None

    return {
        "file": str(path),
        "size_bytes": path.stat().st_size,
        "model": type(tok.model).__name__,
        "vocab_size": tok.vocab_size,
        "merges": len(model.get("merges") or []) if isinstance(model, dict) else 0,
        "normalizer": kind(config.get("normalizer")),
        "pre_tokenizer": kind(config.get("pre_tokenizer")),
        "decoder": kind(config.get("decoder")),
        "post_processor": kind(config.get("post_processor")),
        "added_tokens": len(tok.added),
        "special_ids": len(tok.special_ids),
        "stop_ids": len(tok.stop_ids),
        "prefix_ids": len(tok.prefix_ids),
        "chat_template": tok.chat_template is not None,
    }


def cmd_export(args: argparse.Namespace) -> int:
    from . import load
    from .export import export_report

    source = Path(args.model_dir)
    out_dir = Path(args.output) if args.output else source if source.is_dir() else source.parent
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with _Steps("export") as steps:
            path, lost = export_report(
                source, out_dir, format=args.format, mnn_identical=args.mnn_identical,
                progress=steps,
            )
        oracle, reference = _oracle(source)
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)
    tok = load(path)
    for key, value in _summary(tok, path).items():
        print(f"{key:15s} {value}")
    for note in tok.meta.source_notes:
        print(f"{'source':15s} {note}")
    if lost:
        print(f"{'not exact':15s} {path.name} loses what the source says:")
        for item in lost:
            print(f"  - {item}")
    checks = [(t, s) for t in SAMPLE_TEXTS for s in (False, True)]
    differ = [(t, s) for t, s in _track(checks, "self-check") if tok.encode(t, add_special_tokens=s) != reference(t, s)]
    print(f"{'self-check':15s} {len(checks) - len(differ)}/{len(checks)} sample encodings match {oracle}")
    if not differ:
        return 0
    for text, special in differ[:5]:
        print(f"  differs ({'with' if special else 'without'} special tokens): {text[:60]!r}")
    if args.format == "txt":
        # MNN's text format cannot hold every pipeline: said, not failed, since txt was asked for
        print("  lost: tokenizer.txt cannot express this source exactly; export --format mtok keeps it")
        return 0
    return 1


def _tree(cfg: Any, indent: str = "") -> Iterator[str]:
    if not isinstance(cfg, dict):
        yield f"{indent}{cfg}"
        return
    options = {k: v for k, v in cfg.items() if k not in ("type", "normalizers", "pretokenizers", "decoders", "processors", "vocab", "merges", "precompiled_charsmap")}
    shown = ", ".join(f"{k}={json.dumps(_brief(v), ensure_ascii=False)}" for k, v in options.items())
    yield f"{indent}{cfg.get('type')}" + (f"({shown})" if shown else "")
    for key in ("normalizers", "pretokenizers", "decoders", "processors"):
        for child in cfg.get(key) or []:
            yield from _tree(child, indent + "  ")


def _txt_losses(path: Path) -> list[str]:
    if path.suffix != ".txt" or not path.is_file():
        return []
    from .legacy import txt_losses

    return txt_losses(path)


def _brief(value: Any) -> Any:
    """A long list (a .txt's piece types, ...) as a count of its values, for reading on a terminal."""
    if isinstance(value, dict):
        return {k: _brief(v) for k, v in value.items()}
    if isinstance(value, list) and len(value) > 8:
        if all(isinstance(v, (int, float, str, bool)) for v in value):
            counts = Counter(value)
            if len(counts) <= 8:
                return f"{len(value)} values: " + ", ".join(f"{v!r} ×{n}" for v, n in counts.most_common())
        return f"{len(value)} values"
    return value


def _print_mnn_warnings(tok: Any, exported: bool = False) -> None:
    from .mnn_compat import DEVICE, mnn_warnings

    layout = tok.meta.mnn_layout or DEVICE
    notes = mnn_warnings(tok.config, layout=layout, has_prefix_ids=bool(tok.prefix_ids))
    if notes:
        where = "a .mtok exported from this" if exported else "this file"
        print(f"MNN runtime will approximate ({where}, {layout} layout):")
        for w in notes:
            print(f"  - {w}")


def cmd_info(args: argparse.Namespace) -> int:
    from .mnn_compat import DEVICE, mnn_warnings

    from . import _find_source

    path = Path(args.file)
    tok = _load(args.file)
    config = tok.config
    info = _summary(tok, path if path.is_file() else _find_source(path))
    info.update(
        special=tok.special_ids,
        stop=tok.stop_ids,
        prefix=tok.prefix_ids,
        components={k: config.get(k) for k in ("normalizer", "pre_tokenizer", "decoder", "post_processor")},
        model_options={k: v for k, v in (config.get("model") or {}).items() if k not in ("vocab", "merges", "piece_types")},
        extension=tok.meta.extension_version,
        mnn_layout=tok.meta.mnn_layout or DEVICE,
        mnn_warnings=mnn_warnings(config, layout=tok.meta.mnn_layout or DEVICE, has_prefix_ids=bool(tok.prefix_ids)),
        txt_losses=_txt_losses(path),
        special_tokens=tok.meta.special_tokens,
        source=tok.meta.source_notes,
    )
    template = tok.chat_template
    if args.json:
        info["chat_template"] = template
        json.dump(info, sys.stdout, ensure_ascii=False, indent=2)
        print()
        return 0
    for key in ("file", "size_bytes", "model", "vocab_size", "merges"):
        print(f"{key:15s} {info[key]}")
    for note in tok.meta.source_notes:
        print(f"{'source':15s} {note}")
    print(f"{'header':15s} special {tok.special_ids[:12]}{'…' if len(tok.special_ids) > 12 else ''}  stop {tok.stop_ids}  prefix {tok.prefix_ids}")
    print(f"{'model options':15s} {json.dumps(_brief(info['model_options']), ensure_ascii=False)}")
    for key in ("normalizer", "pre_tokenizer", "decoder", "post_processor"):
        print(f"{key}:")
        for line in _tree(config.get(key), "  "):
            print(line)
    added = list(tok.added.by_id.items())
    print(f"added tokens:   {len(added)} ({sum(t.special for _, t in added)} special)", end="")
    print("  e.g. " + ", ".join(f"{i}:{t.content!r}" for i, t in added[:5]) if added else "")
    if isinstance(template, dict):
        print(f"chat template:  {len(template)} named: {', '.join(template)}")
    elif template:
        lines = template.splitlines()
        print(f"chat template:  {len(lines)} lines")
        for line in lines[:5]:
            print(f"  | {line}")
    else:
        print("chat template:  none")
    if path.suffix == ".mtok":
        version = info["extension"]
        print(f"extension:      {'pymtok exactness extension v%d' % version if version else 'none (MNN layout only)'}")
    if info["txt_losses"]:
        print("tokenizer.txt does not hold (read with assumptions):")
        for item in info["txt_losses"]:
            print(f"  - {item}")
    _print_mnn_warnings(tok, path.suffix != ".mtok")
    return 0


def _pieces(tok: Any, ids: list[int], as_tokens: bool) -> list[str]:
    """Each id's text (or token string): what ``--show`` marks off. Ids that end inside a
    character are joined with the ids that complete it."""
    if as_tokens:
        return [str(tok.id_to_token(i)) for i in ids]
    stream = tok.decode_stream()
    pieces = [stream.step(i) for i in ids]
    return [p for p in pieces if p is not None]


def _show(tok: Any, ids: list[int], *, as_tokens: bool, separator: str) -> None:
    pieces = _pieces(tok, ids, as_tokens)
    colour = sys.stdout.isatty() and "NO_COLOR" not in os.environ
    if colour:
        try:
            from rich.console import Console
            from rich.text import Text
        except ImportError:
            colour = False
    if colour:
        styles = ("on dark_blue", "on dark_green", "on dark_red", "on dark_magenta", "on dark_cyan")
        text = Text()
        for k, piece in enumerate(pieces):
            text.append(piece, style=styles[k % len(styles)])
        console = Console()
        console.print(text)
        console.print(f"{len(ids)} tokens")
    else:
        print(separator.join(pieces))
        print(f"{len(ids)} tokens")


def _encode_inputs(args: argparse.Namespace) -> list[str]:
    """The texts ``encode`` works on: TEXT as given; standard input without the one final newline
    that ``echo`` and editors add (``--keep-newline`` keeps it), or one text per line (``--lines``)."""
    if args.text is not None:
        text = _argument_text(args.text, "TEXT")
    else:
        text = _read_input(STDIN)[1]
    if args.lines:
        # as spm_encode reads them: split at "\n" only, the last line's newline optional
        lines = text.split("\n")
        return lines[:-1] if lines[-1] == "" else lines
    if args.text is None and not args.keep_newline:
        text = text.removesuffix("\n").removesuffix("\r")
    return [text]


def cmd_encode(args: argparse.Namespace) -> int:
    tok = _load(args.file)
    for text in _encode_inputs(args):
        ids = tok.encode(text, add_special_tokens=not args.no_special)
        if args.show:
            _show(tok, ids, as_tokens=args.tokens, separator=args.sep)
        elif args.tokens:
            print(json.dumps([tok.id_to_token(i) for i in ids], ensure_ascii=False))
        else:
            print(" ".join(map(str, ids)))
    return 0


_MAX_ID = 2**32 - 1


def _parse_ids(words: Sequence[str]) -> list[int]:
    ids = []
    for w in words:
        for part in w.replace(",", " ").replace("[", " ").replace("]", " ").split():
            try:
                id = int(part)
            except ValueError:
                raise PymtokError(f"not a token id: {part!r}") from None
            if not 0 <= id <= _MAX_ID:
                raise PymtokError(f"token id {part} is out of range (ids are 0 to {_MAX_ID})")
            ids.append(id)
    return ids


def cmd_decode(args: argparse.Namespace) -> int:
    tok = _load(args.file)
    ids = _parse_ids(args.ids or [_read_input(STDIN)[1]])
    sys.stdout.write(tok.decode(ids, skip_special_tokens=args.skip_special) + "\n")
    return 0


def _read_json_file(path: str, what: str) -> Any:
    name, text = _read_input(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise PymtokError(f"{name}: {what} is not valid JSON ({exc.msg}, line {exc.lineno})") from None


def cmd_chat(args: argparse.Namespace) -> int:
    tok = _load(args.file)
    messages = _read_json_file(args.messages, "messages")
    tools = _read_json_file(args.tools, "tools") if args.tools else None
    out = tok.apply_chat_template(
        messages, tools=tools, add_generation_prompt=not args.no_generation_prompt, tokenize=args.tokenize,
        return_dict=False,
    )
    if args.tokenize:
        print(" ".join(map(str, out)))
    else:
        sys.stdout.write(out)
    return 0


def cmd_count(args: argparse.Namespace) -> int:
    tok = _load(args.file)
    total = 0
    for name, text in _read_text_inputs(args.paths):
        n = len(tok.encode(text, add_special_tokens=False))
        total += n
        print(f"{n}\t{name}")
    if len(args.paths) > 1:
        print(f"{total}\ttotal")
    return 0


def _verify_texts(corpus: Sequence[str]) -> list[str]:
    texts = list(SAMPLE_TEXTS)
    for path in corpus:
        content = _read_input(path)[1]
        texts.extend(line for line in content.split("\n") if line)
    return texts


def _oracle(against: Path) -> tuple[str, Any]:
    """``(description, encode(text, add_special_tokens))`` for the source ``against``.

    The source's own library where it is installed (tokenizers, tiktoken, sentencepiece);
    pymtok's exact reading of the source otherwise.
    """
    from . import _find_source, load

    file = _find_source(against) if against.is_dir() else against
    if not file.is_file():
        raise FileNotFoundError(f"{against}: no such file or folder")
    exact = load(file)
    library: str | None = None
    try:
        if file.suffix == ".json" and file.name != "vocab.json":
            library = "tokenizers"
            from tokenizers import Tokenizer as HFTokenizer

            hf = HFTokenizer.from_file(str(file))
            hf.no_padding()
            hf.no_truncation()
            return f"HF tokenizers on {file.name}", lambda t, s: hf.encode(t, add_special_tokens=s).ids
        if file.name in ("vocab.json", "merges.txt"):
            library = "tokenizers"
            from tokenizers import ByteLevelBPETokenizer

            bpe = ByteLevelBPETokenizer(str(file.parent / "vocab.json"), str(file.parent / "merges.txt"))
            return "HF ByteLevelBPETokenizer", lambda t, s: bpe.encode(t).ids
        if file.suffix == ".tiktoken":
            from .legacy import TIKTOKEN_ENCODINGS, read_tiktoken_ranks, tiktoken_digest

            ranks = read_tiktoken_ranks(file)
            encoding = TIKTOKEN_ENCODINGS.get(tiktoken_digest(ranks))
            if encoding is not None:
                library = "tiktoken"
                import tiktoken

                enc = tiktoken.Encoding(
                    name=encoding.name, pat_str=encoding.pattern, mergeable_ranks=ranks,
                    special_tokens=dict(encoding.special_tokens),
                )
                return f"tiktoken ({encoding.name})", lambda t, s: enc.encode(t, allowed_special="all")
        if file.suffix == ".model":
            library = "sentencepiece"
            import sentencepiece

            sp = sentencepiece.SentencePieceProcessor(model_file=str(file))
            bos = bool(exact.prefix_ids)
            return "sentencepiece", lambda t, s: sp.encode(t, add_bos=s and bos)
        if file.suffix == ".txt" and file.name != "tokenizer.txt" and not file.read_bytes().startswith(b"430 "):
            library = "tokenizers"
            from tokenizers import BertWordPieceTokenizer

            norm = exact.config["normalizer"]
            bert = BertWordPieceTokenizer(
                str(file), lowercase=norm["lowercase"], strip_accents=norm["strip_accents"],
                handle_chinese_chars=norm["handle_chinese_chars"],
            )
            case = "uncased" if norm["lowercase"] else "cased"
            return f"HF BertWordPieceTokenizer ({case}, as pymtok read the vocabulary)", (
                lambda t, s: bert.encode(t, add_special_tokens=s).ids
            )
    except ImportError:
        pass
    hint = f" (install '{library}' to compare with the source's own library)" if library else ""
    return f"pymtok's exact reading of {file.name}{hint}", lambda t, s: exact.encode(t, add_special_tokens=s)


def _agreement(texts: Sequence[str], ours: Sequence[list[int]], theirs: Sequence[list[int]]) -> tuple[int, list[str]]:
    bad = [t for t, a, b in zip(texts, ours, theirs) if a != b]
    return len(texts) - len(bad), bad


def cmd_verify(args: argparse.Namespace) -> int:
    if args.against is None and args.mnn is None:
        raise PymtokError("give --against SOURCE (the model it came from), --mnn BINARY (MNN's tokenizer_demo), or both")
    tok = _load(args.file)
    texts = _verify_texts(args.corpus or [])
    exact = True
    oracle, reference = "", None
    if args.against is not None:
        oracle, reference = _oracle(Path(args.against))
        bad = [
            text
            for text in _track(texts, "verifying")
            if any(tok.encode(text, add_special_tokens=s) != reference(text, s) for s in (False, True))
        ]
        print(f"{len(texts) - len(bad)}/{len(texts)} texts encode identically ({oracle})")
        for text in bad[:5]:
            print(f"  differs: {text[:80]!r}")
        exact = not bad
        if tok.meta.extension_version is not None:
            from .mtok import read_mtok

            mnn = read_mtok(args.file, use_extension=False)
            same = sum(
                mnn.encode(t, add_special_tokens=s) == reference(t, s)
                for t in _track(texts, "MNN-only reading")
                for s in (False, True)
            )
            verdict = "exact" if same == 2 * len(texts) else f"NOT exact ({same}/{2 * len(texts)} encodings match)"
            print(f"MNN-only reading (the file without pymtok's extension): {verdict}")
    if args.mnn is not None:
        from .mnn_compat import mnn_demo_encode

        runnable = [t for t in texts if "\0" not in t]
        mnn_ids = [mnn_demo_encode(args.mnn, args.file, t) for t in _track(runnable, "running MNN")]
        ours = [tok.encode(t) for t in runnable]
        same, bad = _agreement(runnable, mnn_ids, ours)
        print(f"MNN's runtime ({args.mnn}) vs pymtok: {same}/{len(runnable)} texts give the same ids")
        if reference is not None:
            hf_same, hf_bad = _agreement(runnable, mnn_ids, [reference(t, True) for t in runnable])
            print(f"MNN's runtime vs {oracle}: {hf_same}/{len(runnable)} texts give the same ids")
            bad = hf_bad or bad
        for text in bad[:5]:
            print(f"  differs: {text[:80]!r}")
        if len(runnable) < len(texts):
            print(f"  ({len(texts) - len(runnable)} texts with a NUL character left out: MNN's demo takes text as an argument)")
        exact = exact and not bad
    _print_mnn_warnings(tok)
    return 0 if exact else 1


def cmd_convert(args: argparse.Namespace) -> int:
    from .legacy import convert_txt_to_mtok

    if args.to == "json":
        for written in _load(args.file).save_pretrained(Path(args.output)):
            print(f"wrote {written}")
        return 0
    path = convert_txt_to_mtok(Path(args.file), Path(args.output))
    print(f"wrote {path}")
    return 0


def cmd_tokenize(args: argparse.Namespace) -> int:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise PymtokError("pymtok tokenize writes Parquet with pyarrow: pip install 'pymtok[parquet]'") from None
    from .corpus import Settings, plan, run, tokenizer_digest

    for name in ("workers", "batch_size", "shard_size"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    _load(args.tokenizer)  # a bad tokenizer fails here, once, not in every worker
    settings = Settings(
        tokenizer=os.path.abspath(args.tokenizer), field=args.field, add_special_tokens=not args.no_special,
        batch_size=args.batch_size, shard_size=args.shard_size, bin=args.bin,
        tokenizer_digest=tokenizer_digest(args.tokenizer),
    )
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    shards = plan(args.corpus, out, settings, args.format)
    try:
        with _Steps("tokenize") as steps:
            results = run(shards, settings, args.workers, steps)
    except KeyboardInterrupt:
        print("pymtok tokenize: interrupted; the shards written are kept: rerun the same command to resume", file=sys.stderr)
        raise
    skipped = sum(r.skipped for r in results)
    bad = [(r.shard.source, number, why) for r in results for number, why in r.bad]
    written = [r for r in results if not r.skipped]
    print(
        f"{len(shards)} shards in {out} ({len(written)} written, {skipped} already there): "
        f"{sum(r.records for r in written)} records, {sum(r.tokens for r in written)} tokens written; "
        f"{len(bad)} bad records"
    )
    for source, number, why in bad[:_BAD_SHOWN]:
        print(f"{source}:{number}: {why}", file=sys.stderr)
    if len(bad) > _BAD_SHOWN:
        print(f"... and {len(bad) - _BAD_SHOWN} more (listed in {out}/*.bad.jsonl)", file=sys.stderr)
    return 0


_BAD_SHOWN = 20


_FILE_HELP = "tokenizer.mtok, tokenizer.txt, tokenizer.json or a folder"


def _commands() -> dict[str, argparse.ArgumentParser]:
    """One parser per command, each parsed on its own with options and arguments in any order."""
    parsers: dict[str, argparse.ArgumentParser] = {}

    def command(name: str, help: str, func: Callable[[argparse.Namespace], int]) -> argparse.ArgumentParser:
        p = argparse.ArgumentParser(prog=f"pymtok {name}", description=help)
        p.add_argument("--debug", action="store_true", help="show the full traceback on errors")
        p.set_defaults(func=func)
        parsers[name] = p
        return p

    p = command("export", "write tokenizer.mtok (or tokenizer.txt) from a model folder or file", cmd_export)
    p.add_argument(
        "model_dir",
        help="model folder, or a tokenizer.json, .model, .tiktoken, vocab.txt, vocab.json or .gguf file",
    )
    p.add_argument("-o", "--output", help="output folder (default: the model folder, or the source file's)")
    p.add_argument("--format", choices=["mtok", "txt"], default="mtok")
    p.add_argument(
        "--mnn-identical", action="store_true",
        help="write MNN's part of the file byte for byte as MNN's exporter does, with the faults its runtime "
        "has on that layout (by default the layout is the one MNN's runtime reads right)",
    )

    p = command("info", "describe a tokenizer file: header, components, template, MNN caveats", cmd_info)
    p.add_argument("file", help=_FILE_HELP)
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = command("encode", "text to token ids (TEXT, or standard input)", cmd_encode)
    p.add_argument("file", help=_FILE_HELP)
    p.add_argument("text", nargs="?", help="the text (default: standard input, less its final newline)")
    p.add_argument("--tokens", action="store_true", help="print the token strings instead of ids")
    p.add_argument(
        "--show", action="store_true",
        help="show the text cut into its tokens: coloured on a terminal, else the pieces joined by --sep",
    )
    p.add_argument("--sep", default="|", help="what --show puts between tokens when it cannot colour (default: |)")
    p.add_argument("--no-special", action="store_true", help="do not add special tokens (BOS, CLS, ...)")
    p.add_argument("--keep-newline", action="store_true", help="encode standard input's final newline too")
    p.add_argument("--lines", action="store_true", help="encode each line on its own, one output line per input line")

    p = command("decode", "token ids (arguments, or standard input) to text", cmd_decode)
    p.add_argument("file", help=_FILE_HELP)
    p.add_argument("ids", nargs="*", help="token ids (default: read standard input)")
    p.add_argument("--skip-special", action="store_true", help="leave special tokens out")

    p = command("chat", "render a conversation with the file's chat template", cmd_chat)
    p.add_argument("file", help=_FILE_HELP)
    p.add_argument("messages", help='JSON file (- for standard input): [{"role": "user", "content": "..."}, ...]')
    p.add_argument("--tools", help="JSON file (- for standard input) with a list of tool (function) schemas")
    p.add_argument("--no-generation-prompt", action="store_true")
    p.add_argument("--tokenize", action="store_true", help="print token ids instead of the prompt")

    p = command("count", "count tokens of files (or standard input)", cmd_count)
    p.add_argument("file", help=_FILE_HELP)
    p.add_argument("paths", nargs="*", help="text files, - for standard input (default: standard input)")

    p = command(
        "verify",
        "compare a tokenizer file with the model it came from (--against) and with MNN's runtime (--mnn); "
        "exit status 0 when every text matches, 1 when some differ, 2 on an error",
        cmd_verify,
    )
    p.add_argument("file", help=_FILE_HELP)
    p.add_argument(
        "--against", metavar="SOURCE",
        help="the model folder or source file (tokenizer.json, .model, .tiktoken, vocab.txt, vocab.json, .gguf)",
    )
    p.add_argument(
        "--mnn", metavar="BINARY",
        help="a build of MNN's tokenizer_demo (run as BINARY FILE encode TEXT): compare what MNN's runtime gives",
    )
    p.add_argument("--corpus", nargs="*", metavar="PATH", help="text files to encode, - for standard input (one text per line)")

    p = command(
        "tokenize",
        "tokenize corpus files (text: a record per line; JSON Lines; Parquet) to Parquet shards of input_ids, "
        "resumably: a rerun skips the shards already written",
        cmd_tokenize,
    )
    p.add_argument("corpus", nargs="+", metavar="CORPUS", help="input files: .txt, .jsonl or .parquet (or --format)")
    p.add_argument("-o", "--output", required=True, metavar="OUT_DIR", help="the folder the shards go to")
    p.add_argument("--tokenizer", required=True, metavar="FILE", help=_FILE_HELP)
    p.add_argument("--field", default="text", help="the JSON field or Parquet column holding the text (default: text)")
    p.add_argument("--format", choices=["text", "jsonl", "parquet"], help="the inputs' format (default: from the suffix)")
    p.add_argument("--workers", type=int, default=1, help="worker processes (default: 1)")
    p.add_argument("--batch-size", type=int, default=1000, help="records encoded at a time per worker (default: 1000)")
    p.add_argument("--shard-size", type=int, default=100_000, help="records per output shard (default: 100000)")
    p.add_argument("--bin", action="store_true", help="also write each shard's ids as flat uint32 .bin with int64 offsets .idx")
    p.add_argument("--no-special", action="store_true", help="do not add special tokens (BOS, CLS, ...)")

    p = command(
        "convert", "turn a legacy tokenizer.txt into tokenizer.mtok, or any tokenizer file into a HF folder", cmd_convert
    )
    p.add_argument("file", help="a legacy tokenizer.txt (--to mtok), or " + _FILE_HELP + " (--to json)")
    p.add_argument("-o", "--output", required=True, metavar="OUT_DIR")
    p.add_argument(
        "--to", choices=["mtok", "json"], default="mtok",
        help="mtok: tokenizer.mtok from a tokenizer.txt; json: tokenizer.json + tokenizer_config.json for transformers",
    )
    return parsers


def _top_parser(commands: dict[str, argparse.ArgumentParser]) -> argparse.ArgumentParser:
    listing = "\n".join(f"  {name:8s} {p.description.split(';')[0]}" for name, p in commands.items())
    parser = argparse.ArgumentParser(
        prog="pymtok",
        usage="pymtok [--version] [--debug] COMMAND [ARGS...]",
        description="Read, write, inspect and run MNN tokenizer files (.mtok, tokenizer.txt) exactly like HuggingFace.",
        epilog=(
            f"commands (pymtok COMMAND -h for each):\n{listing}\n\n"
            "a first session:\n"
            "  pymtok export path/to/hf-model -o out/     # writes out/tokenizer.mtok and self-checks it\n"
            "  pymtok info out/tokenizer.mtok\n"
            "  pymtok encode out/tokenizer.mtok \"Hello world\" --show\n"
            "  pymtok verify out/tokenizer.mtok --against path/to/hf-model --corpus some.txt\n"
            "FILE may be a tokenizer.mtok, tokenizer.txt, tokenizer.json or a folder holding one."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"pymtok {__version__}")
    parser.add_argument("--debug", action="store_true", help="show the full traceback on errors")
    parser.add_argument("command", choices=list(commands), metavar="COMMAND", help="one of the commands below")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    commands = _commands()
    top = _top_parser(commands)
    words = list(sys.argv[1:] if argv is None else argv)
    # the top level's own options are flags: the first other word is the command
    at = next((k for k, w in enumerate(words) if not w.startswith("-")), len(words))
    outer = top.parse_args(words[: at + 1])
    args = commands[outer.command].parse_intermixed_args(words[at + 1 :])
    args.debug = args.debug or outer.debug
    try:
        status = int(args.func(args))
        sys.stdout.flush()
        return status
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # the reader went away (``pymtok info --json | head``): stop quietly, as cat does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except (PymtokError, ValueError, OSError, TypeError, KeyError, ArithmeticError) as exc:
        if args.debug:
            traceback.print_exc()
        hint = "" if args.debug else " (run with --debug for the traceback)"
        print(f"pymtok {outer.command}: {type(exc).__name__}: {exc}{hint}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
