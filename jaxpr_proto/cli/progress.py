"""The progress bar the commands draw on stderr, and when they draw it."""
from __future__ import annotations

import contextlib
import os
import sys
import time

from jaxpr_proto.cli.exits import PROG

# Files at least this large show a progress bar (when stderr is a terminal).
PROGRESS_MIN_BYTES = 1 << 20


class Progress:
  """A one-line progress bar on a terminal; silent on anything else.

  `stage(name)` moves on to the next of `total` stages; `update(done, of)`
  reports progress within the current stage.
  """

  def __init__(self, total: int, stream=None, *, enabled: bool | None = None,
               width: int = 30):
    self.stream = stream if stream is not None else sys.stderr
    if enabled is None:
      enabled = _isatty(self.stream)
    self.enabled = enabled
    self.total = max(total, 1)
    self.width = width
    self.done = 0
    self.name = ""
    self._last = 0.0
    self._shown = False

  def stage(self, name: str) -> None:
    if self.name:
      self.done += 1
    self.name = name
    self._draw(0.0, force=True)

  def update(self, done: int, of: int) -> None:
    self._draw(done / of if of else 1.0)

  def _draw(self, frac: float, force: bool = False) -> None:
    if not self.enabled:
      return
    now = time.monotonic()
    if not force and now - self._last < 0.1:  # redraw at most 10 times a second
      return
    self._last = now
    overall = min((self.done + frac) / self.total, 1.0)
    n = int(overall * self.width)
    bar = "#" * n + "-" * (self.width - n)
    self.stream.write(f"\r{PROG}: [{bar}] {overall * 100:3.0f}% {self.name}\x1b[K")
    self.stream.flush()
    self._shown = True

  def close(self) -> None:
    if self.enabled and self._shown:
      self.stream.write("\r\x1b[K")
      self.stream.flush()
      self._shown = False

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()


def _isatty(stream) -> bool:
  try:
    return bool(stream.isatty())
  except (AttributeError, ValueError):  # no isatty, or a closed stream
    return False


def progress_for(paths, stages: int) -> Progress:
  """A bar of `stages` stages, shown only when stderr is a terminal and the
  files are large enough to take a while."""
  size = 0
  for p in paths:
    with contextlib.suppress(OSError):  # a missing file fails later, with its own message
      size += os.path.getsize(p)
  return Progress(stages, enabled=_isatty(sys.stderr) and size >= PROGRESS_MIN_BYTES)
