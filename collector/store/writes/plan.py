"""How each table group is written: one declaration per group, read by the writers.

A table a materialized view fills is written by the insert into its source and needs no
declaration of its own (``request_items`` by ``requests``, the score sums by ``scores``), and
:data:`NOT_WRITTEN` names the tables no write reaches any more. Every other table is in
exactly one group below (the run records share the request log's table and its writer).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class WriteMode(Enum):
    """The ways rows reach the store (see :mod:`collector.store.writes`)."""

    GROUP_COMMIT = "group commit"
    """Callers' rows gather in a bounded buffer; one thread inserts them all as one block and
    then answers each caller (:mod:`.group_commit`)."""
    ASYNC_INSERT = "async insert"
    """The ClickHouse server's own group commit (``async_insert``, ``wait_for_async_insert``):
    the caller's insert returns once the server flushed it."""
    JOURNALED = "journaled"
    """Kept by an append to a file, answered, and applied to chDB right behind; every read of
    the group first waits for what was journaled before it (:mod:`.journal`)."""
    WRITE_BEHIND = "write-behind"
    """Answered before the insert, which a worker pool makes and retries; every read of the
    table first waits for the project's rows still being stored (:mod:`.behind`)."""
    DIRECT = "direct"
    """One insert per call, the caller waits for it."""


@dataclass(frozen=True)
class TableGroup:
    """A group of tables written together, and how on each kind of store."""

    name: str
    tables: tuple[str, ...]
    embedded: WriteMode
    server: WriteMode
    why: str

    def mode(self, embedded: bool) -> WriteMode:
        """How the group is written on the embedded store (chDB) or on a ClickHouse server."""
        return self.embedded if embedded else self.server


REQUEST_LOG = TableGroup(
    "request log",
    ("requests",),
    WriteMode.GROUP_COMMIT,
    WriteMode.ASYNC_INSERT,
    "every insert writes a part: one per HTTP request would cap ingest at a few hundred "
    "requests/s and flood the table with tiny parts; bounded, so a stalled store is a 503. "
    "On the embedded store the group commit is a journal by default: answered once in a "
    "file, inserted right behind in large blocks, reads wait for it (writes/log_journal.py)",
)
RUN_RECORDS = TableGroup(
    "run records",
    ("requests",),
    WriteMode.WRITE_BEHIND,
    WriteMode.WRITE_BEHIND,
    "a run's caller waits for its provider, not for the bookkeeping insert after it; the "
    "insert then goes through the request log's writer like any record",
)
REGISTRY = TableGroup(
    "registry",
    ("prompts", "prompt_versions", "prompt_labels"),
    WriteMode.JOURNALED,
    WriteMode.DIRECT,
    "a registry write is one small insert per table, and each chDB insert writes a part "
    "(~5 ms): a file append (~20 us) keeps it across a kill -9 and chDB gets it right "
    "behind; on a server each write is a compare-and-set by deduplication token, read back",
)
SCORES = TableGroup(
    "scores",
    # score_span_names: the score write adds a name there before a score on a span record.
    ("scores", "score_configs", "score_span_names"),
    WriteMode.DIRECT,
    WriteMode.DIRECT,
    "a score write reads the id's live version and ends it in the same insert block, under "
    "the store's write lock: batching would have to hold that lock across callers; each "
    "write answers Stored or Refused (an outage) as a RowWriter's does (direct_write)",
)
EXPERIMENTS = TableGroup(
    "experiments",
    ("experiments", "experiment_results"),
    WriteMode.DIRECT,
    WriteMode.DIRECT,
    "an experiment's state and its results are few rows per run of many, each read back by "
    "the console as soon as written; each write answers Stored or Refused (an outage) as a "
    "RowWriter's does (direct_write)",
)
DATASETS = TableGroup(
    "datasets",
    ("datasets", "dataset_items"),
    WriteMode.DIRECT,
    WriteMode.DIRECT,
    "written by people and scripts at a human pace, read back at once; each write answers "
    "Stored or Refused (an outage) as a RowWriter's does (direct_write)",
)
KEYS = TableGroup(
    "keys",
    ("api_keys", "api_key_revocations", "api_key_usage"),
    WriteMode.DIRECT,
    WriteMode.DIRECT,
    "rare writes; a key's last use is already gathered in memory and written in the "
    "background by the key service; each write answers Stored or Refused (an outage) as a "
    "RowWriter's does (direct_write)",
)
UPKEEP = TableGroup(
    "upkeep",
    ("exports", "request_rollup", "request_rollup_metadata", "request_seals", "schema_migrations"),
    WriteMode.DIRECT,
    WriteMode.DIRECT,
    "written by the collector's own background work (exports, the rollup's sealer, "
    "migrations), one statement at a time",
)

EVALUATION = TableGroup(
    "evaluation",
    (
        "evaluator_versions",
        "evaluation_rules",
        "evaluation_decisions",
        "evaluation_watermarks",
        "collector_heartbeats",
    ),
    WriteMode.DIRECT,
    WriteMode.DIRECT,
    "evaluators and rules are written at a human pace and read back at once; decisions are "
    "few per target, each read back by its rule's page; each write answers Stored or Refused "
    "(an outage) as a RowWriter's does (direct_write); a collector's heartbeat is one row "
    "every few seconds",
)

AUDIT = TableGroup(
    "audit",
    ("audit_log",),
    WriteMode.JOURNALED,
    WriteMode.DIRECT,
    "one row per audited write, appended under the chain's lock (its order); a chDB insert "
    "(a part, 5-15 ms) would be most of a prompt PATCH, so the embedded store keeps the "
    "append in the audit log's own journal and every read of the log waits for it "
    "(store/audit.py); on a server each append is one insert, answering Stored or Refused "
    "(an outage) as a RowWriter's does (direct_write)",
)

ACCOUNTS = TableGroup(
    "accounts",
    ("users", "user_logins", "projects", "memberships", "auth_sessions", "protected_labels"),
    WriteMode.DIRECT,
    WriteMode.DIRECT,
    "people, projects, roles and sign-in sessions change at a human pace and are read back "
    "at once (a sign-out must end its session for the next request); rows are only added, "
    "read with FINAL; each write waits for its insert",
)

CONNECTIONS = TableGroup(
    "connections",
    ("provider_connections", "provider_connection_usage"),
    WriteMode.DIRECT,
    WriteMode.DIRECT,
    "a connection is written by an admin and read back at once; its last use is gathered "
    "in memory and written in the background, as a key's is",
)

NOT_WRITTEN: dict[str, str] = {
    "prompt_heads": "filled by a view of prompt_versions on a server; the embedded store "
    "dropped that view (migration 24) and reads each prompt's newest version instead",
    "score_targets": "its view was dropped (it cost each score write a third insert); the "
    "table stays, as a dropped view's does",
}
"""Tables of the store no write of the collector reaches any more (or only a server's view)."""

WRITE_PLAN: tuple[TableGroup, ...] = (
    REQUEST_LOG,
    RUN_RECORDS,
    REGISTRY,
    SCORES,
    EXPERIMENTS,
    DATASETS,
    KEYS,
    UPKEEP,
    EVALUATION,
    ACCOUNTS,
    CONNECTIONS,
    AUDIT,
)
"""Every table group of the store, as :mod:`collector.store.writes` describes them."""
