"""Bulk adds pause Python's cyclic garbage collector and give it back as they found it."""

from __future__ import annotations

import gc
import threading

from arbormem.ingest.pipeline import collection_paused


def test_paused_inside_and_enabled_again_after() -> None:
    assert gc.isenabled()
    with collection_paused():
        assert not gc.isenabled()
        with collection_paused():  # nested (or another thread's bulk add)
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer one is still running
    assert gc.isenabled()


def test_not_paused_for_a_live_exchange() -> None:
    with collection_paused(False):
        assert gc.isenabled()
    assert gc.isenabled()


def test_left_off_when_the_application_had_it_off() -> None:
    gc.disable()
    try:
        with collection_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_enabled_again_after_an_error_and_across_threads() -> None:
    started, release = threading.Event(), threading.Event()

    def other() -> None:
        with collection_paused():
            started.set()
            release.wait(10)

    worker = threading.Thread(target=other)
    worker.start()
    started.wait(10)
    try:
        with collection_paused():
            raise RuntimeError("the write failed")
    except RuntimeError:
        pass
    assert not gc.isenabled()  # the other thread's bulk add is still running
    release.set()
    worker.join(10)
    assert gc.isenabled()
