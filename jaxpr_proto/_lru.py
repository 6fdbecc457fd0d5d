"""A small thread-safe LRU cache of jitted functions, keyed by content digests."""
from __future__ import annotations

import collections
import threading


class LruCache:

  def __init__(self, size: int):
    self.size = size
    self._items: collections.OrderedDict = collections.OrderedDict()
    self._lock = threading.Lock()

  def get_or_make(self, key, make):
    """The cached value of `key`, or `make()` stored under it. `make` runs
    outside the lock; if two threads race, the first value stored wins."""
    with self._lock:
      value = self._items.get(key)
      if value is not None:
        self._items.move_to_end(key)
        return value
    value = make()
    with self._lock:
      value = self._items.setdefault(key, value)
      self._items.move_to_end(key)
      while len(self._items) > self.size:
        self._items.popitem(last=False)
    return value
