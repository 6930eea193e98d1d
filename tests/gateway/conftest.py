from __future__ import annotations

import pytest

from tests.support import base_config, gateway_in_process, mock_backend


@pytest.fixture
async def mock():
    async with mock_backend() as backend:
        yield backend


@pytest.fixture
def make_gateway(mock, tmp_path):
    """make_gateway(extra_yaml) -> async context manager of a gateway in front of the mock."""

    def factory(extra: str = "", **kwargs):
        path = tmp_path / "decisions.jsonl"
        return gateway_in_process(base_config(mock.url, decisions=str(path), extra=extra), path, **kwargs)

    return factory


@pytest.fixture
async def gw(make_gateway):
    async with make_gateway() as running:
        yield running


@pytest.fixture(params=["hook", "watcher-task"])
async def any_gw(request, make_gateway):
    """The gateway under its own server (disconnect hook) and under plain uvicorn (watcher task)."""
    kwargs = {} if request.param == "hook" else {"http": "uvicorn"}
    async with make_gateway(**kwargs) as running:
        yield running
