"""The schema's migrations, in order: each a version, a name and the steps it takes
(applied by :func:`.migrations.migrate`)."""

from __future__ import annotations

from .accounts import ACCOUNT_TABLES
from .audit import AUDIT_LOG
from .collector_heartbeats import COLLECTOR_HEARTBEATS
from .connections import CONNECTION_USAGE, CONNECTIONS
from .datasets import DATASET_ITEMS, DATASETS
from .evaluation import (
    EVALUATION_DECISION_TIMES,
    EVALUATION_DECISION_TIMES_MV,
    EVALUATION_DECISIONS,
    EVALUATION_RULES,
    EVALUATION_WAITING,
    EVALUATION_WAITING_MV,
    EVALUATION_WAITING_SEED,
    EVALUATOR_VERSIONS,
)
from .evaluation_work import (
    ARRIVAL_SESSIONS,
    EVALUATION_ARRIVALS,
    EVALUATION_ARRIVALS_MV,
    EVALUATION_WORK,
)
from .experiments import EXPERIMENT_RESULTS, EXPERIMENTS
from .exports import EXPORTS
from .keys import API_KEY_REVOCATIONS, API_KEY_USAGE, API_KEYS, API_KEYS_BEFORE_30
from .metadata_index import REQUEST_PROMPTS, REQUEST_PROMPTS_MV
from .prompts import PROMPT_HEADS, PROMPT_HEADS_MV, PROMPT_LABELS, PROMPT_VERSIONS, PROMPTS
from .protected_labels import PROTECTED_LABELS
from .request_tables import (
    PACKED_PARTS,
    REQUEST_IDS,
    REQUEST_IDS_MV,
    REQUEST_ITEMS,
    REQUEST_ITEMS_MV,
    REQUEST_ITEMS_MV_BEFORE_21,
    REQUEST_ITEMS_MV_BEFORE_27,
    REQUEST_ITEMS_MV_BEFORE_51,
    REQUEST_METADATA,
    REQUEST_METADATA_MV,
    REQUESTS,
    TRACE_RECORDS,
    TRACE_RECORDS_BEFORE_27,
    TRACE_RECORDS_MV,
    TRACE_RECORDS_MV_BEFORE_27,
)
from .rollups import (
    REQUEST_ROLLUP,
    REQUEST_ROLLUP_BY_PROMPT,
    REQUEST_ROLLUP_BY_PROMPT_MV,
    REQUEST_ROLLUP_METADATA,
    REQUEST_SEALS,
    REQUEST_TOUCHES,
    REQUEST_TOUCHES_MV,
)
from .schema import (
    AddColumn,
    AddIndex,
    Backfill,
    DropIndex,
    DropView,
    EmbeddedSetting,
    Migration,
    ModifyColumn,
    ModifyQuery,
    ModifySetting,
    RoutedColumn,
)
from .score_tables import (
    SCORE_CONFIGS,
    SCORE_SPAN_NAMES,
    SCORE_SPAN_NAMES_SEED,
    SCORE_SUMS,
    SCORE_SUMS_BY_TIME,
    SCORE_SUMS_BY_TIME_MV,
    SCORE_SUMS_BY_TIME_SEED,
    SCORE_SUMS_MV,
    SCORE_SUMS_MV_BEFORE_37,
    SCORE_SUMS_SEED,
    SCORE_TARGETS,
    SCORE_TARGETS_MV,
    SCORES,
    SCORES_BY_TARGET,
    SCORES_BY_TARGET_MV,
    SCORES_BY_TARGET_MV_BEFORE_37,
    SCORES_BY_TARGET_SEED,
)
from .thread_tables import (
    ACTIVITY_ROLLUP,
    ACTIVITY_ROLLUP_MV,
    THREAD_ITEMS,
    THREAD_ITEMS_BEFORE_27,
    THREAD_ITEMS_MV,
    THREAD_ITEMS_MV_BEFORE_27,
    THREAD_ITEMS_MV_BEFORE_39,
)

# Settings of a backfill copying wide records (the list copy's): 32 MiB blocks on one thread,
# which holds the upgrade of a big store under the collector's 1 GiB target (the defaults
# squash 256 MiB blocks on every thread, several times that).
_WIDE_COPY = (
    "max_threads = 1",
    "max_insert_threads = 1",
    "max_block_size = 8192",
    "min_insert_block_size_rows = 65536",
    "min_insert_block_size_bytes = 33554432",
)

MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "api_keys", (API_KEYS_BEFORE_30,)),
    Migration(
        2,
        "prompt_registry",
        (PROMPTS, PROMPT_VERSIONS, PROMPT_HEADS, PROMPT_HEADS_MV, PROMPT_LABELS),
    ),
    Migration(3, "request_log", (REQUESTS, EXPORTS)),
    # The index of metadata filters, filled from now on by its view and, for the records
    # already stored, by a backfill run once the view exists (see schema.Backfill).
    Migration(
        4,
        "request_metadata_index",
        (
            REQUEST_METADATA,
            REQUEST_METADATA_MV,
            Backfill(REQUEST_METADATA_MV, REQUEST_METADATA),
        ),
    ),
    # The id index replaces the bloom filter on requests.id, which every insert paid for
    # and which still left a detail by client id testing every granule of the log.
    Migration(
        5,
        "request_id_index",
        (
            REQUEST_IDS,
            REQUEST_IDS_MV,
            Backfill(REQUEST_IDS_MV, REQUEST_IDS),
            DropIndex(REQUESTS, "idx_id"),
        ),
    ),
    # Prompt point reads read one packed column (see PROMPT_VERSIONS).
    Migration(6, "prompt_version_json", (AddColumn(PROMPT_VERSIONS, "version_json"),)),
    # The analytics rollup (see rollups.py); the backfill marks every hour already holding
    # records as touched, so the sealer sums them.
    Migration(
        7,
        "request_analytics_rollup",
        (
            REQUEST_TOUCHES,
            REQUEST_TOUCHES_MV,
            Backfill(REQUEST_TOUCHES_MV, REQUEST_TOUCHES),
            REQUEST_ROLLUP,
            REQUEST_ROLLUP_METADATA,
            REQUEST_SEALS,
        ),
    ),
    # Lists and details read the records from a copy in fine granules (see REQUEST_ITEMS).
    # Records are wide: the copy goes in small blocks on one thread (_WIDE_COPY). The view
    # and its backfill are today's, and read columns of the log that migrations 17, 21 and 27
    # add: a store from before this one gets them here first (those migrations' own ADD
    # COLUMN IF NOT EXISTS then find them).
    Migration(
        8,
        "request_items",
        (
            *(
                AddColumn(REQUESTS, column)
                for column in (
                    "kind",
                    "cached_tokens",
                    "cache_write_tokens",
                    "reasoning_tokens",
                    "environment",
                )
            ),
            REQUEST_ITEMS,
            REQUEST_ITEMS_MV,
            Backfill(
                REQUEST_ITEMS_MV,
                REQUEST_ITEMS,
                settings=_WIDE_COPY,
            ),
        ),
    ),
    # New parts of the log in the compact format (see REQUESTS): an insert holds a third of
    # the memory.
    Migration(9, "request_compact_parts", (ModifySetting(REQUESTS, "min_bytes_for_wide_part"),)),
    # Merges of the log and its copies take at most 10 parts at once: each holds less memory.
    Migration(
        10,
        "request_merge_width",
        tuple(
            ModifySetting(table, "max_parts_to_merge_at_once")
            for table in (REQUESTS, REQUEST_ITEMS, REQUEST_METADATA)
        ),
    ),
    # The copies merge column by column too: a merge of the items holds a third of the
    # memory (see request_tables._VERTICAL_MERGES).
    Migration(
        11,
        "request_vertical_merges",
        (
            ModifySetting(REQUEST_ITEMS, "vertical_merge_algorithm_min_columns_to_activate"),
            ModifySetting(REQUEST_METADATA, "vertical_merge_algorithm_min_rows_to_activate"),
            ModifySetting(REQUEST_METADATA, "vertical_merge_algorithm_min_columns_to_activate"),
        ),
    ),
    # List items carry their span fields and a list can be filtered by trace (see
    # REQUEST_ITEMS): both read from ``detail`` by ClickHouse, for the stored rows too.
    Migration(
        12,
        "request_item_traces",
        (
            AddColumn(REQUEST_ITEMS, "trace"),
            AddColumn(REQUEST_ITEMS, "trace_id"),
            AddIndex(REQUEST_ITEMS, "idx_trace"),
        ),
    ),
    # Keys can be revoked (at once, or at the end of a rotation's grace) and say when they
    # were last used: rows of their own beside api_keys (see store/keys.py).
    Migration(13, "api_key_revocations", (API_KEY_REVOCATIONS, API_KEY_USAGE)),
    # List items say whether their cost is known (see REQUEST_ITEMS), for the stored rows too.
    Migration(14, "request_item_cost_known", (AddColumn(REQUEST_ITEMS, "cost_known"),)),
    # Scores on records and traces, and what each score name must be (see store/scores.py).
    Migration(15, "scores", (SCORES, SCORE_CONFIGS)),
    # Score filters and analytics read per-target sums kept by a view, details and list
    # pages a target index, instead of resolving every score of a name per query (see
    # store/scores.py). The scores already stored are summed once (the seed writes only into
    # an empty table) and indexed (a repeat there is harmless).
    Migration(
        16,
        "scores_aggregate",
        (
            SCORE_SUMS,
            SCORE_SUMS_MV_BEFORE_37,
            SCORE_SUMS_SEED,
            SCORE_TARGETS,
            SCORE_TARGETS_MV,
            Backfill(SCORE_TARGETS_MV, SCORE_TARGETS),
        ),
    ),
    # Every record has a kind (docs/api-notes.md, "Traces, sessions and users"): a column of the
    # log and of its list copy, filled
    # for the records stored before from what their rows have (request_tables.KIND_OF_STORED),
    # then written by the copy's view from the record's own. And traces get their own index.
    Migration(
        17,
        "record_kinds",
        (
            AddColumn(REQUESTS, "kind"),
            AddColumn(REQUEST_ITEMS, "kind"),
            # Its query then, not today's: the token columns it reads come with migration 21.
            ModifyQuery(REQUEST_ITEMS_MV_BEFORE_21),
            # Each trace's records, by trace (see TRACE_RECORDS).
            TRACE_RECORDS,
            TRACE_RECORDS_MV_BEFORE_27,
            Backfill(TRACE_RECORDS_MV_BEFORE_27, TRACE_RECORDS_BEFORE_27),
        ),
    ),
    # Datasets and experiments (see store/datasets.py, store/experiments.py).
    Migration(
        18, "datasets_experiments", (DATASETS, DATASET_ITEMS, EXPERIMENTS, EXPERIMENT_RESULTS)
    ),
    # The analytics rollup sums model calls alone (docs/api-notes.md, "Traces, sessions and users",
    # rollups.MODEL_CALLS): every hour
    # already holding records is marked touched, so the sealer sums it anew; until then reads
    # take those hours from the log, exact as ever.
    Migration(19, "rollup_model_calls", (Backfill(REQUEST_TOUCHES_MV, REQUEST_TOUCHES),)),
    # The session and user lists take their candidates from a rollup of each one's latest
    # time per day and kind (see traces.ACTIVITY_ROLLUP), for the records stored before too:
    # a row written by both the view and the backfill changes no maximum.
    Migration(
        20,
        "activity_rollup",
        (ACTIVITY_ROLLUP, ACTIVITY_ROLLUP_MV, Backfill(ACTIVITY_ROLLUP_MV, ACTIVITY_ROLLUP)),
    ),
    # Cached (cache read), cache-write and reasoning tokens are stored (issue 35.4): columns of
    # the log, 0 for the records stored before, and three more fields of the detail the list
    # copy's view packs (before the span fields; a detail packed before reads them as 0).
    Migration(
        21,
        "token_details",
        (
            AddColumn(REQUESTS, "cached_tokens"),
            AddColumn(REQUESTS, "cache_write_tokens"),
            AddColumn(REQUESTS, "reasoning_tokens"),
            # Its query then: the list copy's environment comes with migration 27.
            ModifyQuery(REQUEST_ITEMS_MV_BEFORE_27),
        ),
    ),
    # A detail's and a list page's scores are read by target, from every version of every
    # score kept in target order (see scores.SCORES_BY_TARGET); the scores already stored go in
    # as each id's newest version (a repeat there is harmless).
    Migration(
        22,
        "scores_by_target",
        (SCORES_BY_TARGET, SCORES_BY_TARGET_MV_BEFORE_37, SCORES_BY_TARGET_SEED),
    ),
    # A trace's and a session's pages are one range read of their list items, kept sorted by
    # trace and by session (see traces.THREAD_ITEMS), for the records stored before too: a
    # row written by both the view and the backfill is a retried copy, which reads resolve.
    # The copy reads the list copy's wide ``item``: small blocks on one thread (_WIDE_COPY).
    Migration(
        23,
        "thread_items",
        (
            THREAD_ITEMS,
            # The view then: the list copy it reads has no environment before migration 27.
            THREAD_ITEMS_MV_BEFORE_27,
            Backfill(THREAD_ITEMS_MV_BEFORE_27, THREAD_ITEMS_BEFORE_27, settings=_WIDE_COPY),
        ),
    ),
    # The embedded store's list reads each live prompt's newest version from the collector's
    # live-id index (or, past it, from the versions), so `prompt_heads_mv` goes there: it wrote
    # a second part on every version insert (~10 ms of a PATCH, issue 35). A server keeps the
    # view: its collectors list from `prompt_heads` (no index there), and the head still lands
    # in the version's own insert, no extra round trip. `prompt_heads` stays, readable as is.
    Migration(24, "prompt_heads_embedded_only", (DropView(PROMPT_HEADS_MV, embedded_only=True),)),
    # Score writes stop feeding `score_targets` (issue 31 ingest): every read that took its
    # candidates there takes them from `scores_by_target` (migration 22, kept by its own view
    # and seeded with every stored score at its target), so that view was one insert of three
    # per score block for nothing. The table stays, unread.
    Migration(26, "score_targets_view_dropped", (DropView(SCORE_TARGETS_MV),)),
    # Every record has an environment (docs/api-notes.md, Environments): a column of the log
    # and of the copies lists and sums filter on (the list copy, the trace records, the thread
    # items), written by their views from the record's; the records stored before read
    # ``production``. The metadata index and the two rollups stay as they are: a metadata
    # page tests the environment on the records it reads, as it does the kind, and the
    # rollups answer only the default view (see rollups.MODEL_CALLS and ThreadReads).
    Migration(
        27,
        "record_environments",
        (
            AddColumn(REQUESTS, "environment"),
            AddColumn(REQUEST_ITEMS, "environment"),
            AddColumn(TRACE_RECORDS, "environment"),
            AddColumn(THREAD_ITEMS, "environment"),
            # Its query then: the list copy's trace and cost_known come from it with 51.
            ModifyQuery(REQUEST_ITEMS_MV_BEFORE_51),
            ModifyQuery(TRACE_RECORDS_MV),
            # Its query then: a session's rows lose their list columns with migration 39.
            ModifyQuery(THREAD_ITEMS_MV_BEFORE_39),
        ),
    ),
    # Chat prompts (docs/api-notes.md, Chat prompts): a version's chat fields in one column,
    # "" for the versions stored before, which read as text prompts without them.
    Migration(28, "prompt_chat_fields", (AddColumn(PROMPT_VERSIONS, "chat"),)),
    # Provider connections (docs/api-notes.md, Connections): a project's own credentials,
    # sealed, and when each was last used.
    Migration(29, "provider_connections", (CONNECTIONS, CONNECTION_USAGE)),
    # Scoped keys (docs/api-notes.md, "Keys and scopes"): each key's scopes, expiry, maker and
    # name. The keys stored before read as every scope, as they could do everything before.
    # And each project's protected labels (docs/api-notes.md, "Protected labels").
    Migration(
        30,
        "scoped_keys_protected_labels",
        (
            *(AddColumn(API_KEYS, c) for c in ("scopes", "expires_at", "created_by", "name")),
            PROTECTED_LABELS,
        ),
    ),
    # Accounts (docs/security.md, "Accounts"): users, their last sign-in, projects, members
    # and sign-in sessions (see store/accounts.py).
    Migration(31, "accounts", ACCOUNT_TABLES),
    # Online evaluation (docs/api-notes.md, "Online evaluation"): named evaluators' versions,
    # rules and one decision per rule and target, and the decisions in time order for a
    # rule's list and counts (see store/evaluation/tables.py).
    Migration(
        32,
        "online_evaluation",
        (
            EVALUATOR_VERSIONS,
            EVALUATION_RULES,
            EVALUATION_DECISIONS,
            EVALUATION_DECISION_TIMES,
            EVALUATION_DECISION_TIMES_MV,
        ),
    ),
    # The audit log (docs/security.md, "Audit log"): one hash-chained row per audited write.
    Migration(34, "audit_log", (AUDIT_LOG,)),
    # The evaluation worker (docs/api-notes.md, "Online evaluation"): records in arrival
    # order, each rule's watermark in it, and the decisions by target for the details (see
    # store/evaluation_work.py).
    Migration(36, "evaluation_work", EVALUATION_WORK),
    # Scores on sessions (docs/api-notes.md, "Scores and feedback"): a score's session, keyed
    # apart from records and traces by the by-target index and the sums (see
    # store/score_tables.py), and each arrival's session for the evaluation worker.
    Migration(
        37,
        "session_scores",
        (
            AddColumn(SCORES, "session_id"),
            AddColumn(SCORES_BY_TARGET, "session_id"),
            ModifyQuery(SCORE_SUMS_MV),
            ModifyQuery(SCORES_BY_TARGET_MV),
            *ARRIVAL_SESSIONS,
        ),
    ),
    # The collectors sharing a server (docs/architecture.md, "Several collectors on one
    # server"): their heartbeats, by which their evaluation workers split the rules (see
    # store/collector_heartbeats.py).
    Migration(38, "collector_heartbeats", (COLLECTOR_HEARTBEATS,)),
    # A session's rows of ``thread_items`` stop copying the list item (see
    # thread_tables._LISTED): its page takes it from the trace's row of the record, or the
    # list copy. The view is given its new query, never dropped, so no insert misses it; the
    # rows stored before keep their copy, which the reads take as they are.
    Migration(39, "thread_items_slim", (ModifyQuery(THREAD_ITEMS_MV),)),
    # The prompt index (see store/metadata_index.py): a list by prompt reads the prompt's
    # entries newest first, then only the records it shows, where it had read the log back
    # until a page of the prompt's records turned up (further back the bigger the log).
    Migration(
        40,
        "request_prompt_index",
        (
            REQUEST_PROMPTS,
            REQUEST_PROMPTS_MV,
            Backfill(REQUEST_PROMPTS_MV, REQUEST_PROMPTS),
        ),
    ),
    # Analytics naming one prompt read its sealed buckets from a copy of the rollup keyed by
    # prompt (see rollups.REQUEST_ROLLUP_BY_PROMPT), where it had decoded the latency states
    # of every prompt's rows of the period. A view copies each seal as it is written; the rows
    # sealed before are copied from the rollup itself, not summed from the log again (10M
    # records: 1.06M rows in 7.5 s at a load of 7).
    Migration(
        41,
        "rollup_by_prompt",
        (
            REQUEST_ROLLUP_BY_PROMPT,
            REQUEST_ROLLUP_BY_PROMPT_MV,
            Backfill(REQUEST_ROLLUP_BY_PROMPT_MV, REQUEST_ROLLUP_BY_PROMPT),
        ),
    ),
    # The score sums keyed by the scored record's time (docs/benchmarks.md, "Scores at
    # scale"): a list page's window reads one run of them per name, whatever the shape of the
    # record ids; each score version carries the record time it is summed under, so its
    # tombstone cancels under the same key (see store/score_times.py). The column is added
    # first, then the table and its view, then the sums stored before, from ``score_sums``.
    Migration(
        42,
        "score_sums_by_time",
        (
            AddColumn(SCORES, "record_at"),
            SCORE_SUMS_BY_TIME,
            SCORE_SUMS_BY_TIME_MV,
            SCORE_SUMS_BY_TIME_SEED,
        ),
    ),
    # Smaller compressed blocks of the scores by target (see store/score_tables.py): a page's
    # or a detail's score read of random record ids decompresses less per target. Parts
    # written before keep their blocks until a merge rewrites them.
    Migration(
        43,
        "scores_by_target_small_blocks",
        (
            ModifySetting(SCORES_BY_TARGET, "min_compress_block_size"),
            ModifySetting(SCORES_BY_TARGET, "max_compress_block_size"),
        ),
    ),
    # The waiting decisions not yet replaced, in time order (docs/benchmarks.md, "Online
    # evaluation"): a page of `decision=waiting` reads them instead of every waiting row ever
    # written (see store/evaluation/tables.py).
    Migration(
        44,
        "evaluation_waiting",
        (EVALUATION_WAITING, EVALUATION_WAITING_MV, EVALUATION_WAITING_SEED),
    ),
    # Analytics of the cost count the records without a price from the rollup's sums (see
    # rollups._SUMS), not with a query of the log's whole period. The rows sealed before read
    # NULL there, and a query reading one counts in the log as before; the view keyed by
    # prompt copies the new column from now on.
    Migration(
        47,
        "rollup_unpriced",
        (
            AddColumn(REQUEST_ROLLUP, "unpriced"),
            AddColumn(REQUEST_ROLLUP_BY_PROMPT, "unpriced"),
            AddColumn(REQUEST_ROLLUP_METADATA, "unpriced"),
            ModifyQuery(REQUEST_ROLLUP_BY_PROMPT_MV),
        ),
    ),
    # The score names with a score on a span record, stored by the score writes (see
    # store/score_tables.py): which names count for traces is then three key reads, not a
    # look-up of every span record's id. The seed reads the scored records by key.
    Migration(48, "score_span_names", (SCORE_SPAN_NAMES, SCORE_SPAN_NAMES_SEED)),
    # The activity rollup's view reads a record's session and user once (see
    # thread_tables.ACTIVITY_ROLLUP_MV): the same rows for less of each insert's CPU. Given its
    # new query, never dropped, so no insert misses it.
    Migration(50, "activity_rollup_lean_view", (ModifyQuery(ACTIVITY_ROLLUP_MV),)),
    # The list copy's ``trace`` and ``cost_known`` are written by its view from the record's own
    # columns instead of parsed out of the packed ``detail`` as each row is written (see
    # request_tables._TRACE_OF_RECORD): the same values, less of each insert's CPU. The columns
    # become DEFAULT ones first (metadata only: stored rows keep their values), then the view
    # gets its new query, never dropped, so no insert misses it.
    Migration(
        51,
        "list_copy_trace_from_record",
        (
            ModifyColumn(REQUEST_ITEMS, "trace"),
            ModifyColumn(REQUEST_ITEMS, "cost_known"),
            ModifyQuery(REQUEST_ITEMS_MV),
        ),
    ),
    # The log's tables (the log and every table its inserts feed), and the keys' last use
    # (written beside every ingest), write their parts under 64 MiB as one file each, on the
    # embedded store only (request_tables.PACKED_PARTS).
    Migration(
        52,
        "small_parts_packed",
        tuple(
            EmbeddedSetting(table, PACKED_PARTS)
            for table in (
                REQUESTS,
                REQUEST_ITEMS,
                REQUEST_METADATA,
                REQUEST_IDS,
                TRACE_RECORDS,
                THREAD_ITEMS,
                ACTIVITY_ROLLUP,
                REQUEST_TOUCHES,
                REQUEST_PROMPTS,
                EVALUATION_ARRIVALS,
                API_KEY_USAGE,
            )
        ),
    ),
    # The evaluation worker's arrivals only for the projects that have a rule
    # (evaluation_work.RULED_PROJECTS): a log insert of a project without one writes a copy
    # fewer. The view gets its new query, never dropped, so no insert misses it.
    Migration(53, "arrivals_of_ruled_projects", (ModifyQuery(EVALUATION_ARRIVALS_MV),)),
    # The search text of a record without input whose objects are flat and ASCII is derived
    # by ClickHouse from the stored JSON when an insert leaves it out
    # (request_tables.SEARCH_TEXT_OF_FLAT_ASCII): metadata only, stored rows keep theirs.
    Migration(54, "search_text_derived", (ModifyColumn(REQUESTS, "search_text"),)),
)


def _routed_columns(migrations: tuple[Migration, ...]) -> tuple[RoutedColumn, ...]:
    """The columns the migrations added to sharded tables, for their Distributed tables."""
    added = (
        (step.table.name, step)
        for migration in migrations
        for step in migration.objects
        if isinstance(step, AddColumn) and step.table.sharded
    )
    return tuple(
        RoutedColumn(step.table, step.column)
        for step in {(name, step.column): step for name, step in added}.values()
    )


# On a cluster, the columns migrations 8-37 added to the shards' tables reach the Distributed
# tables in front of them too (schema.RoutedColumn): an upgraded cluster's reads and inserts
# through them named columns they lacked. Nothing on a single store. Since this release an
# AddColumn alters both.
MIGRATIONS = (*MIGRATIONS, Migration(55, "routed_columns", _routed_columns(MIGRATIONS)))
