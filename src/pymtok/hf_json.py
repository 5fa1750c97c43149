"""Reading a HuggingFace model folder: ``tokenizer.json`` plus the configs and chat templates beside it.

Also derives MNN's header lists (special, stop and prefix ids) the way MNN's exporter does
(FORMAT.md §1.2), with our own encoder where MNN asks ``transformers``.
"""

from __future__ import annotations

import dataclasses
import decimal
import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .added_tokens import AddedToken, AddedVocabulary
from .errors import FormatError
from .models import Model
from .tokenizer import Tokenizer, TokenizerMeta

_NAMED_SPECIAL = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
# Named tokens a transformers tokenizer class fills in when tokenizer_config.json omits them; they
# are in its all_special_ids, so MNN's header lists them (gemma's "<mask>", id 4), and in the
# tokenizer's named special tokens.
_GEMMA_DEFAULTS = {"unk_token": "<unk>", "bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "mask_token": "<mask>"}
_CLASS_DEFAULTS = {"GemmaTokenizer": _GEMMA_DEFAULTS, "GemmaTokenizerFast": _GEMMA_DEFAULTS}
# The __call__ settings of transformers 5.24's tokenizer classes that differ from those of
# PreTrainedTokenizerBase (padding_side and truncation_side "right", model_input_names
# input_ids and attention_mask), as each class declares them; AutoTokenizer looks a
# tokenizer_class up without its "Fast", and a name it does not know gets the base's.
_LEFT = {"padding_side": "left"}
_TYPE_IDS_SECOND = {"model_input_names": ["input_ids", "token_type_ids", "attention_mask"]}
_TYPE_IDS_LAST = {"model_input_names": ["input_ids", "attention_mask", "token_type_ids"]}
CLASS_CALL_SETTINGS: dict[str, dict[str, Any]] = {
    **dict.fromkeys(("CodeLlamaTokenizer", "CohereTokenizer", "GemmaTokenizer", "LlamaTokenizer",
                     "Siglip2Tokenizer", "XLNetTokenizer"), _LEFT),
    **dict.fromkeys(("BertTokenizer", "ConvBertTokenizer", "DPRContextEncoderTokenizer",
                     "DPRQuestionEncoderTokenizer", "LxmertTokenizer", "MarkupLMTokenizer",
                     "MobileBertTokenizer", "SqueezeBertTokenizer"), _TYPE_IDS_SECOND),
    **dict.fromkeys(("CanineTokenizer", "DebertaTokenizer", "DebertaV2Tokenizer", "LayoutLMv2Tokenizer",
                     "TapasTokenizer"), _TYPE_IDS_LAST),
    "FNetTokenizer": {"model_input_names": ["input_ids", "token_type_ids"]},
    "LayoutLMv3Tokenizer": {"model_input_names": ["input_ids", "attention_mask", "bbox"]},
}
# add_bos_token / add_eos_token are not among them: beside a tokenizer.json transformers drops
# them (tokenizer.json's post-processor is the one it runs), whatever tokenizer_config.json says
_CALL_SETTINGS = ("model_max_length", "padding_side", "truncation_side", "model_input_names",
                  "chat_control_tokens")


_U64_MAX = 2**64 - 1
_I32_MAX = 2**31 - 1
_POW10 = [float(f"1e{k}") for k in range(309)]
_PLAIN_NUMBER = re.compile(r"(-?)([0-9]+)\.([0-9]+)")


def serde_float(literal: str) -> float:
    """A JSON number as HF's Rust loader (serde_json without ``float_roundtrip``) reads it.

    serde_json keeps up to 19 significant digits in a u64, converts that to f64 and then
    multiplies or divides by a power of ten: two roundings, so it can land one ulp away from
    the correctly rounded value Python's ``float`` gives. Unigram scores are compared for
    equality during Viterbi, so that ulp decides ties and we must reproduce it.
    """
    # a score as vocabularies write them, a fraction of at most 19 digits: its digits are the
    # significand whole, scaled by one division (a tenth of the steps below, for every score of
    # a Unigram vocabulary as it loads)
    plain = _PLAIN_NUMBER.fullmatch(literal)
    if plain and len(plain[2]) + len(plain[3]) <= 19:
        value = float(int(plain[2] + plain[3])) / _POW10[len(plain[3])]
        return -value if plain[1] else value
    text = literal.strip()
    negative = text.startswith("-")
    if negative or text.startswith("+"):
        text = text[1:]
    mantissa, _, exp_text = text.replace("E", "e").partition("e")
    int_part, _, frac_part = mantissa.partition(".")
    # The longest prefix of the digits that fits a u64; digits of the integer part past it still
    # scale the value, those of the fraction are dropped (as serde_json, digit by digit).
    digits = int_part + frac_part
    fit = len(digits) - len(digits.lstrip("0")) + 19
    if len(digits) > fit and int(digits[: fit + 1]) <= _U64_MAX:
        fit += 1
    fit = min(fit, len(digits))
    significand = int(digits[:fit]) if fit else 0
    exponent = len(int_part) - fit
    if exp_text:
        exp_digits = exp_text.lstrip("+-")
        if len(exp_digits) > 10 or int(exp_digits) > _I32_MAX:
            # serde_json's exponent overflow: out of range, or zero
            if significand and not exp_text.startswith("-"):
                raise FormatError(f"JSON number {literal:.40} is out of range")
            return -0.0 if negative else 0.0
        exponent += -int(exp_digits) if exp_text.startswith("-") else int(exp_digits)
    value = float(significand)
    while True:
        if abs(exponent) < len(_POW10):
            value = value * _POW10[exponent] if exponent >= 0 else value / _POW10[-exponent]
            break
        if value == 0.0:
            break
        if exponent >= 0:
            raise FormatError(f"JSON number {literal:.40} is out of range")
        value /= 1e308
        exponent += 308
    return -value if negative else value


def serde_literal(value: float) -> str | None:
    """A JSON number that :func:`serde_float` (HF's loader) reads as exactly ``value``, or None
    where serde_json can read no text as ``value``.

    Python's shortest ``repr`` is read one ulp off for about one score in ten. serde_json keeps a
    u64 significand and divides it by one power of ten, so a significand of 17 to 20 digits,
    chosen among the f64 values next to ``value * 10**k``, reaches every value it can produce.
    """
    if not math.isfinite(value):
        return None
    text = repr(value)
    if serde_float(text) == value:
        return text
    sign, magnitude = ("-" if value < 0 else ""), abs(value)
    top = decimal.Decimal(magnitude).adjusted()
    for digits in (17, 18, 19, 20):
        k = digits - 1 - top  # value = significand / 10**k, or * 10**-k when k < 0
        if abs(k) >= len(_POW10):
            continue
        candidate = float(decimal.Decimal(magnitude).scaleb(k))
        for _ in range(4):
            candidate = math.nextafter(candidate, 0.0)
        for _ in range(9):
            if candidate < 2**64 and candidate.is_integer():
                text = f"{sign}{int(candidate)}e{-k}"
                if serde_float(text) == value:
                    return text
            candidate = math.nextafter(candidate, math.inf)
    return None


def serde_int(literal: str) -> int | float:
    """A JSON integer as serde_json reads it: an integer when it fits 64 bits, else an f64, and
    ``-0`` is the float -0.0 (so HF refuses it where it wants an unsigned integer)."""
    if literal == "-0":
        return -0.0
    if len(literal) <= 20:
        value = int(literal)
        if -(2**63) <= value <= _U64_MAX:
            return value
    return serde_float(literal)


def _no_constant(name: str) -> float:
    raise FormatError(f"{name} is not a JSON value")


# serde_json's recursion limit as HF's loader meets it: 127 nested arrays and objects load, 128 fail
_MAX_DEPTH = 127
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_MINUS_ZERO = re.compile(rb"-0(?![0-9.eE])")
_DIGITS_AS_ZERO = bytes(0x30 if 0x30 <= b <= 0x39 else 0x78 for b in range(256))


def _integers_differ(data: bytes) -> bool:
    """Whether a JSON text may hold an integer serde_json reads unlike Python (``-0``, 20 digits
    or more): two scans cost less than a Python call for every integer of a vocabulary."""
    return _MINUS_ZERO.search(data) is not None or b"0" * 20 in data.translate(_DIGITS_AS_ZERO)


def read_json(path: Path, what: str, *, hf_tokenizers: bool = False) -> Any:
    """A JSON file, every failure a FormatError naming it.

    ``hf_tokenizers``: read it as HF ``tokenizers`` reads ``tokenizer.json`` (serde_json):
    integers past 64 bits become floats, ``NaN``/``Infinity``, lone UTF-16 surrogate escapes and
    nesting deeper than serde_json's limit are refused. Otherwise as Python's ``json`` module
    (what ``transformers`` uses for the other files), with serde_json's floats.
    """
    try:
        with open(path, "rb") as f:
            data = f.read()
        if not hf_tokenizers:
            return json.loads(data.decode("utf-8"), parse_float=serde_float)
        value = json.loads(data.decode("utf-8"), parse_float=serde_float, parse_constant=_no_constant,
                           parse_int=serde_int if _integers_differ(data) else None)
        if _depth(value) > _MAX_DEPTH:
            raise FormatError(f"{what} nests arrays and objects deeper than HF's limit of {_MAX_DEPTH}")
        if _SURROGATE_ESCAPE.search(data):
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        return value
    except UnicodeDecodeError as exc:
        raise FormatError(f"{path}: {what} is not UTF-8 (byte {exc.start})") from None
    except UnicodeEncodeError:
        raise FormatError(f"{path}: {what} holds a lone UTF-16 surrogate escape, which is no character") from None
    except json.JSONDecodeError as exc:
        raise FormatError(f"{path}: {what} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except RecursionError:
        raise FormatError(f"{path}: {what} nests arrays and objects too deeply to read") from None
    except FormatError as exc:
        raise FormatError(f"{path}: {exc}") from None
    except ValueError as exc:  # Python's limit on the digits of an integer
        raise FormatError(f"{path}: {what}: {exc}") from None


def _depth(config: Any) -> int:
    """How deeply a ``tokenizer.json`` nests arrays and objects, leaving out the model's vocab and
    merges: their shape is checked entry by entry when the model is built, which bounds it."""
    model = config.get("model") if isinstance(config, dict) else None
    deepest = 0
    stack = [(config, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(node, dict):
            skip = ("vocab", "merges") if node is model else ()
            children = [v for k, v in node.items() if k not in skip]
        else:
            children = node
        stack += [(child, depth + 1) for child in children if isinstance(child, (dict, list))]
    return deepest


def read_optional_json(folder: Path, name: str) -> dict[str, Any]:
    path = folder / name
    if not path.is_file():
        return {}
    data = read_json(path, name)
    if not isinstance(data, dict):
        raise FormatError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def folder_tokenizer_config(folder: Path) -> dict[str, Any]:
    """``tokenizer_config.json`` beside a tokenizer, with ``special_tokens_map.json`` merged in as
    transformers 5 merges it.

    transformers reads the map only where the config has no ``added_tokens_decoder`` (the form
    it has saved since v4.34); then each entry of the map replaces the config's, an AddedToken
    object becoming a special one, and an ``extra_special_tokens`` list adds the tokens the
    config's lacks. Its older ``additional_special_tokens`` counts only where no
    ``extra_special_tokens`` is left, as transformers' constructor takes it.
    """
    config = read_optional_json(folder, "tokenizer_config.json")
    special_map = read_optional_json(folder, "special_tokens_map.json")
    if not special_map or "added_tokens_decoder" in config:
        return config
    if "additional_special_tokens" in config and not config.get("extra_special_tokens"):
        config["extra_special_tokens"] = config.pop("additional_special_tokens")
    # the config's model-specific tokens held as strings or in a dict extra_special_tokens are
    # set aside before the map is read: they win over the map's, which come first
    explicit = {key: config.pop(key) for key in list(config)
                if key.endswith("_token") and key not in _NAMED_SPECIAL and isinstance(config[key], str)}
    if isinstance(config.get("extra_special_tokens"), Mapping):
        explicit.update(config.pop("extra_special_tokens"))
    for key, value in special_map.items():
        if key == "extra_special_tokens" and isinstance(value, list):
            existing = list(config.get(key) or [])
            existing += [t for t in (_map_token(t) for t in value) if t not in existing]
            config[key] = existing
        elif key == "extra_special_tokens" and isinstance(value, Mapping):
            config.pop(key, None)  # it replaces the config's list
            explicit.update(value)
        elif key.endswith("_token") and key not in _NAMED_SPECIAL and isinstance(value, str):
            # it reaches the constructor as a keyword, as an AddedToken object of the config does
            config[key] = _map_token({"content": value})
        else:
            config[key] = _map_token(value) if key != "extra_special_tokens" else value
    for key, value in explicit.items():
        config[key] = _map_token(value if isinstance(value, Mapping) else {"content": value}) if (
            key in config or isinstance(value, Mapping)) else value
    if "additional_special_tokens" in config:
        additional = config.pop("additional_special_tokens")
        config.setdefault("extra_special_tokens", additional)
    return config


def _map_token(value: Any) -> Any:
    """An AddedToken object of special_tokens_map.json as transformers makes it: special."""
    if isinstance(value, Mapping):
        return {"__type": "AddedToken", **{k: v for k, v in value.items() if k != "special"}, "special": True}
    return value


def token_text(value: Any) -> str | None:
    """A special-token entry of a config: a string or an AddedToken-style ``{"content": ...}``."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def special_token_strings(tokenizer_config: Mapping[str, Any]) -> dict[str, str]:
    """The named special tokens (bos_token, eos_token, ...) of a ``tokenizer_config.json``."""
    out: dict[str, str] = {}
    for key in _NAMED_SPECIAL:
        text = token_text(tokenizer_config.get(key))
        if text is not None:
            out[key] = text
    return out


def derive_meta(
    tok: Tokenizer,
    tokenizer_config: Mapping[str, Any],
    generation_config: Mapping[str, Any],
    chat_template: str | dict[str, str] | None,
) -> TokenizerMeta:
    """MNN's header lists and trailer values for a tokenizer loaded from a model folder."""
    named = special_token_strings(tokenizer_config)
    control = tokenizer_config.get("chat_control_tokens")
    if control is not None and not (isinstance(control, list) and all(isinstance(t, str) for t in control)):
        # transformers refuses it at load too (a TypeError)
        raise FormatError(f"tokenizer_config.json: chat_control_tokens must be a list of strings, got {control!r:.80}")
    extra = extra_special_tokens(tokenizer_config)
    if isinstance(extra, Mapping):
        extra = list(extra.values())
    implied = class_special_tokens(tokenizer_config)
    padding, truncation = _section(tok, "padding"), _section(tok, "truncation")
    # transformers 5 takes the pad token from tokenizer.json's padding where nothing else names one
    from_padding = {"pad_token": padding["pad_token"]} if padding is not None and "pad_token" not in tokenizer_config else {}
    special: list[int] = []
    for text in [*named.values(), *from_padding.values(), *implied.values(), *(token_text(t) for t in extra)]:
        id = tok.token_to_id(text) if text is not None else None
        if id is not None and id not in special:
            special.append(id)
    for id, token in sorted(tok.added.by_id.items()):
        if token.special and id not in special:
            special.append(id)

    stop: list[int] = []

    def add_stop(id: int | None) -> None:
        if id is not None and id not in stop:
            stop.append(id)

    if "eos_token" in named:
        add_stop(tok.token_to_id(named["eos_token"]))
    if "auto_map" in tokenizer_config:
        # MNN takes `im_end_id` from remote-code tokenizer classes (Qwen-1's) that define it
        add_stop(tok.token_to_id("<|im_end|>"))
    # MNN encodes "<|eot_id|>" with the post-processor and "<turn|>" without it
    for marker, with_specials in (("<|eot_id|>", True), ("<turn|>", False)):
        if tok.token_to_id(marker) is not None:
            ids = _encoded(tok, marker, with_specials)
            if len(ids) == 1:
                add_stop(ids[0])
    if tok.token_to_id("<end_of_turn>") is not None:
        ids = _encoded(tok, "<end_of_turn>", True)
        if len(ids) == 2 and ids[0] == 2:
            add_stop(ids[1])
    eos = generation_config.get("eos_token_id")
    for id in eos if isinstance(eos, list) else [eos]:
        if isinstance(id, int):
            add_stop(id)

    prefix: list[int] = []
    ids = _encoded(tok, "A", True)
    if len(ids) > 1 and tok.decode(ids[-1:]) == "A":
        prefix = ids[:-1]

    model = tok.config.get("model") or {}
    clip = str(tokenizer_config.get("tokenizer_class")) in ("CLIPTokenizer", "CLIPTokenizerFast")
    try:
        backend, unmodeled = backend_added_tokens(
            tok.model, tok.config.get("added_tokens") or [], tokenizer_config, {**from_padding, **implied}), None
    except FormatError as exc:
        # only transformers' side of the API needs them: HF tokenizers' still runs the file
        backend, unmodeled = [], str(exc)
    return TokenizerMeta(
        special_ids=special,
        stop_ids=stop,
        prefix_ids=prefix,
        chat_template=chat_template,
        special_tokens={**from_padding, **implied, **special_tokens_from_config(tokenizer_config)},
        clean_up_tokenization_spaces=tokenizer_config.get("clean_up_tokenization_spaces") is True,
        decode_suffix_as_space=(model.get("end_of_word_suffix") or None) if clip else None,
        call_settings={
            **class_call_settings(tokenizer_config, tok.config),
            # tokenizer.json's sides, under tokenizer_config.json's (transformers' setdefault)
            **({"padding_side": padding["direction"]} if padding is not None else {}),
            **({"truncation_side": truncation["direction"]} if truncation is not None else {}),
            **config_call_settings(tokenizer_config),
        },
        **config_special_settings(tokenizer_config),
        backend_added_tokens=backend,
        backend_unmodeled=unmodeled,
    )


def config_special_settings(tokenizer_config: Mapping[str, Any]) -> dict[str, Any]:
    """The extra special tokens and the split_special_tokens default of a tokenizer_config.json
    (TokenizerMeta's fields)."""
    extra = extra_special_tokens(tokenizer_config)
    return {
        "extra_special_tokens": [text for text in (token_text(t) for t in (
            extra.values() if isinstance(extra, Mapping) else extra)) if text is not None],
        "split_special_tokens": tokenizer_config.get("split_special_tokens") is True,
    }


def config_call_settings(tokenizer_config: Mapping[str, Any]) -> dict[str, Any]:
    """The __call__ settings a tokenizer_config.json sets itself (TokenizerMeta.call_settings)."""
    return {key: tokenizer_config[key] for key in _CALL_SETTINGS if tokenizer_config.get(key) is not None}


def extra_special_tokens(tokenizer_config: Mapping[str, Any]) -> Any:
    """transformers' extra special tokens: ``extra_special_tokens`` (a list, or a dict of named
    model-specific tokens), else the older ``additional_special_tokens``."""
    return tokenizer_config.get("extra_special_tokens") or tokenizer_config.get("additional_special_tokens") or []


def _section(tok: Tokenizer, name: str) -> dict[str, Any] | None:
    """tokenizer.json's ``padding`` or ``truncation`` object with its ``direction`` as transformers
    reads it ("left" or "right"); the fields transformers takes are checked as HF ``tokenizers``
    checks them at load, which refuses the file otherwise (truncation's direction defaults to right)."""
    value = tok.config.get(name)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise FormatError(f"tokenizer.json: {name} must be an object or null")
    direction = value.get("direction", "Right" if name == "truncation" else None)
    if direction not in ("Left", "Right"):
        raise FormatError(f'tokenizer.json: {name}.direction must be "Left" or "Right", got {direction!r:.40}')
    if name == "padding" and not isinstance(value.get("pad_token"), str):
        raise FormatError("tokenizer.json: padding.pad_token must be a string")
    return {**value, "direction": direction.lower()}


_FLAGS = ("single_word", "lstrip", "rstrip", "normalized", "special")


def _config_token(value: Any, named: bool) -> AddedToken | None:
    """A special token of tokenizer_config.json as the AddedToken transformers adds for it: a
    string is special and matched on the raw text; an AddedToken object keeps its flags but is
    special if it is a named one."""
    if isinstance(value, str):
        return AddedToken(value, special=True, normalized=False)
    if not (isinstance(value, Mapping) and isinstance(value.get("content"), str)):
        return None
    special = value.get("special", False)
    flags = {"single_word": False, "lstrip": False, "rstrip": False, "normalized": not special, "special": special,
             **{key: value[key] for key in _FLAGS if key in value}}
    try:
        token = AddedToken.from_config({"id": 0, "content": value["content"], **flags})
    except FormatError as exc:
        raise FormatError(f"tokenizer_config.json: {exc}") from None
    return dataclasses.replace(token, special=True) if named else token


def _model_specific(tokenizer_config: Mapping[str, Any]) -> list[Any]:
    """The values of tokenizer_config.json's model-specific special tokens, in transformers' order:
    other ``*_token`` entries held as AddedToken objects, then those held as strings and a dict
    ``extra_special_tokens``'."""
    others = [(key, value) for key, value in tokenizer_config.items()
              if key.endswith("_token") and key not in _NAMED_SPECIAL]
    as_objects = [value for _, value in others if isinstance(value, Mapping) and value.get("__type") == "AddedToken"]
    as_strings = [value for _, value in others if isinstance(value, str)]
    extra = extra_special_tokens(tokenizer_config)
    return [*as_objects, *as_strings, *(extra.values() if isinstance(extra, Mapping) else [])]


def backend_added_tokens(
    model: Model, added_tokens: Sequence[Mapping[str, Any]], tokenizer_config: Mapping[str, Any],
    defaults: Mapping[str, str],
) -> list[dict[str, Any]]:
    """The added tokens transformers 5's tokenizer holds beyond those of a pipeline with ``model``
    and ``added_tokens`` (both in ``added_tokens``' shape).

    transformers registers each named special token (bos_token ... mask_token, ``defaults`` where
    tokenizer_config.json has none, then the model-specific ones) and each extra special token
    that is not an added token yet: a new one gets the next id, a model vocabulary token keeps
    its id but becomes an added token (matched in any text). A named token that is an added
    token ``tokenizer.json`` does not flag special becomes special when transformers reads it
    from the added tokens it loads (``tokenizer_config.json``'s ``added_tokens_decoder`` where
    there is one, else ``tokenizer.json``'s); an extra one stays as it is.
    """
    named = [tokenizer_config.get(key, defaults.get(key)) for key in _NAMED_SPECIAL]
    named_tokens = [t for t in (_config_token(v, True) for v in [*named, *_model_specific(tokenizer_config)]) if t]
    named_contents = {t.content for t in named_tokens}
    extra = extra_special_tokens(tokenizer_config)
    extra_tokens = [t for t in (_config_token(v, False) for v in (extra if isinstance(extra, list) else [])) if t]
    extra_tokens = [dataclasses.replace(t, special=True) if t.content in named_contents else t for t in extra_tokens]

    file_tokens = [AddedToken.from_config(t) for t in added_tokens]
    held = AddedVocabulary(file_tokens, token_to_model_id=model.token_to_id, model_vocab_size=model.vocab_size,
                           normalizer=None)
    current = {held.by_id[id].content: held.by_id[id] for id in held.ids.values()}
    decoder = tokenizer_config.get("added_tokens_decoder")
    loaded: dict[str, AddedToken] = dict(current)
    if isinstance(decoder, Mapping):
        loaded = {t.content: t for t in (_config_token(v, False) for v in decoder.values()) if t}

    out: dict[str, AddedToken] = {}
    # flags change at the ids tokens have: the order does not matter
    for content in sorted(named_contents & loaded.keys()):
        source = loaded[content]
        if source.special:
            continue
        if content not in current or dataclasses.replace(current[content], special=False) != source:
            # transformers re-adds the added_tokens_decoder entry as it is there
            raise FormatError(
                f"tokenizer_config.json: added_tokens_decoder holds {content!r:.80} differently from tokenizer.json "
                "and names it as a special token; pymtok does not model how transformers then merges the two"
            )
        if not current[content].special:
            out[content] = dataclasses.replace(current[content], special=True)
    for token in [*named_tokens, *extra_tokens]:
        if token.content in current or token.content in loaded:
            if token.content not in current:
                raise FormatError(
                    f"tokenizer_config.json: added_tokens_decoder holds {token.content!r:.80}, which tokenizer.json "
                    "lacks, and names it as a special token; pymtok does not model how transformers adds it"
                )
            continue
        if token.content in out and out[token.content] != token:
            raise FormatError(
                f"tokenizer_config.json names {token.content!r:.80} twice as a special token, with different "
                "flags; pymtok does not model which of them transformers' backend then goes by"
            )
        out.setdefault(token.content, token)
    # an added_tokens_decoder entry no name touches that tokenizer.json holds with other flags:
    # transformers' backend adds it again as it is there, and HF's added vocabulary takes its
    # flags (a remote-code class reads the config its own way: the file's flags stay, as the base
    # over tokenizer.json has them)
    for content, token in loaded.items() if "auto_map" not in tokenizer_config else ():
        if content in current and content not in named_contents and content not in out and token != current[content]:
            out[content] = token
    if not out:
        return []
    # ids as HF assigns them to tokens added after the file's
    ids = AddedVocabulary(
        [*file_tokens, *out.values()], token_to_model_id=model.token_to_id,
        model_vocab_size=model.vocab_size, normalizer=None,
    ).ids
    return [{"id": ids[t.content], "content": t.content, **{key: getattr(t, key) for key in _FLAGS}} for t in out.values()]


def class_call_settings(tokenizer_config: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    """The __call__ settings transformers' AutoTokenizer gives the class tokenizer_config.json
    names, before the file's own. A remote-code class (``auto_map``) is not known: the base's.
    AutoTokenizer's corrections that read config.json (a model type whose hub class is wrong) are
    not made: pymtok does not read config.json."""
    if "auto_map" in tokenizer_config:
        return {}
    name = str(tokenizer_config.get("tokenizer_class") or "").removesuffix("Fast")
    # LlamaTokenizer is Metaspace: for a tokenizer.json that says "ByteLevel" anywhere (Llama 3's)
    # AutoTokenizer takes the base class instead
    if name == "LlamaTokenizer" and _mentions(config, "ByteLevel"):
        return {}
    return {key: list(value) if isinstance(value, list) else value
            for key, value in CLASS_CALL_SETTINGS.get(name, {}).items()}


def class_special_tokens(tokenizer_config: Mapping[str, Any]) -> dict[str, str]:
    """The named special tokens the config's transformers class fills in where the config has no
    entry for them (Gemma's ``mask_token``): transformers counts them among the special tokens
    and its templates see them."""
    defaults = _CLASS_DEFAULTS.get(str(tokenizer_config.get("tokenizer_class")), {})
    return {key: text for key, text in defaults.items() if key not in tokenizer_config}


def _mentions(value: Any, text: str) -> bool:
    """Whether ``text`` is a key or a string value anywhere in a JSON value."""
    if isinstance(value, str):
        return value == text
    if isinstance(value, Mapping):
        return text in value or any(_mentions(item, text) for item in value.values())
    if isinstance(value, list):
        return any(_mentions(item, text) for item in value)
    return False


def _encoded(tok: Tokenizer, text: str, add_special_tokens: bool) -> list[int]:
    """``tok.encode(text)``, or no ids where the model cannot encode it (a BPE whose unk token is
    missing meets an unknown character): HF loads such a file, and so do we."""
    try:
        return tok.encode(text, add_special_tokens=add_special_tokens)
    except FormatError:
        return []


def load_folder(path: Path) -> Tokenizer:
    """Load ``tokenizer.json`` (a file, or a folder holding one) with the configs beside it."""
    file = path / "tokenizer.json" if path.is_dir() else path
    if not file.is_file():
        raise FormatError(f"{path}: no tokenizer.json there")
    folder = file.parent
    config = read_json(file, "tokenizer.json", hf_tokenizers=True)
    if not isinstance(config, dict):
        raise FormatError(f"{file}: expected a JSON object at the top level")
    try:
        tok = Tokenizer.from_config(config)
    except FormatError as exc:
        raise FormatError(f"{file}: {exc}") from None
    tok.meta = folder_meta(tok, folder)
    return tok


def folder_meta(tok: Tokenizer, folder: Path) -> TokenizerMeta:
    """:func:`derive_meta` from the configs beside a tokenizer file (each optional)."""
    tokenizer_config = folder_tokenizer_config(folder)
    generation_config = read_optional_json(folder, "generation_config.json")
    return derive_meta(tok, tokenizer_config, generation_config, find_chat_template(folder))


# Where chat templates and the special tokens they see come from (chat.py renders them): only
# reading files, so loading a tokenizer does not import jinja2.


def special_tokens_from_config(cfg: Mapping[str, Any]) -> dict[str, str]:
    """The special-token variables transformers passes to chat templates, from tokenizer_config.json.

    That is every ``*_token`` entry with a text (bos_token, eos_token, …, and model-specific ones
    such as image_token) plus a dict-valued ``extra_special_tokens``; the tokens a transformers
    class fills in where the config omits them are :func:`class_special_tokens`'.

    >>> special_tokens_from_config({"bos_token": "<s>", "eos_token": {"content": "</s>"},
    ...                             "pad_token": None, "add_bos_token": True})
    {'bos_token': '<s>', 'eos_token': '</s>'}
    """
    tokens: dict[str, str] = {}
    for key, value in cfg.items():
        text = token_text(value)
        if key.endswith("_token") and text is not None:
            tokens[key] = text
    extra = cfg.get("extra_special_tokens")
    if isinstance(extra, Mapping):
        for key, value in extra.items():
            text = token_text(value)
            if text is not None:
                tokens[key] = text
    return tokens


def _read_config(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise FormatError(f"{path}: cannot read JSON: {exc}") from exc


def _named_templates(value: Any, where: str) -> str | dict[str, str] | None:
    """A ``chat_template`` entry: a string, or a list of {"name", "template"} dicts."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list) and all(
        isinstance(t, Mapping) and isinstance(t.get("name"), str) and isinstance(t.get("template"), str)
        for t in value
    ):
        return {t["name"]: t["template"] for t in value}
    raise FormatError(f"{where}: chat_template must be a string or a list of {{name, template}}")


def find_chat_template(folder: Path) -> str | dict[str, str] | None:
    """A model folder's chat template(s), in transformers' order of precedence.

    1. ``chat_template.jinja`` (the "default") and ``additional_chat_templates/*.jinja``;
    2. else ``chat_template.json``'s ``"chat_template"``;
    3. else ``tokenizer_config.json``'s ``"chat_template"``.

    Several templates come back as a dict by name; a lone "default" as its string.
    """
    folder = Path(folder)
    templates = {
        path.name.removesuffix(".jinja"): path.read_text(encoding="utf-8")
        for path in sorted((folder / "additional_chat_templates").glob("*.jinja"))
        if path.is_file()
    }
    default = folder / "chat_template.jinja"
    if default.is_file():
        templates["default"] = default.read_text(encoding="utf-8")
    if templates:
        return templates["default"] if list(templates) == ["default"] else templates
    for name in ("chat_template.json", "tokenizer_config.json"):
        path = folder / name
        if path.is_file():
            data = _read_config(path)
            if not isinstance(data, Mapping):
                raise FormatError(f"{path}: expected a JSON object")
            found = _named_templates(data.get("chat_template"), str(path))
            if found is not None:
                return found
    return None


def template_from_llm_config(path: Path) -> tuple[str, str] | None:
    """MNN's override: ``(chat_template, eos)`` from ``llm_config.json``'s ``"jinja"`` block.

    When the block has a template, MNN's runtime uses it and its ``"eos"`` text (``""`` when
    absent) instead of the tokenizer file's, for ``.mtok`` and ``.txt`` alike. Returns None when
    the file or the template is absent.
    """
    path = Path(path)
    if not path.is_file():
        return None
    data = _read_config(path)
    block = data.get("jinja") if isinstance(data, Mapping) else None
    if not isinstance(block, Mapping) or block.get("chat_template") is None:
        return None
    template, eos = block["chat_template"], block.get("eos") or ""
    if not isinstance(template, str) or not isinstance(eos, str):
        raise FormatError(f"{path}: jinja.chat_template and jinja.eos must be strings")
    return template, eos
