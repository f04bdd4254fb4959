"""The registry's tables: their DDL, and nothing else.

Apart from the rows and the queries so the migrations (``store/migrations.py``) import only
what they create. A new field of a prompt version is a column of :data:`PROMPT_VERSIONS` here
and, in the same change, its row and encoding in :mod:`.rows` (whose docstring lists every
place, in order).
"""

from __future__ import annotations

from ..schema import Table, View

# Name claims and soft deletes. Sorted by name because every route addresses a prompt by
# name; ``generation`` keeps each re-creation of a soft-deleted name as its own row, and
# ReplacingMergeTree(row_version) lets the delete row (row_version 2) supersede the claim.
PROMPTS = Table(
    name="prompts",
    columns=(
        "project String",
        "name String",
        "generation UInt32",
        "prompt_id String",
        "created_at DateTime64(3, 'UTC')",
        "is_deleted UInt8",
        "deleted_at DateTime64(3, 'UTC')",
        "row_version UInt8",
    ),
    indexes=("INDEX idx_prompt_id prompt_id TYPE bloom_filter GRANULARITY 1",),
    engine="ReplacingMergeTree",
    engine_args=("row_version",),
    order_by="(project, name, generation)",
    dedup=True,
)

# Immutable version rows, append-only: a version is never rewritten, so plain MergeTree.
# Sorted by (project, prompt_id, version): "latest" is the last row of a short range.
PROMPT_VERSIONS = Table(
    name="prompt_versions",
    columns=(
        "project String",
        "prompt_id String",
        "version UInt32",
        "version_id UUID",
        "name String",
        "description String",
        "template String",
        "model String",
        "parameters String",
        "tags Array(String)",
        "folder String",
        "note String",
        "prompt_created_at DateTime64(3, 'UTC')",
        "created_at DateTime64(3, 'UTC')",
        # A version's chat-prompt fields (its type, messages, tools, tool choice, response
        # format, variables schema, config) as one JSON object of those it has; "" for a text
        # prompt without any (every version stored before chat prompts). Read beside
        # ``version_json`` (see rows._packed_version).
        "chat String DEFAULT ''",
        # The whole version as one JSON array, written by ClickHouse at insert: a point read
        # of one column costs about half one of thirteen (each column read has its own
        # fixed cost), and cold reads are point reads.
        "version_json String MATERIALIZED toJSONString((prompt_id, version, "
        "toString(version_id), name, description, template, model, parameters, tags, folder, "
        "note, toUnixTimestamp64Milli(prompt_created_at), toUnixTimestamp64Milli(created_at)))",
    ),
    order_by="(project, prompt_id, version)",
    dedup=True,
    settings=("index_granularity = 256",),
)

# The newest version's list fields per prompt, fed by a materialized view so a version and
# its head land in one insert. ReplacingMergeTree(version) keeps the highest version; reads
# use FINAL so unmerged parts never show an older head.
PROMPT_HEADS = Table(
    name="prompt_heads",
    columns=(
        "project String",
        "prompt_id String",
        "version UInt32",
        "name String",
        "description String",
        "model String",
        "tags Array(String)",
        "folder String",
        "prompt_created_at DateTime64(3, 'UTC')",
        "updated_at DateTime64(3, 'UTC')",
    ),
    engine="ReplacingMergeTree",
    engine_args=("version",),
    order_by="(project, prompt_id)",
)

PROMPT_HEADS_MV = View(
    name="prompt_heads_mv",
    to_table="prompt_heads",
    select=(
        "SELECT project, prompt_id, version, name, description, model, tags, folder, "
        "prompt_created_at, created_at AS updated_at FROM {db}.prompt_versions"
    ),
)

# A label points at one version at a time; the newest move wins (version 0 = removed).
PROMPT_LABELS = Table(
    name="prompt_labels",
    columns=(
        "project String",
        "prompt_id String",
        "label String",
        "version UInt32",
        "updated_at DateTime64(6, 'UTC')",
    ),
    engine="ReplacingMergeTree",
    engine_args=("updated_at",),
    order_by="(project, prompt_id, label)",
)
