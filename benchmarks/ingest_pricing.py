"""What pricing costs ingest per record, in process: the record normalisation with and without it.

    .venv/bin/python benchmarks/ingest_pricing.py

The records are request_log.py's (five priced models, no client cost), validated as the batch
route validates them; each round normalises all of them once without the price book and once
with it, and the best round of each is kept (a shared machine only ever adds time).
"""

from __future__ import annotations

import json
import random
import time
from datetime import UTC, datetime

from pydantic import TypeAdapter
from request_log import make_pool

from promptrail.collector.models.requests import ValidRequestBatch
from promptrail.collector.services.ingest import record_values
from promptrail.collector.services.pricing import GenaiPriceBook, PriceBook

ROUNDS = 9


def per_record_us(records: list, prices: PriceBook | None) -> float:  # type: ignore[type-arg]
    now = datetime.now(UTC)
    began = time.perf_counter()
    for record in records:
        record_values(record, now, prices)
    return (time.perf_counter() - began) / len(records) * 1e6


def main() -> None:
    pool = make_pool(random.Random(1), client_cost=False)
    stamped = [dict(record, created_at="2026-11-01T00:00:00Z") for record in pool * 3]
    body = json.dumps({"records": stamped}).encode()
    adapter = TypeAdapter(ValidRequestBatch)
    began = time.perf_counter()
    records = adapter.validate_json(body).records
    validate = (time.perf_counter() - began) / len(records) * 1e6
    book = GenaiPriceBook()
    priced = [record_values(r, datetime.now(UTC), book) for r in records]
    assert all(row["cost_known"] for row in priced)
    without = min(per_record_us(records, None) for _ in range(ROUNDS))
    with_prices = min(per_record_us(records, book) for _ in range(ROUNDS))
    print(
        f"{len(records)} records: normalising {without:.2f} µs without pricing, "
        f"{with_prices:.2f} µs with it ({with_prices - without:+.2f} µs per record); "
        f"validating the batch body {validate:.1f} µs per record"
    )


if __name__ == "__main__":
    main()
