// Sessions: the list (GET /v1/sessions, latest activity first) and one session as a
// conversation (GET /v1/sessions/{id}): each turn's input and output in order, with its model,
// latency, cost and scores, linked to its record and its trace.

import { api } from "./api.js";
import {
  asText,
  costText,
  facts,
  field,
  h,
  longText,
  replace,
  section,
  statusBadge,
} from "./dom.js";
import * as fmt from "./format.js";
import { PAGE_SIZE, filterForm, paged } from "./paging.js";
import { environmentField } from "./environments.js";
import { evaluationsSection } from "./evaluations.js";
import { scoreBadges, scoreConfigs, sessionScoresSection } from "./scores.js";
import { traceHref } from "./trace.js";
import {
  describeList,
  errorCount,
  inputs,
  linkOr,
  listRow,
  listTable,
  recordHref,
  sessionHref,
  userHref,
} from "./traces.js";

const FILTERS = ["user_id", "start_date", "end_date", "environment"];

const COLUMNS = [
  ["Last activity (UTC)", ""],
  ["Session", ""],
  ["Users", ""],
  ["Started (UTC)", ""],
  ["Model calls", "num"],
  ["Errors", "num"],
  ["Tokens", "num"],
  ["Cost", "num"],
];

/** #/sessions?<filters>: the filters, the table of sessions and "Load more". */
export async function showSessions(view, filters) {
  const results = h("div", { class: "results" });
  replace(view, h("h1", {}, "Sessions"), sessionFilters(filters), periodNote(filters), results);
  await sessionList(results, filters);
}

/** The table of sessions matching `filters` (user_id, start_date, end_date) into `container`. */
export async function sessionList(container, filters) {
  const body = h("tbody");
  const query = { limit: PAGE_SIZE };
  for (const name of FILTERS) query[name] = filters.get(name);
  await paged(container, listTable(COLUMNS, body, "Sessions"), {
    loading: "Loading…",
    fetchPage: (cursor) => api("/sessions", { query: { ...query, cursor } }),
    add: (sessions) => body.append(...sessions.map(sessionRow)),
    describe: describeList(
      "session",
      "sessions",
      FILTERS.some((name) => filters.get(name)),
    ),
  });
}

/** What the lists of sessions and users cover when no dates are chosen (the API's default). */
export function periodNote(filters) {
  if (filters.get("start_date") || filters.get("end_date")) return null;
  return h("p", { class: "muted period" }, "The last 30 days (choose dates to see others).");
}

function sessionFilters(filters) {
  const { text, date } = inputs(filters);
  return filterForm("#/sessions", "Filter sessions", [
    field("User", text("user_id", "metadata.user_id")),
    field("From", date("start_date")),
    field("To", date("end_date")),
    environmentField(filters),
  ]);
}

function sessionRow(session) {
  const href = sessionHref(session.session_id);
  return listRow(
    COLUMNS,
    [
      h("a", { href }, fmt.time(session.last_at)),
      [
        h("span", { class: "cut", title: session.session_id }, session.session_id),
        scoreBadges(session.scores),
      ],
      userLinks(session.user_ids),
      fmt.time(session.first_at),
      fmt.count(session.records),
      errorCount(session.errors),
      fmt.count(session.total_tokens),
      costText(session.estimated_cost_usd),
    ],
    href,
  );
}

function userLinks(userIds) {
  if (!userIds.length) return linkOr("", "");
  return h(
    "span",
    { class: "user-links" },
    userIds.map((id) => h("a", { href: userHref(id), title: id }, id)),
  );
}

/** #/sessions/<id>: the session's totals, then its model calls as a conversation. */
export async function showSession(view, sessionId) {
  const path = `/sessions/${encodeURIComponent(sessionId)}`;
  const configs = scoreConfigs(); // asked beside the session, not after it
  const first = await api(path, { query: { limit: PAGE_SIZE } });
  const session = first.data;
  // The session's own scores (with their comments) and the form judging the conversation.
  const scores = await sessionScoresSection(sessionId, session.scores, await configs);
  const turns = h("ol", { class: "conversation", "aria-label": "Turns of the session" });
  const results = h("div", { class: "results" });
  replace(
    view,
    h("a", { class: "back", href: "#/sessions" }, "← Sessions"),
    h(
      "h1",
      {},
      h("span", { class: "muted" }, "Session"),
      " ",
      h("span", { class: "cut", title: sessionId }, sessionId),
    ),
    h(
      "div",
      { class: "detail" },
      section("Summary", sessionFacts(session)),
      scores,
      // Each rule's decision on the session with its reason, as a trace's page shows it.
      evaluationsSection(session.evaluations),
    ),
    h("h2", { class: "conversation-head" }, "Conversation"),
    results,
  );
  await paged(results, turns, {
    loading: "Loading…",
    fetchPage: async (cursor) => {
      const page = cursor ? await api(path, { query: { limit: PAGE_SIZE, cursor } }) : first;
      return { data: page.data.items, pagination: page.pagination };
    },
    add: (records) => {
      const before = turns.children.length;
      const added = records.map((record, i) => turn(record, before + i));
      turns.append(...added.map(({ item }) => item));
      fillFromDetails(added);
    },
    describe: (shown, hasMore) =>
      `${fmt.count(shown)} of ${fmt.count(session.records)} turns shown` +
      `${hasMore ? ", more to load" : ""}.`,
  });
}

function sessionFacts(session) {
  return facts([
    ["Started (UTC)", fmt.time(session.first_at)],
    ["Last activity (UTC)", fmt.time(session.last_at)],
    ["Users", session.user_ids.length ? userLinks(session.user_ids) : ""],
    ["Model calls", fmt.count(session.records)],
    ["Errors", fmt.count(session.errors)],
    ["Tokens", fmt.count(session.total_tokens)],
    ["Estimated cost", fmt.cost(session.estimated_cost_usd)],
  ]);
}

/**
 * One turn: its head (time linking to the record, model, status, latency, cost, scores, trace
 * link), what went in and what came out. A turn whose input has no variables (a captured call)
 * shows its last user message, and a failed turn its error, read from the record's detail by
 * `fillFromDetails`.
 */
function turn(record, index) {
  const input = h("div", { class: "turn-input" });
  const head = h(
    "div",
    { class: "turn-head" },
    h("span", { class: "turn-number" }, `#${index + 1}`),
    h("a", { href: recordHref(record.id), class: "mono" }, fmt.time(record.created_at)),
    h("span", { class: "mono" }, record.model || "—"),
    statusBadge(record.status),
    h("span", {}, fmt.duration(record.latency_ms)),
    costText(record.usage.estimated_cost_usd, record.cost_known),
    record.trace_id ? h("a", { href: traceHref(record.trace_id) }, "Trace") : null,
    scoreBadges(record.scores),
  );
  const output = h("div", { class: "turn-output" }, outputOf(record));
  const variables = Object.entries(record.input_variables || {});
  if (variables.length) replace(input, variableList(variables));
  const item = h(
    "li",
    { class: `turn${record.status === "error" ? " failed" : ""}`, "data-record-id": record.id },
    head,
    h("div", { class: "turn-label" }, "Input"),
    input,
    h("div", { class: "turn-label" }, "Output"),
    output,
  );
  const failed = record.status === "error";
  return { item, input, output, record, needsInput: !variables.length, failed };
}

function variableList(variables) {
  return h(
    "dl",
    { class: "facts" },
    variables.map(([name, value]) => [h("dt", {}, name), h("dd", {}, longText(value))]),
  );
}

function outputOf(record) {
  const output = record.output || {};
  if (typeof output.content === "string") return longText(output.content, "output");
  if (Object.keys(output).length) return longText(output);
  return h(
    "p",
    { class: "muted" },
    record.status === "error" ? "No output (the call failed)." : "none",
  );
}

// Details read at once for a page's turns: a page of 50 turns must not open 50 connections.
const DETAIL_READS = 4;

/**
 * Read the detail of each turn that needs it (list items carry neither `input` nor `error`):
 * a turn without variables shows its last user message, a failed turn its error.
 */
async function fillFromDetails(turns) {
  const waiting = turns.filter((t) => t.needsInput || t.failed);
  for (const t of waiting) {
    if (t.needsInput) replace(t.input, h("p", { class: "muted" }, "Loading…"));
  }
  const next = async () => {
    for (let t = waiting.shift(); t; t = waiting.shift()) {
      try {
        const { data } = await api(`/requests/${encodeURIComponent(t.record.id)}`);
        if (t.needsInput) replace(t.input, lastUserMessage(data.input));
        if (t.failed && data.error) t.output.append(longText(data.error, "error"));
      } catch {
        if (t.needsInput)
          replace(t.input, h("p", { class: "muted" }, "Could not read this turn's input."));
      }
    }
  };
  await Promise.all(Array.from({ length: DETAIL_READS }, next));
}

/** The turn's own words: the last user message of a chat input, else the whole input. */
function lastUserMessage(input) {
  if (input === null || input === undefined) return h("p", { class: "muted" }, "none");
  if (Array.isArray(input)) {
    const users = input.filter((m) => m && typeof m === "object" && m.role === "user");
    if (users.length) return longText(messageText(users[users.length - 1].content));
  }
  return longText(input);
}

/** A message's content as text: a string, or the text parts of a list of parts. */
function messageText(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    const texts = content.filter((p) => p && typeof p.text === "string").map((p) => p.text);
    if (texts.length) return texts.join("\n");
  }
  return asText(content ?? "");
}
