"""Where MNN's C++ runtime will not reproduce a tokenizer exactly (BEHAVIOR.md §12), and running
a user's own build of MNN's tokenizer demo to measure it.

pymtok itself encodes every file exactly; the warnings tell someone deploying the file to MNN
which texts its runtime will tokenize differently, and why. They describe the layout pymtok writes
by default (``device``: what MNN reads right, docs/FORMAT_EXTENSION.md) or MNN's own exporter's
(``mnn-identical``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from .errors import PymtokError

_CHILDREN = ("normalizers", "pretokenizers", "decoders", "processors")

DEVICE = "device"
MNN_IDENTICAL = "mnn-identical"


def _walk(cfg: Any) -> Iterator[Mapping[str, Any]]:
    if not isinstance(cfg, Mapping):
        return
    yield cfg
    for key in _CHILDREN:
        for child in cfg.get(key) or []:
            yield from _walk(child)


def _normalizer_warnings(cfg: Mapping[str, Any]) -> Iterator[str]:
    kind = cfg.get("type")
    if kind in ("NFC", "NFKC"):
        yield (
            f"normalizer {kind}: MNN normalizes one character at a time, so text with combining marks "
            "(Arabic vowel marks, Korean jamo, 'e' + a combining accent) is not composed or reordered, and "
            "invisible format characters (zero-width spaces and joiners, as in emoji sequences) become spaces"
        )
    elif kind == "NFKD":
        yield "normalizer NFKD: MNN composes (NFKC) instead of decomposing: accented letters get other ids"
    elif kind == "NFD":
        yield "normalizer NFD: MNN does not decompose at all: accented letters get other ids"
    elif kind == "Precompiled":
        yield (
            "normalizer Precompiled (SentencePiece's character map): MNN uses plain NFKC instead, so characters "
            "the map treats specially (some spaces, full-width forms, format characters) can get other ids"
        )
    elif kind == "Replace" and "Regex" in (cfg.get("pattern") or {}):
        yield "normalizer Replace with a regex: MNN only replaces literal text, so this replacement never happens there"
    elif kind == "BertNormalizer":
        yield (
            "normalizer BertNormalizer: MNN keeps invisible format characters (zero-width spaces, soft hyphens), "
            "also strips spacing vowel signs (Devanagari and other Indic scripts lose them), and lowercases one "
            "character at a time"
        )
    elif kind == "StripAccents":
        yield "normalizer StripAccents: MNN decomposes as it strips, so characters with accents can get other ids"
    elif kind == "SentencePiece":
        yield (
            "normalizer SentencePiece: MNN gets Llama's stand-in (the charsmap as an NFKC table, a ▁ prefix, spaces as ▁): "
            "no longest-match charsmap, no whitespace collapsing, no suffix mode, user-defined pieces normalized"
        )
    elif kind not in (None, "Sequence", "Prepend", "Replace", "Lowercase", "Strip"):
        yield f"normalizer {kind}: MNN has no such step and skips it: text it would change gets other ids"


def _pre_tokenizer_warnings(cfg: Mapping[str, Any], layout: str) -> Iterator[str]:
    kind = cfg.get("type")
    if kind == "Metaspace":
        if cfg.get("prepend_scheme") in ("first", "never") or cfg.get("split", True):
            yield (
                "pre-tokenizer Metaspace: MNN puts '▁' before every piece and never splits at spaces, so text "
                "after a special token and runs of spaces get other ids"
            )
    elif kind == "ByteLevel" and cfg.get("add_prefix_space"):
        yield "pre-tokenizer ByteLevel add_prefix_space: MNN adds no space before the text: its first word gets another id"
    elif kind == "Digits" and layout == MNN_IDENTICAL:
        if not cfg.get("individual_digits"):
            yield "pre-tokenizer Digits: MNN's exporter writes a no-op, so numbers are not split from the words around them"
        else:
            yield "pre-tokenizer Digits: MNN splits only ASCII digits, so other numerals (Arabic-Indic, full-width) differ"
    elif kind == "Punctuation" and (layout == MNN_IDENTICAL or cfg.get("behavior") == "MergedWithNext"):
        yield "pre-tokenizer Punctuation: MNN drops this step, so punctuation is not split off the words around it"
    elif kind == "Split":
        if cfg.get("behavior") in ("MergedWithNext", "Contiguous"):
            yield f"pre-tokenizer Split ({cfg.get('behavior')}): MNN removes the matched text instead: it vanishes from the ids"
        if "String" in (cfg.get("pattern") or {}):
            yield "pre-tokenizer Split with a literal pattern: MNN reads it as a regex, so text with . * + ( [ etc. splits wrongly"
        else:
            yield (
                "pre-tokenizer Split regex: MNN's regex engine knows character classes only by their first letter "
                "(\\p{Lu} is any letter, so 'HelloWorld' is not split at the capital), treats lazy repeats as greedy "
                "and drops alternatives with lookbehind: some texts split differently"
            )
    elif kind in ("Whitespace", "UnicodeScripts", "CharDelimiterSplit", "FixedLength"):
        yield f"pre-tokenizer {kind}: MNN drops this step, so the pieces it would cut reach the model joined"


def _model_warnings(cfg: Mapping[str, Any]) -> Iterator[str]:
    if cfg.get("type") == "SentencePieceBPE":
        yield "model SentencePieceBPE: MNN runs rank-ordered BPE with merges ranked by score (equal scores by id, not by position)"
    elif "merges" in cfg:
        if cfg.get("ignore_merges"):
            yield (
                "model BPE ignore_merges: MNN merges every word piece by piece even when the whole word is a "
                "token, so some words (often in Arabic, Russian, Korean) get more, different ids"
            )
        if cfg.get("unk_token"):
            yield "model BPE unk_token: MNN has no unknown token for BPE: characters outside the vocabulary are dropped"
        if cfg.get("continuing_subword_prefix") or cfg.get("end_of_word_suffix"):
            yield (
                "model BPE continuing_subword_prefix/end_of_word_suffix: MNN has neither, so nearly every word "
                "gets other ids (this model cannot run exactly on MNN)"
            )
    elif isinstance(cfg.get("vocab"), list):
        yield (
            "model Unigram: MNN scores unknown characters and byte fallback differently and breaks ties toward "
            "the shorter piece: rare characters and repeated punctuation can get other ids"
        )


def _sparse_id_warnings(config: Mapping[str, Any], model: Mapping[str, Any], layout: str) -> Iterator[str]:
    from .mtok import vocab_fillers

    vocab = model.get("vocab")
    if not isinstance(vocab, Mapping) or not vocab or "merges" not in model and "continuing_subword_prefix" not in model:
        return
    if max(vocab.values()) + 1 > len(vocab) and not vocab_fillers(config, layout == MNN_IDENTICAL):
        yield (
            "vocabulary ids with gaps: MNN's loader writes each token at its id in a table sized by the "
            "token count, past the table's end (memory corruption or a crash on the device)"
        )


def _decoder_warnings(cfg: Mapping[str, Any] | None) -> Iterator[str]:
    if cfg is None:
        yield "decoder null: MNN decodes as byte-level instead: decoded text with non-ASCII characters can be wrong"
        return
    for c in _walk(cfg):
        kind = c.get("type")
        if kind == "SentencePiece":
            yield "decoder SentencePiece: MNN gets Llama's stand-in (▁ to space, byte fallback, strip one leading space)"
        elif kind in ("BPEDecoder", "CTC"):
            yield f"decoder {kind}: MNN decodes as byte-level instead: decoded text can be wrong"
        elif kind == "Strip":
            yield "decoder Strip: MNN strips only the first and last token, once: decoded text can keep a leading space"
        elif kind == "WordPiece":
            yield "decoder WordPiece: MNN also strips '##' from the first token and cleans up spaces only in part"
        elif kind == "Replace" and "Regex" in (c.get("pattern") or {}):
            yield "decoder Replace with a regex: MNN's runtime loops forever on it when decoding"


def mnn_warnings(config: Mapping[str, Any], *, layout: str = DEVICE, has_prefix_ids: bool = False) -> list[str]:
    """What MNN's runtime gets wrong for this tokenizer config laid out as ``layout``, in words."""
    out: list[str] = []
    for c in _walk(config.get("normalizer")):
        out.extend(_normalizer_warnings(c))
    for c in _walk(config.get("pre_tokenizer")):
        out.extend(_pre_tokenizer_warnings(c, layout))
    model = config.get("model")
    if isinstance(model, Mapping):
        out.extend(_model_warnings(model))
        out.extend(_sparse_id_warnings(config, model, layout))
    out.extend(_decoder_warnings(config.get("decoder")))
    for c in _walk(config.get("post_processor")):
        kind = c.get("type")
        if kind in ("BertProcessing", "RobertaProcessing") and layout == MNN_IDENTICAL:
            out.append(f"post-processor {kind}: MNN's exporter drops it, so encode() adds no special tokens")
        elif kind == "TemplateProcessing" and has_prefix_ids and layout == MNN_IDENTICAL:
            out.append("post-processor TemplateProcessing with prefix ids: MNN's encode() puts the BOS token in twice")
    for t in config.get("added_tokens") or []:
        if t.get("single_word") or (t.get("normalized") and not t.get("special")):
            out.append(
                "added tokens: MNN matches every added token in the raw text, ignoring single_word and normalized, "
                "so such a token inside a word is matched where HF would not"
            )
            break
    return list(dict.fromkeys(out))


_IDS = re.compile(r"ids=\[([0-9,\s-]*)\]")


def mnn_demo_encode(binary: str | Path, file: str | Path, text: str, *, timeout: float = 60.0) -> list[int]:
    """The ids a build of MNN's ``tokenizer_demo`` prints for ``text`` (``BINARY FILE encode TEXT``,
    which prints ``ids=[...]``; its ``encode`` adds the post-processor's special tokens)."""
    import subprocess

    if "\0" in text:
        raise PymtokError("MNN's tokenizer_demo takes the text as an argument, which cannot hold a NUL character")
    try:
        proc = subprocess.run(
            [str(binary), str(file), "encode", text], capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
    except FileNotFoundError:
        raise PymtokError(f"{binary}: no such program (build MNN's tokenizer_demo and give its path)") from None
    except PermissionError:
        raise PymtokError(f"{binary}: not an executable program") from None
    except subprocess.TimeoutExpired:
        raise PymtokError(f"{binary} did not answer within {timeout:g} s for a text of {len(text)} characters") from None
    except OSError as exc:
        raise PymtokError(f"{binary} could not be run: {exc}") from None
    out = proc.stdout.decode("utf-8", "replace")
    found = _IDS.search(out)
    if proc.returncode != 0 or found is None:
        tail = (proc.stderr or proc.stdout).decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
        raise PymtokError(
            f"{binary} failed on a text of {len(text)} characters (exit status {proc.returncode}): {tail[0][:200]}"
        )
    return [int(x) for x in found.group(1).replace(",", " ").split()]
