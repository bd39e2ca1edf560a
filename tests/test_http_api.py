"""The OpenAPI schema: every route fuzzed on a live server (no 5xx), and the
generated reference in docs/http-api.md kept in step with the code."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from arbormem.server.docs import openapi_spec, render
from tests.serving import Served, serve

SPEC = openapi_spec()
schema = schemathesis.openapi.from_dict(SPEC)
schema.config.generation.update(max_examples=12)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serve(tmp_path_factory.mktemp("fuzz")) as s:
        # Something to find, so reads go past the empty-thread paths.
        s.memory.for_tenant("acme").add_many(
            [{"content": "alice likes tea"}, {"role": "assistant", "content": "noted"}],
            user="alice",
        )
        yield s


@schema.parametrize()
@settings(deadline=None, suppress_health_check=list(HealthCheck))
def test_no_route_answers_a_server_error(case: schemathesis.Case, live: Served) -> None:
    case.call_and_validate(
        base_url=live.url, headers=live.headers(live.acme), checks=[not_a_server_error]
    )


def test_the_reference_is_generated_from_the_code() -> None:
    docs = (Path(__file__).resolve().parents[1] / "docs" / "http-api.md").read_text()
    assert docs == render(SPEC), "docs/http-api.md is stale: run python -m arbormem.server.docs"


def test_every_route_is_documented() -> None:
    docs = (Path(__file__).resolve().parents[1] / "docs" / "http-api.md").read_text()
    for path, methods in SPEC["paths"].items():
        for method in methods:
            assert f"## {method.upper()} {path}\n" in docs
