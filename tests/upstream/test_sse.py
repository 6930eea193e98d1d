"""The SSE splitter: whole events out, however the bytes were cut."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tokenward.wire.sse import SseSplitter

EVENTS = [b'data: {"a": 1}\n\n', b": ping\n\n", b'data: {"b":\ndata: 2}\n\n', b"event: x\r\ndata: y\r\n\r\n",
          b"data: [DONE]\n\n"]


def split_all(stream: bytes, cuts: list[int]) -> tuple[list[bytes], bytes]:
    splitter = SseSplitter()
    out = []
    last = 0
    for cut in sorted(set(cuts)) + [len(stream)]:
        out += [e.raw for e in splitter.feed(stream[last:cut])]
        last = cut
    return out, splitter.finish()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(EVENTS), min_size=1, max_size=8), st.lists(st.integers(0, 400), max_size=10),
       st.binary(max_size=5).filter(lambda b: b"\n" not in b and b"\r" not in b))
def test_any_cutting_gives_the_same_events(events, cuts, tail):
    stream = b"".join(events) + tail
    whole, rest = split_all(stream, [])
    cut, cut_rest = split_all(stream, [c for c in cuts if c < len(stream)])
    assert cut == whole == events
    assert cut_rest == rest == tail


def test_data_of_each_shape():
    splitter = SseSplitter()
    got = splitter.feed(b"".join(EVENTS))
    assert [e.data for e in got] == [b'{"a": 1}', None, b'{"b":\n2}', b"y", b"[DONE]"]
    assert [e.done for e in got] == [False, False, False, False, True]
