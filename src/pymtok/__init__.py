"""pymtok: MNN's LLM tokenizer files (.mtok and tokenizer.txt) in Python, exact against HF.

>>> import pymtok
>>> tok = pymtok.load("Qwen3-0.6B/")                  # doctest: +SKIP
>>> tok.encode("Hello world")                          # doctest: +SKIP
[9707, 1879]
>>> tok.decode([9707, 1879])                           # doctest: +SKIP
'Hello world'
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import FormatError, PymtokError, TemplateError, TextError
from .export import export
from .paths import regular_file
from .tokenizer import DecodeStream, Tokenizer, TokenizerMeta

__version__ = "0.1.0"

__all__ = [
    "DecodeStream", "FormatError", "PymtokError", "TemplateError", "TextError", "Tokenizer", "TokenizerMeta",
    "__version__", "export", "load",
]


def load(path: str | os.PathLike[str]) -> Tokenizer:
    """Load a tokenizer from any file a model ships it in, or a folder holding one.

    Files: ``tokenizer.json``, ``tokenizer.mtok``, ``tokenizer.txt`` (MNN's legacy format), a
    SentencePiece ``.model``, a ``.tiktoken`` file, GPT-2's ``vocab.json`` (with ``merges.txt``
    beside it), a BERT ``vocab.txt`` and a ``.gguf`` file. A folder is searched in that order
    (each pattern must match one file); ``tokenizer_config.json``, ``special_tokens_map.json``
    and ``generation_config.json`` beside the file are read where they apply.
    """
    p = Path(path)
    if p.is_dir():
        p = _find_source(p)
    regular_file(p)
    with open(p, "rb") as f:
        head = f.read(16)
    if head.startswith(b"430 4"):
        from .mtok import read_mtok

        tok = read_mtok(p)
    elif head.startswith(b"430 "):
        from .legacy import read_txt

        tok = read_txt(p)
    elif p.suffix == ".model":
        from .sentencepiece import read_model

        tok = read_model(p)
    elif head.startswith(b"GGUF") or p.suffix == ".gguf":
        from .gguf import read_gguf

        tok = read_gguf(p)
    elif p.suffix == ".tiktoken":
        from .legacy import load_tiktoken

        tok = load_tiktoken(p)
    elif p.name == "vocab.json" or p.name == "merges.txt":
        from .legacy import load_vocab_merges

        tok = load_vocab_merges(p.parent / "vocab.json", p.parent / "merges.txt")
    elif p.suffix == ".txt" and p.name != "tokenizer.txt":
        from .legacy import load_bert_vocab

        tok = load_bert_vocab(p)
    elif p.suffix in (".mtok", ".txt"):
        raise FormatError(
            f"{p}: header at byte 0: not an MNN tokenizer file (it starts {head[:8]!r}, expected '430 <type>')"
        )
    else:
        from .hf_json import load_folder

        tok = load_folder(p)
    _apply_llm_config(tok, p.parent / "llm_config.json")
    return tok


# A folder's tokenizer files, in the order they are preferred
_FOLDER_FILES = ("tokenizer.json", "tokenizer.mtok", "tokenizer.txt")
# after MNN's exporter's order (FORMAT.md §6): SentencePiece, tiktoken, GPT-2, BERT; GGUF last
_FOLDER_SOURCES = ("tokenizer.model", "ice_text.model", "*.tiktoken", "vocab.json", "*vocab.txt", "*.gguf")


def _find_source(folder: Path) -> Path:
    """The tokenizer file a model folder holds (see :func:`load`)."""
    for name in _FOLDER_FILES:
        if (folder / name).is_file():
            return folder / name
    for pattern in _FOLDER_SOURCES:
        found = sorted(folder.glob(pattern))
        if pattern == "vocab.json" and found and not (folder / "merges.txt").is_file():
            raise FormatError(f"{folder}: vocab.json without merges.txt beside it")
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise FormatError(f"{folder}: several {pattern} files ({', '.join(f.name for f in found)}); name one")
    raise FormatError(
        f"{folder}: no tokenizer in this folder (looked for {', '.join(_FOLDER_FILES + _FOLDER_SOURCES)})"
    )


def _apply_llm_config(tok: Tokenizer, path: Path) -> None:
    """MNN deployments override the template and EOS text from ``llm_config.json``'s jinja block."""
    from .hf_json import template_from_llm_config

    override = template_from_llm_config(path)
    if override is not None:
        tok.set_chat_template(*override)
