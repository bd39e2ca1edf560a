"""The background job runner: coalescing, delays, waiting, draining on close."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import pytest

from arbormem.jobs import Jobs


@pytest.fixture
def jobs() -> Iterator[Jobs]:
    runner = Jobs(workers=2)
    yield runner
    runner.close()


def test_a_job_runs_in_the_background_and_wait_returns_when_it_is_done(jobs: Jobs) -> None:
    caller = threading.get_ident()
    ran_on: list[int] = []
    future = jobs.submit("work", lambda: ran_on.append(threading.get_ident()) or 7)
    assert jobs.wait(timeout=30)
    assert future.result() == 7
    assert ran_on and ran_on[0] != caller
    assert jobs.pending() == []


def test_a_delayed_job_waits_until_someone_waits_for_it(jobs: Jobs) -> None:
    done = threading.Event()
    jobs.submit("upkeep", done.set, key="s1", delay=3600)
    [job] = jobs.pending()
    assert (job.kind, job.key, job.state) == ("upkeep", "s1", "waiting")
    assert not done.is_set()
    assert jobs.wait(timeout=30)
    assert done.is_set()


def test_jobs_with_one_key_coalesce_while_the_first_waits(jobs: Jobs) -> None:
    runs: list[str] = []
    first = jobs.submit("upkeep", lambda: runs.append("first"), key="s1", delay=3600)
    second = jobs.submit("upkeep", lambda: runs.append("second"), key="s1", delay=3600)
    assert second is first
    jobs.wait()
    assert runs == ["first"]
    # Once it started, the key is free again.
    jobs.submit("upkeep", lambda: runs.append("third"), key="s1", delay=3600)
    jobs.wait()
    assert runs == ["first", "third"]


def test_postpone_pushes_a_waiting_job_back(jobs: Jobs) -> None:
    started = threading.Event()
    jobs.submit("reorganize", started.set, key="t1", delay=1.0)
    jobs.submit("reorganize", started.set, key="t1", delay=3600, postpone=True)
    # The first delay has long passed when this stops waiting, had it not been pushed back.
    assert not started.wait(timeout=2.0)
    assert [j.state for j in jobs.pending()] == ["waiting"]
    jobs.wait()
    assert started.is_set()


def test_pending_says_what_runs_and_what_is_queued() -> None:
    runner = Jobs(workers=1)
    release = threading.Event()
    running = threading.Event()

    def block() -> None:
        running.set()
        release.wait(30)

    runner.submit("slow", block)
    runner.submit("next", lambda: None)
    assert running.wait(30)
    states = {j.kind: j.state for j in runner.pending()}
    assert states == {"slow": "running", "next": "queued"}
    assert runner.busy
    assert not runner.wait(timeout=0.01)
    release.set()
    assert runner.wait(timeout=30)
    assert not runner.busy
    runner.close()


def test_a_failing_job_is_logged_and_never_raised_at_the_caller(
    jobs: Jobs, caplog: pytest.LogCaptureFixture
) -> None:
    def fail() -> None:
        raise RuntimeError("boom")

    with caplog.at_level(logging.WARNING, logger="arbormem.jobs"):
        future = jobs.submit("upkeep", fail)
        assert jobs.wait(timeout=30)
    assert isinstance(future.exception(), RuntimeError)
    assert "background upkeep failed: boom" in caplog.text


def test_wait_can_wait_for_one_kind_only(jobs: Jobs) -> None:
    release = threading.Event()
    jobs.submit("slow", lambda: release.wait(30))
    done = threading.Event()
    jobs.submit("upkeep", done.set)
    assert jobs.wait(timeout=30, kind="upkeep")
    assert done.is_set()
    release.set()


def test_close_drains_waiting_jobs_and_later_work_runs_inline() -> None:
    runner = Jobs()
    ran: list[str] = []
    runner.submit("upkeep", lambda: ran.append("delayed"), key="s", delay=3600)
    runner.close()
    assert ran == ["delayed"]
    assert runner.stopping.is_set()
    caller = threading.get_ident()
    where: list[int] = []
    future = runner.submit("late", lambda: where.append(threading.get_ident()))
    assert future.done() and where == [caller]


def test_postpone_moves_only_a_job_that_waits(jobs: Jobs) -> None:
    started = threading.Event()
    assert not jobs.postpone("t1", 3600)  # nothing waits: nothing made
    jobs.submit("reorganize", started.set, key="t1", delay=1.0)
    assert jobs.postpone("t1", 3600)
    assert not started.wait(timeout=2.0)
    jobs.wait()
    assert started.is_set()
    assert not jobs.postpone("t1", 3600)


def test_a_running_job_says_how_far_it_is_in_pending(jobs: Jobs) -> None:
    said, release = threading.Event(), threading.Event()

    def work() -> None:
        jobs.progress(3, 10)
        said.set()
        release.wait(30)

    jobs.submit("records", work)
    assert said.wait(30)
    [job] = jobs.pending()
    assert (job.kind, job.state, job.done, job.total) == ("records", "running", 3, 10)
    release.set()
    assert jobs.wait(timeout=30) and jobs.pending() == []
    jobs.progress(1, 2)  # outside a job: nothing to say it of
    queued = jobs.submit("other", lambda: None, delay=3600)
    assert [(j.done, j.total) for j in jobs.pending()] == [(None, None)]
    assert jobs.wait(timeout=30) and queued.done()
