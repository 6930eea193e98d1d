from tests.fixtures.redis_server import redis_server, redis_server_session  # noqa: F401
