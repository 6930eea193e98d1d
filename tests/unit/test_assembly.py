"""The gateway's assembly (assemble/gateway.py): every builder is handed exactly what its
parameters name, with the types ``Available`` declares; a gateway built from any subset of
the stages that tests and benches use either answers requests or refuses to start, naming
the context slot that is missing and the stage that writes it; the assembled parts cannot
be reassigned."""

from __future__ import annotations

import dataclasses
import inspect
import types
import typing

import httpx
import pytest

from tests.support import ROOT, chat, mock_backend, start_app, stop_app
from tokenward.app import Gateway
from tokenward.assemble import providers
from tokenward.assemble.gateway import AssemblyError, Parts, available_types, check_needs
from tokenward.config.loader import parse_config
from tokenward.http.serving import StartupFailed
from tokenward.pipeline.context import RequestContext
from tokenward.stages import order


def _optional(kind: object) -> object:
    """``X | None`` -> X (a builder may take an optional part as required, or the reverse)."""
    args = typing.get_args(kind)
    if isinstance(kind, types.UnionType) or typing.get_origin(kind) is typing.Union:
        rest = tuple(a for a in args if a is not type(None))
        return rest[0] if len(rest) == 1 else kind
    return kind


def _builders() -> list[tuple[str, object]]:
    return [(f"stage {slot}", build) for slot, build in order.STAGES] + \
        [(f"provider {name}", build) for name, build in providers.PROVIDERS.items()]


@pytest.mark.parametrize(("who", "build"), _builders(), ids=[who for who, _ in _builders()])
def test_every_parameter_names_an_available_part_of_its_type(who, build):
    if not isinstance(build, types.FunctionType):
        pytest.skip("a builder compiled by mypyc keeps no annotations (tokenward/compiled.py): "
                    "the Python tree checks them")
    available = available_types()
    hints = typing.get_type_hints(build)
    for name in inspect.signature(build).parameters:
        assert name in available, f"{who} takes {name!r}, which Available does not declare"
        assert _optional(hints[name]) == _optional(available[name]), \
            f"{who} takes {name}: {hints[name]}, Available declares {available[name]}"


def test_every_provider_is_declared_available():
    assert set(providers.PROVIDERS) <= set(available_types())


def test_the_slot_writers_are_the_stages_that_write_them():
    """order.SLOT_WRITERS (named in the refusal) agrees with the stage classes' own ``writes``."""
    from tokenward.stages import (s02_edge, s03_identity, s06_entitlement, s08_validation, s09_work, s10_admission,
                                  s12_screening, s14_cache)

    classes = [s02_edge.EdgeStage, s03_identity.IdentityStage, s06_entitlement.EntitlementStage,
               s08_validation.ValidationStage, s09_work.WorkStage, s10_admission.AdmissionStage,
               s12_screening.ScreeningStage, s14_cache.CacheStage]
    by_name = {cls.name: cls for cls in classes}
    # a context's slots, read off one (a compiled RequestContext has no __slots__ to list)
    context = RequestContext("r", "POST", "/", [], None, None, 0)   # type: ignore[arg-type]
    for slot, writer in order.SLOT_WRITERS.items():
        assert slot in by_name[writer].writes, (slot, writer)
    for cls in classes:
        assert set(cls.needs) <= set(order.SLOT_WRITERS), cls
        assert all(hasattr(context, slot) for slot in cls.needs), cls


class _Stub:
    holds = False
    on_routes = None

    def __init__(self, name: str, needs: set[str], writes: set[str]) -> None:
        self.name = name
        self.needs = frozenset(needs)
        self.writes = frozenset(writes)


def test_an_order_that_leaves_a_need_unwritten_is_refused_naming_both():
    check_needs([_Stub("edge", set(), {"route"}), _Stub("validation", {"route"}, {"request"})])
    with pytest.raises(AssemblyError) as refused:
        check_needs([_Stub("edge", set(), {"route"}), _Stub("work", {"request"}, {"work"})])
    assert "stage 'work' needs ctx.request, written by the stage 'validation', which this gateway does not run " \
        "before it" in str(refused.value)
    with pytest.raises(AssemblyError) as refused:
        check_needs([_Stub("identity", set(), {"principal"})])
    assert "the forward step needs ctx.route, written by the stage 'edge'" in str(refused.value)


def _config_text(tmp_path, mock_url: str) -> str:
    """The README's config, with a cache section and a model alias: every stage is built."""
    text = (ROOT / "examples" / "gateway.yaml").read_text()
    text = text.replace("http://127.0.0.1:9100/v1", mock_url)
    text = text.replace("sqlite:///tokenward-keys.db", f"sqlite:///{tmp_path}/keys.db")
    text = text.replace("  decisions: stdout", "  decisions: off")
    text = text.replace("    upstream_model: small-chat\n", "    upstream_model: small-chat\n    aliases: [small]\n", 1)
    return text + "\ncache:\n  store: memory\n"


NAMES = [slot for slot, _ in order.STAGES]
# what benches build (bench/inproc.py --stages, bench/overhead.py --stages: the stages added
# one at a time in their order) and what tests build (every stage, or one left out or replaced)
SUBSETS = [frozenset(NAMES[:n]) for n in range(1, len(NAMES) + 1)] + \
    [frozenset(NAMES) - {name} for name in NAMES] + [frozenset({"edge"}), frozenset({"edge", "identity"})]


async def _assert_works_or_refuses(tmp_path, mock, names: frozenset[str]) -> str:
    config = parse_config(_config_text(tmp_path, mock.url), environ={})
    gateway = Gateway(config, stages=order.only(set(names)))
    try:
        server, port = await start_app(gateway)
    except StartupFailed as exc:   # the server's lifespan carries the assembly's message
        message = str(exc)
        assert message.startswith("stages: ") and "needs ctx." in message and ", written by the stage '" in message, \
            message
        return "refused"
    try:
        headers = {}
        if "identity" in names:
            key, _ = await gateway.parts.keys.create("acme")
            headers = {"authorization": f"Bearer {key}"}
        before = await mock.requests()
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            reply = await client.post("/v1/chat/completions", json=chat(), headers=headers)
        assert reply.status_code == 200, (sorted(names), reply.text)
        assert await mock.requests() == before + 1
        return "works"
    finally:
        await stop_app(server)


async def test_every_subset_tests_and_benches_build_works_or_is_refused_at_start(tmp_path):
    outcomes = {}
    async with mock_backend() as mock:
        for i, names in enumerate(dict.fromkeys(SUBSETS)):
            run = tmp_path / str(i)
            run.mkdir()
            outcomes[names] = await _assert_works_or_refuses(run, mock, names)
    assert outcomes[frozenset(NAMES)] == "works"
    assert outcomes[frozenset({"edge"})] == "works"
    assert outcomes[frozenset(NAMES) - {"identity"}] == "refused"     # entitlement needs a principal
    assert outcomes[frozenset(NAMES) - {"validation"}] == "refused"   # work needs the request
    assert outcomes[frozenset(NAMES) - {"screening"}] == "refused"    # transform needs the screening


async def test_the_assembled_parts_cannot_be_reassigned(tmp_path):
    async with mock_backend() as mock:
        gateway = Gateway(parse_config(_config_text(tmp_path, mock.url), environ={}))
        server, _ = await start_app(gateway)
        try:
            parts = gateway.parts
            assert isinstance(parts, Parts)
            for field in dataclasses.fields(Parts):
                with pytest.raises(dataclasses.FrozenInstanceError):
                    setattr(parts, field.name, getattr(parts, field.name))
            with pytest.raises((AttributeError, TypeError)):
                parts.brand_new = 1   # slots: no new attribute either
            assert isinstance(parts.stages, tuple)
            assert [stage.name for stage in parts.stages] == [name for name in NAMES
                                                              if name in parts.stage_names]
        finally:
            await stop_app(server)


async def test_a_builder_that_asks_for_an_unknown_part_is_refused_by_name(tmp_path):
    def build_odd(services):   # the old style: the whole services object
        raise AssertionError("never called")

    async with mock_backend() as mock:
        gateway = Gateway(parse_config(_config_text(tmp_path, mock.url), environ={}),
                          stages=order.replaced("screening", build_odd))
        with pytest.raises(StartupFailed, match="stage 'screening' is built from 'services', which nothing"):
            await start_app(gateway)

