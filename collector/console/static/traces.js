// Traces: the list (GET /v1/traces, newest first, filtered by date, user, session and root
// name) and one trace (GET /v1/traces/{id} read whole) as its tree and waterfall. The list
// table and its rows are shared with the Sessions and Users pages.

import { api } from "./api.js";
import { costText, facts, field, h, replace, section } from "./dom.js";
import * as fmt from "./format.js";
import { PAGE_SIZE, filterForm, paged } from "./paging.js";
import { scoreBadges, scoreConfigs, traceScoresSection } from "./scores.js";
import { environmentField } from "./environments.js";
import { evaluationsSection } from "./evaluations.js";
import { readTrace, traceHref, traceTree } from "./trace.js";

/** The route of the session page of `sessionId`. */
export const sessionHref = (sessionId) => `#/sessions/${encodeURIComponent(sessionId)}`;
/** The route of the user page of `userId`. */
export const userHref = (userId) => `#/users/${encodeURIComponent(userId)}`;
/** The route of a record's detail. */
export const recordHref = (id) => `#/requests/${encodeURIComponent(id)}`;

/**
 * A list's table: `columns` are [label, class] pairs ("num" right-aligns). On a phone its rows
 * become cards, each cell under its column's name.
 */
export function listTable(columns, body, label, className = "") {
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      { class: `records listing ${className}`.trim(), "aria-label": label },
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          columns.map(([name, kind]) => h("th", { class: kind, scope: "col" }, name)),
        ),
      ),
      body,
    ),
  );
}

/**
 * One row: `cells` under `columns`. The first cell holds the row's link (what the keyboard
 * reaches); a click anywhere else on the row follows it too.
 */
export function listRow(columns, cells, href) {
  const row = h(
    "tr",
    {},
    cells.map((cell, i) => {
      const [label, kind] = columns[i];
      return h("td", { class: i === 0 ? "lead" : kind, "data-label": label }, cell);
    }),
  );
  row.addEventListener("click", (event) => {
    if (event.target.closest("a") === null) window.location.hash = href;
  });
  return row;
}

/** A link to `href` showing `text`, or "—" when there is nothing to link to. */
export function linkOr(text, href) {
  return text ? h("a", { href, title: text }, text) : h("span", { class: "muted" }, "—");
}

/** The form fields shared by the lists: a text input or a date input named `name`. */
export function inputs(filters) {
  const named = (name) => ({ id: `filter-${name}`, name, value: filters.get(name) || "" });
  return {
    text: (name, placeholder) => h("input", { ...named(name), type: "text", placeholder }),
    date: (name) => h("input", { ...named(name), type: "date" }),
  };
}

/** A list's status line: "3 traces shown", or why none are. */
export function describeList(noun, plural, filtered) {
  return (shown, hasMore) => {
    if (shown === 0) return filtered ? `No ${plural} match these filters.` : `No ${plural} yet.`;
    const counted = `${fmt.count(shown)} ${shown === 1 ? noun : plural} shown`;
    return `${counted}${hasMore ? ", more to load" : ""}.`;
  };
}

const FILTERS = ["start_date", "end_date", "user_id", "session_id", "name", "environment"];

const COLUMNS = [
  ["Started (UTC)", ""],
  ["Name", ""],
  ["Duration", "num"],
  ["Records", "num"],
  ["Model calls", "num"],
  ["Errors", "num"],
  ["Tokens", "num"],
  ["Cost", "num"],
  ["User", ""],
  ["Session", ""],
];

/** #/traces?<filters>: the filters, the table of traces and "Load more". */
export async function showTraces(view, filters) {
  const results = h("div", { class: "results" });
  replace(view, h("h1", {}, "Traces"), traceFilters(filters), results);
  const body = h("tbody");
  const query = { limit: PAGE_SIZE };
  for (const name of FILTERS) query[name] = filters.get(name);
  await paged(results, listTable(COLUMNS, body, "Traces"), {
    loading: "Loading…",
    fetchPage: (cursor) => api("/traces", { query: { ...query, cursor } }),
    add: (traces) => body.append(...traces.map(traceRow)),
    describe: describeList(
      "trace",
      "traces",
      FILTERS.some((name) => filters.get(name)),
    ),
  });
}

function traceFilters(filters) {
  const { text, date } = inputs(filters);
  return filterForm("#/traces", "Filter traces", [
    field("From", date("start_date")),
    field("To", date("end_date")),
    field("Name", text("name", "root span name")),
    field("User", text("user_id", "metadata.user_id")),
    field("Session", text("session_id", "any session")),
    environmentField(filters),
  ]);
}

function traceRow(trace) {
  const href = traceHref(trace.trace_id);
  return listRow(
    COLUMNS,
    [
      h("a", { href }, fmt.time(trace.started_at)),
      [
        h("span", { class: "cut", title: trace.name }, trace.name || "(unnamed)"),
        scoreBadges(trace.scores),
      ],
      fmt.duration(trace.duration_ms),
      fmt.count(trace.records),
      fmt.count(trace.llm_calls),
      errorCount(trace.errors),
      fmt.count(trace.total_tokens),
      costText(trace.estimated_cost_usd),
      linkOr(trace.user_id, userHref(trace.user_id)),
      linkOr(trace.session_id, sessionHref(trace.session_id)),
    ],
    href,
  );
}

/** An error count: red when there are any. */
export function errorCount(errors) {
  return errors ? h("span", { class: "badge bad" }, fmt.count(errors)) : "0";
}

/** #/traces/<id>: one trace's totals, then its records as a tree and a waterfall. */
export async function showTrace(view, traceId) {
  const found = await readTrace(traceId);
  if (found === null) {
    replace(
      view,
      h("a", { class: "back", href: "#/traces" }, "← Traces"),
      h("p", { class: "error", role: "alert" }, `No trace ${traceId} in this project.`),
    );
    return;
  }
  const { trace } = found;
  replace(
    view,
    h("a", { class: "back", href: "#/traces" }, "← Traces"),
    h("h1", {}, trace.name || "(unnamed trace)"),
    h("p", { class: "muted mono record-id" }, trace.trace_id),
    h(
      "div",
      { class: "detail" },
      section("Summary", traceFacts(trace)),
      await traceScoresSection(trace.trace_id, trace.scores, await scoreConfigs()),
      evaluationsSection(trace.evaluations),
      h("section", { class: "card wide trace" }, h("h2", {}, "Spans"), traceTree(found)),
    ),
  );
}

function traceFacts(trace) {
  return facts([
    ["Started (UTC)", fmt.time(trace.started_at)],
    ["Duration", fmt.duration(trace.duration_ms)],
    ["Records", fmt.count(trace.records)],
    ["Model calls", fmt.count(trace.llm_calls)],
    ["Errors", fmt.count(trace.errors)],
    ["Tokens", fmt.count(trace.total_tokens)],
    ["Estimated cost", fmt.cost(trace.estimated_cost_usd)],
    ["User", trace.user_id && h("a", { href: userHref(trace.user_id) }, trace.user_id)],
    [
      "Session",
      trace.session_id && h("a", { href: sessionHref(trace.session_id) }, trace.session_id),
    ],
  ]);
}
