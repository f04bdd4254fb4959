"""One project's chat versions as the linking holds them: filed on arrival, compiled on use.

A version is filed under its first message's role and the text before its first tag
(:func:`.matching_patterns.filing_key`, read without compiling it), and a bucket's versions are
compiled the first time a record is tried against them, or by the warm-up's background pass
(:meth:`ProjectVersions.compile_all`), whichever comes first. So reading a project's versions
costs the read only: a batch compiles the few buckets its records need (one version each in
the benchmark of docs/benchmarks.md, "Chat prompt linking"), never the whole project.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from ...store.prompts import PromptVersionRow
from .matching_patterns import (
    CompiledVersion,
    Message,
    compile_version,
    filing_key,
    is_chat,
    order_of,
)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# A compiled version per (prompt id, version); None: it cannot match (kept, not tried again).
_Compiled = dict[tuple[str, int], CompiledVersion | None]
# A version as filed: its order of recency, its key (None: it opens with a placeholder), itself.
_Entry = tuple[tuple[float, int, str], tuple[str, str] | None, PromptVersionRow]


class _Bucket:
    """The versions filed under one key, newest first, and once compiled their patterns."""

    __slots__ = ("compiled", "rows")

    def __init__(self, rows: list[PromptVersionRow]) -> None:
        self.rows = rows
        self.compiled: list[CompiledVersion] | None = None


@dataclass(frozen=True)
class _Index:
    """A project's buckets for lookup (replaced whole on each change, so a reader needs no lock
    to find its buckets; compiling one takes the project's compile lock)."""

    buckets: dict[tuple[str, str], _Bucket]
    lengths: tuple[int, ...]
    loose: _Bucket | None  # versions that open with a placeholder
    cache: _Compiled
    lock: threading.Lock

    @classmethod
    def of(cls, entries: Sequence[_Entry], cache: _Compiled, lock: threading.Lock) -> _Index:
        filed: defaultdict[tuple[str, str], list[PromptVersionRow]] = defaultdict(list)
        loose: list[PromptVersionRow] = []
        for _, key, row in sorted(entries, key=lambda entry: entry[0], reverse=True):
            if key is None:
                loose.append(row)
            else:
                filed[key].append(row)
        lengths = tuple(sorted({len(prefix) for _, prefix in filed}))
        buckets = {key: _Bucket(bucket) for key, bucket in filed.items()}
        return cls(buckets, lengths, _Bucket(loose) if loose else None, cache, lock)

    def compiled(self, bucket: _Bucket) -> list[CompiledVersion]:
        """The bucket's versions compiled (compiling them now if no one did yet)."""
        done = bucket.compiled
        if done is not None:
            return done
        with self.lock:
            if bucket.compiled is None:
                versions = []
                for row in bucket.rows:
                    key = (row.prompt_id, row.version)
                    if key not in self.cache:
                        self.cache[key] = compile_version(row)
                    version = self.cache[key]
                    if version is not None:
                        versions.append(version)
                bucket.compiled = versions
            return bucket.compiled

    def compile_all(self, stop: threading.Event) -> None:
        """Compile every bucket not compiled yet, one at a time (a batch needing a bucket
        waits for at most the one being compiled), until ``stop`` is set."""
        for bucket in [*self.buckets.values(), *([self.loose] if self.loose else [])]:
            if stop.is_set():
                return
            self.compiled(bucket)

    def held_compiled(self) -> int:
        """How many versions are compiled so far (what a batch did not have to compile)."""
        return sum(version is not None for version in self.cache.values())

    def find(self, messages: list[Message]) -> tuple[CompiledVersion, dict[str, str]] | None:
        """The newest version the messages match, with its variables' text."""
        role, items = messages[0]
        text = items[0][1] if items and items[0][0] == "text" else ""
        best: tuple[CompiledVersion, dict[str, str]] | None = None
        buckets = [self.loose] if self.loose is not None else []
        for length in self.lengths:
            if length > len(text):
                break
            bucket = self.buckets.get((role, text[:length]))
            if bucket is not None:
                buckets.append(bucket)
        for bucket in buckets:
            for version in self.compiled(bucket):  # newest first: the first match is its best
                if best is not None and version.order <= best[0].order:
                    break
                if version.fixed > len(messages):
                    continue
                values = version.match(messages)
                if values is not None:
                    best = version, values
                    break
        return best

    @property
    def empty(self) -> bool:
        """Whether no version is filed (nothing to try a record against)."""
        return not self.buckets and self.loose is None


@dataclass
class ProjectVersions:
    """One project's chat versions (by prompt id and number) and its prompts deleted since."""

    versions: dict[tuple[str, int], _Entry] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)
    polled_at: datetime = _EPOCH
    loaded_at: float = 0.0
    stale: bool = False  # a write of unknown outcome came during its load: read it again
    _cache: _Compiled = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    index: _Index = field(init=False)

    def __post_init__(self) -> None:
        self.index = _Index.of([], self._cache, self._lock)

    def add(self, rows: Sequence[PromptVersionRow], compiled: _Compiled | None = None) -> None:
        """File the chat versions among ``rows`` (those of prompts deleted since are left out),
        with those of them ``compiled`` already."""
        changed = False
        for row in rows:
            key = (row.prompt_id, row.version)
            if row.prompt_id in self.deleted or key in self.versions or not is_chat(row):
                continue
            self.versions[key] = (order_of(row), filing_key(row), row)
            if compiled is not None and key in compiled:
                self._cache[key] = compiled[key]
            changed = True
        if changed:
            self._refile()

    def drop(self, prompt_ids: Sequence[str]) -> None:
        """Forget the versions of deleted prompts."""
        self.deleted.update(prompt_ids)
        gone = [key for key in self.versions if key[0] in self.deleted]
        for key in gone:
            del self.versions[key]
            self._cache.pop(key, None)
        if gone:
            self._refile()

    def _refile(self) -> None:
        # A new index each change (its buckets compile again from the cache: no version is
        # compiled twice).
        self.index = _Index.of(list(self.versions.values()), self._cache, self._lock)
