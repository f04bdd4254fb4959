"""Answers read from rows by attribute (collector/models/rows.py): what each field reads."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated

from promptrail.collector.models.requests import RequestDetail, RequestListItem
from promptrail.collector.models.rows import NoneIfEmpty, RowModel
from promptrail.collector.store.request_rows import RequestRow

AT = datetime(2026, 7, 1, 10, tzinfo=UTC)


class Answer(RowModel):
    name: str
    label: Annotated[str | None, NoneIfEmpty] = None
    shown: str


@dataclass(frozen=True)
class Row:
    name: str
    label: str

    @property
    def shown(self) -> str:
        return self.name.upper()


@dataclass(frozen=True, slots=True)
class SlottedRow:
    name: str
    label: str
    shown: str


def test_fields_read_attributes_and_properties_and_given_fields_win() -> None:
    assert Answer.of(Row("a", "")) == Answer(name="a", label=None, shown="A")
    assert Answer.of(Row("a", "x"), shown="given") == Answer(name="a", label="x", shown="given")
    assert Answer.of(SlottedRow("b", "", "s"), name="c") == Answer(name="c", label=None, shown="s")


def test_a_records_empty_columns_are_null_in_its_answers() -> None:
    row = RequestRow(id="req_1", created_at=AT, prompt_name="p", version=0, latency_ms=7)

    item = RequestListItem.of_record(row)
    detail = RequestDetail.of_record(row)

    for answer in (item, detail):
        assert (answer.version, answer.trace_id, answer.span_id, answer.span_name) == (None,) * 4
    assert (detail.provider, detail.error) == (None, None)
    assert item.latency_ms == 7 and detail.timing.total_latency_ms == 7
    assert item.scores == {} and detail.scores == []


def test_a_records_set_columns_are_kept() -> None:
    row = RequestRow(
        id="req_2",
        created_at=AT,
        version=3,
        trace_id="a" * 32,
        span_id="b" * 16,
        provider="openai",
        error="boom",
        total_tokens=12,
        estimated_cost_usd=0.5,
        integration={"pre_process_executed": True, "errors": ["x"]},
    )

    detail = RequestDetail.of_record(row)

    assert (detail.version, detail.trace_id, detail.span_id) == (3, "a" * 32, "b" * 16)
    assert (detail.provider, detail.error) == ("openai", "boom")
    assert (detail.usage.total_tokens, detail.usage.estimated_cost_usd) == (12, 0.5)
    assert detail.integration.model_dump() == {
        "pre_process_executed": True,
        "post_process_executed": False,
        "errors": ["x"],
    }
