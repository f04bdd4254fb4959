"""The store: one ClickHouse client and the table groups the services use."""

from __future__ import annotations

from typing import cast

from clickhouse_connect.driver.client import Client

from .analytics import AnalyticsStore
from .backups import BackupStore
from .connection import close_client, open_client
from .datasets import DatasetStore
from .experiments import ExperimentStore
from .exports import ExportStore
from .keys import KeyStore
from .migrations import migrate
from .prompts import PromptStore
from .requests import RequestStore, journal_path_of
from .rollups import RollupStore
from .scores import ScoreStore
from .writes.log_journal import SettlingClient


class Store:
    """A migrated ClickHouse database with typed accessors per table group."""

    def __init__(
        self,
        client: Client,
        database: str,
        cluster: str | None = None,
        writer: Client | None = None,
    ) -> None:
        """Query through ``client``; insert records through ``writer`` when given.

        Each client runs one call at a time, so with one client a stalled insert would hold
        every read behind it; the embedded store gives the log's inserts a client of their own
        (both are handles on the one engine of the process).
        """
        self.client = client
        self.database = database
        self.cluster = cluster
        self._writer = writer
        self.keys = KeyStore(client, database, cluster)
        self.prompts = PromptStore(client, database, cluster)
        # The stores reading the request log settle its journal first (store/DESIGN.md, "The
        # request-log journal"), as the log's own store does: a score's record lookups, the
        # rollup, analytics and exports.
        journal = journal_path_of(client, database, cluster)
        log_client = client if journal is None else cast(Client, SettlingClient(client, journal))
        # For the stores built over this store's client elsewhere that read the log too.
        self.log_client = log_client
        self.scores = ScoreStore(log_client, database, cluster, sole_writer=self.is_embedded)
        traced = self.scores.traced_names
        self.requests = RequestStore(client, database, cluster, traced)
        self.request_writes = (
            RequestStore(writer, database, cluster, traced) if writer is not None else self.requests
        )
        self.rollups = RollupStore(log_client, database, self.requests.table)
        self.analytics = AnalyticsStore(log_client, self.requests, self.rollups)
        self.exports = ExportStore(log_client, database, self.requests, self.is_embedded)
        self.backups = BackupStore(client, database, self.prompts.settle)
        self.datasets = DatasetStore(client, database, cluster)
        self.experiments = ExperimentStore(client, database, cluster, log_client=log_client)

    @property
    def is_embedded(self) -> bool:
        """Whether ClickHouse runs inside this process (chDB)."""
        return type(self.client).__name__ == "ChdbClient"

    @classmethod
    def open(cls, url: str, database: str, cluster: str | None = None) -> Store:
        """Connect to ``url``, apply migrations and return the store."""
        client = open_client(url)
        writer = None
        try:
            migrate(client, database, cluster)
            if url.startswith("chdb://"):
                writer = open_client(url)
        except Exception:
            close_client(client)
            raise
        return cls(client, database, cluster, writer)

    def ping(self) -> bool:
        """Return whether the store answers a trivial query."""
        return bool(self.client.query("SELECT 1").result_rows)

    def close(self) -> None:
        """Close the ClickHouse clients."""
        self.prompts.close()
        self.requests.close()
        if self._writer is not None:
            close_client(self._writer)
        close_client(self.client)
