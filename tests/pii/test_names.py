"""The name cues that back up spaCy's small model (pii/names.py): a pure function over
the merged spans, so tested without the model."""

from __future__ import annotations

import pytest

from tokenward.pii.names import recover_names


def names(text: str, spans=()) -> list[str]:
    return [text[s:e] for s, e, kind in recover_names(text, list(spans)) if kind == "PERSON"]


@pytest.mark.parametrize("text,name", [
    ("My name is Svenja Rogge", "Svenja Rogge"),
    ("Sometimes people call me Christine", "Christine"),
    ("Hi Wilfredo, thanks for the call", "Wilfredo"),
    ("Please change it to Catalina Sedano", "Catalina Sedano"),
    ("Bot: What's the name on the account? User: Lupe Cuenca", "Lupe Cuenca"),
    ("Rogge began writing as a teenager.", "Rogge"),
    ("I'm so jealous! said Kathleen to him", "Kathleen"),
    ("Okafor, can you send me the contract again?", "Okafor"),
    ("The mix was done by producer Ilse Brandt in two days.", "Ilse Brandt"),
    ("She gave Tomasz the keys before leaving.", "Tomasz"),
    ("Then I met Aiyana at the station.", "Aiyana"),
])
def test_cues(text: str, name: str) -> None:
    assert names(text) == [name]


@pytest.mark.parametrize("text", [
    "Thanks, that helps a lot.",
    "Paris, the capital, is busy in June.",
    "The producer said the mix is done.",
])
def test_no_name_where_none_is(text: str) -> None:
    assert names(text) == []


def test_a_place_after_a_cue_becomes_a_person() -> None:
    text = "please change it to Catalina Sedano"
    start = text.index("Catalina")
    assert recover_names(text, [(start, len(text), "LOCATION")]) == [(start, len(text), "PERSON")]


def test_a_validated_span_is_left_alone() -> None:
    text = "Contact: Ana Lima"
    assert recover_names(text, [(9, 17, "EMAIL")]) == [(9, 17, "EMAIL")]


def test_lists_follow_the_people_in_them() -> None:
    text = "They had 6: Yvonne, Jason, Jill and Chelsea."
    spans = [(text.index("Jason"), text.index("Jason") + 5, "PERSON"), (text.index("Jill"), text.index("Jill") + 4, "PERSON")]
    assert names(text, spans) == ["Yvonne", "Jason", "Jill", "Chelsea"]
    assert names("We ship to Paris, Lyon and Nice.") == []    # no person in the list: nothing


@pytest.mark.parametrize("text", [
    "Meeting moved from 10:30 to 11:15.",
    "Hi there, the build is green.",
    "This is The End of the report.",
    "Thanks All for the review.",
    "Windows crashed again after the update.",
])
def test_not_names(text: str) -> None:
    assert names(text) == []
