"""Failed sign-ins counted per e-mail address (docs/security.md, "Accounts").

After ``max_failures`` failures for one address within ``window_seconds``, every attempt for it
(the right password too) is refused until the oldest of those failures is a window old. The
count lives in this collector's memory: behind several collectors each counts its own, so an
attacker gets at most ``max_failures`` guesses a minute per collector.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable

from ...errors import SignInLimited

MAX_FAILURES = 10
WINDOW_SECONDS = 60.0
# Addresses tracked at most; past it the longest-quiet one is forgotten, so a flood of
# made-up addresses cannot grow the collector's memory without bound.
MAX_TRACKED = 100_000


class LoginLimits:
    """Count failed sign-ins per e-mail address and refuse an address over its limit."""

    def __init__(
        self,
        max_failures: int = MAX_FAILURES,
        window_seconds: float = WINDOW_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._max = max_failures
        self._window = window_seconds
        self._clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def admit(self, email: str) -> None:
        """Raise 429 RATE_LIMITED while ``email`` is over its limit."""
        now = self._clock()
        with self._lock:
            failures = self._recent(email.lower(), now)
            if failures is not None and len(failures) >= self._max:
                wait = failures[0] + self._window - now
                raise SignInLimited(max(1, math.ceil(wait)))

    def failed(self, email: str) -> None:
        """Count one failed sign-in for ``email``."""
        now = self._clock()
        key = email.lower()
        with self._lock:
            failures = self._recent(key, now)
            if failures is None:
                failures = self._failures[key] = deque(maxlen=self._max)
                if len(self._failures) > MAX_TRACKED:
                    self._failures.popitem(last=False)
            failures.append(now)
            self._failures.move_to_end(key)

    def succeeded(self, email: str) -> None:
        """Forget the failures of ``email`` (its owner signed in)."""
        with self._lock:
            self._failures.pop(email.lower(), None)

    def _recent(self, key: str, now: float) -> deque[float] | None:
        failures = self._failures.get(key)
        if failures is None:
            return None
        while failures and failures[0] <= now - self._window:
            failures.popleft()
        if not failures:
            del self._failures[key]
            return None
        return failures
