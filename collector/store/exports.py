"""Export jobs and the export itself: rows stream from ClickHouse straight into a file."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from clickhouse_connect.driver.client import Client

from .connection import utc
from .request_filters import RequestFilter, filter_where
from .requests import RequestStore
from .schema import Table, quote
from .score_sql import record_scores_json

# Job state survives restarts; the newest row of an export wins (FINAL).
EXPORTS = Table(
    name="exports",
    columns=(
        "project LowCardinality(String)",
        "export_id String",
        "status LowCardinality(String)",
        "format LowCardinality(String)",
        "filters String",
        "include_metadata Bool",
        "file_path String",
        "row_count UInt64",
        "error String",
        "created_at DateTime64(3, 'UTC')",
        "updated_at DateTime64(6, 'UTC')",
    ),
    engine="ReplacingMergeTree",
    engine_args=("updated_at",),
    order_by="(project, export_id)",
)

_JOB_COLUMNS = (
    "project",
    "export_id",
    "status",
    "format",
    "filters",
    "include_metadata",
    "file_path",
    "row_count",
    "error",
    "created_at",
    "updated_at",
)

# A spreadsheet runs a cell that starts with = + - @ (or a tab or carriage return) as a
# formula: the free-text columns get a leading ' there, as OWASP advises against CSV
# injection (a record's text is anyone's who can log one). The JSON columns start with { [ ".
_NOT_A_FORMULA = (
    "if(substring({c}, 1, 1) IN ('=', '+', '-', '@', '\\t', '\\r'), concat('\\'', {c}), {c}) AS {c}"
)
_CSV_COLUMNS = (
    "id, formatDateTime(created_at, '%Y-%m-%dT%H:%i:%S.%fZ') AS created_at, "
    f"{_NOT_A_FORMULA.format(c='prompt_name')}, "
    f"if(version = 0, NULL, version) AS version, {_NOT_A_FORMULA.format(c='model')}, "
    f"{_NOT_A_FORMULA.format(c='provider')}, toString(status) AS status, "
    "input_variables, input, output, {metadata}prompt_tokens, completion_tokens, total_tokens, "
    "cached_tokens, cache_write_tokens, reasoning_tokens, "
    f"estimated_cost_usd, latency_ms, {_NOT_A_FORMULA.format(c='error')}, "
    "{scores} AS scores"
)

# JSON lines are assembled inside ClickHouse so the stored JSON objects (input variables,
# output, metadata, input) are embedded as objects, byte for byte, with no Python per row.
_JSON_LINE = (
    "concat('{{\"id\":', toJSONString(id), ',\"created_at\":', "
    "toJSONString(formatDateTime(created_at, '%Y-%m-%dT%H:%i:%S.%fZ')), "
    "',\"prompt_name\":', toJSONString(prompt_name), "
    "',\"version\":', if(version = 0, 'null', toString(version)), "
    "',\"model\":', toJSONString(model), ',\"provider\":', toJSONString(provider), "
    "',\"status\":', toJSONString(toString(status)), "
    "',\"input_variables\":', input_variables, ',\"input\":', if(input = '', 'null', input), "
    "',\"output\":', output, {metadata}"
    '\',"usage":{{"prompt_tokens":\', toString(prompt_tokens), '
    "',\"completion_tokens\":', toString(completion_tokens), "
    "',\"total_tokens\":', toString(total_tokens), "
    "',\"cached_tokens\":', toString(cached_tokens), "
    "',\"cache_write_tokens\":', toString(cache_write_tokens), "
    "',\"reasoning_tokens\":', toString(reasoning_tokens), "
    "',\"estimated_cost_usd\":', toString(estimated_cost_usd), '}}', "
    "',\"latency_ms\":', toString(latency_ms), ',\"error\":', toJSONString(error), "
    "',\"scores\":', {scores}, '}}') AS line"
)

# The CSV select names its formatted columns (created_at as text, status as text) after the
# stored ones, so the header reads as the log does; ClickHouse would otherwise resolve the
# filter's and the sort's `created_at` to the text and compare a string with a date.
_COLUMNS_BEFORE_ALIASES: dict[str, Any] = {"prefer_column_name_to_alias": 1}
# A missing value (a record's version, when it has none) is an empty cell, as spreadsheets and
# csv readers expect, not ClickHouse's own marker \N.
_CSV_SETTINGS: dict[str, Any] = {**_COLUMNS_BEFORE_ALIASES, "format_csv_null_representation": ""}


@dataclass(frozen=True)
class ExportJob:
    """The stored state of one export."""

    project: str
    export_id: str
    status: str
    format: str
    filters: dict[str, Any]
    include_metadata: bool
    file_path: str
    row_count: int
    error: str
    created_at: datetime
    updated_at: datetime


class ExportStore:
    """Export job rows, and the query that writes an export file."""

    def __init__(
        self, client: Client, database: str, requests: RequestStore, embedded: bool
    ) -> None:
        self._client = client
        self._table = f"{quote(database)}.{quote(EXPORTS.name)}"
        self._requests = requests
        self._embedded = embedded

    def save(self, job: ExportJob) -> None:
        """Write a new state of a job."""
        self._client.insert(
            self._table,
            [
                [
                    job.project,
                    job.export_id,
                    job.status,
                    job.format,
                    json.dumps(job.filters),
                    job.include_metadata,
                    job.file_path,
                    job.row_count,
                    job.error,
                    job.created_at,
                    job.updated_at,
                ]
            ],
            column_names=list(_JOB_COLUMNS),
        )

    def get(self, project: str, export_id: str) -> ExportJob | None:
        """Return the newest state of a job."""
        jobs = self._select(
            "project = {project:String} AND export_id = {id:String}",
            {"project": project, "id": export_id},
        )
        return jobs[0] if jobs else None

    def with_status(self, status: str, updated_before: datetime | None = None) -> list[ExportJob]:
        """Return every job (all projects) now in a status, optionally not touched since."""
        where = "status = {status:String}"
        params: dict[str, Any] = {"status": status}
        if updated_before is not None:
            where += " AND updated_at < {before:DateTime64(6, 'UTC')}"
            params["before"] = updated_before
        return self._select(where, params)

    def left_over(
        self, processing_before: datetime | None, completed_before: datetime
    ) -> list[ExportJob]:
        """Return, in one read, the jobs a collector's start takes up: every job processing
        (only those not touched since ``processing_before``, when given) and every job
        completed before ``completed_before``."""
        processing = "status = 'processing'"
        params: dict[str, Any] = {"completed": completed_before}
        if processing_before is not None:
            processing += " AND updated_at < {processing:DateTime64(6, 'UTC')}"
            params["processing"] = processing_before
        return self._select(
            f"({processing}) OR "
            "(status = 'completed' AND updated_at < {completed:DateTime64(6, 'UTC')})",
            params,
        )

    def _select(self, where: str, params: dict[str, Any]) -> list[ExportJob]:
        rows = self._client.query(
            f"SELECT {', '.join(_JOB_COLUMNS)} FROM {self._table} FINAL WHERE {where}",
            parameters=params,
        ).result_rows
        return [
            ExportJob(
                project=r[0],
                export_id=r[1],
                status=r[2],
                format=r[3],
                filters=json.loads(r[4]),
                include_metadata=bool(r[5]),
                file_path=r[6],
                row_count=int(r[7]),
                error=r[8],
                created_at=utc(r[9]),
                updated_at=utc(r[10]),
            )
            for r in rows
        ]

    @property
    def scores_table(self) -> str:
        """The scores table that score filters and the exported scores read."""
        return self._requests.scores_table

    def write_file(
        self, project: str, filters: RequestFilter, fmt: str, include_metadata: bool, path: Path
    ) -> int:
        """Write matching records to ``path`` (CSVWithNames or JSON lines); return the count."""
        where, params = filter_where(project, filters)
        # Each record's scores (docs/api-notes.md, "Scores and feedback"): a JSON array, in CSV a
        # column holding it.
        scores = record_scores_json(self.scores_table)
        settings = _COLUMNS_BEFORE_ALIASES
        if fmt == "csv":
            columns = _CSV_COLUMNS.format(
                metadata="metadata, " if include_metadata else "", scores=scores
            )
            output_format = "CSVWithNames"
            settings = _CSV_SETTINGS
        else:
            metadata = "',\"metadata\":', metadata, " if include_metadata else ""
            columns = _JSON_LINE.format(metadata=metadata, scores=scores)
            output_format = "TabSeparatedRaw"
        select = (
            f"SELECT {columns} FROM {self._requests.table} FINAL WHERE {where} "
            "ORDER BY created_at DESC, id DESC"
        )
        count = int(
            self._client.query(
                f"SELECT count() FROM {self._requests.table} FINAL WHERE {where}", parameters=params
            ).result_rows[0][0]
        )
        if self._embedded:
            # chDB writes the file itself: rows never pass through Python.
            self._client.command(
                f"INSERT INTO FUNCTION file({{path:String}}, '{output_format}') {select}",
                parameters={**params, "path": str(path)},
                settings={**settings, "engine_file_truncate_on_insert": 1},
            )
            if not path.exists():
                # ClickHouse writes no file for an empty result: a CSV still gets its header.
                self._write_empty(select, params, fmt, path)
        else:
            # A server streams the formatted bytes over HTTP into the shared export dir.
            stream = self._client.raw_stream(
                select, parameters=params, settings=settings, fmt=output_format
            )
            with path.open("wb") as handle:
                for chunk in stream:
                    handle.write(chunk)
        return count

    def _write_empty(self, select: str, params: dict[str, Any], fmt: str, path: Path) -> None:
        if fmt != "csv":
            path.touch()
            return
        names = self._client.query(
            f"{select} LIMIT 0", parameters=params, settings=_COLUMNS_BEFORE_ALIASES
        ).column_names
        path.write_text(",".join(f'"{name}"' for name in names) + "\n")
