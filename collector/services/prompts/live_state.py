"""One project's live-id index: its live prompts, their newest versions, labels and held rows.

:class:`IndexedProject` is the state :class:`~.live_ids.LiveIdIndex` keeps per project, and
:class:`IndexedPrompt` one live prompt in it. Each change here is idempotent in the way the
index's exactness needs (collector/services/prompts/DESIGN.md, "Live-id index"): a claim
keeps the newest generation, a version only raises the newest number, a label move older
than one applied changes nothing; so a write applied twice (by the load's read and its
replay, or by two polls) changes nothing. Locking, loading, eviction and polling are the
index's (:mod:`.live_ids`); nothing here locks.
"""

from __future__ import annotations

from datetime import UTC, datetime

from ...store.prompts import LiveState, PromptRef, PromptVersionRow

# Rows of the newest versions of a prompt held besides the labeled ones: a label is usually
# put on one of the last few versions written (create, new versions, then a label on one),
# and a move to a held version reads nothing from the store. On the embedded store such a
# read waits for the registry journal's queued writes first (~0.1-0.5 s under 8 writers).
_RECENT_ROWS = 4


class IndexedPrompt:
    """One live prompt: its newest stored version, where its labels point, and the rows of
    those versions (the newest few and each labeled one) as far as they are known."""

    __slots__ = ("labels", "moved", "newest", "rows")

    def __init__(self, newest: int) -> None:
        self.newest = newest
        self.labels: dict[str, int] | None = None
        # When each label's last applied move was stored (``updated_at``), where known: a
        # polled index skips an older move a lagging replica still answers with.
        self.moved: dict[str, datetime] | None = None
        self.rows: dict[int, PromptVersionRow] = {}

    def keep(self, row: PromptVersionRow | None) -> None:
        """Hold ``row`` if a default read can ask for it, or a label move likely will (one of
        the few newest versions); drop the others."""
        if row is not None:
            self.rows[row.version] = row
        recent = range(self.newest - _RECENT_ROWS + 1, self.newest + 1)
        wanted = {*recent, *(self.labels or {}).values()}
        for version in [v for v in self.rows if v not in wanted]:
            del self.rows[version]

    def pick(self, number: int | None, label: str | None) -> int | None:
        """The version a read asks for, or None if the prompt has no such version or label."""
        if label is not None:
            return self.labels.get(label) if self.labels else None
        if number is not None:
            return number if 1 <= number <= self.newest else None
        return self.newest


class IndexedProject:
    """The live prompts of one project: name -> id, and id -> versions and labels."""

    def __init__(self) -> None:
        self.by_name: dict[str, str] = {}
        self.prompts: dict[str, IndexedPrompt] = {}
        # The highest generation each name ever claimed, deleted ones too.
        self.generations: dict[str, int] = {}
        # Prompts a polled index saw deleted: a claim row of one, read again from a replica
        # that has not got the delete yet, must not bring it back.
        self.dead: set[str] = set()
        # When the store was last read for this project (its load, then each poll): a poll
        # reads what was stored from a little before then.
        self.polled_at = datetime.now(UTC)

    @classmethod
    def loaded(cls, state: LiveState, started: datetime) -> IndexedProject | None:
        """The index of a project the store read at ``started``, or None when the state is not
        one to trust (a claim without a version)."""
        built = cls()
        built.polled_at = started
        built.generations.update(state.generations)
        for live in state.prompts:
            built.created(live.name, live.prompt_id, live.newest)
            for label, version in live.labels:
                built.labeled(live.prompt_id, label, version)
            for row in live.rows:
                built.prompts[live.prompt_id].keep(row)
        if any(live.newest < 1 for live in built.prompts.values()):
            return None
        return built

    def lookup(self, ref: PromptRef) -> str | None:
        if ref.by_id:
            return ref.value if ref.value in self.prompts else None
        return self.by_name.get(ref.value)

    def locate(
        self, ref: PromptRef, number: int | None, label: str | None
    ) -> tuple[str | None, int | None]:
        prompt_id = self.lookup(ref)
        if prompt_id is None:
            return None, None
        return prompt_id, self.prompts[prompt_id].pick(number, label)

    def located_row(
        self, ref: PromptRef, number: int | None, label: str | None
    ) -> tuple[str | None, int | None, PromptVersionRow | None]:
        prompt_id, version = self.locate(ref, number, label)
        if prompt_id is None or version is None:
            return prompt_id, version, None
        return prompt_id, version, self.prompts[prompt_id].rows.get(version)

    def created(
        self,
        name: str,
        prompt_id: str,
        newest: int = 1,
        row: PromptVersionRow | None = None,
        generation: int | None = None,
    ) -> None:
        self.by_name[name] = prompt_id
        if generation is not None:
            self.generations[name] = max(generation, self.generations.get(name, 0))
        live = self.prompts.setdefault(prompt_id, IndexedPrompt(newest))
        live.newest = max(live.newest, newest)
        live.keep(row)

    def deleted(self, name: str, prompt_id: str, remember: bool = False) -> None:
        if self.by_name.get(name) == prompt_id:
            del self.by_name[name]
        self.prompts.pop(prompt_id, None)
        if remember:
            self.dead.add(prompt_id)

    def polled_claim(self, name: str, generation: int, prompt_id: str, deleted: bool) -> None:
        """Apply a claim or delete row a poll read. A claim of a generation older than the
        name's newest known one changes nothing (a poll re-reads rows it may have applied
        before); a delete always applies (a deleted prompt never lives again)."""
        if deleted:
            self.generations[name] = max(generation, self.generations.get(name, 0))
            self.deleted(name, prompt_id, remember=True)
        elif generation >= self.generations.get(name, 0) and prompt_id not in self.dead:
            self.created(name, prompt_id, 1, None, generation)

    def stored(self, prompt_id: str, version: int, row: PromptVersionRow | None = None) -> None:
        live = self.prompts.get(prompt_id)
        if live is not None:
            live.newest = max(live.newest, version)
            live.keep(row)

    def labeled(
        self,
        prompt_id: str,
        label: str,
        version: int,
        row: PromptVersionRow | None = None,
        at: datetime | None = None,
    ) -> None:
        live = self.prompts.get(prompt_id)
        if live is None:
            return
        if at is not None:
            if live.moved is None:
                live.moved = {}
            last = live.moved.get(label)
            if last is not None and at < last:
                return  # older than a move already applied: the store keeps the newest
            live.moved[label] = at
        if version > 0:
            if live.labels is None:
                live.labels = {}
            live.labels[label] = version
            live.newest = max(live.newest, version)
        elif live.labels:
            live.labels.pop(label, None)
        live.keep(row)
