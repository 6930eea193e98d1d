from tests.fixtures.redis_server import redis_server, redis_server_session  # noqa: F401
from tests.identity.conftest import backend, backend_process  # noqa: F401
