"""What the process knows of the score names scored on traces (store/traced_score_names.py).

The list's score filters and the score analytics leave the trace half out for a name with no
trace score; asking the store costs a key read per name and page, so the answer is kept. A
kept "no" must never hide a trace score: these tests hold the rules that make it safe.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

from promptrail.collector.store.traced_score_names import TracedScoreNames


class FakeStore:
    """The store's side of the cache: which names have trace scores, and the reads made."""

    def __init__(self) -> None:
        self.traced: dict[str, set[str]] = {}
        self.reads: list[tuple[str, tuple[str, ...]]] = []

    def read(self, project: str, names: Sequence[str]) -> Iterable[str]:
        self.reads.append((project, tuple(names)))
        return [n for n in names if n in self.traced.get(project, set())]


def test_the_sole_writer_keeps_a_no_and_learns_a_yes_from_its_own_write() -> None:
    store = FakeStore()
    names = TracedScoreNames(store.read, sole_writer=True)
    assert names.of("p", ["helpful"]) == frozenset()
    assert names.of("p", ["helpful"]) == frozenset()
    assert store.reads == [("p", ("helpful",))]  # asked once

    names.note("p", ["helpful"])  # before the trace score's insert
    store.traced["p"] = {"helpful"}
    assert names.of("p", ["helpful", "thumbs"]) == {"helpful"}
    assert store.reads[1:] == [("p", ("thumbs",))]  # only the name it had not asked about
    assert names.of("q", ["helpful"]) == frozenset()  # projects apart


def test_another_writer_s_trace_score_is_seen_where_the_process_is_not_the_only_writer() -> None:
    store = FakeStore()
    names = TracedScoreNames(store.read, sole_writer=False)
    assert names.of("p", ["helpful"]) == frozenset()
    store.traced["p"] = {"helpful"}  # another collector's write: no note here
    assert names.of("p", ["helpful"]) == {"helpful"}
    assert names.of("p", ["helpful"]) == {"helpful"}
    assert len(store.reads) == 2  # a yes is kept, a no asked again


def test_a_trace_score_written_while_the_store_is_read_is_not_hidden_by_that_read() -> None:
    store = FakeStore()
    reading, noted = threading.Event(), threading.Event()

    def slow_read(project: str, names: Sequence[str]) -> Iterable[str]:
        answer = store.read(project, names)  # the store has no trace score yet
        reading.set()
        noted.wait(5)
        return answer

    names = TracedScoreNames(slow_read, sole_writer=True)
    seen: list[frozenset[str]] = []
    reader = threading.Thread(target=lambda: seen.append(names.of("p", ["helpful"])))
    reader.start()
    assert reading.wait(5)
    names.note("p", ["helpful"])  # a writer, while the read is under way
    noted.set()
    reader.join(5)
    assert seen == [{"helpful"}]
    assert names.of("p", ["helpful"]) == {"helpful"}
    assert len(store.reads) == 1
