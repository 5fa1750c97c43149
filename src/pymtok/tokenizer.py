"""The tokenizer: one pipeline (added tokens → normalizer → pre-tokenizer → model → post-processor).

Every file format is read into the same component configs (``tokenizer.json``'s shape) and built
here by ``Tokenizer.from_config``; nothing else constructs a pipeline.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from . import decoders, models, native, normalizers, pre_tokenizers, processors
from .added_tokens import AddedToken, AddedVocabulary
from .errors import FormatError

T = TypeVar("T")


@dataclass
class TokenizerMeta:
    """What MNN files carry beside the pipeline (FORMAT.md §1, §5.1), and the chat context."""

    special_ids: list[int] = field(default_factory=list)
    stop_ids: list[int] = field(default_factory=list)
    prefix_ids: list[int] = field(default_factory=list)
    chat_template: str | dict[str, str] | None = None
    # bos_token, eos_token, unk_token, ... as strings: the chat template context
    special_tokens: dict[str, str] = field(default_factory=dict)
    clean_up_tokenization_spaces: bool = False
    # transformers' CLIPTokenizer turns this end-of-word suffix into a space after decoding and
    # strips the result; tokenizer.json's decoder alone leaves it in the text
    decode_suffix_as_space: str | None = None
    # version of pymtok's exactness extension the .mtok file carried (None: MNN's layout only)
    extension_version: int | None = None
    # how a .mtok's MNN part is laid out: "device" (what MNN's runtime reads right, pymtok's
    # default) or "mnn-identical" (MNN's exporter's bytes); None for other sources
    mnn_layout: str | None = None


class Tokenizer:
    """Encode text to ids and back, exactly as HF ``tokenizers`` does for the same config.

    >>> tok = pymtok.load("Qwen3/tokenizer.json")          # doctest: +SKIP
    >>> tok.encode("Hello world")                           # doctest: +SKIP
    [9707, 1879]
    """

    def __init__(
        self,
        *,
        model: models.Model,
        normalizer: normalizers.Normalizer | None = None,
        pre_tokenizer: pre_tokenizers.PreTokenizer | None = None,
        decoder: decoders.Decoder | None = None,
        post_processor: processors.PostProcessor | None = None,
        added_tokens: Iterable[AddedToken] = (),
        meta: TokenizerMeta | None = None,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        self.model = model
        self.normalizer = native.accelerate_normalizer(normalizer)
        self.pre_tokenizer = pre_tokenizer
        self.decoder = decoder
        self.post_processor = post_processor
        self.added = AddedVocabulary(
            added_tokens,
            token_to_model_id=model.token_to_id,
            model_vocab_size=model.vocab_size,
            normalizer=normalizer,
        )
        self.meta = meta if meta is not None else TokenizerMeta()
        # The HF-shaped configuration this pipeline was built from (what .mtok's extension stores)
        self.config: Mapping[str, Any] = config if config is not None else {}
        self._chat: Any = None
        self._native_segment = native.accelerate(self)
        self._native_text = native.accelerate_text(self)
        # encode_batch in one native call, on the native core's own threads (the encoder
        # accelerate_text set up)
        encoder = getattr(self._native_segment, "__self__", None)
        self._native_batch = encoder.encode_batch if self._native_text is not None else None

    @classmethod
    def from_config(cls, config: Mapping[str, Any], meta: TokenizerMeta | None = None) -> Tokenizer:
        """Build from a ``tokenizer.json``-shaped mapping (vocab tables may be any Mapping)."""
        if not isinstance(config, Mapping):
            raise FormatError(f"tokenizer config must be an object, got {type(config).__name__}")
        if "model" not in config:
            raise FormatError("tokenizer config has no 'model'")
        added = config.get("added_tokens") or []
        if not isinstance(added, list):
            raise FormatError("'added_tokens' must be a list")
        return cls(
            model=_built("model", models.from_config, config["model"]),
            normalizer=_built("normalizer", normalizers.from_config, config.get("normalizer")),
            pre_tokenizer=_built("pre_tokenizer", pre_tokenizers.from_config, config.get("pre_tokenizer")),
            decoder=_built("decoder", decoders.from_config, config.get("decoder")),
            post_processor=_built("post_processor", processors.from_config, config.get("post_processor")),
            added_tokens=[_built("added_tokens", AddedToken.from_config, t) for t in added],
            meta=meta,
            config=config,
        )

    # -- encoding -------------------------------------------------------------------------

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Token ids of ``text``; ``add_special_tokens`` applies the post-processor (BOS, CLS, ...)."""
        if not isinstance(text, str):
            raise TypeError(f"encode() takes a str, got {type(text).__name__}")
        if self._native_text is not None:
            return self._native_text(text, add_special_tokens)  # checks for lone surrogates itself
        _check_encodable(text)
        ids: list[int] = []
        for piece, offset, added_id in self.added.split(text, self.normalizer):
            if added_id is not None:
                ids.append(added_id)
            elif piece:
                ids.extend(self._encode_segment(piece, offset))
        if add_special_tokens and self.post_processor is not None:
            ids = self.post_processor(ids)
        return ids

    def _encode_segment(self, normalized: str, offset: int) -> list[int]:
        if self._native_segment is not None:
            return self._native_segment(normalized, offset)
        if self.pre_tokenizer is None:
            return self.model.encode_pieces((normalized,))
        pieces = self.pre_tokenizer([(normalized, offset)])
        return self.model.encode_pieces([piece for piece, _ in pieces])

    def encode_batch(
        self, texts: Sequence[str], add_special_tokens: bool = True, *, num_threads: int | None = None
    ) -> list[list[int]]:
        """``encode`` each text, spread over ``num_threads`` threads.

        By default one thread per CPU when the native core runs (it releases the GIL), else one:
        pure-Python encoding gains nothing from threads.
        """
        if isinstance(texts, str):
            raise TypeError("encode_batch() takes a list of str; use encode() for one string")
        if num_threads is None:
            num_threads = (os.cpu_count() or 1) if self._native_segment is not None else 1
        if self._native_batch is not None:
            # the native core runs its own threads: no pool to start, texts handed out as they finish
            lists: list[list[int]] = self._native_batch(texts, self.normalizer, add_special_tokens, num_threads)
            return lists
        n = len(texts)

        def encode_share(share: Sequence[str]) -> list[list[int]]:
            return [self.encode(t, add_special_tokens) for t in share]

        if num_threads <= 1 or n < 2:
            return encode_share(texts)
        # Contiguous shares, a few per thread so that threads done early take more (batches are
        # often sorted, e.g. by language, and texts of one kind cost alike); a task per text would
        # cost more than short texts take.
        step = -(-n // (num_threads * _SHARES_PER_THREAD))
        shares = [texts[i : i + step] for i in range(0, n, step)]
        with ThreadPoolExecutor(max_workers=min(num_threads, len(shares))) as pool:
            parts = pool.map(encode_share, shares)
            return [ids for part in parts for ids in part]

    # -- decoding -------------------------------------------------------------------------

    def decode(
        self,
        ids: Iterable[int],
        skip_special_tokens: bool = False,
        clean_up_tokenization_spaces: bool | None = None,
    ) -> str:
        """The text of ``ids``, as ``transformers``' ``decode`` gives it for the same folder.

        ``clean_up_tokenization_spaces`` overrides the folder's setting; ``False`` turns off every
        transformers text fix-up, giving exactly HF ``tokenizers``' decode.
        """
        text = self._decode_tokens(ids, skip_special_tokens)
        if clean_up_tokenization_spaces is False:
            return text
        if self.meta.decode_suffix_as_space:
            text = text.replace(self.meta.decode_suffix_as_space, " ").strip()
        # transformers 5 leaves BPE output alone: the cleanup was made for WordPiece spacing
        if (clean_up_tokenization_spaces or self.meta.clean_up_tokenization_spaces) and not isinstance(
            self.model, models.BPE
        ):
            text = decoders.clean_up_tokenization(text)
        return text

    def _decode_tokens(self, ids: Iterable[int], skip_special_tokens: bool) -> str:
        tokens: list[str] = []
        special = self.added.special
        for id in ids:
            if not isinstance(id, int) or isinstance(id, bool):
                raise TypeError(f"token ids must be int, got {type(id).__name__}")
            if id < 0:
                raise ValueError(f"token id {id} is negative")
            token = self.added.token_for_decode(id)
            if token is None:
                token = self.model.id_to_token(id)
                if token is None:
                    continue  # HF skips ids it does not know
            if skip_special_tokens and token in special:
                continue
            tokens.append(token)
        if self.decoder is not None:
            return "".join(self.decoder(tokens))
        return " ".join(tokens)

    def decode_stream(self, skip_special_tokens: bool = False) -> DecodeStream:
        """An incremental decoder: feed ids one by one, get text as soon as it is complete."""
        return DecodeStream(self, skip_special_tokens)

    # -- vocabulary -----------------------------------------------------------------------

    def token_to_id(self, token: str) -> int | None:
        id = self.added.ids.get(token)
        return id if id is not None else self.model.token_to_id(token)

    def id_to_token(self, id: int) -> str | None:
        token = self.added.by_id.get(id)
        return token.content if token is not None else self.model.id_to_token(id)

    def get_vocab(self) -> dict[str, int]:
        vocab = self.model.get_vocab()
        vocab.update(self.added.ids)
        return vocab

    @property
    def vocab_size(self) -> int:
        """Model vocabulary plus the added tokens it lacks (HF's ``get_vocab_size(True)``)."""
        extra = sum(1 for t in self.added.ids if self.model.token_to_id(t) is None)
        return self.model.vocab_size + extra

    @property
    def special_ids(self) -> list[int]:
        return list(self.meta.special_ids)

    @property
    def stop_ids(self) -> list[int]:
        return list(self.meta.stop_ids)

    @property
    def prefix_ids(self) -> list[int]:
        return list(self.meta.prefix_ids)

    # -- chat -----------------------------------------------------------------------------

    @property
    def chat_template(self) -> str | dict[str, str] | None:
        return self.meta.chat_template

    def set_chat_template(self, template: str | dict[str, str], eos_token: str | None = None) -> None:
        """Replace the chat template (and the ``eos_token`` text it sees), as MNN's override does."""
        self.meta.chat_template = template
        if eos_token is not None:
            self.meta.special_tokens["eos_token"] = eos_token
        self._chat = None

    def apply_chat_template(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        documents: Sequence[Mapping[str, Any]] | None = None,
        add_generation_prompt: bool = True,
        tokenize: bool = False,
        **template_kwargs: Any,
    ) -> str | list[int]:
        """Render ``messages`` with the model's chat template, as ``transformers`` does.

        With ``tokenize=True`` the prompt is encoded without adding special tokens (the
        template already holds them).
        """
        from .chat import ChatTemplate
        from .errors import TemplateError

        if self.meta.chat_template is None:
            raise TemplateError("this tokenizer has no chat template")
        if self._chat is None:
            self._chat = ChatTemplate(self.meta.chat_template, special_tokens=self.meta.special_tokens)
        prompt = self._chat.render(
            messages,
            tools=tools,
            documents=documents,
            add_generation_prompt=add_generation_prompt,
            **template_kwargs,
        )
        return self.encode(prompt, add_special_tokens=False) if tokenize else prompt


_SHARES_PER_THREAD = 8


def _built(section: str, build: Callable[[Any], T], cfg: Any) -> T:
    """``build(cfg)``; a config of the wrong shape deep inside a component (a number where a
    string belongs, ...) fails there with a Python error, which is reported as what it is: a
    malformed ``section``."""
    try:
        return build(cfg)
    except FormatError:
        raise
    except (TypeError, ValueError, AttributeError, KeyError, IndexError) as exc:
        raise FormatError(f"{section}: malformed config ({type(exc).__name__}: {exc})") from None


def _check_encodable(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"text holds a lone surrogate {text[exc.start]!r} at index {exc.start}; "
            "it has no UTF-8 form to tokenize"
        ) from None


class DecodeStream:
    """Incremental decoding with HF ``DecodeStream``'s semantics.

    ``step(id)`` returns the text the new id completes, or ``None`` while a character is still
    incomplete; the pieces joined equal ``decode`` of all ids.
    """

    def __init__(self, tokenizer: Tokenizer, skip_special_tokens: bool = False) -> None:
        self._tok = tokenizer
        self._skip = skip_special_tokens
        self._ids: list[int] = []
        self._prefix = ""
        self._prefix_index = 0

    def _decode(self, ids: list[int]) -> str:
        return self._tok.decode(ids, self._skip)

    def step(self, id: int) -> str | None:
        if not self._prefix and self._ids:
            prefix = self._decode(self._ids)
            if not prefix.endswith("\ufffd"):
                self._prefix = prefix
                self._prefix_index = len(self._ids)
        self._ids.append(id)
        text = self._decode(self._ids)
        if len(text.encode("utf-8")) <= len(self._prefix.encode("utf-8")) or text.endswith("\ufffd"):
            return None
        if not text.startswith(self._prefix):
            raise ValueError(
                f"decode stream: text {text!r} no longer starts with the emitted {self._prefix!r}"
            )
        new_text = text[len(self._prefix) :]
        new_index = len(self._ids) - self._prefix_index
        self._ids = self._ids[self._prefix_index :]
        self._prefix = self._decode(self._ids)
        self._prefix_index = new_index
        return new_text
