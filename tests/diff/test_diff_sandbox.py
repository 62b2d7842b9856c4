"""Hostile chat templates: each contained, bounded in steps and memory, reported as a clear failure.

Renders go through the backstop worker (`render_template`), as the diff does; the memory check runs
the same renderer in this process, where it can be measured.
"""

from __future__ import annotations

import resource
from pathlib import Path

import pytest
from diffkit import make_snapshot

from tracker.diff import diff_snapshots
from tracker.diff.conversations import CONVERSATIONS
from tracker.diff.sandbox import DEFAULT_LIMITS, RenderOutcome, render_bounded
from tracker.sandbox.render_backstop import render_template
from tracker.shared.domain import ChangeKind

LIMITS = DEFAULT_LIMITS
VARS = {"messages": [{"role": "user", "content": "hi"}], "bos_token": "<s>"}

# a list whose repr doubles 100 times while its weight in memory stays tiny (shared halves)
_DOUBLING = "{% set ns = namespace(x=1) %}{% for i in range(100) %}{% set ns.x = [ns.x, ns.x] %}{% endfor %}"

HOSTILE: list[tuple[str, str, str]] = [
    ("mro_walk", "{{ ''.__class__.__mro__[1].__subclasses__() }}", "security"),
    ("messages_mro", "{% for c in messages.__class__.__mro__ %}{{ c }}{% endfor %}", "security"),
    ("cycler_globals", "{{ cycler.__init__.__globals__.os.popen('id').read() }}", "security"),
    ("joiner_globals", "{{ joiner.__init__.__globals__['os'].system('id') }}", "security"),
    ("namespace_dunder", "{% set ns = namespace(__class__=1) %}{{ ns }}", "security"),
    ("namespace_private_set", "{% set ns = namespace() %}{% set ns._x = 1 %}", "security"),
    ("lipsum_globals", "{{ lipsum.__globals__['os'].listdir('/') }}", "security"),
    ("dict_type", "{{ dict.__class__.__base__.__subclasses__() }}", "security"),
    ("self_context", "{{ self.__init__.__globals__ }}", "security"),
    ("format_attr", "{{ '{0.__class__.__mro__}'.format(messages) }}", "security"),
    ("list_mutation", "{% set l = [] %}{{ l.append(1) }}", "security"),
    ("open_builtin", "{{ open('/etc/passwd').read() }}", "error"),
    ("import", "{% import 'os' as os %}", "error"),
    (
        "infinite_nested_loop",
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        "budget",
    ),
    ("huge_range", "{% for i in range(10**12) %}{% endfor %}", "limit"),
    ("string_repeat", "{{ 'a' * 10**9 }}", "limit"),
    ("list_repeat", "{{ ([1] * 10**9)|length }}", "limit"),
    ("huge_pow", "{{ 10 ** 10000000 }}", "limit"),
    (
        "tilde_doubling",
        "{% set ns = namespace(s='a') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
        "limit",
    ),
    (
        "plus_doubling",
        "{% set ns = namespace(s='a') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
        "limit",
    ),
    (
        "replace_growth",
        "{% set ns = namespace(s='aaaa') %}{% for i in range(40) %}{% set ns.s = ns.s|replace('a', 'aaaa') %}{% endfor %}",
        "limit",
    ),
    ("center_filter", "{{ 'a'|center(10**9) }}", "limit"),
    ("ljust_method", "{{ 'a'.ljust(999999999) }}", "limit"),
    ("format_width", "{{ '{:>999999999}'.format(1) }}", "limit"),
    ("percent_width", "{{ '%999999999d' % 1 }}", "limit"),
    ("format_filter_width", "{{ '%999999999d'|format(1) }}", "limit"),
    ("join_growth", "{{ (['a' * 100000] * 10)|join('x') }}", "limit"),
    ("output_flood", "{% for i in range(100000) %}{{ 'x' * 100000 }}{% endfor %}", "limit"),
    ("random_filter", "{{ messages|random }}", "security"),
    ("lipsum", "{{ lipsum(1000000) }}", "security"),
    ("replace_huge", "{{ ('ab' * 400000)|replace('a', 'a' * 1000) }}", "limit"),
    ("join_huge", "{{ (['a' * 1000000] * 100000)|join }}", "limit"),
    (
        "list_literal_repr",
        "{% set s = 'a' * 900000 %}{{ [s, s, s, s, s, s, s, s, s, s] }}",
        "limit",
    ),
    ("str_join_method", "{% set s = 'a' * 900000 %}{{ ('x' * 100000).join([s, s]) }}", "limit"),
    ("indent_growth", "{{ ('a\\n' * 400000)|indent(1000) }}", "limit"),
    ("format_refs", "{{ ('{0}' * 100000).format('a' * 1000) }}", "limit"),
    ("percent_refs", "{{ ('%(a)s' * 100000) % {'a': 'a' * 1000} }}", "limit"),
    ("power_tower", "{{ ((2 ** 4096) ** 4096) ** 4096 }}", "limit"),
    ("tojson_indent", "{{ (range(1000)|list)|tojson(indent=100000) }}", "limit"),
    ("shared_doubling_repr", _DOUBLING + "{{ ns.x }}", "limit"),
    ("shared_doubling_string", _DOUBLING + "{{ ns.x|string }}", "limit"),
    ("cyclic_namespace", "{% set ns = namespace(l=[]) %}{% set ns.me = ns %}{{ ns }}", "limit"),
    ("expandtabs", "{{ ('a\\tb' * 100000).expandtabs(1000) }}", "limit"),
    ("recursive_macro", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "limit"),
    ("recursive_loop", "{% for x in [[1]] recursive %}{{ loop([x]) }}{% endfor %}", "limit"),
    ("deep_parens", "{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}", "limit"),
    ("deep_ifs", "{% if true %}" * 3000 + "x" + "{% endif %}" * 3000, "limit"),
    ("huge_source", "x" * 600_000, "limit"),
]


@pytest.mark.parametrize(("name", "source", "category"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_template_is_contained(name: str, source: str, category: str) -> None:
    result = render_template(source, VARS, LIMITS)
    assert result.outcome == category, (name, result)
    assert result.output == ""
    assert result.error


def test_no_escape_reads_files_or_runs_commands(tmp_path: Path) -> None:
    secret = tmp_path / "canary.txt"
    secret.write_text("CANARY-7f3a")
    marker = tmp_path / "pwned"
    attempts = [
        f"{{{{ cycler.__init__.__globals__.os.popen('cat {secret}').read() }}}}",
        f"{{{{ joiner.__init__.__globals__.os.system('touch {marker}') }}}}",
        f"{{{{ namespace.__init__.__globals__.__builtins__.open('{secret}').read() }}}}",
        f"{{{{ ''.__class__.__base__.__subclasses__()[0].__init__.__globals__['sys'].modules['os'].system('touch {marker}') }}}}",
        f"{{% include '{secret}' %}}",
        f"{{% from '{secret}' import x %}}",
        "{{ raise_exception.__globals__ }}",
        "{{ strftime_now.__globals__['datetime'] }}",
    ]
    for source in attempts:
        result = render_template(source, VARS, LIMITS)
        # refused outright, or the unsafe attribute is undefined and renders as nothing
        assert not result.ok or result.output == "", source
        assert "CANARY" not in result.output + result.error
    assert not marker.exists()


def test_hostile_corpus_stays_within_memory() -> None:
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _name, source, category in HOSTILE:
        assert render_bounded(source, VARS, LIMITS).outcome == category
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before) / 1024
    assert grown_mib < 256


def test_hostile_template_in_a_repo_is_reported_not_raised() -> None:
    good = make_snapshot(
        {"chat_template.jinja": b"{% for m in messages %}{{ m.content }}{% endfor %}"}
    )
    evil = make_snapshot(
        {"chat_template.jinja": b"{% for m in messages %}{{ m.content * 10**9 }}{% endfor %}"}
    )
    changes = diff_snapshots(good, evil)
    broken = [c for c in changes if c.kind is ChangeKind.BROKEN]
    assert {c.key for c in broken} == {c.id for c in CONVERSATIONS}
    assert all(c.after == "<limit: repetition over the size limit (1000000)>" for c in broken)


def test_a_template_that_spins_runs_out_of_steps() -> None:
    spin = "{% for i in range(100000) %}{% for j in range(100000) %}{% if i == -1 %}x{% endif %}{% endfor %}{% endfor %}"
    result = render_template(spin, VARS, LIMITS)
    assert (result.outcome, result.error) == (
        RenderOutcome.BUDGET,
        "rendering needs over 1,000,000 steps",
    )
    assert result.shown() == "<budget: rendering needs over 1,000,000 steps>"


BENIGN = [
    ("{{ '**%s**' % messages[0].content }}", "**hi**"),
    ("{{ '{:*^9}'.format('x') }}", "****x****"),
    ("{{ '%5.2f' % 3.14159 }}", " 3.14"),
    ("{{ messages|tojson }}", '[{"role": "user", "content": "hi"}]'),
    ("{{ messages|tojson(indent=2)|length }}", "51"),
    (
        "{% for m in messages %}{{ loop.index }}{% if loop.last %}{% break %}{% endif %}{% endfor %}",
        "1",
    ),
    (
        "{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}",
        "3",
    ),
    ("{{ (messages|map(attribute='content')|join(', '))|upper }}", "HI"),
    ("{% generation %}{{ bos_token }}{% endgeneration %}", "<s>"),
    ("{{ dict(a=1)|items|list }}", "[('a', 1)]"),
]


@pytest.mark.parametrize(("source", "expected"), BENIGN)
def test_benign_templates_render_as_transformers_would(source: str, expected: str) -> None:
    result = render_template(source, VARS, LIMITS)
    assert (result.outcome, result.output) == ("ok", expected)


def test_a_spinning_template_runs_out_of_steps_in_every_conversation() -> None:
    from tracker.diff.chat_template import render_all

    spin = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    results = render_all(spin, {}, LIMITS)
    assert list(results) == [c.id for c in CONVERSATIONS]
    assert {r.shown() for r in results.values()} == {
        "<budget: rendering needs over 1,000,000 steps>"
    }
