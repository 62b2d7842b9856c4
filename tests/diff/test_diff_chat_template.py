"""Chat templates: resolution as transformers does it, source and rendered diffs on real template changes."""

from __future__ import annotations

import json

from diffkit import DATA, make_snapshot, version

from tracker.diff import diff_snapshots
from tracker.diff.chat_template import render_all, resolve_templates
from tracker.diff.conversations import CONVERSATIONS
from tracker.diff.sandbox import DEFAULT_LIMITS
from tracker.shared.domain import Artifact, ChangeKind

GRANITE = "ibm-granite__granite-3.1-1b-a400m-instruct"
KIMI = DATA / "models" / "moonshotai__Kimi-K2-Instruct"


def _granite(prefix: str) -> dict[str, bytes]:
    return {"tokenizer_config.json": version(GRANITE, prefix)}


def test_granite_template_update_shows_the_real_prompt_difference() -> None:
    # c4f8e0dd "Updated chat template": the loop now runs over loop_messages, so a system message
    # is no longer rendered twice.
    changes = diff_snapshots(
        make_snapshot(_granite("01_0a854d48_tok")), make_snapshot(_granite("02_c4f8e0dd"))
    )
    assert [(c.artifact, c.kind, c.key) for c in changes] == [
        (Artifact.CHAT_TEMPLATE, ChangeKind.RENDERED, "generation_prompt"),
        (Artifact.CHAT_TEMPLATE, ChangeKind.CHANGED, "source"),
        (Artifact.CHAT_TEMPLATE, ChangeKind.RENDERED, "system_user"),
    ]
    source = changes[1]
    assert "-{%- for message in messages %}\n+{%- for message in loop_messages %}" in source.detail
    system = "<|start_of_role|>system<|end_of_role|>You are a helpful assistant.<|end_of_text|>\n"
    user = "<|start_of_role|>user<|end_of_role|>What is the capital of France?<|end_of_text|>\n"
    assert changes[2].before == system + system + user
    assert changes[2].after == system + user
    assert changes[0].after == system + user + "<|start_of_role|>assistant<|end_of_role|>"
    assert changes[2].summary == (
        "chat template renders `system_user` differently (first difference at character 99; 246 → 164 characters)"
    )
    assert f"-{system.rstrip()}" in changes[2].detail


def test_kimi_k2_template_revision_renders_a_new_default_system_prompt() -> None:
    tc = json.dumps({"bos_token": "[BOS]", "eos_token": "[EOS]"}).encode()
    before = make_snapshot(
        {
            "chat_template.jinja": (KIMI / "chat_template.2025-07.jinja").read_bytes(),
            "tokenizer_config.json": tc,
        }
    )
    after = make_snapshot(
        {
            "chat_template.jinja": (KIMI / "chat_template.jinja").read_bytes(),
            "tokenizer_config.json": tc,
        }
    )
    changes = {c.key: c for c in diff_snapshots(before, after)}
    assert set(changes) == {
        "source",
        "multi_turn",
        "reasoning",
        "tools",
        "tool_calls",
        "tool_calls_no_ids",
        "parallel_tool_calls",
    }
    assert changes["source"].summary == (
        "chat template source changed (+47 -26 lines); renders differently for 6 of 8 conversations"
    )
    assert changes["source"].facts == {
        "rendered": {
            "conversations": 8,
            "same": ["system_user", "generation_prompt"],
            "differs": [
                "multi_turn",
                "tools",
                "tool_calls",
                "reasoning",
                "tool_calls_no_ids",
                "parallel_tool_calls",
            ],
            "fails_both": {},
        }
    }
    multi = changes["multi_turn"]
    assert multi.kind is ChangeKind.RENDERED
    assert multi.before.startswith(
        "<|im_system|>system<|im_middle|>You are a helpful assistant<|im_end|>"
    )
    assert multi.after.startswith(
        "<|im_system|>system<|im_middle|>You are Kimi, an AI assistant created by Moonshot AI.<|im_end|>"
    )
    # the revised template appends to a list, which transformers' immutable sandbox refuses
    broken = changes["tool_calls"]
    assert broken.kind is ChangeKind.BROKEN
    assert broken.after == "<security: access to attribute 'append' of 'list' object is unsafe.>"


def test_resolution_order_jinja_file_over_tokenizer_config_and_named_templates() -> None:
    tc = json.dumps(
        {
            "chat_template": [
                {"name": "default", "template": "A"},
                {"name": "tool_use", "template": "T"},
            ]
        }
    )
    snap = make_snapshot({"tokenizer_config.json": tc.encode()})
    got = resolve_templates(snap)
    assert dict(got.sources) == {"default": "A", "tool_use": "T"}
    snap2 = make_snapshot(
        {
            "tokenizer_config.json": tc.encode(),
            "chat_template.jinja": b"J",
            "additional_chat_templates/rag.jinja": b"R",
        }
    )
    got2 = resolve_templates(snap2)
    assert dict(got2.sources) == {"default": "J", "rag": "R"}
    assert dict(got2.origins) == {
        "default": "chat_template.jinja",
        "rag": "additional_chat_templates/rag.jinja",
    }
    snap3 = make_snapshot(
        {"tokenizer_config.json": tc.encode(), "chat_template.json": b'{"chat_template": "C"}'}
    )
    assert dict(resolve_templates(snap3).sources) == {"default": "C"}


def test_moving_the_same_template_to_chat_template_jinja_is_no_change() -> None:
    tc = json.loads(version(GRANITE, "02_c4f8e0dd"))
    template = tc.pop("chat_template")
    before = make_snapshot(_granite("02_c4f8e0dd"))
    after = make_snapshot(
        {"tokenizer_config.json": json.dumps(tc).encode(), "chat_template.jinja": template.encode()}
    )
    assert [c for c in diff_snapshots(before, after) if c.artifact is Artifact.CHAT_TEMPLATE] == []


def test_named_template_changes_are_keyed_by_name() -> None:
    def snap(tool: str) -> object:
        doc = {
            "chat_template": [
                {"name": "default", "template": "{{ messages[0].content }}"},
                {"name": "tool_use", "template": tool},
            ]
        }
        return make_snapshot({"tokenizer_config.json": json.dumps(doc).encode()})

    changes = diff_snapshots(snap("{{ tools|length }}"), snap("{{ tools|length }} tools"))  # type: ignore[arg-type]
    assert [(c.kind, c.key) for c in changes] == [
        (ChangeKind.CHANGED, "tool_use"),
        (ChangeKind.RENDERED, "tool_use:parallel_tool_calls"),
        (ChangeKind.RENDERED, "tool_use:tool_calls"),
        (ChangeKind.RENDERED, "tool_use:tool_calls_no_ids"),
        (ChangeKind.RENDERED, "tool_use:tools"),
    ]
    assert changes[-1].before == "1" and changes[-1].after == "1 tools"
    # conversations without tools fail identically at both revisions (tools is None): no change


def test_source_change_that_renders_the_same_says_so() -> None:
    # a whitespace-control and comment edit: the prompt of every canonical conversation is the same
    old = b"{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
    new = b"{#- one line per message -#}\n{%- for m in messages -%}{{ m.role }}: {{ m.content }}\n{% endfor %}"
    changes = diff_snapshots(
        make_snapshot({"chat_template.jinja": old}), make_snapshot({"chat_template.jinja": new})
    )
    [source] = changes
    assert (source.kind, source.key) == (ChangeKind.CHANGED, "source")
    assert source.summary == (
        "chat template source changed (+2 -1 lines); rendered output unchanged for 8 conversations"
    )
    assert source.facts["rendered"]["same"] == [c.id for c in CONVERSATIONS]
    assert source.detail.startswith(
        "# rendered output: rendered output unchanged for 8 conversations\n"
    )


def test_conversations_that_fail_in_both_revisions_are_listed_with_the_error() -> None:
    refuse = "{% if m.role == 'tool' %}{{ raise_exception('tool messages are not supported') }}{% endif %}"
    old = f"{{% for m in messages %}}{refuse}{{{{ m.content }}}}{{% endfor %}}".encode()
    new = f"{{% for m in messages %}}{refuse}{{{{ m.content }}}}\n{{% endfor %}}".encode()
    changes = diff_snapshots(
        make_snapshot({"chat_template.jinja": old}), make_snapshot({"chat_template.jinja": new})
    )
    [source] = [c for c in changes if c.key == "source"]
    assert source.kind is ChangeKind.CHANGED
    assert source.facts["rendered"]["fails_both"] == {
        "parallel_tool_calls": "raised: tool messages are not supported",
        "tool_calls": "raised: tool messages are not supported",
        "tool_calls_no_ids": "raised: tool messages are not supported",
    }
    assert source.summary == (
        "chat template source changed (+2 -1 lines); renders differently for 5 of 8 conversations; "
        "3 fail to render in both revisions (parallel_tool_calls, tool_calls, tool_calls_no_ids)"
    )
    assert (
        "# fails to render in both revisions: tool_calls: raised: tool messages are not supported"
        in source.detail.splitlines()
    )
    assert {c.key for c in changes if c is not source} == {
        "system_user",
        "generation_prompt",
        "multi_turn",
        "tools",
        "reasoning",
    }


def test_bos_token_change_alone_changes_the_rendered_prompt() -> None:
    template = "{{ bos_token }}{% for m in messages %}{{ m.content }}{{ eos_token }}{% endfor %}"
    before = make_snapshot(
        {
            "tokenizer_config.json": json.dumps(
                {"chat_template": template, "bos_token": "<s>", "eos_token": "</s>"}
            ).encode()
        }
    )
    after = make_snapshot(
        {
            "tokenizer_config.json": json.dumps(
                {"chat_template": template, "bos_token": "<s>", "eos_token": "<|eot|>"}
            ).encode()
        }
    )
    changes = diff_snapshots(before, after)
    assert [(c.artifact, c.kind, c.key) for c in changes][:2] == [
        (Artifact.SPECIAL_TOKENS, ChangeKind.CHANGED, "eos_token"),
        (Artifact.CHAT_TEMPLATE, ChangeKind.RENDERED, "generation_prompt"),
    ]
    rendered = changes[1]
    assert (
        rendered.before == "<s>You are a helpful assistant.</s>What is the capital of France?</s>"
    )
    assert (
        rendered.after
        == "<s>You are a helpful assistant.<|eot|>What is the capital of France?<|eot|>"
    )


def test_template_that_no_longer_parses_is_broken() -> None:
    good = make_snapshot(
        {"chat_template.jinja": b"{% for m in messages %}{{ m.content }}{% endfor %}"}
    )
    bad = make_snapshot({"chat_template.jinja": b"{% for m in messages %}{{ m.content }}"})
    changes = diff_snapshots(good, bad)
    assert [(c.kind, c.key) for c in changes] == [
        (ChangeKind.CHANGED, "source"),
        (ChangeKind.BROKEN, "source"),
    ]
    assert changes[1].summary.startswith(
        "chat template no longer parses: line 1: Unexpected end of template"
    )


def test_template_that_now_raises_for_a_conversation_is_rendered_not_broken() -> None:
    old = b"{% for m in messages %}{{ m.role }}{% endfor %}"
    new = b"{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('no system role') }}{% endif %}{{ m.role }}{% endfor %}"
    changes = {
        c.key: c
        for c in diff_snapshots(
            make_snapshot({"chat_template.jinja": old}), make_snapshot({"chat_template.jinja": new})
        )
    }
    assert changes["system_user"].kind is ChangeKind.RENDERED
    assert changes["system_user"].after == "<raised: no system role>"
    assert "multi_turn" not in changes


def test_wrong_type_chat_template_and_binary_jinja_are_unreadable() -> None:
    (c,) = [
        c
        for c in diff_snapshots(
            None, make_snapshot({"tokenizer_config.json": b'{"chat_template": 5}'})
        )
        if c.artifact is Artifact.CHAT_TEMPLATE
    ]
    assert c.kind is ChangeKind.UNREADABLE
    assert (
        c.summary
        == "could not read the chat template in tokenizer_config.json: `chat_template` is int, not a string or list"
    )
    (d,) = diff_snapshots(None, make_snapshot({"chat_template.jinja": b"\x00\x01\x02"}))
    assert (d.kind, d.summary) == (
        ChangeKind.UNREADABLE,
        "could not read chat_template.jinja: binary content (NUL bytes), not text",
    )


def test_rendering_is_deterministic_and_uses_a_fixed_time() -> None:
    src = "{{ strftime_now('%Y-%m-%d') }} {{ messages|length }}"
    first = render_all(src, {}, DEFAULT_LIMITS)
    assert first == render_all(src, {}, DEFAULT_LIMITS)
    assert first["system_user"].output == "2026-01-01 2"
    assert first["multi_turn"].output == "2026-01-01 4"


def test_unfetched_tokenizer_config_claims_nothing() -> None:
    untracked = make_snapshot({}, extra_tree={"tokenizer_config.json": "abc"})
    assert diff_snapshots(None, untracked) == ()
    assert diff_snapshots(make_snapshot(_granite("02_c4f8e0dd")), untracked) == ()
