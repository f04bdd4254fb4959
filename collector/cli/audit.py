"""``promptrail audit verify``: recompute the audit log's hash chain (docs/security.md).

promptrail audit verify [--data-dir DIR]

It opens the store itself (the embedded data dir with no collector running, or a ClickHouse
server named by ``PROMPTRAIL_STORE_URL``); while a collector holds the embedded data dir it
asks that collector (its loopback admin route), which runs the same check on its store. It
prints how many entries it checked and the newest entry's hash (keep it elsewhere: a chain cut
short at its newest end is only found against a head kept outside the store); a chain that
does not match exits 1 naming its first bad entry.
"""

from __future__ import annotations

from typing import Any

from ..runtime_file import read_runtime
from .shared import (
    DataDir,
    admin_call,
    console,
    fail,
    first_line,
    group,
    open_store,
    settings_for,
)

# Attached to the root app as ``audit`` (root.py).
app = group("Check the audit log.")


@app.command("verify")
def verify(data_dir: DataDir = None) -> None:
    """Recompute the audit log's chain; exit 1 naming the first entry that does not match."""
    settings = settings_for(data_dir)
    running = read_runtime(settings.data_dir) if settings.is_embedded else None
    # Verifying walks the whole chain: a long log takes minutes.
    verdict = (
        admin_call(running, "GET", "/audit/verify", timeout=600) if running else _on_store(settings)
    )
    problem = verdict.get("problem")
    if problem:
        raise fail(
            f"audit entry {problem['seq']} ({problem['id']}) does not match: {problem['reason']}; "
            f"{verdict['checked']} entries before it match"
        )
    console.print(f"audit log verified: {verdict['checked']} entries, head {verdict['head']}")


def _on_store(settings: Any) -> dict[str, Any]:
    from ..services.audit import verify_chain
    from ..store.audit import AuditStore

    with open_store(settings) as store:
        try:
            audit = AuditStore(store.client, store.database, store.cluster, settings.store_url)
            try:
                verdict = verify_chain(audit.walk())
            finally:
                audit.close()
        except Exception as exc:
            raise fail(f"the store {settings.store_url} failed: {first_line(exc)}") from None
    return verdict.as_json()
