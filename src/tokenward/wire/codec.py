"""msgspec's plain JSON and MessagePack functions, bound here once for every module above
that calls them: each imports the function itself (``from ..wire.codec import json_encode
as _encode``), a module global of its own, so a call costs no attribute lookup.

A decoder or encoder made for one type (``msgspec.json.Decoder(SomeStruct)``) is not one of
these: it stays beside the code that reads that type. mock/ sits beside wire/ in the lowest
layer, so it binds its own.
"""

from __future__ import annotations

import msgspec

__all__ = ["json_decode", "json_encode", "msgpack_encode"]

json_encode = msgspec.json.encode
json_decode = msgspec.json.decode
msgpack_encode = msgspec.msgpack.encode
