"""The end of a CI job's log, kept while it streams in, bounded in memory and in reading.

A failing job's cause is near the end of its log, and a log can be hundreds of
megabytes: only the last ``max_bytes`` are kept, and reading stops after
``MAX_READ`` bytes whatever the log's size (the log is then marked cut short).
"""

from __future__ import annotations

from bot.change_state import LogTail

MAX_READ = 64 * 1024 * 1024


class TailBuffer:
    """Bytes in, the last ``max_bytes`` kept; ``partial``: bytes came before the first one."""

    def __init__(self, max_bytes: int, *, max_read: int = MAX_READ) -> None:
        if max_bytes < 1:
            raise ValueError("a log tail needs max_bytes of at least 1")
        self.max_bytes = max_bytes
        self.max_read = max_read
        self.partial = False
        self.read = 0
        self._data = bytearray()

    @classmethod
    def of(cls, data: bytes, max_bytes: int) -> TailBuffer:
        buffer = cls(max_bytes)
        buffer.add(data)
        return buffer

    def add(self, chunk: bytes) -> bool:
        """Keep the end of ``chunk``; False once ``max_read`` bytes were read (stop)."""
        self.read += len(chunk)
        self._data += chunk
        if len(self._data) > self.max_bytes:
            del self._data[: len(self._data) - self.max_bytes]
            self.partial = True
        return self.read < self.max_read

    def tail(self, log_id: str) -> LogTail:
        """The kept bytes as text; when cut, from the first whole line on."""
        data = bytes(self._data)
        cut = self.partial or self.read >= self.max_read
        if cut and b"\n" in data[:-1]:
            data = data[data.index(b"\n") + 1 :]
        text = data.decode("utf-8", errors="replace")
        return LogTail(log_id=log_id, text=text, truncated=cut)
