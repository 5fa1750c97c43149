"""Tokenizers no fixture has: pipelines drawn at random from the components HF ``tokenizers``
offers (normalizers, pre-tokenizers, models with their options, decoders, post-processors,
added tokens with their flags), trained by HF's own trainers on corpus text, then compared with
HF id for id: encode with and without special tokens, pairs, offsets, decode. The fixtures are a
few real models; held-out ones fall anywhere in this space. Drawn this way, a Metaspace +
ByteLevel pipeline showed a heap overflow in the native pre-tokenizer and UnicodeScripts a
script table newer than HF's.

Each seed is one pipeline; the fast tier runs a few, the full tier many. A failing seed prints
its configuration, so it can be rebuilt alone.
"""

from __future__ import annotations

import functools
import json
import random
from pathlib import Path
from typing import Any

import pytest
from conftest import corpus_chunks, corpus_files, full_tier

import pymtok
from pymtok.export import export

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, trainers  # noqa: E402
from tokenizers import normalizers as N  # noqa: E402
from tokenizers import pre_tokenizers as P  # noqa: E402
from tokenizers import processors as PP  # noqa: E402

FAST_SEEDS = 6
FULL_SEEDS = 60
BEHAVIORS = ["removed", "isolated", "merged_with_previous", "merged_with_next", "contiguous"]
EDGES = ["", " ", "  leading and trailing  ", "a\u0301b\u00e9 \ufb01 \uff21\uff22\uff23 \u00bd \u1e9e \u0130",
         "\t\n\r x", "<s> hello </s>", "[MASK] the", "don't can't I'M", "12345 3.14 1,000", "\u01c4 \u01c5",
         "\u200b\u200d zero width", "\U0001f44d\U0001f3fd\U0001f468\u200d\U0001f469", "\u65e5\u672c\u8a9e",
         "\ud55c\uad6d\uc5b4", "   ", "a" * 300, "<unk>", "\ufeffbom", "\u064e\u062a"]


@functools.cache
def training_text() -> list[str]:
    """Some of every corpus file, windows of 300 characters."""
    return [text[i:i + 300] for _, text in corpus_files() for i in range(0, min(len(text), 30000), 900)]


def normalizer(r: random.Random) -> Any:
    steps = [
        lambda: N.NFC(), lambda: N.NFD(), lambda: N.NFKC(), lambda: N.NFKD(), lambda: N.Lowercase(),
        lambda: N.StripAccents(), lambda: N.Strip(left=r.random() < .5, right=r.random() < .5),
        lambda: N.Replace(r.choice([" ", "a", "  ", "e"]), r.choice(["\u2581", "", "X", "  "])),
        lambda: N.Replace(Regex(r.choice([r"\s+", " {2,}", r"\p{P}", r"[0-9]+", r"(?i:the)"])), r.choice([" ", "", "#"])),
        lambda: N.Prepend("\u2581"),
        lambda: N.BertNormalizer(clean_text=r.random() < .5, handle_chinese_chars=r.random() < .5,
                                 strip_accents=r.choice([None, True, False]), lowercase=r.random() < .5),
        lambda: N.Nmt(), lambda: N.ByteLevel(),
    ]
    count = r.choice([0, 1, 1, 2, 3])
    chosen = [r.choice(steps)() for _ in range(count)]
    if not chosen:
        return None
    return chosen[0] if count == 1 and r.random() < .5 else N.Sequence(chosen)


def pre_tokenizer(r: random.Random, byte_level: bool) -> Any:
    def split() -> Any:
        pattern = r.choice([" ", "-", "e", "the"]) if r.random() < .5 else Regex(r.choice(
            [r"\s+", r"\d", "[a-z]+", "(?i:'s|'t)", r"\p{L}+", r" ?[^\s\p{L}\p{N}]+", r"\s+(?!\S)",
             "[0-9][0-9][0-9]", r"\p{N}{1,3}", r" ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
             r"[\p{Lu}\p{Lt}]*[\p{Ll}\p{M}]+|\p{N}|[^\r\n\p{L}\p{N}]+", r"\w+|[^\w\s]+", r"[.,!?;:]"]))
        return P.Split(pattern=pattern, behavior=r.choice(BEHAVIORS), invert=r.random() < .3)

    steps = [
        lambda: P.Whitespace(), lambda: P.WhitespaceSplit(), lambda: P.Punctuation(behavior=r.choice(BEHAVIORS)),
        lambda: P.Digits(individual_digits=r.random() < .5),
        lambda: P.Metaspace(replacement="\u2581", prepend_scheme=r.choice(["always", "never", "first"]),
                            split=r.random() < .5),
        split, lambda: P.CharDelimiterSplit(r.choice([" ", "e", ","])), lambda: P.UnicodeScripts(),
        lambda: P.BertPreTokenizer(), lambda: P.FixedLength(length=r.choice([1, 3, 5])),
    ]
    chosen = [r.choice(steps)() for _ in range(r.choice([0, 1, 1, 2]))]
    if byte_level:
        chosen.append(P.ByteLevel(add_prefix_space=r.random() < .5, use_regex=r.random() < .7))
        if r.random() < .3:
            # after ByteLevel a step cuts GPT-2 characters, which can part a character's bytes
            chosen.append(r.choice([step for k, step in enumerate(steps) if k != 4])())
    if not chosen:
        return None
    return chosen[0] if len(chosen) == 1 else P.Sequence(chosen)


def trained(seed: int) -> Tokenizer:
    """The seed's pipeline, trained (Unigram's vocabulary holds every character it meets)."""
    r = random.Random(seed)
    kind = r.choice(["BPE", "BPE", "WordPiece", "Unigram", "WordLevel"])
    byte_level = kind == "BPE" and r.random() < .5
    specials = ["<unk>", "<s>", "</s>", "[MASK]"]
    size = r.choice([1000, 3000])
    if kind == "BPE":
        options: dict[str, Any] = {"fuse_unk": r.random() < .3, "ignore_merges": r.random() < .3,
                                   "byte_fallback": not byte_level and r.random() < .4}
        if r.random() < .7:
            options["unk_token"] = "<unk>"
        affixes = {}
        if not byte_level and r.random() < .3:
            affixes["continuing_subword_prefix"] = "##"
        if not byte_level and r.random() < .3:
            affixes["end_of_word_suffix"] = "</w>"
        tok = Tokenizer(models.BPE(**options, **affixes))
        trainer: Any = trainers.BpeTrainer(vocab_size=size, special_tokens=specials, limit_alphabet=600,
                                           initial_alphabet=P.ByteLevel.alphabet() if byte_level else [], **affixes)
    elif kind == "WordPiece":
        tok = Tokenizer(models.WordPiece(unk_token="<unk>", max_input_chars_per_word=r.choice([5, 100])))
        trainer = trainers.WordPieceTrainer(vocab_size=size, special_tokens=specials, limit_alphabet=600)
    elif kind == "WordLevel":
        tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
        trainer = trainers.WordLevelTrainer(vocab_size=size, special_tokens=specials)
    else:
        tok = Tokenizer(models.Unigram())
        trainer = trainers.UnigramTrainer(vocab_size=size + 5000, special_tokens=specials, unk_token="<unk>")
    tok.normalizer = normalizer(r)
    tok.pre_tokenizer = pre_tokenizer(r, byte_level)
    if byte_level:
        tok.decoder = decoders.ByteLevel()
    elif kind == "WordPiece":
        tok.decoder = decoders.WordPiece(cleanup=r.random() < .5)
    elif r.random() < .3:
        tok.decoder = decoders.Metaspace(prepend_scheme=r.choice(["always", "never", "first"]))
    elif r.random() < .4:
        # Llama's and Mistral's decoder, shuffled and cut
        parts = [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                 decoders.Strip(" ", r.choice([0, 1]), r.choice([0, 1]))]
        r.shuffle(parts)
        tok.decoder = decoders.Sequence(parts[:r.choice([2, 3, 4])])
    tok.train_from_iterator(training_text(), trainer)
    bos, eos = ("<s>", tok.token_to_id("<s>")), ("</s>", tok.token_to_id("</s>"))
    roll = r.random()
    if roll < .15:
        tok.post_processor = PP.BertProcessing(eos, bos)
    elif roll < .3:
        tok.post_processor = PP.RobertaProcessing(eos, bos, trim_offsets=r.random() < .5,
                                                  add_prefix_space=r.random() < .5)
    elif roll < .7:
        tok.post_processor = PP.TemplateProcessing(single="<s> $A </s>", pair="<s> $A </s> $B:1 </s>:1",
                                                   special_tokens=[bos, eos])
    elif byte_level and r.random() < .5:
        tok.post_processor = PP.ByteLevel(trim_offsets=r.random() < .5)
    elif byte_level:
        # Llama 3's: byte-level offsets, then the template
        tok.post_processor = PP.Sequence([
            PP.ByteLevel(trim_offsets=r.random() < .5),
            PP.TemplateProcessing(single="<s> $A", pair="<s> $A <s>:1 $B:1", special_tokens=[bos])])
    tok.add_tokens([AddedToken(word, single_word=r.random() < .3, lstrip=r.random() < .3, rstrip=r.random() < .3,
                               normalized=r.random() < .5, special=r.random() < .5)
                    for word in r.sample(["hello", "the", " is", "<tag>", "\u65e5\u672c", "ab c", "\uff21\uff22"], 3)])
    return tok


def seeds() -> list[int]:
    return list(range(FULL_SEEDS if full_tier() else FAST_SEEDS))


@pytest.mark.parametrize("seed", seeds())
def test_trained_pipeline_matches_hf(seed: int, tmp_path: Path) -> None:
    folder = tmp_path / "source"
    folder.mkdir()
    trained(seed).save(str(folder / "tokenizer.json"))
    # the oracle reads the file pymtok reads: a trained Unigram in memory can split a tie of
    # equal scores otherwise than its own file read back
    hf = Tokenizer.from_file(str(folder / "tokenizer.json"))
    config = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    shown = {k: config[k] for k in ("normalizer", "pre_tokenizer", "decoder", "post_processor")}
    shown["model"] = {k: v for k, v in config["model"].items() if k not in ("vocab", "merges")}
    where = f"seed {seed}: {json.dumps(shown)[:1500]}"
    mtok = export(folder, tmp_path / "mtok")
    texts = corpus_chunks(40, seed=seed) + EDGES
    for label, tok in (("tokenizer.json", pymtok.load(folder)), (".mtok", pymtok.load(mtok))):
        for i, text in enumerate(texts):
            encoding = hf.encode(text)
            assert tok.encode(text) == encoding.ids, f"{label} {where}: {text!r}"
            plain = hf.encode(text, add_special_tokens=False).ids
            assert tok.encode(text, add_special_tokens=False) == plain, f"{label} {where}: {text!r}"
            other = texts[(i + 1) % len(texts)]
            assert tok.encode(text, other) == hf.encode(text, other).ids, f"{label} {where}: {text!r} / {other!r}"
            assert tok(text, return_offsets_mapping=True)["offset_mapping"] == encoding.offsets, \
                f"{label} {where}: offsets of {text!r}"
            for skip in (False, True):
                ours = tok.decode(encoding.ids, skip_special_tokens=skip, clean_up_tokenization_spaces=False)
                try:
                    theirs = hf.decode(encoding.ids, skip_special_tokens=skip)
                except BaseException as panic:  # pyo3's PanicException is no Exception
                    # HF's Strip decoder indexes before a token's start when it strips more
                    # characters than the token has: nothing to compare with
                    assert type(panic).__name__ == "PanicException", panic
                    continue
                assert ours == theirs, f"{label} {where}: decode of {text!r}"
