"""``do_get`` tickets: the public door to their wire form for the request handlers.

The protobuf encoding lives in :mod:`flight_server._serde` (the one module that touches the
generated messages); handlers in sub-packages take these two functions from here.
"""

from __future__ import annotations

from flight_server._serde import decode_ticket, encode_ticket

__all__ = ["decode_ticket", "encode_ticket"]
