// The request log: the filtered list (one API page at a time, "Load more" follows the cursor)
// and the detail of one record.

import { api } from "./api.js";
import { addFromLogPanel, addRecordPanel } from "./datasets.js";
import { costText, facts, field, h, longText, replace, section, statusBadge } from "./dom.js";
import { evaluationsSection } from "./evaluations.js";
import { exportButtons } from "./export.js";
import * as fmt from "./format.js";
import { PAGE_SIZE, filterForm, paged } from "./paging.js";
import { playgroundLink } from "./playground.js";
import { scoreBadges, scoreConfigs, scoresSection } from "./scores.js";
import { searchFilters, searchForm, showHits } from "./search.js";
import { traceHref, traceSection } from "./trace.js";
import { sessionHref, userHref } from "./traces.js";
import { environmentField } from "./environments.js";
import { can } from "./roles.js";

const FILTERS = [
  "prompt_name",
  "status",
  "start_date",
  "end_date",
  "meta_key",
  "meta_value",
  "score_name",
  "score_min",
  "score_max",
  "score_value",
  "environment",
];

/** The list's query for the API from the route's filters (metadata as metadata.<key>). */
function listQuery(filters) {
  const query = {
    limit: PAGE_SIZE,
    prompt_name: filters.get("prompt_name"),
    status: filters.get("status"),
    start_date: filters.get("start_date"),
    end_date: filters.get("end_date"),
    environment: filters.get("environment"),
  };
  const key = filters.get("meta_key");
  if (key) query[`metadata.${key}`] = filters.get("meta_value") || "";
  return { ...query, ...scoreQuery(filters) };
}

/** The API's score filters from the route's: score.<name>.min/.max bound the mean, = a value. */
function scoreQuery(filters) {
  const name = filters.get("score_name");
  if (!name) return {};
  const query = {};
  if (filters.get("score_min")) query[`score.${name}.min`] = filters.get("score_min");
  if (filters.get("score_max")) query[`score.${name}.max`] = filters.get("score_max");
  if (filters.get("score_value")) query[`score.${name}`] = filters.get("score_value");
  return query;
}

/** The export's filters from the route's: the same records the table lists. */
function exportFilters(filters) {
  const chosen = {};
  for (const name of ["prompt_name", "status", "start_date", "end_date", "environment"]) {
    if (filters.get(name)) chosen[name] = filters.get(name);
  }
  const key = filters.get("meta_key");
  if (key) chosen.metadata = { [key]: filters.get("meta_value") || "" };
  return { ...chosen, ...scoreQuery(filters) };
}

/** A dataset's filters from the route's: the export's but the environment (a dataset made from
 * the log takes the default view). */
function logFilters(filters) {
  const chosen = exportFilters(filters);
  delete chosen.environment;
  return chosen;
}

/** #/requests?<filters>: search, filters, the table and "Load more"; ?q=<text> searches. */
export async function showRequests(view, filters) {
  const query = filters.get("q") || "";
  const environment = filters.get("environment") || "";
  const results = h("div", { class: "results" });
  replace(
    view,
    h(
      "div",
      { class: "page-head" },
      h("h1", {}, "Requests"),
      query || !can("write") ? null : exportButtons(exportFilters(filters)),
    ),
    searchForm(query, environment),
    query
      ? h("a", { class: "back", href: "#/requests" }, "← All requests")
      : requestFilters(filters),
    query ? searchFilters(query, filters) : can("write") && addFromLogPanel(logFilters(filters)),
    results,
  );
  if (query) await showHits(results, query, environment);
  else await showTable(results, filters);
}

async function showTable(container, filters) {
  const body = h("tbody");
  const query = listQuery(filters);
  await paged(container, h("div", { class: "table-wrap" }, recordTable(body)), {
    loading: "Loading…",
    fetchPage: (cursor) => api("/requests", { query: { ...query, cursor } }),
    add: (records) => body.append(...records.map((record) => recordRow(record, filters))),
    describe: (shown, hasMore) => summaryText(shown, hasMore, filters),
  });
}

function summaryText(shown, hasMore, filters) {
  const filtered = FILTERS.some((name) => filters.get(name));
  const noun = shown === 1 ? "request" : "requests";
  if (shown === 0)
    return filtered ? "No requests match these filters." : "No requests logged yet.";
  return `${fmt.count(shown)} ${noun} shown${hasMore ? ", more to load" : ""}.`;
}

function requestFilters(filters) {
  const value = (name) => filters.get(name) || "";
  const named = (name) => ({ id: `filter-${name}`, name, value: value(name) });
  const text = (name, placeholder) => h("input", { ...named(name), type: "text", placeholder });
  const date = (name) => h("input", { ...named(name), type: "date" });
  const bound = (name) => h("input", { ...named(name), type: "number", step: "any" });
  const status = h(
    "select",
    { id: "filter-status", name: "status" },
    [
      ["", "Any"],
      ["success", "success"],
      ["error", "error"],
    ].map(([option, label]) =>
      h("option", { value: option, selected: value("status") === option }, label),
    ),
  );
  return filterForm("#/requests", "Filter requests", [
    field("Prompt", text("prompt_name", "any prompt")),
    field("Status", status),
    field("From", date("start_date")),
    field("To", date("end_date")),
    field("Metadata key", text("meta_key", "e.g. user_id")),
    field("Metadata value", text("meta_value", "")),
    field("Score name", text("score_name", "e.g. helpfulness")),
    field("Score min", bound("score_min")),
    field("Score max", bound("score_max")),
    field("Score value", text("score_value", "e.g. good, true")),
    environmentField(filters),
  ]);
}

const COLUMNS = [
  ["Time (UTC)", ""],
  ["Prompt", ""],
  ["Version", "num"],
  ["Model", ""],
  ["Status", ""],
  ["Tokens", "num"],
  ["Cost", "num"],
  ["Latency", "num"],
];

function recordTable(body) {
  return h(
    "table",
    { class: "records log" },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        COLUMNS.map(([label, kind]) => h("th", { class: kind, scope: "col" }, label)),
      ),
    ),
    body,
  );
}

function recordRow(record, filters) {
  const href = detailHref(record.id, filters);
  const cells = [
    h("a", { href }, fmt.time(record.created_at)),
    [record.prompt_name || h("span", { class: "muted" }, "—"), scoreBadges(record.scores)],
    record.version ?? "",
    record.model,
    statusBadge(record.status),
    fmt.count(record.usage.total_tokens),
    costText(record.usage.estimated_cost_usd, record.cost_known),
    fmt.duration(record.latency_ms),
  ];
  // Each cell carries its column's name: on a phone the rows become cards that show it.
  const row = h(
    "tr",
    {},
    cells.map((cell, i) => {
      const [label, kind] = COLUMNS[i];
      return h("td", { class: i === 0 ? "time" : kind, "data-label": label }, cell);
    }),
  );
  // The link in the first cell is what the keyboard reaches; a click anywhere on the row works.
  row.addEventListener("click", (event) => {
    if (event.target.closest("a") === null) window.location.hash = href;
  });
  return row;
}

function detailHref(id, filters) {
  const back = filters.toString();
  return `#/requests/${encodeURIComponent(id)}${back ? `?from=${encodeURIComponent(back)}` : ""}`;
}

/** #/requests/<id>: everything the API knows of one record. */
export async function showRequest(view, id, back = "") {
  const [{ data: record }, configs] = await Promise.all([
    api(`/requests/${encodeURIComponent(id)}`),
    scoreConfigs(),
  ]);
  const trace = await traceSection(record);
  replace(
    view,
    h("a", { class: "back", href: back ? `#/requests?${back}` : "#/requests" }, "← Requests"),
    h(
      "h1",
      {},
      record.prompt_name || record.span_name || "Unnamed call",
      " ",
      statusBadge(record.status),
    ),
    h("p", { class: "muted mono record-id" }, record.id),
    // Its exact messages, tools and model in the playground (a run is a write).
    can("write") && record.input && (record.kind ?? "llm") === "llm"
      ? playgroundLink(`request=${encodeURIComponent(record.id)}`)
      : null,
    relatedLinks(record),
    h(
      "div",
      { class: "detail" },
      trace,
      scoresSection(record, configs),
      evaluationsSection(record.evaluations),
      detailSections(record),
      can("write") && addRecordPanel(record),
    ),
  );
}

/** Links to the record's trace, session and user pages (those it has), or null. */
function relatedLinks(record) {
  const metadata = record.metadata || {};
  const text = (value) => (typeof value === "string" && value ? value : null);
  const session = text(metadata.session_id);
  const user = text(metadata.user_id);
  const links = [
    record.trace_id ? h("a", { href: traceHref(record.trace_id) }, "Trace") : null,
    session ? h("a", { href: sessionHref(session), title: session }, `Session ${session}`) : null,
    user ? h("a", { href: userHref(user), title: user }, `User ${user}`) : null,
  ].filter(Boolean);
  if (!links.length) return null;
  return h(
    "nav",
    { class: "related", "aria-label": "This record's trace, session and user" },
    links,
  );
}

/** The cards of one record's detail, from its summary to its integration. */
export function detailSections(record) {
  const usage = record.usage;
  const timing = record.timing;
  const integration = record.integration;
  return [
    section("Summary", summaryFacts(record)),
    record.error ? section("Error", longText(record.error, "error")) : null,
    section("Input variables", keyValues(record.input_variables)),
    record.input === null || record.input === undefined
      ? null
      : section("Input", inputView(record.input)),
    section("Output", outputView(record.output)),
    section("Metadata", keyValues(record.metadata)),
    section(
      "Usage and cost",
      facts([
        ["Prompt tokens", fmt.count(usage.prompt_tokens)],
        ["Completion tokens", fmt.count(usage.completion_tokens)],
        // Counted inside the prompt and completion tokens; shown only when the call had them
        // (facts leaves out an empty value).
        ["Cached prompt tokens (cache read)", whenAny(usage.cached_tokens)],
        ["Cache-write tokens", whenAny(usage.cache_write_tokens)],
        ["Reasoning tokens", whenAny(usage.reasoning_tokens)],
        ["Total tokens", fmt.count(usage.total_tokens)],
        [
          "Estimated cost",
          record.cost_known ? fmt.cost(usage.estimated_cost_usd) : `unknown (${fmt.NO_PRICE})`,
        ],
      ]),
    ),
    section(
      "Timing",
      facts([
        ["Total latency", fmt.duration(timing.total_latency_ms)],
        ["Time to first token", fmt.duration(record.time_to_first_token_ms)],
        ["Pre-processing", fmt.duration(timing.pre_process_ms)],
        ["LLM call", fmt.duration(timing.llm_call_ms)],
        ["Post-processing", fmt.duration(timing.post_process_ms)],
      ]),
    ),
    section(
      "Integration",
      facts([
        ["Pre-process ran", integration.pre_process_executed ? "yes" : "no"],
        ["Post-process ran", integration.post_process_executed ? "yes" : "no"],
        ["Errors", integration.errors.length ? longText(integration.errors) : "none"],
      ]),
    ),
  ];
}

/** A count as text when it is above 0, else null (records stored before migration 21 have 0). */
function whenAny(count) {
  return count ? fmt.count(count) : null;
}

function summaryFacts(record) {
  return facts([
    ["Time (UTC)", fmt.time(record.created_at)],
    ["Status", record.status],
    ["Prompt", record.prompt_name],
    ["Version", record.version ?? ""],
    ["Model", record.model],
    ["Provider", record.provider],
    ["Latency", fmt.duration(record.timing.total_latency_ms)],
    ["Span", record.span_name],
    ["Trace id", record.trace_id && h("span", { class: "mono" }, record.trace_id)],
    ["Span id", record.span_id && h("span", { class: "mono" }, record.span_id)],
    [
      "Parent span id",
      record.parent_span_id && h("span", { class: "mono" }, record.parent_span_id),
    ],
  ]);
}

/** A table of an object's keys and values (values as text or JSON). */
function keyValues(object) {
  const entries = Object.entries(object || {});
  if (entries.length === 0) return h("p", { class: "muted" }, "none");
  return h(
    "table",
    { class: "kv" },
    h(
      "tbody",
      {},
      entries.map(([key, value]) =>
        h("tr", {}, h("th", { scope: "row" }, key), h("td", {}, longText(value))),
      ),
    ),
  );
}

function outputView(output) {
  const { content, ...rest } = output || {};
  return [
    content === undefined ? null : longText(content, "output"),
    Object.keys(rest).length ? keyValues(rest) : null,
    content === undefined && !Object.keys(rest).length ? h("p", { class: "muted" }, "none") : null,
  ];
}

/** Messages as role + content; any other input (Responses, embeddings) as JSON. */
function inputView(input) {
  const isMessages =
    Array.isArray(input) && input.every((m) => m && typeof m === "object" && "role" in m);
  if (!isMessages) return longText(input);
  return h(
    "ol",
    { class: "messages" },
    input.map((message) =>
      h(
        "li",
        {},
        h("span", { class: "role" }, String(message.role)),
        longText(message.content ?? ""),
      ),
    ),
  );
}
