"""Whether the collector is taking records, said once per change, and the words for the exit line.

A collector that is down must not go unnoticed (issue 30.9): the first failed post logs one
warning with the collector's URL and the reason; once a post gets an answer again, the send it
belongs to logs one line saying so and how many records went (the backlog, which may take
several posts). The posts in between (retries, every flush) say nothing more: an outage is two
lines, not a storm. At shutdown, records that could not be delivered are reported in one
line that says where they went and why (docs/sdk.md, "When the collector is down").
"""

from __future__ import annotations

import logging
import re
import threading
import time

import httpx

logger = logging.getLogger("promptrail")

_ERRNO = re.compile(r"^\[Errno -?\d+\]\s*")


def describe_error(exc: httpx.HTTPError, timeout: float) -> str:
    """The reason a post failed, in a few words ("connection refused", "no answer within 10 s")."""
    if isinstance(exc, httpx.ConnectTimeout):
        return f"no connection within {timeout:g} s"
    if isinstance(exc, httpx.TimeoutException):
        return f"no answer within {timeout:g} s"
    text = _ERRNO.sub("", str(exc)).strip().rstrip(".")
    if not text:
        return type(exc).__name__
    return text[:1].lower() + text[1:]


def describe_status(response: httpx.Response) -> str:
    """Why a post was refused for now: "HTTP 503 STORE_UNAVAILABLE" (the collector's code)."""
    code = ""
    try:
        document = response.json()
        error = document.get("error") if isinstance(document, dict) else None
        code = str(error.get("code") or "") if isinstance(error, dict) else ""
    except ValueError:
        pass  # not the collector talking (a proxy's page): its reason phrase says enough
    return f"HTTP {response.status_code} {code or response.reason_phrase}".strip()


def seconds(value: float) -> str:
    """A duration for a log line: "0.4 s", "12 s" ("under 0.1 s" rather than "0.0 s")."""
    if value < 0.1:
        return "under 0.1 s"
    return f"{value:.1f} s" if value < 10 else f"{value:.0f} s"


def unsent_line(count: int, fate: str, why: str, noun: str = "records") -> str:
    """The exit line: how many records (or scores), where they went ("dropped"), and why.

    ``fate`` is "dropped" while records live in memory only; a disk spool would say
    "kept on disk at <path>" here, with the same ``why``.
    """
    return f"promptrail: {count} {noun} {fate} at shutdown: {why}"


class Reachability:
    """The collector's state as the exporter's posts found it; logs each change once.

    Posts change it under the exporter's send lock; a round of sending may end (and announce
    a recovery) in another thread, hence a lock of its own, so each change is said once.
    """

    def __init__(self, url: str, noun: str = "records", spool: str | None = None) -> None:
        self.url = url
        self.noun = noun  # what the exporter sends: "records", or "scores"
        self.spool = spool  # the directory they are kept in while it is down (None: memory)
        self.down_since: float | None = None
        self.reason = ""
        # After an outage, until the send that found the collector back ends: how long the
        # outage lasted, the records sent since (the backlog may take several posts) and how
        # many of those came from the disk spool.
        self._back: tuple[float, int, int] | None = None
        self._lock = threading.Lock()

    @property
    def down(self) -> bool:
        """Whether the last post found the collector unreachable (or failing)."""
        return self.down_since is not None

    def failed(self, reason: str) -> None:
        """A post got no answer, or a 5xx: warn once, when the collector goes from up to down."""
        # The latest reason is the one the exit line gives (a refusal can become a timeout).
        self.settled(0)  # back, then down again before the round ended: both lines, in order
        with self._lock:
            self.reason = reason
            if self.down_since is not None:
                return
            self.down_since = time.monotonic()
        if self.spool is not None:
            logger.warning(
                "promptrail: collector at %s unreachable (%s); %s are kept on disk at %s and "
                "sent when it is back (counted in promptrail.stats())",
                self.url,
                reason,
                self.noun,
                self.spool,
            )
            return
        logger.warning(
            "promptrail: collector at %s unreachable (%s); %s wait in memory and are "
            "retried (counted in promptrail.stats())",
            self.url,
            reason,
            self.noun,
        )

    def answered(self, sent: int, *, replayed: bool = False) -> None:
        """A post got an answer (``sent`` records stored, ``replayed`` from the disk spool):
        the collector is up."""
        with self._lock:
            if self.down_since is not None:
                self._back = (time.monotonic() - self.down_since, 0, 0)
                self.down_since = None
            if self._back is not None:
                outage, so_far, from_disk = self._back
                self._back = (outage, so_far + sent, from_disk + (sent if replayed else 0))

    def settled(self, waiting: int) -> None:
        """A round of sending ended: after an outage, say once that the collector is back."""
        with self._lock:
            if self._back is None:
                return
            outage, sent, from_disk = self._back
            self._back = None
        # WARNING, like the line that announced the outage: whoever saw that one (Python's
        # default handler shows warnings only) must also see that it is over.
        logger.warning(
            "promptrail: collector at %s reachable again after %s; %d %s sent%s%s",
            self.url,
            seconds(outage),
            sent,
            self.noun,
            f" ({from_disk} from the spool)" if from_disk else "",
            f", {waiting} more waiting" if waiting else "",
        )

    def why_unsent(self, waited: float) -> str:
        """Why records are still here at shutdown, for :func:`unsent_line`."""
        if self.down_since is not None:
            outage = seconds(time.monotonic() - self.down_since)
            return f"collector at {self.url} unreachable ({self.reason}) for {outage}"
        return f"collector at {self.url} did not take them within the shutdown's {seconds(waited)}"
