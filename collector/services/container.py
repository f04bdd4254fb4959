"""The services container: every service of one app, wired over one store.

The composition root: :meth:`Services.build` is the one place that knows which store, cache,
provider and setting each service is built from. ``app.py`` builds it at start-up; routes
reach it through ``api/deps.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from ..access.principal import SessionResolver
from ..config import Settings
from ..providers import HttpPolicy, Provider, ProviderEndpoint
from ..providers.anthropic import DEFAULT_BASE_URL as ANTHROPIC_BASE_URL
from ..providers.anthropic import AnthropicProvider
from ..providers.openai import DEFAULT_BASE_URL as OPENAI_BASE_URL
from ..providers.openai import OpenAIProvider
from ..store.accounts import AccountStore
from ..store.audit import AuditStore
from ..store.collector_heartbeats import HeartbeatStore
from ..store.connections import ConnectionStore
from ..store.database import Store
from ..store.protected_labels import ProtectedLabelStore
from ..store.traces import TraceStore
from ..store.writes import GroupCommitLimits, PendingWrites, RowWriter
from ..store.writes.plan import REQUEST_LOG
from .accounts import Accounts, KeyProjects
from .analytics import AnalyticsService
from .audit import AuditService, key_hints
from .backups import BackupService
from .connections.budget import SpendBook
from .connections.credentials import Credentials
from .connections.sealing import load_keys
from .connections.service import ConnectionService
from .datasets import DatasetService
from .evaluation import Evaluation
from .evaluation.backfill import Backfills
from .evaluation.judging import Judges
from .evaluation.ownership import Ownership
from .evaluation.worker import EvaluationWorker
from .experiment_traffic import ExperimentTraffic
from .experiments import ExperimentService
from .exports import ExportService
from .faults import FaultService
from .ingest import IngestService
from .keys import KeyCache, KeyService
from .otlp import OtlpService
from .playground.service import PlaygroundService
from .pricing import GenaiPriceBook
from .prompts import PromptService
from .prompts.live_ids import LiveIdIndex
from .prompts.matching import ChatLinks
from .prompts.version_cache import VersionCache
from .protected_labels import ProtectedLabels
from .rate_limits import ProjectLimits
from .requests import RequestService
from .rollups import RollupService
from .runs import RunService
from .scores import ScoreService
from .sso import SsoConfig, SsoService
from .traces import TraceService


@dataclass
class Services:
    """Everything a route may call, built once per app."""

    settings: Settings
    store: Store
    keys: KeyService
    prompts: PromptService
    ingest: IngestService
    records: RowWriter
    requests: RequestService
    analytics: AnalyticsService
    rollups: RollupService
    exports: ExportService
    backups: BackupService
    runs: RunService
    otlp: OtlpService
    faults: FaultService
    pending: PendingWrites
    rate_limits: ProjectLimits
    scores: ScoreService
    traces: TraceService
    datasets: DatasetService
    experiments: ExperimentService
    connections: ConnectionService
    evaluation: Evaluation
    accounts: Accounts
    protected_labels: ProtectedLabels
    playground: PlaygroundService
    # Set by the accounts service when people may sign in; None: keys only.
    sessions: SessionResolver | None = None
    # Sign-in through an OpenID Connect provider (docs/security.md, "SSO").
    sso: SsoService | None = None
    # The audit log (docs/security.md, "Audit log"); set by build.
    audit: AuditService | None = None
    # Online evaluation's worker (docs/api-notes.md, "Online evaluation"), started by the
    # app's lifespan; set by build.
    evaluation_worker: EvaluationWorker | None = None

    @classmethod
    def build(cls, settings: Settings, store: Store) -> Services:
        """Wire services over a store (start background work with :meth:`start`)."""
        # Both are exact only where this process is the store's only writer.
        # On a server other collectors write too: the live-id index is kept fresh by polling
        # (PROMPTRAIL_REGISTRY_POLL_SECONDS; 0 reads every prompt from the store there).
        polled = not store.is_embedded and settings.registry_poll_seconds > 0
        prompts = PromptService(
            store.prompts,
            settings.cursor_secret,
            VersionCache(enabled=store.is_embedded),
            LiveIdIndex(enabled=store.is_embedded or polled, polled=polled),
            # Linking unnamed records: kept fresh by the writes and the poll; a server without
            # polling reads a project's chat versions again every few seconds.
            ChatLinks(store.prompts, max_age=None if store.is_embedded or polled else 5.0),
        )
        prices = GenaiPriceBook()  # one price book: runs and every ingest path price alike
        retry_after = settings.store_retry_after_seconds
        # The request log's one writer (docs/architecture.md, "The write path"): ingest's
        # records and the runs' go through it alike.
        records = RowWriter.for_group(
            REQUEST_LOG,
            store.request_writes,
            store.is_embedded,
            GroupCommitLimits(
                pending_bytes=settings.ingest_buffer_bytes,
                wait_seconds=settings.ingest_wait_seconds,
                probe_seconds=min(1.0, retry_after),
                journal=settings.request_journal,
            ),
        )
        ingest = IngestService(
            store.requests,
            records,
            max_batch_records=settings.max_batch_records,
            prices=prices,
            retry_after_seconds=retry_after,
            experiments=ExperimentTraffic(store.experiments.client_ids),
            links=prompts.links,
        )
        pending = PendingWrites(retry_after=retry_after, settle=records.settle)
        rollups = RollupService(
            store.rollups,
            settle=timedelta(seconds=settings.rollup_settle_seconds),
            interval=settings.rollup_interval_seconds,
        )
        # Every collector on an embedded store lives in this process: they share the
        # cache of checked keys, which a revocation clears (services/keys.py).
        keys = KeyService(
            store.keys,
            KeyCache.shared(settings.store_url, store.database) if store.is_embedded else None,
            retry_after,
        )
        requests = RequestService(store.requests, settings.cursor_secret, pending)
        scores = ScoreService(
            store.scores,
            settings.cursor_secret,
            keys.hashes_by_id,
            keys.active_project,
            retry_after,
        )
        connection_store = ConnectionStore(store.client, store.database, store.cluster)
        connections = ConnectionService(
            connection_store,
            load_keys(settings),
            SpendBook(connection_store, pending.wait),
            pending,
            retry_after,
        )
        environment = _providers(settings)
        credentials = Credentials(connections, environment, _policy(settings))
        runs = RunService(prompts, records, environment, prices, pending, credentials)
        datasets = DatasetService(store.datasets, requests, settings.cursor_secret, retry_after)
        evaluation = Evaluation.build(
            store.log_client, store.database, store.cluster, settings.cursor_secret, retry_after
        )
        # Checked on every label change of the registry (docs/api-notes.md, "Protected labels").
        protected_labels = ProtectedLabels(
            ProtectedLabelStore(store.client, store.database, store.cluster), retry_after
        )
        prompts.label_guard = protected_labels
        # Users, sign-in sessions, projects and members (docs/security.md, "Accounts").
        accounts = Accounts.build(
            AccountStore(store.client, store.database, store.cluster),
            KeyProjects(store.keys.count_for, lambda: {row.project for row in store.keys.rows()}),
            retry_after,
        )
        # Online evaluation's worker and its backfills (docs/api-notes.md, "Online evaluation").
        worker = EvaluationWorker(
            evaluation.work,
            evaluation.decision_store,
            evaluation.evaluators,
            prompts,
            scores,
            Judges(runs),
            pending.wait,
            settings.evaluation_poll_seconds,
        )
        worker.backfills = Backfills(worker, evaluation.work, evaluation.rules)
        if not store.is_embedded:  # collectors sharing a server split the rules (ownership.py)
            worker.ownership = Ownership(
                HeartbeatStore(store.client, store.database, store.cluster)
            )
        evaluation.rules.on_change = worker.wake
        # The audit log (docs/security.md, "Audit log"): a backup holds every entry acknowledged.
        audit_store = AuditStore(store.client, store.database, store.cluster, settings.store_url)
        store.backups.also_settle(audit_store.settle)
        store.backups.also_settle(records.settle)  # the log's journal too
        return cls(
            settings=settings,
            store=store,
            keys=keys,
            accounts=accounts,
            protected_labels=protected_labels,
            playground=PlaygroundService(runs, prompts, datasets, prices),
            sessions=accounts.sessions,
            prompts=prompts,
            ingest=ingest,
            records=records,
            requests=requests,
            analytics=AnalyticsService(store.analytics, rollups, pending),
            rollups=rollups,
            exports=ExportService(
                store.exports,
                settings.exports_path,
                timedelta(days=settings.export_retention_days),
                pending,
            ),
            backups=BackupService(store.backups, settings.exports_path, store.is_embedded),
            runs=runs,
            otlp=OtlpService(ingest),
            faults=FaultService(store),
            pending=pending,
            rate_limits=ProjectLimits(
                settings.limit_requests,
                settings.limit_records,
                settings.limit_bytes,
                settings.project_limits,
            ),
            scores=scores,
            traces=TraceService(
                TraceStore(store.log_client, store.database),
                scores,
                settings.cursor_secret,
                pending,
            ),
            datasets=datasets,
            experiments=ExperimentService(
                store.experiments,
                datasets,
                prompts,
                runs,
                scores,
                settings.cursor_secret,
                retry_after,
                named_evaluators=evaluation.evaluators,
            ),
            evaluation=evaluation,
            connections=connections,
            sso=SsoService(
                SsoConfig.from_settings(settings),
                accounts,
                AccountStore(store.client, store.database, store.cluster),
                retry_after,
            ),
            audit=AuditService(audit_store, key_hints(store.keys)),
            evaluation_worker=worker,
        )

    def start(self) -> None:
        """Start background work: exports and their upkeep, the rollup's sealer, keys' last use."""
        self.exports.start(sole_runner=self.store.is_embedded)
        self.rollups.start()
        self.keys.start()
        if self.prompts.live_ids.polled:
            self.prompts.start_polling(self.settings.registry_poll_seconds)
        # Chat versions for linking read now, before serving, not on a batch's first record.
        self.prompts.links.start_warming(self.store.keys.projects)
        keys = self.connections.keys
        if keys is not None and keys.previous:
            # A key rotation (docs/security.md, Connections): seal every connection again.
            self.connections.reseal()
        if self.store.is_embedded:
            # The only runner of this store: an experiment still running died with its process.
            self.experiments.recover()

    def close(self) -> None:
        """Close provider clients, flush records, stop background work, close the store."""
        self.experiments.close()
        self.runs.close()
        self.pending.close()
        self.records.close()
        self.exports.close()
        self.rollups.close()
        self.keys.close()
        self.prompts.links.stop()  # its start read and compiling, before the store closes
        self.prompts.close()
        if self.audit is not None:
            self.audit.close()
        self.store.close()


def _policy(settings: Settings) -> HttpPolicy:
    """The timeouts, retries and pool size of every provider client."""
    return HttpPolicy(
        connect_timeout=settings.provider_connect_timeout,
        read_timeout=settings.provider_read_timeout,
        max_retries=settings.provider_max_retries,
        retry_base_delay=settings.provider_retry_base_delay,
        retry_max_delay=settings.provider_retry_max_delay,
        max_connections=settings.provider_max_connections,
    )


def _providers(settings: Settings) -> dict[str, Provider]:
    """Build one pooled client per model provider, as the settings configure them."""
    policy = _policy(settings)
    openai_key = settings.openai_api_key
    anthropic_key = settings.anthropic_api_key
    return {
        "openai": OpenAIProvider(
            ProviderEndpoint(
                settings.openai_base_url or OPENAI_BASE_URL,
                openai_key.get_secret_value() if openai_key else None,
            ),
            policy,
        ),
        "anthropic": AnthropicProvider(
            ProviderEndpoint(
                settings.anthropic_base_url or ANTHROPIC_BASE_URL,
                anthropic_key.get_secret_value() if anthropic_key else None,
            ),
            policy,
        ),
    }
