"""The render backstop: a render past its CPU, wall-clock or memory allowance kills the worker process and
raises RetryLaterError (never a RenderResult); the next request gets a fresh worker.

The step budget is lifted in these tests (`steps=10**12`) so that a spinning template runs into the
backstop instead of the budget, which would stop it first in production.
"""

from __future__ import annotations

import os
import time

import pytest

from tracker.diff.sandbox import RenderLimits, RenderOutcome
from tracker.sandbox.render_backstop import RenderBackstopError, RenderWorker
from tracker.shared.errors import RetryLaterError

SPIN = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
HELLO = "{{ messages[0].content }}"
VARS = {"messages": [{"role": "user", "content": "hi"}]}
NO_BUDGET = RenderLimits(steps=10**12)


@pytest.fixture
def worker() -> RenderWorker:
    w = RenderWorker()
    yield w
    w.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_cpu_rlimit_kills_the_worker_and_the_next_request_gets_a_new_one(
    worker: RenderWorker,
) -> None:
    before = worker.render_batch(HELLO, [VARS], NO_BUDGET)
    assert [(r.output, r.outcome) for r in before] == [("hi", RenderOutcome.OK)]
    first = worker.pid
    assert first is not None
    limits = RenderLimits(steps=10**12, backstop_cpu_s=1, backstop_wall_s=300)
    with pytest.raises(RenderBackstopError) as caught:
        worker.render_batch(SPIN, [VARS], limits)
    assert str(caught.value) == "chat-template render used over 1 s of CPU (backstop)"
    assert isinstance(caught.value, RetryLaterError)
    assert not _alive(first)
    assert worker.render_batch(HELLO, [VARS], NO_BUDGET) == before
    assert worker.pid not in (None, first)


def test_wall_clock_backstop_kills_a_worker_that_does_not_answer(worker: RenderWorker) -> None:
    worker.render_batch(HELLO, [VARS], NO_BUDGET)
    first = worker.pid
    assert first is not None
    limits = RenderLimits(steps=10**12, backstop_cpu_s=600, backstop_wall_s=0.5)
    with pytest.raises(RenderBackstopError) as caught:
        worker.render_batch(SPIN, [VARS], limits)
    assert str(caught.value) == (
        "chat-template render still running after 0.5 s (wall-clock backstop)"
    )
    assert not _alive(first)
    assert worker.render_batch(HELLO, [VARS], NO_BUDGET)[0].output == "hi"


def test_out_of_memory_is_a_backstop_hit_not_a_result(worker: RenderWorker) -> None:
    # 60 nested macro frames each holding its own 900 kB string: ~54 MB, within the step budget
    hoard = (
        "{% macro f(n) %}{% set s = 'x' * 900000 ~ n %}{% if n > 0 %}{{ f(n - 1) }}{% endif %}"
        "{{ s|length }}{% endmacro %}{{ f(60) }}"
    )
    fits = worker.render_batch(hoard, [{}], RenderLimits())
    assert fits[0].outcome is RenderOutcome.OK
    assert fits[0].output == "900001" * 10 + "900002" * 51
    with pytest.raises(RenderBackstopError) as caught:
        worker.render_batch(hoard, [{}], RenderLimits(backstop_memory_mib=32))
    assert str(caught.value) == "chat-template render stopped: out of memory (over 32 MiB)"
    assert worker.render_batch(HELLO, [VARS], NO_BUDGET)[0].output == "hi"


def test_a_killed_worker_is_replaced_before_the_next_request(worker: RenderWorker) -> None:
    worker.render_batch(HELLO, [VARS], NO_BUDGET)
    first = worker.pid
    assert first is not None
    os.kill(first, 9)
    deadline = time.monotonic() + 10
    while worker.pid is not None and time.monotonic() < deadline:  # seen dead (and reaped)
        time.sleep(0.01)
    assert worker.render_batch(HELLO, [VARS], NO_BUDGET)[0].output == "hi"
    assert worker.pid != first


def test_results_cross_the_process_boundary_unchanged(worker: RenderWorker) -> None:
    source = (
        "{% for m in messages %}{{ m.role }}: {{ m.content }}\u00e9\U0001f600\n{% endfor %}"
        "{{ raise_exception('no system prompt') if messages|length > 5 }}"
    )
    many = [VARS, {"messages": [{"role": "user", "content": str(i)} for i in range(6)]}]
    got = worker.render_batch(source, many, NO_BUDGET)
    assert [r.outcome for r in got] == [RenderOutcome.OK, RenderOutcome.RAISED]
    assert got[0].output == "user: hi\u00e9\U0001f600\n"
    assert got[1].error == "no system prompt"
