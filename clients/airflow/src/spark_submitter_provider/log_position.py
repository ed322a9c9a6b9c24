"""How far into a driver's log a task has shown it: the pure part of following the log.

The provider reads the driver's log with `timestamps=true`, so every line starts with the time
the container runtime wrote it (RFC 3339, nine fraction digits, the kubelet's format). A
position is the timestamp of the last line shown and how many lines with exactly that timestamp
were shown (a runtime can stamp several lines with the same time). It is small enough to keep
in the task state store after every batch, and it is exact: resuming from it skips what was
shown and nothing else, whatever the clocks of the worker and the cluster say. The clock only
chooses `since_seconds` (how far back the submitter is asked to start), with a margin, so that
a resumed read does not go through the whole log again.

Nothing here does I/O or reads a clock: `now_ns` is passed in.
"""

from __future__ import annotations

import calendar
import math
import re
from dataclasses import dataclass
from typing import Any

#: A line longer than this is cut (its rest dropped, its length said): memory stays bounded by
#: the line, never the log. 16 KiB is where container runtimes cut a line into partial records.
MAX_LINE_BYTES = 16 * 1024

#: Seconds added to `since_seconds` when resuming, for a worker clock behind the cluster's.
CLOCK_MARGIN_S = 60

_TIMESTAMP = re.compile(
    rb"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)"
)


def timestamp_ns(text: bytes) -> int | None:
    """Nanoseconds since the epoch of an RFC 3339 timestamp, or None if `text` is not one."""
    m = _TIMESTAMP.fullmatch(text)
    if m is None:
        return None
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    try:
        seconds = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0))
    except (ValueError, OverflowError):
        return None
    zone = m.group(8)
    if zone != b"Z":
        sign = 1 if zone[:1] == b"+" else -1
        seconds -= sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    fraction = (m.group(7) or b"").ljust(9, b"0")
    return seconds * 1_000_000_000 + int(fraction)


@dataclass(frozen=True)
class LogLine:
    """One line of the log: its timestamp (None when it has none) and its text, without the
    newline and without the timestamp."""

    at: bytes | None
    at_ns: int | None
    text: str


def parse_line(raw: bytes) -> LogLine:
    """A line as the submitter sends it with `timestamps=true` (`<timestamp> <text>`)."""
    stamp, sep, rest = raw.partition(b" ")
    at_ns = timestamp_ns(stamp) if sep else None
    if at_ns is None:
        return LogLine(None, None, raw.decode("utf-8", errors="replace"))
    return LogLine(stamp, at_ns, rest.decode("utf-8", errors="replace"))


@dataclass(frozen=True)
class LogPosition:
    """The last line shown: its timestamp as written (`at`) and how many lines carrying exactly
    that timestamp were shown (`lines`)."""

    at: str
    lines: int

    @property
    def at_ns(self) -> int:
        value = timestamp_ns(self.at.encode())
        if value is None:
            raise ValueError(f"not an RFC 3339 timestamp: {self.at!r}")
        return value

    def to_store(self) -> dict[str, Any]:
        return {"at": self.at, "lines": self.lines}

    @classmethod
    def from_store(cls, value: Any) -> LogPosition | None:
        """The stored position, or None (nothing shown yet, or a value this version cannot read)."""
        if not isinstance(value, dict):
            return None
        at, lines = value.get("at"), value.get("lines")
        if not isinstance(at, str) or not isinstance(lines, int) or lines < 1:
            return None
        if timestamp_ns(at.encode()) is None:
            return None
        return cls(at, lines)


class LogCursor:
    """Decides which lines of a (re)read log are new, and keeps the position of the last one.

    Lines older than the position were shown; of the lines stamped exactly at the position, the
    first `lines` were shown. A line without a timestamp (none should come with
    `timestamps=true`) is shown and leaves the position where it is.
    """

    def __init__(self, position: LogPosition | None = None) -> None:
        self._position = position
        self._at_ns = position.at_ns if position else None
        # Lines at the position's timestamp still to skip in this read.
        self._skip = position.lines if position else 0

    @property
    def position(self) -> LogPosition | None:
        return self._position

    def restart(self) -> None:
        """A new read of the log begins: lines at the position's timestamp are skipped again."""
        self._skip = self._position.lines if self._position else 0

    def admit(self, line: LogLine) -> bool:
        """Whether `line` is new; if so the position moves past it."""
        if line.at is None or line.at_ns is None:
            return True
        if self._at_ns is not None and line.at_ns < self._at_ns:
            return False
        if self._at_ns is not None and line.at_ns == self._at_ns and self._position is not None:
            if self._skip > 0:
                self._skip -= 1
                return False
            self._position = LogPosition(self._position.at, self._position.lines + 1)
            return True
        self._position = LogPosition(line.at.decode(), 1)
        self._at_ns, self._skip = line.at_ns, 0
        return True


def since_seconds(position: LogPosition | None, now_ns: int, margin_s: int = CLOCK_MARGIN_S) -> int | None:
    """`since_seconds` for a read that resumes after `position` (None: read from the start).

    Measured with this machine's clock against the cluster's timestamp, plus `margin_s`: a
    worker clock up to that far behind the cluster's still gets every line after the position
    (the cursor drops the older ones that come with it).
    """
    if position is None:
        return None
    elapsed_s = max(now_ns - position.at_ns, 0) / 1e9
    return max(math.ceil(elapsed_s) + margin_s, 1)


class LineSplitter:
    """Bytes as they arrive → complete lines, holding at most `max_line` bytes of a line.

    A line longer than that is cut: its first `max_line` bytes are kept, the rest is counted
    and dropped, and the kept part ends with a note of how much was dropped.
    """

    def __init__(self, max_line: int = MAX_LINE_BYTES) -> None:
        self._max = max_line
        self._buffer = bytearray()
        self._dropped = 0

    def feed(self, chunk: bytes) -> list[bytes]:
        lines: list[bytes] = []
        start = 0
        while start < len(chunk):
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            self._take(piece)
            if end < 0:
                break
            lines.append(self._line())
            start = end + 1
        return lines

    def flush(self) -> list[bytes]:
        """The last line, when the log did not end with a newline."""
        if not self._buffer and not self._dropped:
            return []
        return [self._line()]

    def _take(self, piece: bytes) -> None:
        room = self._max - len(self._buffer)
        self._buffer += piece[:room]
        self._dropped += max(len(piece) - room, 0)

    def _line(self) -> bytes:
        line = bytes(self._buffer)
        if self._dropped:
            line += f" [line cut: {self._dropped} more bytes]".encode()
        self._buffer.clear()
        self._dropped = 0
        return line
