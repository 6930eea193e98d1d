from tests.identity.conftest import backend  # noqa: F401
