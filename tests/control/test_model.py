"""A control as the admin API, the CLI's --json and the status page show it (``Control.public``):
every field of the control, named and valued as the struct has it, plus its scope and whether
it is in force; and the parameters an action accepts, checked before they are stored."""

from __future__ import annotations

import msgspec
import pytest

from tokenward.control.model import Control, ControlError, PublicControl
from tokenward.control.service import _params


def test_public_has_every_field_of_the_control_and_no_other():
    assert list(PublicControl.__annotations__) == [*Control.__struct_fields__, "scope", "active"]


def test_public_is_the_control_as_it_is_plus_scope_and_whether_in_force():
    control = Control(id=7, kind="restrict", tenant="acme", key_id="k1", params={"max_output_tokens": 64,
                      "no_tools": True}, reason="spam", rule="burst", signals={"rate": 3.5}, automatic=True,
                      by="tokenward:abuse", created_at=100.0, until=200.0)
    public = control.public(150.0)
    assert public == {**msgspec.structs.asdict(control), "scope": "key:k1", "active": True}
    assert control.public(250.0)["active"] is False
    # what the admin API sends: the same JSON the struct's fields give, the two extras after
    assert msgspec.json.decode(msgspec.json.encode(public)) == public


@pytest.mark.parametrize(("kind", "given", "param"), [
    ("reduce_concurrency", {"concurrency": 0}, "concurrency"),
    ("reduce_concurrency", {"concurrency": True}, "concurrency"),   # a bool is not a count
    ("reduce_concurrency", {"concurrency": "2"}, "concurrency"),
    ("restrict", {"max_output_tokens": -1}, "max_output_tokens"),
    ("restrict", {"no_tools": 1}, "no_tools"),
    ("suspend", {"concurrency": 2}, "concurrency"),               # not a parameter of this action
])
def test_bad_action_parameters_are_refused_naming_the_parameter(kind, given, param):
    with pytest.raises(ControlError) as caught:
        _params(kind, given)
    assert caught.value.param == param


def test_action_parameters_get_their_defaults():
    assert _params("reduce_concurrency", None) == {"concurrency": 1}
    assert _params("restrict", {"no_tools": False}) == {"max_output_tokens": 256, "no_tools": False}
    assert _params("suspend", {}) is None
