"""The score configs: what scores of a name must be (docs/api-notes.md, "Scores and
feedback"), one row per (project, name), the newest write winning.

Apart from the score store (:mod:`.scores`), which answers for them, to keep it one class
of scores.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from clickhouse_connect.driver.client import Client

from .score_rows import ScoreConfigRow, as_utc
from .score_tables import SCORE_CONFIGS
from .writes.direct import direct_write
from .writes.outcomes import WriteOutcome


class ScoreConfigs:
    """Reads and writes ``score_configs``."""

    def __init__(
        self,
        client: Client,
        table: str,
        write_settings: dict[str, Any],
        read_settings: dict[str, Any],
    ) -> None:
        """``table``: the quoted ``score_configs``."""
        self._client = client
        self._configs = table
        self._write_settings = write_settings
        self._read_settings = read_settings

    def put(self, project: str, config: ScoreConfigRow) -> WriteOutcome:
        """Store (replace) the config of one score name; answers as ScoreStore.insert does."""
        return direct_write(lambda: self._put_config(project, config))

    def _put_config(self, project: str, config: ScoreConfigRow) -> None:
        self._client.insert(
            self._configs,
            [
                [
                    project,
                    config.name,
                    config.data_type,
                    config.min,
                    config.max,
                    config.categories or [],
                    int(config.categories is not None),
                    config.description,
                    config.updated_at,
                ]
            ],
            column_names=SCORE_CONFIGS.inserted_columns(),
            column_type_names=SCORE_CONFIGS.column_types(SCORE_CONFIGS.inserted_columns()),
            settings=self._write_settings,
        )

    def read(self, project: str, names: Iterable[str] | None = None) -> list[ScoreConfigRow]:
        """Return the project's configs (of ``names`` only, when given), by name."""
        wanted = None if names is None else sorted(set(names))
        if wanted == []:
            return []
        rows = self._client.query(
            "SELECT name, data_type, min, max, categories, has_categories, description, "
            f"updated_at FROM {self._configs} FINAL WHERE project = {{p:String}} "
            + ("AND name IN {names:Array(String)} " if wanted is not None else "")
            + "ORDER BY name",
            parameters={"p": project, "names": wanted or []},
            settings=self._read_settings,
        ).result_rows
        return [
            ScoreConfigRow(
                name=str(r[0]),
                data_type=str(r[1]),
                min=r[2],
                max=r[3],
                categories=list(r[4]) if r[5] else None,
                description=r[6],
                updated_at=as_utc(r[7]),
            )
            for r in rows
        ]
