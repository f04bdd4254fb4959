"""The registry's version cache (services/prompts/version_cache.py): a write forgets its
project's rows at once, without walking the cache, and a read begun before a write never
serves its row after it."""

from __future__ import annotations

from datetime import UTC, datetime

from promptrail.collector.services.prompts.version_cache import VersionCache
from promptrail.collector.store.prompts import PromptVersionRow


def row(version: int) -> PromptVersionRow:
    at = datetime(2026, 11, 27, tzinfo=UTC)
    return PromptVersionRow(
        prompt_id="prompt_1",
        version=version,
        version_id=f"pv_{version}",
        name="greet",
        description="",
        template="Hello {name}",
        model="gpt-4o-mini",
        parameters={},
        tags=[],
        folder="",
        note="",
        prompt_created_at=at,
        created_at=at,
    )


def test_a_kept_row_is_served_until_its_project_is_written() -> None:
    cache = VersionCache(enabled=True)
    generation, cached = cache.lookup("p", ("greet", "latest"))
    assert cached is None
    cache.keep("p", ("greet", "latest"), generation, row(1))
    cache.keep("q", ("greet", "latest"), cache.lookup("q", ("greet", "latest"))[0], row(7))
    assert cache.lookup("p", ("greet", "latest"))[1] == row(1)

    cache.invalidate("p")  # a new version of greet
    generation, cached = cache.lookup("p", ("greet", "latest"))
    assert cached is None
    assert cache.lookup("q", ("greet", "latest"))[1] == row(7)  # another project keeps its own
    cache.keep("p", ("greet", "latest"), generation, row(2))
    assert cache.lookup("p", ("greet", "latest"))[1] == row(2)


def test_a_read_that_a_write_overtook_is_not_kept() -> None:
    cache = VersionCache(enabled=True)
    generation, _ = cache.lookup("p", "k")
    cache.invalidate("p")  # lands while the read is at the store
    cache.keep("p", "k", generation, row(1))
    assert cache.lookup("p", "k")[1] is None


def test_the_cache_holds_at_most_its_bound_newest_used_last_to_go() -> None:
    cache = VersionCache(enabled=True, max_entries=3)
    for key in range(3):
        cache.keep("p", key, 0, row(key))
    assert cache.lookup("p", 0)[1] == row(0)  # used: now the newest
    cache.keep("p", 3, 0, row(3))
    assert [cache.lookup("p", key)[1] for key in range(4)] == [row(0), None, row(2), row(3)]


def test_a_disabled_cache_serves_nothing() -> None:
    cache = VersionCache(enabled=False)
    cache.keep("p", "k", cache.lookup("p", "k")[0], row(1))
    assert cache.lookup("p", "k")[1] is None
