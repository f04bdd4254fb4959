// Users: the list (GET /v1/users, latest activity first, each with its totals) and one user's
// sessions (GET /v1/sessions?user_id=) and records (GET /v1/requests?metadata.user_id=).

import { api } from "./api.js";
import { costText, field, h, replace, section, statusBadge } from "./dom.js";
import * as fmt from "./format.js";
import { PAGE_SIZE, filterForm, paged } from "./paging.js";
import { environmentField } from "./environments.js";
import { scoreBadges } from "./scores.js";
import { periodNote, sessionList } from "./sessions.js";
import {
  describeList,
  errorCount,
  inputs,
  listRow,
  listTable,
  recordHref,
  userHref,
} from "./traces.js";

const FILTERS = ["start_date", "end_date", "environment"];

const COLUMNS = [
  ["User", ""],
  ["Last activity (UTC)", ""],
  ["First seen (UTC)", ""],
  ["Model calls", "num"],
  ["Sessions", "num"],
  ["Errors", "num"],
  ["Tokens", "num"],
  ["Cost", "num"],
];

/** #/users?<filters>: the filters, the table of users with their totals and "Load more". */
export async function showUsers(view, filters) {
  const results = h("div", { class: "results" });
  const { date } = inputs(filters);
  const form = filterForm("#/users", "Filter users", [
    field("From", date("start_date")),
    field("To", date("end_date")),
    environmentField(filters),
  ]);
  replace(view, h("h1", {}, "Users"), form, periodNote(filters), results);
  const body = h("tbody");
  const query = { limit: PAGE_SIZE };
  for (const name of FILTERS) query[name] = filters.get(name);
  await paged(results, listTable(COLUMNS, body, "Users"), {
    loading: "Loading…",
    fetchPage: (cursor) => api("/users", { query: { ...query, cursor } }),
    add: (users) => body.append(...users.map(userRow)),
    describe: describeList(
      "user",
      "users",
      FILTERS.some((name) => filters.get(name)),
    ),
  });
}

function userRow(user) {
  const href = userHref(user.user_id);
  return listRow(
    COLUMNS,
    [
      h("a", { href, title: user.user_id }, user.user_id),
      fmt.time(user.last_at),
      fmt.time(user.first_at),
      fmt.count(user.records),
      fmt.count(user.sessions),
      errorCount(user.errors),
      fmt.count(user.total_tokens),
      costText(user.estimated_cost_usd),
    ],
    href,
  );
}

const RECORD_COLUMNS = [
  ["Time (UTC)", ""],
  ["Name", ""],
  ["Model", ""],
  ["Status", ""],
  ["Tokens", "num"],
  ["Cost", "num"],
  ["Latency", "num"],
];

/** #/users/<id>: the user's sessions (the last 30 days) and model calls, newest first. */
export async function showUser(view, userId) {
  const sessions = h("div", { class: "results" });
  const records = h("div", { class: "results" });
  replace(
    view,
    h("a", { class: "back", href: "#/users" }, "← Users"),
    h(
      "h1",
      {},
      h("span", { class: "muted" }, "User"),
      " ",
      h("span", { class: "cut", title: userId }, userId),
    ),
    h(
      "div",
      { class: "detail" },
      section("Sessions (last 30 days)", sessions, "wide"),
      section("Model calls", records, "wide"),
    ),
  );
  await Promise.all([
    sessionList(sessions, new URLSearchParams({ user_id: userId })),
    recordList(records, userId),
  ]);
}

async function recordList(container, userId) {
  const body = h("tbody");
  const query = { limit: PAGE_SIZE, "metadata.user_id": userId };
  await paged(container, listTable(RECORD_COLUMNS, body, "Model calls"), {
    loading: "Loading…",
    fetchPage: (cursor) => api("/requests", { query: { ...query, cursor } }),
    add: (found) => body.append(...found.map(recordRow)),
    describe: describeList("model call", "model calls", false),
  });
}

function recordRow(record) {
  const href = recordHref(record.id);
  const name = record.prompt_name || record.span_name || "Unnamed call";
  return listRow(
    RECORD_COLUMNS,
    [
      h("a", { href }, fmt.time(record.created_at)),
      [h("span", { class: "cut", title: name }, name), scoreBadges(record.scores)],
      record.model,
      statusBadge(record.status),
      fmt.count(record.usage.total_tokens),
      costText(record.usage.estimated_cost_usd, record.cost_known),
      fmt.duration(record.latency_ms),
    ],
    href,
  );
}
