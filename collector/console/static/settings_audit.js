// #/settings/audit?actor=&resource_type=&resource_id=&from=&to=: the project's audit log for its
// admins (GET /v1/audit, newest first, a page at a time): who wrote what, when, from where, and
// what the resource was before and after. Filters live in the address like the other lists';
// an entry's actor and resource are links that filter by them.

import { api } from "./api.js";
import { diffTable } from "./diff.js";
import { facts, h, replace } from "./dom.js";
import * as fmt from "./format.js";
import { PAGE_SIZE, filterForm, paged } from "./paging.js";

const ROUTE = "#/settings/audit";

function input(filters, name, attrs = {}) {
  return h("input", {
    id: `audit-${name}`,
    name,
    value: filters.get(name) || "",
    autocomplete: "off",
    ...attrs,
  });
}

function labelled(label, control) {
  return h("div", { class: "field" }, h("label", { for: control.id }, label), control);
}

function filterHref(name, value) {
  return `${ROUTE}?${new URLSearchParams({ [name]: value })}`;
}

/** The API's query: a day's date as its start in UTC; "to" takes the whole day it names. */
function auditQuery(filters) {
  const query = {
    actor: filters.get("actor"),
    resource_type: filters.get("resource_type"),
    resource_id: filters.get("resource_id"),
    limit: PAGE_SIZE,
  };
  const from = filters.get("from");
  const to = filters.get("to");
  if (from) query.from = `${from}T00:00:00Z`;
  if (to) {
    const next = new Date(`${to}T00:00:00Z`);
    next.setUTCDate(next.getUTCDate() + 1);
    query.to = next.toISOString();
  }
  return query;
}

function actorOf(entry) {
  const actor = entry.actor || {};
  const who = actor.email || (actor.key_hint ? `key ${actor.key_hint}` : actor.id);
  return h("a", { href: filterHref("actor", actor.id), title: `Only ${who}'s writes` }, who);
}

function sideText(value) {
  return JSON.stringify(value, null, 2);
}

function entryCard(entry) {
  const hasBefore = entry.before !== undefined && entry.before !== null;
  const hasAfter = entry.after !== undefined && entry.after !== null;
  const title = hasBefore && hasAfter ? "Before and after" : hasAfter ? "After" : "Before";
  const changes =
    hasBefore || hasAfter
      ? h(
          "details",
          { class: "before-after" },
          h("summary", {}, title),
          h(
            "div",
            { class: "table-wrap" },
            diffTable(
              hasBefore ? sideText(entry.before) : "",
              hasAfter ? sideText(entry.after) : "",
              "Before",
              "After",
              { leftEmpty: !hasBefore, rightEmpty: !hasAfter },
            ),
          ),
        )
      : null;
  return h(
    "li",
    { class: "card audit-entry", "data-entry-id": entry.id },
    h(
      "p",
      { class: "audit-head" },
      h("span", { class: "badge" }, entry.action),
      " ",
      h(
        "a",
        { href: filterHref("resource_type", entry.resource_type) },
        entry.resource_type,
      ),
      " ",
      h(
        "a",
        {
          class: "mono",
          href: `${ROUTE}?${new URLSearchParams({
            resource_type: entry.resource_type,
            resource_id: entry.resource_id,
          })}`,
        },
        entry.resource_id,
      ),
    ),
    facts([
      ["When (UTC)", fmt.time(entry.at)],
      ["By", actorOf(entry)],
      ["Role", entry.role || (entry.actor?.type === "key" ? "key" : "")],
      ["From", entry.ip],
      ["Hash", h("span", { class: "mono", title: entry.hash }, `${entry.hash.slice(0, 16)}…`)],
    ]),
    changes,
  );
}

/** #/settings/audit of the project (the API reads it off the caller), into `body`. */
export async function showAudit(body, project, filters) {
  const list = h("ol", { class: "audit-list", "aria-label": "Audit log" });
  const results = h("div", { class: "results" });
  replace(
    body,
    filterForm(
      ROUTE,
      "Audit log filters",
      [
        labelled("Actor id", input(filters, "actor", { placeholder: "usr_… or key_…" })),
        labelled("Resource type", input(filters, "resource_type", { placeholder: "prompt" })),
        labelled("Resource id", input(filters, "resource_id")),
        labelled("From", input(filters, "from", { type: "date" })),
        labelled("To", input(filters, "to", { type: "date" })),
      ],
      "filters audit-filters",
    ),
    results,
  );
  const query = auditQuery(filters);
  await paged(results, list, {
    loading: "Loading…",
    fetchPage: (cursor) => api("/audit", { query: { ...query, cursor } }),
    add: (entries) => list.append(...entries.map(entryCard)),
    describe: (shown, more) =>
      shown === 0 ? "No audited write matches." : fmt.shown(shown, "entry", "entries", more),
  });
}
