// The playground's grid: one row per input (a set of variables, or a dataset item), one column
// per model or variant, one cell per pair, each filled as its run's stream arrives (`chunk`
// events append text nodes; `end` gives the cell's tokens, cost, latency, time to first token,
// status and error). Runs are fetch POSTs read as server-sent events, as in run.js.

import { readEvents, request } from "./api.js";
import { costText, h, replace, statusBadge } from "./dom.js";
import * as fmt from "./format.js";

/** POST a playground run with `stream: true`; `onEvent` gets start, chunk, end and done. */
export async function streamRun(body, onEvent) {
  const response = await request("/playground/runs", {
    method: "POST",
    body: { ...body, stream: true },
  });
  await readEvents(response, onEvent);
}

/**
 * The grid: `columns` are [{label, title}], rows are added with `addRow(label)` (answering
 * its index). `cell(row, column)` answers the cell's handle: start(), chunk(text), end(cell),
 * fail(text).
 */
export function resultGrid(columns) {
  const head = h(
    "tr",
    {},
    h("th", { scope: "col", class: "corner" }, "Input"),
    columns.map((c, index) =>
      h("th", { scope: "col", title: c.title || null, "data-column": index }, c.label),
    ),
  );
  const body = h("tbody", {});
  const rowLabels = [];
  const cells = [];
  const element = h(
    "div",
    { class: "grid-wrap" },
    h(
      "table",
      { class: "playground-grid", "aria-label": "Playground results" },
      h("thead", {}, head),
      body,
    ),
  );
  const addRow = (label) => {
    const index = rowLabels.length;
    rowLabels.push(label);
    const row = columns.map((column, c) => {
      // On a phone a cell is a card under its row: its label names the column.
      return gridCell(column.label, index, c);
    });
    cells.push(row);
    body.append(
      h(
        "tr",
        { "data-row": index },
        h("th", { scope: "row", class: "row-label" }, label),
        row.map((handle) => handle.element),
      ),
    );
    return index;
  };
  return { element, addRow, cell: (row, column) => cells[row]?.[column], rows: rowLabels };
}

/** One cell: waiting, then streaming, then its figures (or its error). */
function gridCell(label, row, column) {
  const output = h("pre", { class: "cell-output", "aria-live": "off" });
  const state = h("div", { class: "cell-state" }, h("span", { class: "muted" }, "not run"));
  const figures = h("div", { class: "cell-figures" });
  const error = h("p", { class: "cell-error error hidden", role: "alert" });
  const element = h(
    "td",
    { class: "grid-cell", "data-row": row, "data-column": column, "data-label": label },
    state,
    output,
    figures,
    error,
  );
  return {
    element,
    start() {
      element.dataset.status = "running";
      replace(state, h("span", { class: "badge" }, "running"));
      replace(output);
      replace(figures);
      error.classList.add("hidden");
    },
    chunk(text) {
      element.dataset.status = "streaming";
      output.append(text);
    },
    end(cell) {
      element.dataset.status = cell.status;
      replace(state, statusBadge(cell.status));
      if (cell.output && !output.textContent) output.append(cell.output);
      if (cell.tool_calls?.length) {
        output.append(
          ...cell.tool_calls.map((call) => `\n${call.name}(${call.arguments ?? ""})`),
        );
      }
      replace(figures, cellFigures(cell));
      if (cell.error) {
        replace(error, `${cell.error.message} (${cell.error.code})`);
        error.classList.remove("hidden");
      }
    },
    fail(text) {
      element.dataset.status = "error";
      replace(state, statusBadge("error"));
      replace(error, text);
      error.classList.remove("hidden");
    },
  };
}

/** A finished cell's figures: tokens, cost, latency, time to first token, its record. */
function cellFigures(cell) {
  const usage = cell.usage ?? {};
  const item = (term, value) =>
    h("span", { class: "figure" }, h("span", { class: "muted" }, `${term} `), value);
  return [
    item("tokens", fmt.count(usage.total_tokens ?? 0)),
    item("cost", costText(cell.estimated_cost_usd ?? usage.estimated_cost_usd, cell.cost_known)),
    item("latency", fmt.duration(cell.latency_ms)),
    cell.time_to_first_token_ms === null || cell.time_to_first_token_ms === undefined
      ? null
      : item("TTFT", fmt.duration(cell.time_to_first_token_ms)),
    cell.request_id
      ? h(
          "a",
          { class: "figure", href: `#/requests/${encodeURIComponent(cell.request_id)}` },
          "record",
        )
      : null,
  ];
}
