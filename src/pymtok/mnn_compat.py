"""Where MNN's C++ runtime will not reproduce a tokenizer exactly (BEHAVIOR.md §12).

pymtok itself encodes every file exactly; these warnings tell someone deploying the file to MNN
what its runtime will approximate.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

_CHILDREN = ("normalizers", "pretokenizers", "decoders", "processors")


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
        yield f"normalizer {kind}: MNN maps single code points through a table (no composition of 'e\\u0301', no reordering) and turns control/format characters into spaces"
    elif kind == "NFKD":
        yield "normalizer NFKD: MNN writes an NFKC table instead"
    elif kind == "NFD":
        yield "normalizer NFD: dropped by MNN's exporter"
    elif kind == "Precompiled":
        yield "normalizer Precompiled (SentencePiece charsmap): MNN approximates it with an NFKC table"
    elif kind == "Replace" and "Regex" in (cfg.get("pattern") or {}):
        yield "normalizer Replace with a regex: MNN keeps only literal patterns (this one becomes a no-op)"
    elif kind == "BertNormalizer":
        yield "normalizer BertNormalizer: MNN keeps format characters (Cf), strips Mc/Me marks too, and lowercases per code point"
    elif kind == "StripAccents":
        yield "normalizer StripAccents: MNN decomposes as well as strips"
    elif kind == "SentencePiece":
        yield (
            "normalizer SentencePiece: MNN gets Llama's stand-in (the charsmap as an NFKC table, a ▁ prefix, spaces as ▁): "
            "no longest-match charsmap, no whitespace collapsing, no suffix mode, user-defined pieces normalized"
        )
    elif kind not in (None, "Sequence", "Prepend", "Replace", "Lowercase", "Strip"):
        yield f"normalizer {kind}: not representable in MNN (dropped)"


def _pre_tokenizer_warnings(cfg: Mapping[str, Any]) -> Iterator[str]:
    kind = cfg.get("type")
    if kind == "Metaspace":
        if cfg.get("prepend_scheme") in ("first", "never") or cfg.get("split", True):
            yield "pre-tokenizer Metaspace: MNN always prepends '▁' to every piece and never splits on it"
    elif kind == "ByteLevel" and cfg.get("add_prefix_space"):
        yield "pre-tokenizer ByteLevel add_prefix_space: ignored by MNN"
    elif kind == "Digits" and not cfg.get("individual_digits"):
        yield "pre-tokenizer Digits(individual_digits=false): a no-op in MNN"
    elif kind == "Split":
        if cfg.get("behavior") in ("MergedWithNext", "Contiguous"):
            yield f"pre-tokenizer Split behavior {cfg.get('behavior')}: MNN reads it as Removed"
        if "String" in (cfg.get("pattern") or {}):
            yield "pre-tokenizer Split with a String pattern: MNN treats it as a regex"
        else:
            yield "pre-tokenizer Split regex: MNN's regex engine folds Unicode to categories (only \\p{L,N,P,S,M,Z} first letters), treats lazy as greedy and drops lookbehind alternatives"
    elif kind in ("Whitespace", "Punctuation", "UnicodeScripts", "CharDelimiterSplit", "FixedLength"):
        yield f"pre-tokenizer {kind}: not representable in MNN (dropped)"


def _model_warnings(cfg: Mapping[str, Any]) -> Iterator[str]:
    if cfg.get("type") == "SentencePieceBPE":
        yield "model SentencePieceBPE: MNN runs rank-ordered BPE with merges ranked by score (equal scores by id, not by position)"
    elif "merges" in cfg:
        if cfg.get("ignore_merges"):
            yield "model BPE ignore_merges: ignored by MNN (whole-word vocabulary hits are re-merged)"
        if cfg.get("unk_token"):
            yield "model BPE unk_token: MNN has no unknown token for BPE (unknown characters are dropped)"
        if cfg.get("continuing_subword_prefix") or cfg.get("end_of_word_suffix"):
            yield "model BPE continuing_subword_prefix/end_of_word_suffix: not supported by MNN"
    elif isinstance(cfg.get("vocab"), list):
        yield "model Unigram: MNN scores unknowns and byte fallback differently and breaks ties toward the shorter piece"


def _decoder_warnings(cfg: Mapping[str, Any] | None) -> Iterator[str]:
    if cfg is None:
        yield "decoder null: MNN's exporter writes ByteLevel in its place"
        return
    for c in _walk(cfg):
        kind = c.get("type")
        if kind == "SentencePiece":
            yield "decoder SentencePiece: MNN gets Llama's stand-in (▁ to space, byte fallback, strip one leading space)"
        elif kind in ("BPEDecoder", "CTC"):
            yield f"decoder {kind}: MNN writes ByteLevel in its place"
        elif kind == "Strip":
            yield "decoder Strip: MNN strips only the first/last token, once"
        elif kind == "WordPiece":
            yield "decoder WordPiece: MNN also strips '##' from the first token and applies only part of the cleanup"
        elif kind == "Replace" and "Regex" in (c.get("pattern") or {}):
            yield "decoder Replace with a regex: MNN's runtime loops forever on it"


def mnn_warnings(config: Mapping[str, Any], *, has_prefix_ids: bool = False) -> list[str]:
    """Human-readable notes on what MNN's runtime approximates for this tokenizer config."""
    out: list[str] = []
    for c in _walk(config.get("normalizer")):
        out.extend(_normalizer_warnings(c))
    for c in _walk(config.get("pre_tokenizer")):
        out.extend(_pre_tokenizer_warnings(c))
    model = config.get("model")
    if isinstance(model, Mapping):
        out.extend(_model_warnings(model))
    out.extend(_decoder_warnings(config.get("decoder")))
    post = config.get("post_processor")
    for c in _walk(post):
        kind = c.get("type")
        if kind in ("BertProcessing", "RobertaProcessing"):
            out.append(f"post-processor {kind}: dropped by MNN's exporter (no special tokens added)")
        elif kind == "TemplateProcessing" and has_prefix_ids:
            out.append("post-processor TemplateProcessing + header prefix ids: MNN's encode() adds BOS twice")
    for t in config.get("added_tokens") or []:
        if t.get("single_word") or (t.get("normalized") and not t.get("special")):
            out.append("added tokens: MNN ignores single_word/normalized and matches every added token on the raw text")
            break
    return list(dict.fromkeys(out))
