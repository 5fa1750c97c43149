"""The ``pymtok`` console script, end to end through subprocesses, on real fixtures."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest


from conftest import auto_tokenizer, fixture_path, hf_tokenizer

REPO = Path(__file__).resolve().parent.parent


def pymtok_command() -> str:
    """The installed console script (beside this interpreter, as pip puts it)."""
    exe = Path(sys.executable).parent / "pymtok"
    if not exe.is_file():
        pytest.fail(f"the pymtok command is not installed beside {sys.executable} (pip install -e .)")
    return str(exe)


def run(*args: str, stdin: str | bytes | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    proc = subprocess.run(
        [pymtok_command(), *args],
        input=stdin.encode("utf-8") if isinstance(stdin, str) else stdin, capture_output=True, env=env, timeout=600,
    )
    result = subprocess.CompletedProcess(
        proc.args, proc.returncode, proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8")
    )
    if check:
        assert result.returncode == 0, result.stderr
    return result


# a session's: the tests using it are spread over the workers, between other modules' tests
@pytest.fixture(scope="session")
def qwen_mtok(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("qwen3")
    proc = run("export", str(fixture_path("tokenizers", "qwen3")), "-o", str(out))
    assert "self-check" in proc.stdout and "30/30 sample encodings match HF tokenizers" in proc.stdout, proc.stdout
    return out / "tokenizer.mtok"


def test_export_prints_summary(qwen_mtok: Path) -> None:
    assert qwen_mtok.is_file()


def test_export_writes_the_same_file_on_both_paths(qwen_mtok: Path, tmp_path: Path) -> None:
    # the file holds records only, no tables of the native core's layout: both writers agree
    other = "0" if os.environ.get("PYMTOK_PURE") == "1" else "1"
    subprocess.run(
        [pymtok_command(), "export", str(fixture_path("tokenizers", "qwen3")), "-o", str(tmp_path)],
        env=dict(os.environ, PYMTOK_PURE=other), check=True, capture_output=True, timeout=600,
    )
    assert (tmp_path / "tokenizer.mtok").read_bytes() == qwen_mtok.read_bytes()


def test_encode_ids_match_hf(qwen_mtok: Path) -> None:
    text = "Hello world, 你好! 😀"
    want = hf_tokenizer("qwen3").encode(text).ids
    assert run("encode", str(qwen_mtok), text).stdout.split() == [str(i) for i in want]
    assert run("encode", str(qwen_mtok), stdin=text).stdout.split() == [str(i) for i in want]


def test_encode_tokens_and_no_special() -> None:
    folder = fixture_path("tokenizers", "all-minilm-l6-v2")
    hf = hf_tokenizer("all-minilm-l6-v2")
    text = "Unaffable cafés."
    with_special = run("encode", str(folder), text).stdout.split()
    assert with_special == [str(i) for i in hf.encode(text).ids]
    plain = run("encode", str(folder), text, "--no-special").stdout.split()
    assert plain == [str(i) for i in hf.encode(text, add_special_tokens=False).ids]
    tokens = json.loads(run("encode", str(folder), text, "--tokens").stdout)
    assert tokens == hf.encode(text).tokens


def test_encode_show_colours_and_counts(qwen_mtok: Path) -> None:
    out = run("encode", str(qwen_mtok), "Hello world", "--show").stdout
    assert "Hello" in out and "2 tokens" in out


def test_decode(qwen_mtok: Path) -> None:
    hf = hf_tokenizer("qwen3")
    ids = hf.encode("<|im_start|>user\nCafé ☕<|im_end|>").ids
    out = run("decode", str(qwen_mtok), *map(str, ids)).stdout
    assert out == hf.decode(ids, skip_special_tokens=False) + "\n"
    out = run("decode", str(qwen_mtok), "--skip-special", stdin=" ".join(map(str, ids))).stdout
    assert out == hf.decode(ids, skip_special_tokens=True) + "\n"


def test_chat_matches_transformers(qwen_mtok: Path, tmp_path: Path) -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi 👋"}]
    path = tmp_path / "m.json"
    path.write_text(json.dumps(messages), encoding="utf-8")
    want = auto_tokenizer("qwen3").apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert run("chat", str(qwen_mtok), str(path)).stdout == want
    ids = run("chat", str(qwen_mtok), str(path), "--tokenize").stdout.split()
    assert ids == [str(i) for i in hf_tokenizer("qwen3").encode(want, add_special_tokens=False).ids]


def test_count(qwen_mtok: Path, tmp_path: Path) -> None:
    a = tmp_path / "a.txt"
    a.write_text("one two three\n", encoding="utf-8")
    b = tmp_path / "b.txt"
    b.write_text("日本語のテキスト", encoding="utf-8")
    hf = hf_tokenizer("qwen3")
    na = len(hf.encode("one two three\n", add_special_tokens=False).ids)
    nb = len(hf.encode("日本語のテキスト", add_special_tokens=False).ids)
    lines = run("count", str(qwen_mtok), str(a), str(b)).stdout.splitlines()
    assert lines == [f"{na}\t{a}", f"{nb}\t{b}", f"{na + nb}\ttotal"]


def test_info_json(qwen_mtok: Path) -> None:
    info = json.loads(run("info", str(qwen_mtok), "--json").stdout)
    hf = hf_tokenizer("qwen3")
    assert info["vocab_size"] == hf.get_vocab_size(with_added_tokens=True)
    merges = json.loads(fixture_path("tokenizers", "qwen3", "tokenizer.json").read_text(encoding="utf-8"))["model"]["merges"]
    assert info["merges"] == len(merges)
    assert info["components"]["pre_tokenizer"]["type"] == "Sequence"
    assert info["chat_template"]
    text = run("info", str(qwen_mtok)).stdout
    assert "MNN runtime will approximate" in text and "NFC" in text


def test_verify(qwen_mtok: Path) -> None:
    corpus = fixture_path("..", "corpus", "zh_udhr_hans.txt")
    out = run("verify", str(qwen_mtok), "--against", str(fixture_path("tokenizers", "qwen3")), "--corpus", str(corpus)).stdout
    assert "texts encode identically" in out
    total = out.split()[0].split("/")
    assert total[0] == total[1]


@pytest.mark.parametrize(
    "args, message",
    [
        (["encode", "/nonexistent/tokenizer.mtok", "x"], "no such tokenizer file"),
        (["decode", "{qwen}", "abc"], "not a token id"),
        (["info", "{corrupt}"], "FormatError"),
        (["info", "{badjson}"], "not valid JSON"),
        (["chat", "{qwen}", "{badjson}"], "not valid JSON"),
        (["encode", "{notmtok}", "x"], "not an MNN tokenizer file"),
    ],
)
def test_errors_are_one_line_and_nonzero(args: list[str], message: str, qwen_mtok: Path, tmp_path: Path) -> None:
    corrupt = tmp_path / "tokenizer.mtok"
    corrupt.write_bytes(qwen_mtok.read_bytes()[:5000])
    badjson = tmp_path / "tokenizer.json"
    badjson.write_text("{not json", encoding="utf-8")
    notmtok = tmp_path / "notes.mtok"
    notmtok.write_text("just some text\n", encoding="utf-8")
    subst = {"{qwen}": str(qwen_mtok), "{corrupt}": str(corrupt), "{badjson}": str(badjson), "{notmtok}": str(notmtok)}
    proc = run(*[subst.get(a, a) for a in args], check=False)
    assert proc.returncode != 0
    assert message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_fresh_venv_install_export_encode(tmp_path: Path) -> None:
    """The README's install command in a fresh virtual environment, then export + encode."""
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    src = tmp_path / "src"
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(".venv", ".git", "build", "*.egg-info", "__pycache__", "*.so"))
    subprocess.run([str(py), "-m", "pip", "install", "--quiet", "."], cwd=src, check=True, timeout=900)
    exe = env_dir / "bin" / "pymtok"
    out = tmp_path / "out"
    subprocess.run([str(exe), "export", str(fixture_path("tokenizers", "llama3")), "-o", str(out)], check=True, timeout=600)
    proc = subprocess.run([str(exe), "encode", str(out / "tokenizer.mtok"), "Hello world"], capture_output=True, text=True, check=True)
    assert proc.stdout.split() == [str(i) for i in hf_tokenizer("llama3").encode("Hello world").ids]


def test_export_txt_then_convert_to_mtok(tmp_path: Path) -> None:
    """A BERT vocab.txt folder → `export --format txt` → `convert` → .mtok with WordPiece's ids."""
    from tokenizers import BertWordPieceTokenizer

    folder = tmp_path / "bert"
    folder.mkdir()
    vocab = fixture_path("tokenizers", "all-minilm-l6-v2", "vocab.txt")
    shutil.copy(vocab, folder / "vocab.txt")
    run("export", str(folder), "-o", str(tmp_path / "txt"), "--format", "txt")
    txt = tmp_path / "txt" / "tokenizer.txt"
    assert txt.read_bytes().startswith(b"430 2\n")
    out = run("convert", str(txt), "-o", str(tmp_path / "mtok")).stdout
    assert "wrote" in out and "lost" not in out
    text = "Unaffable cafés, naïve 你好."
    oracle = BertWordPieceTokenizer(str(vocab), lowercase=True)
    want = oracle.encode(text, add_special_tokens=False).ids
    assert run("encode", str(tmp_path / "mtok" / "tokenizer.mtok"), text, "--no-special").stdout.split() == [str(i) for i in want]
    assert run("encode", str(txt), text, "--no-special").stdout.split() == [str(i) for i in want]


def ids_of(hf_name: str, text: str, special: bool = True) -> list[str]:
    return [str(i) for i in hf_tokenizer(hf_name).encode(text, add_special_tokens=special).ids]


def test_options_anywhere_on_the_line(qwen_mtok: Path) -> None:
    folder = str(fixture_path("tokenizers", "all-minilm-l6-v2"))
    assert run("encode", folder, "--no-special", "Hello there").stdout.split() == ids_of("all-minilm-l6-v2", "Hello there", False)
    assert run("--debug", "encode", folder, "Hello there", "--no-special").stdout.split() == ids_of("all-minilm-l6-v2", "Hello there", False)
    assert run("encode", folder, "--debug", stdin="Hello there").stdout.split() == ids_of("all-minilm-l6-v2", "Hello there")
    ids = ids_of("qwen3", "<|im_start|>hi")
    want = hf_tokenizer("qwen3").decode([int(i) for i in ids], skip_special_tokens=True) + "\n"
    assert run("decode", str(qwen_mtok), "--skip-special", *ids).stdout == want
    assert "x" in run("encode", str(qwen_mtok), "--show", "x").stdout


def test_version_and_module_entry_point() -> None:
    import importlib.metadata

    import pymtok

    assert pymtok.__version__ == importlib.metadata.version("pymtok")
    assert run("--version").stdout.strip() == f"pymtok {pymtok.__version__}"
    proc = subprocess.run([sys.executable, "-m", "pymtok", "--version"], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == f"pymtok {pymtok.__version__}"
    assert "usage: pymtok" in run(check=False).stderr


def test_stdin_newline_is_stripped_unless_kept(qwen_mtok: Path) -> None:
    assert run("encode", str(qwen_mtok), stdin="Hello world\n").stdout.split() == ids_of("qwen3", "Hello world")
    kept = run("encode", str(qwen_mtok), "--keep-newline", stdin="Hello world\n").stdout.split()
    assert kept == ids_of("qwen3", "Hello world\n")
    lines = run("encode", str(qwen_mtok), "--lines", stdin="one line\n\nthird 三\n").stdout.split("\n")
    assert [line.split() for line in lines[:-1]] == [ids_of("qwen3", t) for t in ("one line", "", "third 三")]


def test_show_without_a_terminal_marks_boundaries(qwen_mtok: Path) -> None:
    hf = hf_tokenizer("qwen3")
    text = "Hello world, 你好"
    enc = hf.encode(text)
    out = run("encode", str(qwen_mtok), "--show", text).stdout.splitlines()
    # each of these ids decodes to whole characters, so the pieces are the ids' own texts
    assert out[0].split("|") == [hf.decode([i]) for i in enc.ids]
    assert out[1] == f"{len(enc.ids)} tokens"
    tokens = run("encode", str(qwen_mtok), "--show", "--tokens", "--sep", " / ", text).stdout.splitlines()[0]
    assert tokens.split(" / ") == enc.tokens


def test_stdin_dash_for_files(qwen_mtok: Path, tmp_path: Path) -> None:
    messages = json.dumps([{"role": "user", "content": "Hi"}])
    assert "Hi" in run("chat", str(qwen_mtok), "-", stdin=messages).stdout
    n = len(hf_tokenizer("qwen3").encode("one two", add_special_tokens=False).ids)
    assert run("count", str(qwen_mtok), "-", stdin="one two").stdout.split() == [str(n), "<stdin>"]
    out = run("verify", str(qwen_mtok), "--against", str(fixture_path("tokenizers", "qwen3")), "--corpus", "-", stdin="a\nb c\n").stdout
    n_texts = 2 + len(__import__("pymtok.cli", fromlist=["SAMPLE_TEXTS"]).SAMPLE_TEXTS)
    assert out.startswith(f"{n_texts}/{n_texts} texts encode identically (HF tokenizers")


def one_line_error(proc: subprocess.CompletedProcess[str], status: int = 2) -> str:
    assert proc.returncode == status, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    return proc.stderr


def test_non_utf8_input_names_where(qwen_mtok: Path, tmp_path: Path) -> None:
    assert "<stdin>: not UTF-8 at byte 3" in one_line_error(run("encode", str(qwen_mtok), stdin=b"abc\xff", check=False))
    bad = tmp_path / "bad.txt"
    bad.write_bytes("héllo\n".encode() + b"\xc3(")
    assert f"{bad}: not UTF-8 at byte 7" in one_line_error(run("count", str(qwen_mtok), str(bad), check=False))
    proc = subprocess.run([pymtok_command(), "encode", str(qwen_mtok), b"ab\xfe"], capture_output=True, text=True)
    assert "argument TEXT: not UTF-8 at byte 2" in one_line_error(proc)


def test_bad_ids_and_sources_are_one_line_errors(qwen_mtok: Path, tmp_path: Path) -> None:
    assert "out of range" in one_line_error(run("decode", str(qwen_mtok), "99999999999999999999999", check=False))
    assert "out of range" in one_line_error(run("decode", str(qwen_mtok), "-5", check=False))
    empty = tmp_path / "empty"
    empty.mkdir()
    assert str(empty) in one_line_error(run("verify", str(qwen_mtok), "--against", str(empty), check=False))


def test_closed_pipe_ends_quietly(qwen_mtok: Path) -> None:
    big = "word " * 200_000
    for args in (["encode", str(qwen_mtok), "--tokens"], ["info", str(qwen_mtok), "--json"]):
        proc = subprocess.run(
            f"{pymtok_command()} {' '.join(args)} | head -c 10", shell=True, input=big.encode(), capture_output=True,
            timeout=120,
        )
        assert proc.stderr == b"", proc.stderr


def test_info_summarises_long_option_lists() -> None:
    from pymtok.cli import _brief

    assert _brief({"piece_types": [6] * 997 + [2, 3, 3], "unk_id": 0}) == {
        "piece_types": "1000 values: 6 ×997, 3 ×2, 2 ×1", "unk_id": 0,
    }
    assert _brief(list(range(50))) == "50 values"
    for source in (fixture_path("mnn-toy", "sp.txt"), fixture_path("legacy", "tiktoken", "cl100k_base.tiktoken")):
        out = run("info", str(source)).stdout
        assert max(len(line) for line in out.splitlines() if not line.startswith("  | ")) < 400, out


def test_export_shows_progress_on_a_terminal(tmp_path: Path) -> None:
    """Export's slow steps appear as a progress display when stderr is a terminal."""
    import pty
    import re

    pytest.importorskip("rich")
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [pymtok_command(), "export", str(fixture_path("tokenizers", "all-minilm-l6-v2")), "-o", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=follower,
    )
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the follower side closed
            break
        if not chunk:
            break
        seen += chunk
    assert proc.wait(timeout=600) == 0
    screen = re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]", b"", seen).decode("utf-8", "replace")
    for step in ("reading the source", "building the NFD table", "self-check"):
        assert step in screen, screen[-2000:]


def stand_in_demo(tmp_path: Path, body: str, known: dict[str, list[int]]) -> Path:
    """A program with the interface of MNN's tokenizer_demo (FILE encode TEXT → ids=[...]) giving
    pymtok's ids for the file: ``known``'s for its texts, as verify runs the program once a text
    and a load each would take most of the test's time."""
    table = tmp_path / "known.json"
    table.write_text(json.dumps(known), encoding="utf-8")
    exe = tmp_path / "tokenizer_demo"
    exe.write_text(
        f"#!{sys.executable}\nimport json, sys\nfile, mode, text = sys.argv[1:4]\n"
        f"ids = json.loads(open({str(table)!r}, encoding='utf-8').read()).get(text)\n"
        "if ids is None:\n    import pymtok\n    ids = pymtok.load(file).encode(text)\n"
        f"{body}\n"
        "print(f'len={len(ids)}')\nprint('ids=[' + ', '.join(map(str, ids)) + ']')\n",
        encoding="utf-8",
    )
    exe.chmod(0o755)
    return exe


def test_verify_against_mnns_demo(tmp_path: Path) -> None:
    import pymtok
    from pymtok.cli import SAMPLE_TEXTS

    folder = fixture_path("tokenizers", "mistral-7b-v0.1")
    run("export", str(folder), "-o", str(tmp_path))
    mtok = str(tmp_path / "tokenizer.mtok")
    corpus = tmp_path / "c.txt"
    corpus.write_text("first line\nsecond, with a comma\n", encoding="utf-8")
    tok = pymtok.load(mtok)
    known = {text: tok.encode(text) for text in ["first line", "second, with a comma", *SAMPLE_TEXTS]}
    faithful = stand_in_demo(tmp_path, "", known)
    out = run("verify", mtok, "--mnn", str(faithful), "--against", str(folder), "--corpus", str(corpus)).stdout
    n = 2 + len(SAMPLE_TEXTS)
    assert f"vs pymtok: {n}/{n} texts give the same ids" in out
    assert f"vs HF tokenizers on tokenizer.json: {n}/{n} texts" in out
    # MNN's own layout doubles the BOS: what the user must be told
    doubled = stand_in_demo(tmp_path / "..", "ids = ids[:1] + ids if 'comma' in text else ids", known)
    proc = run("verify", mtok, "--mnn", str(doubled), "--corpus", str(corpus), check=False)
    assert proc.returncode == 1 and f"vs pymtok: {n - 1}/{n} texts" in proc.stdout
    assert "differs: 'second, with a comma'" in proc.stdout


def test_verify_mnn_binary_errors(tmp_path: Path, qwen_mtok: Path) -> None:
    assert "no such program" in one_line_error(run("verify", str(qwen_mtok), "--mnn", str(tmp_path / "none"), check=False))
    failing = tmp_path / "failing"
    failing.write_text("#!/bin/sh\necho 'cannot open tokenizer' >&2\nexit 3\n", encoding="utf-8")
    failing.chmod(0o755)
    message = one_line_error(run("verify", str(qwen_mtok), "--mnn", str(failing), check=False))
    assert "exit status 3" in message and "cannot open tokenizer" in message
    assert "--against" in one_line_error(run("verify", str(qwen_mtok), check=False))


def test_info_says_what_mnn_gets_wrong_in_words(tmp_path: Path) -> None:
    folder = fixture_path("tokenizers", "clip-vit")
    device = run("info", str(folder)).stdout
    assert "nearly every word gets other ids" in device
    run("export", str(fixture_path("tokenizers", "falcon")), "-o", str(tmp_path / "d"))
    run("export", str(fixture_path("tokenizers", "falcon")), "-o", str(tmp_path / "i"), "--mnn-identical")
    assert "punctuation is not split off" not in run("info", str(tmp_path / "d" / "tokenizer.mtok")).stdout
    identical = run("info", str(tmp_path / "i" / "tokenizer.mtok")).stdout
    assert "mnn-identical layout" in identical and "punctuation is not split off" in identical
