"""One real gateway (uvicorn on a port-0 socket) and one mock backend per test module.

Module-scoped to keep the area fast: start-up (key store, tiktoken vocabulary) happens
once per module, and each test compares the backend's request counter before and after.
"""

from __future__ import annotations

import pytest_asyncio

from tests.support import gateway_in_process, mock_backend
from tests.validation.harness import Client, create_keys, lab_config


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("validation")
    async with mock_backend() as backend:
        config = lab_config(backend.url, tmp_path)
        async with gateway_in_process(config, tmp_path / "decisions.jsonl") as running:
            keys = await create_keys(running.gateway)
            api = Client(running, backend, keys)
            try:
                yield api
            finally:
                await api.aclose()
