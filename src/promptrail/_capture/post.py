"""Posting a batch of encoded items to the collector, with the one retry rule.

:class:`BatchPoster` owns the sender's HTTP client and its view of the collector
(``reachability.py``): it joins the items' JSON into one body for its endpoint
(``endpoints.py``), compressed with zstd once the collector's answers name it (gzip before, and
for a collector that does not), posts it, tells an outage (no answer, a 5xx) from a refusal (a 4xx:
settled, counted as dropped) and retries by backoff or the collector's ``Retry-After``
within the caller's deadline. What each post came to is told back through ``settle``.
"""

from __future__ import annotations

import logging
import threading
import time
import zlib

import httpx
import zstandard

from .._retry import RetryPolicy, retry_after
from .endpoints import Endpoint
from .reachability import Reachability, describe_error, describe_status
from .spool import Settle
from .stats import CaptureStats

logger = logging.getLogger("promptrail")

# A 500 is the collector's own failure (bad input is a 4xx): worth another try.
_RETRYABLE = {429, 500, 502, 503, 504}
# Backoff from 1 s up to 30 s, and a Retry-After honoured up to 30 s, within the export's
# deadline (a retry that would end past it is left to the next export).
_RETRY = RetryPolicy(base=1.0, ceiling=30.0, retry_after_max=30.0)
# zlib.compress(data, level, wbits): wbits 31 is a gzip member (16 + a 2**15 window).
_gzip = zlib.compress
_GZIP = {"Content-Encoding": "gzip", "Content-Type": "application/json"}
_ZSTD = {"Content-Encoding": "zstd", "Content-Type": "application/json"}
# A zstd compressor is not safe to share between threads (a flush from the application's
# thread may post beside the shipper's).
_compressors = threading.local()


def _zstd(body: bytes) -> bytes:
    compressor = getattr(_compressors, "zstd", None)
    if compressor is None:
        # Level 3, zstd's default: about gzip level 1's ratio for a fifth of its CPU. The
        # frame states its size, so the collector sizes its buffer once.
        compressor = _compressors.zstd = zstandard.ZstdCompressor(level=3)
    return compressor.compress(body)


def _names_zstd(response: httpx.Response) -> bool:
    """Whether the collector's answer lists zstd among the codings it takes (RFC 7694)."""
    accepted = response.headers.get("accept-encoding", "")
    return "zstd" in (coding.strip().lower() for coding in accepted.split(","))


def _gzipped(body: bytes) -> bytes:
    # Level 1: records repeat themselves, so it still shrinks a batch about tenfold for a
    # third of level 5's CPU. One zlib call for the whole gzip member (header, deflate, CRC
    # and length), as gzip.compress(mtime=0) makes it: gzip.compress's default takes a
    # separate zlib.crc32 and joins three pieces. Each zlib call over a few KB releases the
    # GIL, and each release costs the shipper a wait to get it back while the application
    # runs (src/promptrail/DESIGN.md, "Shipping beside the calls").
    return _gzip(body, 1, 31)


# _post's answer when a zstd body must go again as gzip (a sentinel float, never a wait).
_GZIP_AGAIN = -1.0


class BatchPoster:
    """Post batches of one endpoint's encoded items; retry what is worth retrying."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        endpoint: Endpoint,
        *,
        timeout: float,
        transport: httpx.BaseTransport | None,
        stats: CaptureStats,
        stopping: threading.Event,
        spool_place: str | None,
    ) -> None:
        self._base_url = base_url
        self._api_key = api_key
        self._endpoint = endpoint
        self._timeout = timeout
        self._transport = transport
        self._stats = stats
        self._stopping = stopping
        self.restart(spool_place)

    def restart(self, spool_place: str | None) -> None:
        """A new client and a fresh view of the collector (at start, and in a forked child:
        the parent's connections are the parent's); ``spool_place``: where what cannot be sent
        waits (None: in memory), as the outage's line says."""
        self.reach = Reachability(self._base_url, self._endpoint.kind, spool_place)
        # gzip until the collector's answers name zstd: one that predates it would refuse a
        # zstd body as bad input.
        self.zstd = False
        headers = {"User-Agent": "promptrail-python"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        self.client = httpx.Client(
            base_url=self._base_url,
            headers=headers,
            timeout=self._timeout,
            transport=self._transport,
        )

    def post(
        self,
        batch: list[bytes],
        deadline: float,
        request_timeout: float | None,
        settle: Settle,
        *,
        patient: bool = True,
        replayed: bool = False,
    ) -> bool:
        """Post one batch; True once it is settled (stored, or refused for good).

        Not ``patient``: an outage ends the attempt at once (the records go to, or stay in,
        the disk spool, whose replay is the retry); a 429 is still waited for. ``replayed``:
        the batch comes from the spool (the recovery line counts those apart).
        """
        # The records are JSON already: the body is one join.
        plain = b'{"' + self._endpoint.body_key + b'":[' + b",".join(batch) + b"]}"
        zstd = self.zstd
        body = _zstd(plain) if zstd else _gzipped(plain)
        attempt = 0
        while True:
            wait = self._post(len(batch), body, request_timeout, settle, replayed, zstd)
            if wait == _GZIP_AGAIN:
                zstd, body = False, _gzipped(plain)
                continue
            if wait is None:
                return True
            if not patient and self.reach.down:
                self._stats.add("export_retries_deferred")
                return False
            attempt += 1
            backoff = _RETRY.pause(wait if wait > 0 else None, attempt)
            if time.monotonic() + backoff > deadline or self._stopping.is_set():
                self._stats.add("export_retries_deferred")
                return False
            self._stats.add("export_retries")
            self._stopping.wait(backoff)

    def _post(
        self,
        count: int,
        body: bytes,
        timeout: float | None,
        settle: Settle,
        replayed: bool,
        zstd: bool,
    ) -> float | None:
        """Send once; None when settled, else seconds to wait (0: use backoff), or
        ``_GZIP_AGAIN`` when a zstd body was refused as such."""
        timeout = self._timeout if timeout is None else timeout
        noun = self._endpoint.kind
        try:
            response = self.client.post(
                self._endpoint.path,
                content=body,
                headers=_ZSTD if zstd else _GZIP,
                timeout=timeout,
            )
        except httpx.HTTPError as exc:
            logger.debug("promptrail: collector unreachable: %s", exc)
            self.reach.failed(describe_error(exc, timeout))
            return 0.0
        self.zstd = _names_zstd(response)
        if zstd and not self.zstd and response.status_code in (400, 415):
            # A collector replaced by one that takes no zstd: the same batch, gzipped, now.
            return _GZIP_AGAIN
        if response.status_code in _RETRYABLE:
            # A 429 is the collector answering (a project over its limit), not an outage.
            if response.status_code != 429:
                self.reach.failed(describe_status(response))
            return retry_after(response) or 0.0
        if response.status_code == 201:
            data = response.json().get("data", {})
            rejected = data.get("rejected", [])
            exported = count - len(rejected)
            settle(count, exported, "rejected")
            self.reach.answered(exported, replayed=replayed)
            if rejected:
                logger.warning(
                    "promptrail: collector rejected %d %s: %s", len(rejected), noun, rejected[0]
                )
            return None
        reason = {400: "rejected", 401: "unauthorized", 413: "too_large"}.get(
            response.status_code, "http_error"
        )
        settle(count, 0, reason)
        self.reach.answered(0)
        logger.warning(
            "promptrail: collector refused %d %s (%s): %s",
            count,
            noun,
            response.status_code,
            response.text[:300],
        )
        return None
