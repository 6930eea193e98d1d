# Local stubs: only what tokenward calls of matplotlib (the lab extra: tokenward lab's plots),
# so that mypy gives one answer whether the extra is installed or not; the signatures follow
# matplotlib's own stubs. Checked against the installed package by tests/unit/test_stubs.py.
def use(backend: str, *, force: bool = ...) -> None: ...
