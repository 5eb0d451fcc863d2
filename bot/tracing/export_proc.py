"""The process that sends webhook deliveries' spans (``bot.tracing.deliveries``).

    python -m bot.tracing.export_proc    (started by the bot, fed through its stdin)

It reads length-prefixed ``marshal`` frames from its parent: first where to send (the OTLP
endpoint, headers, timeout, compression, the resource's attributes), then batches of
recorded spans, whose ids it derives and samples (``bot.tracing.ids``) and which it writes
as OTLP protobuf (``bot.tracing.otlp``) and POSTs, off the
parent's GIL. At the end of its input it has sent what it read, and ends.
"""

from __future__ import annotations

import marshal
import struct
import sys
from typing import IO, Any

from bot.tracing.otlp import Encoder, Poster


def read(stream: IO[bytes]) -> Any:
    """The next frame, or None at the end of the input."""
    head = stream.read(4)
    if len(head) < 4:
        return None
    size = struct.unpack("!I", head)[0]
    data = stream.read(size)
    if len(data) < size:  # the parent ended in the middle of a frame
        return None
    return marshal.loads(data)  # noqa: S302 - frames from the parent process, over its pipe


def main(stream: IO[bytes]) -> None:
    config = read(stream)
    if config is None:
        return
    encoder = Encoder(config["resource"], ratio=config.get("ratio", 1.0))
    poster = Poster(config["endpoint"], config["headers"], timeout=config["timeout"],
                    compression=config["compression"])  # fmt: skip
    try:
        while (batch := read(stream)) is not None:
            spans = encoder.spans(batch)
            if spans:  # none when none was sampled
                poster.post(encoder.request(spans))
    finally:
        poster.close()


if __name__ == "__main__":
    main(sys.stdin.buffer)
