"""Chat templates: byte-identical to transformers' apply_chat_template, and safe on hostile input.

The oracle is transformers (test-only) loaded offline from the same fixture folder. chatglm3-6b's
config names remote code (``auto_map``) that is not in the fixture, so AutoTokenizer refuses it;
it is loaded with ``PreTrainedTokenizerFast``, which reads the same tokenizer_config.json (template
and special tokens) and renders through the same transformers code path.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import auto_tokenizer, fixture_path, hf_tokenizer, slow_for

from pymtok.chat import (
    ChatTemplate,
    find_chat_template,
    special_tokens_from_config,
    template_from_llm_config,
)
from pymtok.errors import FormatError, TemplateError

TEMPLATED = ["chatglm3-6b", "deepseek-v3", "gemma-v1", "llama3", "phi-3-mini", "qwen3"]

# The well-known Mistral-7B-Instruct-v0.1 template (the base model's fixture has none): it checks
# that roles alternate with raise_exception.
MISTRAL_INSTRUCT = (
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != "
    "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
    "user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}"
    "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
    "{{ message['content'] + eos_token }}{% else %}{{ raise_exception('Only user and assistant "
    "roles are supported!') }}{% endif %}{% endfor %}"
)

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather <in> a city — «quoted»",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name, e.g. Zürich"}},
            "required": ["city"],
        },
    },
}

SINGLE: list[dict[str, Any]] = [{"role": "user", "content": "Hello!"}]
MULTI: list[dict[str, Any]] = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "What is 2+2?"},
    {"role": "assistant", "content": "4"},
    {"role": "user", "content": "And 3+3?"},
]
ASSISTANT_LAST: list[dict[str, Any]] = [
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello, how can I help?"},
]
NO_SYSTEM = MULTI[1:]
UNICODE: list[dict[str, Any]] = [
    {"role": "user", "content": "Grüße aus Köln 😀👍🏽 — 你好，世界 \u200b tab\there\nnew line"},
    {"role": "assistant", "content": "Ça va 🇫🇷 ∑ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢"},
    {"role": "user", "content": "<|im_end|> literal & <b>html</b> \\ \"quotes\""},
]
EMPTY: list[dict[str, Any]] = [{"role": "user", "content": ""}, {"role": "assistant", "content": ""}, {"role": "user", "content": ""}]
TOOL_CHAT: list[dict[str, Any]] = [
    {"role": "user", "content": "Weather in Paris?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "type": "function",
                "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
            }
        ],
    },
    {"role": "tool", "content": '{"temp": 21, "sky": "☀"}'},
]
# DeepSeek-V3 writes arguments as a JSON string and tests tool-call turns for `content is none`;
# transformers drops None-valued keys, so such a turn fails to render there (and here)
TOOL_CHAT_STRING_ARGS: list[dict[str, Any]] = [
    TOOL_CHAT[0],
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
        ],
    },
    TOOL_CHAT[2],
    {"role": "assistant", "content": "21 °C and sunny."},
]

CONVERSATIONS = {
    "single": SINGLE, "multi": MULTI, "no_system": NO_SYSTEM, "assistant_last": ASSISTANT_LAST,
    "unicode": UNICODE, "empty": EMPTY,
}


# ---------------------------------------------------------------------------------------------
# helpers


def _load_hf(folder: Path) -> Any:
    os.environ["HF_HUB_OFFLINE"] = "1"
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    if "auto_map" in config:
        return PreTrainedTokenizerFast.from_pretrained(str(folder))
    return AutoTokenizer.from_pretrained(str(folder))


def hf(name: str) -> Any:
    return auto_tokenizer(name)


def ours(name: str) -> ChatTemplate:
    folder = fixture_path("tokenizers", name)
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    source = find_chat_template(folder)
    assert source is not None
    return ChatTemplate(source, special_tokens_from_config(config))


def outcome(render: Any) -> tuple[str, str]:
    """("ok", text) or ("error", message), so that raising in both counts as agreement."""
    try:
        return "ok", render()
    except TemplateError as exc:
        return "error", str(exc)
    except Exception as exc:  # transformers raises jinja2's TemplateError, ValueError, ...
        return "error", f"{type(exc).__name__}: {exc}"


def assert_same(hf_tok: Any, template: ChatTemplate, messages: list[dict[str, Any]], **kwargs: Any) -> str:
    add = kwargs.pop("add_generation_prompt", True)
    # both sides get their own copy: neither may see the other's edits
    theirs = outcome(lambda: hf_tok.apply_chat_template(
        copy.deepcopy(messages), tokenize=False, add_generation_prompt=add, **copy.deepcopy(kwargs)
    ))
    mine = outcome(lambda: template.render(copy.deepcopy(messages), add_generation_prompt=add, **kwargs))
    if theirs[0] == "error":
        assert mine[0] == "error", f"transformers raised {theirs[1]!r}, we rendered {mine[1]!r}"
        # raise_exception messages come through verbatim
        tail = theirs[1].split(": ", 1)[-1]
        assert tail in mine[1]
    else:
        assert mine == theirs
    return mine[1]


# ---------------------------------------------------------------------------------------------
# the fixtures' templates against transformers


@pytest.mark.parametrize("name", TEMPLATED)
@pytest.mark.parametrize("conversation", sorted(CONVERSATIONS))
@pytest.mark.parametrize("add_generation_prompt", [True, False])
def test_fixture_templates_match_transformers(name: str, conversation: str, add_generation_prompt: bool) -> None:
    assert_same(hf(name), ours(name), CONVERSATIONS[conversation], add_generation_prompt=add_generation_prompt)


def test_templates_that_raise_in_transformers_raise_template_error() -> None:
    # Gemma refuses a system role and checks that roles alternate
    for chat in (MULTI, [SINGLE[0], SINGLE[0]]):
        with pytest.raises(TemplateError, match="System role not supported|roles must alternate"):
            ours("gemma-v1").render(chat)
        assert_same(hf("gemma-v1"), ours("gemma-v1"), chat)


@pytest.mark.parametrize("chat", [NO_SYSTEM, [SINGLE[0], SINGLE[0]], MULTI], ids=["ok", "twice", "system"])
def test_mistral_instruct_alternation_check(chat: list[dict[str, Any]]) -> None:
    tok = hf("mistral-7b-v0.1")
    config = json.loads((fixture_path("tokenizers", "mistral-7b-v0.1") / "tokenizer_config.json").read_text())
    template = ChatTemplate(MISTRAL_INSTRUCT, special_tokens_from_config(config))
    theirs = outcome(lambda: tok.apply_chat_template(chat, tokenize=False, chat_template=MISTRAL_INSTRUCT))
    mine = outcome(lambda: template.render(chat, add_generation_prompt=False))
    assert mine[0] == theirs[0]
    if theirs[0] == "ok":
        assert mine == theirs
    else:
        assert "must alternate" in mine[1] or "Only user and assistant" in mine[1]


@pytest.mark.parametrize("name", ["qwen3", "deepseek-v3"])
def test_tools_tool_calls_and_results(name: str) -> None:
    chat = TOOL_CHAT if name == "qwen3" else TOOL_CHAT_STRING_ARGS
    for add in (True, False):
        text = assert_same(hf(name), ours(name), chat, tools=[WEATHER_TOOL], add_generation_prompt=add)
        assert ("Paris" in text) == (name == "qwen3")
    if name == "qwen3":
        text = assert_same(hf(name), ours(name), SINGLE, tools=[WEATHER_TOOL])
        assert "«quoted»" in text  # tojson keeps non-ASCII, as transformers' does


@pytest.mark.parametrize("enable_thinking", [True, False, None])
def test_qwen3_thinking(enable_thinking: bool | None) -> None:
    kwargs = {} if enable_thinking is None else {"enable_thinking": enable_thinking}
    reasoning = [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4", "reasoning_content": "Two plus two is four."},
        {"role": "user", "content": "3+3?"},
        {"role": "assistant", "content": "6", "reasoning_content": "Three and three: six."},
    ]
    # older names for reasoning are aliased to reasoning_content
    aliased = [dict(m) for m in reasoning]
    aliased[3]["reasoning"] = aliased[3].pop("reasoning_content")
    inline = [reasoning[0], {"role": "assistant", "content": "<think>\nhm\n</think>\n\n4"}, reasoning[2]]
    for chat in (SINGLE, MULTI, reasoning, aliased, inline):
        for add in (True, False):
            assert_same(hf("qwen3"), ours("qwen3"), chat, add_generation_prompt=add, **kwargs)


def test_none_valued_keys_are_dropped_like_transformers() -> None:
    chat = [{"role": "user", "content": "hi", "name": None}, {"role": "assistant", "content": None, "tool_calls": None}]
    src = "{% for m in messages %}{{ m.keys()|list }}{{ m.content is defined }}{% endfor %}"
    tok = hf("llama3")
    expected = tok.apply_chat_template(copy.deepcopy(chat), tokenize=False, chat_template=src)
    assert ChatTemplate(src).render(chat, add_generation_prompt=False) == expected


# Features of transformers' environment and context, each rendered by both with the same template.
ENV_TEMPLATES = {
    "tojson": (
        "{{ tools|tojson }}|{{ tools[0]|tojson(indent=2) }}|{{ messages|tojson(separators=(',', ':'), "
        "sort_keys=true) }}|{{ messages|tojson(ensure_ascii=true) }}|{{ '<&>'|tojson }}"
    ),
    "tojson_indent_str": "{{ tools|tojson(indent='\t') }}",
    "loopcontrols": "{% for m in messages %}{% if loop.index > 2 %}{% break %}{% endif %}"
    "{% if m.role == 'system' %}{% continue %}{% endif %}[{{ m.content }}]{% endfor %}",
    "generation": "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}"
    "{{ m.content }}{% endgeneration %}{% else %}<{{ m.content }}>{% endif %}{% endfor %}",
    "namespace": "{% set ns = namespace(n=0, s='') %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
    "{% set ns.s = ns.s ~ m.role[0] %}{% endfor %}{{ ns.n }}{{ ns.s }}{{ ns }}",
    "dict": "{{ dict(a=1, b=[2]) }}{{ dict.fromkeys(['x', 'y'], 0) }}{{ dict(messages[0]) }}",
    "context": "{{ bos_token }}|{{ eos_token }}|{{ pad_token is defined }}|{{ tools }}|{{ documents }}|"
    "{{ add_generation_prompt }}|{{ custom }}|{{ messages|length }}",
    "whitespace": "  {% for m in messages %}\n    {{ m.role }}\n  {% endfor %}\n{# c #}\nx {{- ' y ' -}} z",
    "printing": "{{ none }}|{{ true }}|{{ [1, 'a', none] }}|{{ {'k': 'v'} }}|{{ 1.5 }}|{{ 'a' ~ 1 ~ none }}"
    "|{{ messages[0] }}|{{ undefined_var }}|{{ 7 // 2 }}|{{ 2 ** 10 }}|{{ '%s-%d' % ('a', 3) }}"
    "|{{ 'x{}y'.format(3) }}|{{ 'ab' * 3 }}|{{ [1] + [2] }}|{{ -(3) }}",
    "filters": "{{ messages|map(attribute='role')|join(', ') }}|{{ 'a b'|center(9) }}|{{ 'x\ny'|indent(2, true) }}"
    "|{{ 'abc'|replace('b', 'BB') }}|{{ '%s!'|format('hi') }}|{{ [1, 2, 3]|batch(2, 0)|list }}"
    "|{{ [1, 2, 3]|slice(2)|list }}|{{ [[1], [2]]|sum(start=[]) }}|{{ 'Hi'|e }}|{{ [3, 1]|sort }}"
    "|{{ 'aaa bbb'|wordwrap(3) }}|{{ messages|selectattr('role', 'eq', 'user')|list|length }}",
    "str_methods": "{{ ' a b '.split() }}{{ 'a,b'.split(',') }}{{ 'x'.center(5, '*') }}{{ '-'.join(['a', 'b']) }}"
    "{{ 'a\tb'.expandtabs(4) }}{{ 'abc'.replace('b', '') }}{{ 'l1\nl2'.splitlines() }}{{ 'a'.ljust(3) }}|",
    "slices": "{{ messages[::-1]|map(attribute='role')|list }}{{ 'hello'[1:3] }}{{ messages[-1].content }}",
    "reasoning_alias": "{% for m in messages %}{{ m }}{% endfor %}",
    # a macro's output under {% autoescape true %} is markup, which ~ then joins as markup
    "autoescape": "{% macro f(x) %}<{{ x }}>{% endmacro %}{% autoescape true %}{{ f('&') ~ messages[0].role ~ '<' }}"
    "{{ ('<i>'|safe) ~ '<b>' }}{% autoescape false %}{{ f('&') ~ '&' }}{% endautoescape %}{% endautoescape %}"
    "{% autoescape messages|length > 1 %}{{ f('&') ~ '&' }}{% endautoescape %}{{ f('&') ~ '&' }}",
    "comparisons": "{{ 1 < 2 < 3 }}{{ 3 > 2 > 2 }}{{ 'a' in 'cat' }}{{ 'z' not in messages[0] }}"
    "{{ messages[0] == messages[0] }}{{ [1, 2] != [1, 2] }}{{ 2 >= 2 <= 1 }}{{ none == undefined_var }}"
    "{% for m in messages if m.role != 'system' and m.content|length % 2 == 0 %}{{ m.role }}{% endfor %}",
}


@pytest.mark.parametrize("key", sorted(ENV_TEMPLATES))
def test_environment_matches_transformers(key: str) -> None:
    src = ENV_TEMPLATES[key]
    tok = hf("llama3")
    chat = MULTI + [{"role": "assistant", "content": "ok", "reasoning": "because"}]
    kwargs: dict[str, Any] = {"tools": [WEATHER_TOOL], "documents": [{"title": "T", "text": "körper"}], "custom": {"x": "ü"}}
    expected = tok.apply_chat_template(copy.deepcopy(chat), tokenize=False, chat_template=src,
                                       add_generation_prompt=True, **copy.deepcopy(kwargs))
    assert ChatTemplate(src, tok.special_tokens_map).render(chat, **kwargs) == expected


def test_chained_comparison_stops_at_its_first_false_link_like_transformers() -> None:
    # jinja2 evaluates no operand after a false link, so one that would raise is never reached
    src = "{{ 1 > 2 > messages[99].role }}|{{ 0 < messages|length > 2 < messages[99].role }}|{{ 1 < 2 < 3 }}"
    expected = hf("llama3").apply_chat_template(SINGLE, tokenize=False, chat_template=src)
    assert ChatTemplate(src).render(SINGLE) == expected


def test_strftime_now_matches_transformers() -> None:
    src = "Today Date: {{ strftime_now('%d %b %Y') }}"
    expected = hf("llama3").apply_chat_template(SINGLE, tokenize=False, chat_template=src)
    assert ChatTemplate(src).render(SINGLE) == expected


def test_single_step_dunder_reads_render_empty_like_transformers() -> None:
    # the sandbox turns an unsafe attribute into an undefined value, which prints as nothing;
    # only using it further raises
    for src in ("{{ messages.__class__ }}", "{{ raise_exception.__globals__ }}", "{{ messages['__class__'] }}"):
        expected = hf("llama3").apply_chat_template(SINGLE, tokenize=False, chat_template=src)
        assert ChatTemplate(src).render(SINGLE) == expected == ""


# ---------------------------------------------------------------------------------------------
# named templates, errors of the API


def test_named_templates_pick_like_transformers() -> None:
    named = {"default": "D{{ tools is none }}", "tool_use": "T{{ tools|length }}", "rag": "R{{ documents|length }}"}
    tok = copy.copy(hf("llama3"))
    tok.chat_template = named
    template = ChatTemplate(named)
    cases: list[dict[str, Any]] = [
        {}, {"tools": [WEATHER_TOOL]}, {"tools": []},
        {"chat_template": "rag", "documents": [{"text": "x"}]},
        {"chat_template": "default", "tools": [WEATHER_TOOL]},
    ]
    for kwargs in cases:
        expected = tok.apply_chat_template(SINGLE, tokenize=False, **copy.deepcopy(kwargs))
        assert template.render(SINGLE, **kwargs) == expected


def test_chat_template_argument_rule_matches_transformers() -> None:
    # a name picks one of several templates; any other string is the template itself
    tok = copy.copy(hf("llama3"))
    for source, name in (({"default": "D", "rag": "R"}, "rag"), ({"default": "D"}, "nope {{ 1 }}"),
                         ("x", "tool_use"), ("x", "default"), ("x", "{{ messages|length }}")):
        tok.chat_template = source
        assert ChatTemplate(source).render(SINGLE, chat_template=name) == tok.apply_chat_template(
            SINGLE, tokenize=False, chat_template=name)
    with pytest.raises(TemplateError, match="no 'default'"):
        ChatTemplate({"a": "x", "b": "y"}).render(SINGLE)
    # no templates at all is not an empty template: both raise, and take a template string
    import pymtok

    mine = pymtok.load(fixture_path("tokenizers", "llama3"))
    mine.set_chat_template({})
    tok.chat_template = {}
    for name in (None, "{{ messages | length }}"):
        theirs = outcome(lambda: tok.apply_chat_template(SINGLE, tokenize=False, chat_template=name))
        got = outcome(lambda: mine.apply_chat_template(SINGLE, tokenize=False, chat_template=name))
        assert got[0] == theirs[0] and (got[0] == "error" or got == theirs), (got, theirs)
    with pytest.raises(TypeError, match="chat_template must be a str"):
        ChatTemplate("x").render(SINGLE, chat_template=["x"])  # type: ignore[arg-type]


def test_bad_inputs_raise_template_error() -> None:
    template = ChatTemplate("{{ messages }}")
    assert template.render([]) == "[]"
    with pytest.raises(TemplateError, match="conversation is empty"):
        template.render([], add_generation_prompt=False, continue_final_message=True)
    with pytest.raises(TemplateError, match="must be dicts"):
        template.render(["hello"])
    with pytest.raises(TemplateError, match="tools"):
        template.render(SINGLE, tools=[print])  # type: ignore[list-item] # a builtin has no signature to convert
    with pytest.raises(TemplateError, match="documents"):
        template.render(SINGLE, documents=["text"])  # type: ignore[list-item]


def test_jinja_errors_name_the_template_and_line() -> None:
    with pytest.raises(TemplateError, match=r"chat template, line 2: .*"):
        ChatTemplate("ok\n{% for %}").render(SINGLE)
    with pytest.raises(TemplateError, match=r"chat template 'x', line 3: .*'nope' is undefined"):
        ChatTemplate({"x": "a\nb\n{{ nope() }}"}).render(SINGLE, chat_template="x")
    with pytest.raises(TemplateError, match="line 1: custom failure"):
        ChatTemplate("{{ raise_exception('custom failure') }}").render(SINGLE)


def test_special_token_entries_may_be_added_token_dicts() -> None:
    template = ChatTemplate("{{ bos_token }}|{{ eos_token }}|{{ unk_token is defined }}",
                            {"bos_token": {"__type": "AddedToken", "content": "<s>"}, "eos_token": "</s>",
                             "unk_token": None})
    assert template.render(SINGLE) == "<s>|</s>|False"
    # keyword arguments override special tokens, as in transformers
    assert template.render(SINGLE, eos_token="E") == "<s>|E|False"


# ---------------------------------------------------------------------------------------------
# where templates and special tokens come from


@pytest.mark.parametrize("name", TEMPLATED + ["mistral-7b-v0.1", "clip-vit", "t5-small", "gpt-4o"])
def test_special_tokens_from_config_match_transformers(name: str) -> None:
    folder = fixture_path("tokenizers", name)
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    expected = dict(hf(name).special_tokens_map)
    if name == "gemma-v1":
        # GemmaTokenizer fills in mask_token="<mask>" by default; the config does not name it
        assert expected.pop("mask_token") == "<mask>"
    assert special_tokens_from_config(config) == expected


@pytest.mark.parametrize("name", TEMPLATED)
def test_find_chat_template_in_fixtures(name: str) -> None:
    assert find_chat_template(fixture_path("tokenizers", name)) == hf(name).chat_template


def test_find_chat_template_precedence_matches_transformers(tmp_path: Path) -> None:
    src = fixture_path("tokenizers", "llama3")
    for file in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(src / file, tmp_path / file)
    os.environ["HF_HUB_OFFLINE"] = "1"
    from transformers import AutoTokenizer

    def loaded() -> Any:
        return AutoTokenizer.from_pretrained(str(tmp_path)).chat_template

    assert find_chat_template(tmp_path) == loaded()  # tokenizer_config.json's string
    (tmp_path / "chat_template.jinja").write_bytes("JINJA {{ x }}\r\nline 2 ☃\n".encode())
    assert find_chat_template(tmp_path) == loaded() == "JINJA {{ x }}\nline 2 ☃\n"
    (tmp_path / "additional_chat_templates").mkdir()
    (tmp_path / "additional_chat_templates" / "tool_use.jinja").write_text("TOOLS", encoding="utf-8")
    assert find_chat_template(tmp_path) == loaded() == {"default": "JINJA {{ x }}\nline 2 ☃\n", "tool_use": "TOOLS"}
    (tmp_path / "chat_template.jinja").unlink()
    assert find_chat_template(tmp_path) == loaded() == {"tool_use": "TOOLS"}


def test_find_chat_template_json_and_named_list(tmp_path: Path) -> None:
    assert find_chat_template(tmp_path) is None
    config = {"chat_template": [{"name": "default", "template": "D"}, {"name": "rag", "template": "R"}]}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    assert find_chat_template(tmp_path) == {"default": "D", "rag": "R"}
    # chat_template.json (the processors' legacy file) comes before tokenizer_config.json
    (tmp_path / "chat_template.json").write_text(json.dumps({"chat_template": "J"}), encoding="utf-8")
    assert find_chat_template(tmp_path) == "J"
    (tmp_path / "chat_template.jinja").write_text("F", encoding="utf-8")
    assert find_chat_template(tmp_path) == "F"
    (tmp_path / "chat_template.json").write_text(json.dumps({"chat_template": 3}), encoding="utf-8")
    (tmp_path / "chat_template.jinja").unlink()
    with pytest.raises(FormatError, match="chat_template.json"):
        find_chat_template(tmp_path)
    (tmp_path / "chat_template.json").write_text("{", encoding="utf-8")
    with pytest.raises(FormatError, match="chat_template.json"):
        find_chat_template(tmp_path)


def test_template_from_llm_config(tmp_path: Path) -> None:
    path = tmp_path / "llm_config.json"
    assert template_from_llm_config(path) is None
    path.write_text(json.dumps({"jinja": {"chat_template": "T", "eos": "<|im_end|>", "context": {"a": 1}}}))
    assert template_from_llm_config(path) == ("T", "<|im_end|>")
    path.write_text(json.dumps({"jinja": {"chat_template": "T"}, "bos": "<s>"}))
    assert template_from_llm_config(path) == ("T", "")
    path.write_text(json.dumps({"llm_model": "llm.mnn"}))
    assert template_from_llm_config(path) is None
    path.write_text(json.dumps({"jinja": {"chat_template": ["x"]}}))
    with pytest.raises(FormatError, match="llm_config.json"):
        template_from_llm_config(path)


# ---------------------------------------------------------------------------------------------
# hostile templates: TemplateError within 2 s, no code run, bounded memory

CANARY = "/tmp/pymtok_chat_canary"

HOSTILE = {
    "mro_subclasses": "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "globals_os": "{{ cycler.__init__.__globals__.os.system('touch " + CANARY + "') }}",
    "raise_globals": "{{ raise_exception.__globals__['__builtins__']['exec']('open(\"" + CANARY + "\", \"w\")') }}",
    "getitem_walk": "{{ messages['__class__']['__base__'] }}",
    "attr_filter_walk": "{{ (messages|attr('__class__')).__subclasses__() }}",
    "format_walk": "{{ '{0.__class__.__base__.__subclasses__}'.format(messages)|length }}{{ ''.__class__() }}",
    "namespace_dunder": "{% set ns = namespace() %}{% set ns.__class__ = 1 %}",
    "namespace_underscore": "{{ namespace(_x=1) }}",
    "dict_type": "{{ dict.__class__.__subclasses__() }}",
    "mutate_messages": "{{ messages.append(1) }}",
    "forever": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "forever_output": "{% for i in range(100000) %}{% for j in range(100000) %}xxxxxxxx{% endfor %}{% endfor %}",
    "forever_in_macro": "{% macro f() %}{% for i in range(100000) %}{% for j in range(100000) %}x"
    "{% endfor %}{% endfor %}{% endmacro %}{{ f() }}",
    "exponential_macro": "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(80) }}",
    "recursive_macro": "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
    "recursive_loop": "{% for x in [1] recursive %}{{ loop([1, 1]) }}{% endfor %}",
    "tilde_doubling": "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
    "plus_doubling": "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
    "filter_doubling": "{% set ns = namespace(s='ab') %}{% for i in range(64) %}"
    "{% set ns.s = [ns.s, ns.s]|join %}{% endfor %}",
    "replace_doubling": "{% set ns = namespace(s='ab') %}{% for i in range(64) %}"
    "{% set ns.s = ns.s|replace('a', 'aa')|replace('b', ns.s) %}{% endfor %}",
    "list_doubling": "{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}",
    "nested_list_print": "{% set ns = namespace(l=['x' * 100000]) %}{% for i in range(64) %}"
    "{% set ns.l = [ns.l, ns.l] %}{% endfor %}{{ ns.l }}",
    "retain_many": "{% set ns = namespace(l=[], s='y' * 10000000) %}{% for i in range(1000) %}"
    "{% set ns.l = ns.l + [ns.s ~ i] %}{% endfor %}",
    "multiply": "{{ 'a' * 10000000000 }}",
    "power": "{{ 9 ** 999999999 }}",
    "huge_range": "{{ range(1000000000000)|list }}",
    "center": "{{ 'a'|center(1000000000) }}",
    "ljust": "{{ 'a'.ljust(1000000000) }}",
    "percent_width": "{{ '%999999999s' % 'a' }}",
    "format_width": "{{ '{:>999999999}'.format('a') }}",
    "format_nested_width": "{{ '{:{}}'.format('a', '999999999') }}",
    "join_separator": "{{ range(100000)|join('x' * 1000000) }}",
    "tojson_indent": "{{ range(100000)|list|tojson(indent=100000) }}",
    "indent": "{{ ('\n' * 1000000)|indent(100000) }}",
    "batch_fill": "{{ [1]|batch(1000000000, 0)|list }}",
    "lipsum": "{{ lipsum(100000000) }}",
    "split": "{{ ('ab,' * 5000000).split(',')|length }}",
    "expandtabs": "{{ ('\t' * 1000000).expandtabs(100000) }}",
}


# Cases of issue 11, each of which ran for a minute or more (or exhausted memory) before its
# cost was counted up front.
HOSTILE.update({
    "wordwrap_long_word": "{{ ('a' * 1000000)|wordwrap(1) }}",
    "sort_big_strings": "{{ (['a' * 1000000] * 10000)|sort|length }}",
    "sort_case_sensitive": "{{ (['a' * 1000000] * 10000)|sort(case_sensitive=true)|length }}",
    "unique_big_strings": "{{ (['a' * 1000000] * 10000)|unique|list|length }}",
    "max_big_strings": "{{ (['a' * 1000000] * 10000)|max|length }}",
    "min_big_strings": "{{ (['a' * 1000000] * 10000)|min|length }}",
    "dictsort_big": "{{ dict.fromkeys(range(100000)|map('string'), 'a' * 1000000)|dictsort|length }}",
    "groupby_big": "{{ ([{'k': 'a' * 1000000}] * 10000)|groupby('k')|length }}",
    # two equal values sharing their parts: comparing walks 2**60 paths
    "compare_shared": "{% set ns = namespace(a=['x'], b=['x']) %}{% for i in range(60) %}"
    "{% set ns.a = [ns.a, ns.a] %}{% set ns.b = [ns.b, ns.b] %}{% endfor %}{{ ns.a == ns.b }}",
    "in_shared": "{% set ns = namespace(a=['x'], b=['x']) %}{% for i in range(60) %}"
    "{% set ns.a = [ns.a, ns.a] %}{% set ns.b = [ns.b, ns.b] %}{% endfor %}{{ ns.a in [ns.b] }}",
    "chained_compare_shared": "{% set ns = namespace(a=['x'], b=['x']) %}{% for i in range(60) %}"
    "{% set ns.a = [ns.a, ns.a] %}{% set ns.b = [ns.b, ns.b] %}{% endfor %}{{ 1 < 2 < ns.a > ns.b }}",
})
# Templates too big to compile, refused before their cost grows: 2 MB of {{ 1 }}, a list literal
# of 2M elements, and the same under the character limit (tokens counted, then nodes).
BIG_SOURCES = {
    "prints_2mb": "{{ 1 }}" * 300_000,
    "list_literal_2m": "{{ [" + "1," * 2_000_000 + "1] }}",
    "tokens": "{{ [" + "1," * 300_000 + "1] }}",
    "nodes": "{{ 1 }}" * 60_000,
}


@pytest.fixture
def no_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Take the CPU-time backstop away: what a test then sees is decided by counted work alone,
    the same on any machine however loaded."""
    import pymtok.chat

    monkeypatch.setattr(pymtok.chat, "TIME_LIMIT", float("inf"))
    monkeypatch.setattr(pymtok.chat, "TIME_PER_MESSAGE", float("inf"))


@pytest.mark.parametrize("key", sorted(HOSTILE))
def test_hostile_templates_raise_by_counted_bounds(key: str, no_clock: None) -> None:
    if os.path.exists(CANARY):
        os.unlink(CANARY)
    template = ChatTemplate(HOSTILE[key])
    with pytest.raises(TemplateError):
        template.render(SINGLE)
    assert not os.path.exists(CANARY)


def test_the_cpu_time_backstop_stops_what_the_counts_let_through(monkeypatch: pytest.MonkeyPatch) -> None:
    import pymtok.chat

    for bound in ("MAX_STEPS", "MAX_ITERATIONS"):
        monkeypatch.setattr(pymtok.chat, bound, 1 << 60)
    monkeypatch.setattr(pymtok.chat, "TIME_LIMIT", 0.01)
    # a million loop steps take far more than 10 ms of CPU on any machine
    template = ChatTemplate("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}")
    with pytest.raises(TemplateError, match="CPU time"):
        template.render(SINGLE)


@pytest.mark.parametrize("key", sorted(BIG_SOURCES))
def test_oversized_templates_are_refused_before_compiling(key: str, no_clock: None) -> None:
    with pytest.raises(TemplateError, match="characters|tokens|nodes"):
        ChatTemplate(BIG_SOURCES[key]).render(SINGLE)


def test_self_referencing_and_deep_messages_raise_template_error() -> None:
    template = ChatTemplate("{{ messages }}")
    looped: dict[str, Any] = {"role": "user"}
    looped["content"] = looped
    listed: list[Any] = []
    listed.append(listed)
    deep: Any = "x"
    for _ in range(5000):
        deep = [deep]
    # a value shared 2**40 times over: tiny in memory, huge once copied for the template
    shared: Any = ["x"]
    for _ in range(40):
        shared = [shared, shared]
    for content in (looped, listed, deep, {"a": deep}, shared):
        with pytest.raises(TemplateError, match="nested|values"):
            template.render([{"role": "user", "content": content}])
    for where in ({"tools": [{"type": "function", "x": deep}]}, {"documents": [{"text": deep}]}, {"extra": deep}):
        with pytest.raises(TemplateError, match="nested"):
            template.render(SINGLE, **where)


def test_budget_is_per_render_and_per_thread() -> None:
    slow = ChatTemplate(HOSTILE["exponential_macro"])
    fast = ChatTemplate("{% for m in messages %}{{ m.content }}{% endfor %}")
    failures: list[BaseException] = []

    def run_slow() -> None:
        try:
            slow.render(SINGLE)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            failures.append(exc)

    thread = threading.Thread(target=run_slow)
    thread.start()
    for _ in range(200):  # renders on this thread keep their own, fresh budget meanwhile
        assert fast.render(MULTI) == "".join(m["content"] for m in MULTI)
    thread.join()
    assert len(failures) == 1 and isinstance(failures[0], TemplateError)
    assert fast.render(SINGLE) == "Hello!"  # a failed render leaves nothing behind


def test_big_legitimate_chats_render(no_clock: None) -> None:
    template = ours("qwen3")
    long_chat = [{"role": ("user", "assistant")[i % 2], "content": f"message {i}"} for i in range(5000)]
    assert template.render(long_chat).count("<|im_start|>") == 5001
    huge = [{"role": "user", "content": "x" * 8_000_000}]
    assert len(template.render(huge)) > 8_000_000
    # size checks measure big strings closely: a 3M-character tool argument in JSON, a
    # 5M-character message through str.format and split()
    code = 'print("hi")\n' * 250_000
    chat = [TOOL_CHAT[0], {**TOOL_CHAT[1], "tool_calls": [
        {"type": "function", "function": {"name": "run", "arguments": {"code": code}}}]}]
    assert_same(hf("qwen3"), template, chat)
    src = "{{ '[{}]'.format(messages[0].content) }}{{ messages[0].content.split()|length }}"
    assert ChatTemplate(src).render([{"role": "user", "content": "word " * 1_000_000}]).endswith("]1000000")


def test_hooks_run_without_the_sandbox_call_check(monkeypatch: pytest.MonkeyPatch) -> None:
    # Llama 3.2 Vision's template reads content['type'] on every character of a string content:
    # a long chat makes tens of thousands of comparisons and loop steps. Through the sandbox's
    # call check they cost three times transformers' render and ran out of time where it renders.
    import pymtok.chat

    src = (
        "{% for m in messages %}{% for c in m.content %}{% if c['type'] == 'image' %}<img>{% endif %}"
        "{% endfor %}{{ m.role ~ ': ' ~ m.content }}{% if 0 < loop.index < 3 %}!{% endif %}{% endfor %}"
    )
    checked = 0
    call = pymtok.chat._ChatEnvironment.call

    def counting_call(self: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal checked
        checked += 1
        return call(self, *args, **kwargs)

    monkeypatch.setattr(pymtok.chat._ChatEnvironment, "call", counting_call)
    chat = [{"role": ("user", "assistant")[i % 2], "content": f"words {i} " * 50} for i in range(40)]
    expected = hf("llama3").apply_chat_template(copy.deepcopy(chat), tokenize=False, chat_template=src)
    assert ChatTemplate(src).render(chat, add_generation_prompt=False) == expected
    assert checked == 0


def test_key_lookups_in_a_big_dict_render_like_transformers(no_clock: None) -> None:
    # 'key' in a dict is a hash lookup: counting it as a walk of the dict used up the render's
    # work on a loop of lookups that transformers renders at once
    table = {f"k{i}": i for i in range(50_000)}
    src = "{% for i in range(3000) %}{% if 'k7' in table and 'x' not in table %}.{% endif %}{% endfor %}"
    expected = hf("llama3").apply_chat_template(SINGLE, tokenize=False, chat_template=src, table=table)
    assert ChatTemplate(src).render(SINGLE, table=table) == expected


# ---------------------------------------------------------------------------------------------
# through the Tokenizer: tokenizer.json folders, and the same after export to .mtok and reload


@pytest.fixture(scope="module")
def exported(exported_mtok: Any) -> Any:
    import pymtok

    made: dict[str, Any] = {}

    def load(name: str) -> Any:
        if name not in made:
            made[name] = pymtok.load(exported_mtok(name))
        return made[name]

    return load


@pytest.mark.parametrize("name", slow_for(TEMPLATED, "gemma-v1"))
@pytest.mark.parametrize("source", ["tokenizer.json", ".mtok"])
def test_tokenizer_apply_chat_template_matches_transformers(name: str, source: str, exported: Any) -> None:
    import pymtok

    tok = exported(name) if source == ".mtok" else pymtok.load(fixture_path("tokenizers", name))
    for conversation in ("multi", "unicode", "assistant_last"):
        messages = CONVERSATIONS[conversation]
        for add in (True, False):
            theirs = outcome(lambda: hf(name).apply_chat_template(
                copy.deepcopy(messages), tokenize=False, add_generation_prompt=add))
            mine = outcome(lambda: tok.apply_chat_template(
                copy.deepcopy(messages), add_generation_prompt=add, tokenize=False))
            assert mine[0] == theirs[0]
            if theirs[0] == "ok":
                assert mine == theirs
                # ids are HF tokenizers' for the prompt (transformers' own Llama/ChatGLM classes
                # re-build their pipelines and can differ from tokenizer.json)
                ids = tok.apply_chat_template(copy.deepcopy(messages), add_generation_prompt=add, return_dict=False)
                assert ids == hf_tokenizer(name).encode(theirs[1], add_special_tokens=False).ids


def test_qwen3_tools_and_thinking_after_mtok_round_trip(exported: Any) -> None:
    tok = exported("qwen3")
    for kwargs in ({"tools": [WEATHER_TOOL]}, {"enable_thinking": False}, {"enable_thinking": True}):
        theirs = hf("qwen3").apply_chat_template(
            copy.deepcopy(TOOL_CHAT), tokenize=False, add_generation_prompt=True, **copy.deepcopy(kwargs))
        assert tok.apply_chat_template(
            copy.deepcopy(TOOL_CHAT), add_generation_prompt=True, tokenize=False, **kwargs) == theirs


def test_loading_does_not_import_jinja2() -> None:
    """jinja2 is most of pymtok's import time: only rendering a template may import it."""
    import subprocess
    import sys

    folder = fixture_path("tokenizers", "qwen3")
    code = (
        "import sys, pymtok\n"
        "assert 'jinja2' not in sys.modules, 'import pymtok'\n"
        f"tok = pymtok.load({str(folder)!r})\n"
        "assert tok.meta.chat_template and 'jinja2' not in sys.modules, 'pymtok.load'\n"
        "tok.apply_chat_template([{'role': 'user', 'content': 'hi'}])\n"
        "assert 'jinja2' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
