// Full-text search of the request log: hits with the API's highlight runs, built as text nodes.
// Like every list, the hits take an environment (docs/api-notes.md, "Environments"), kept in the
// address beside the text (#/requests?q=<text>&environment=<name>).

import { api } from "./api.js";
import { goTo, h } from "./dom.js";
import { environmentField } from "./environments.js";
import * as fmt from "./format.js";
import { PAGE_SIZE, paged } from "./paging.js";

/**
 * The nodes of one field's highlight: the API's runs ({text, match}) as text nodes, each match
 * in a <mark> made by the console, so no part of a record is ever parsed.
 */
export function highlighted(runs) {
  return runs.map((run) => (run.match ? h("mark", {}, run.text) : run.text));
}

/** The address of the search for `text` in `environment` (none: the default view). */
function searchHref(text, environment) {
  const chosen = new URLSearchParams();
  if (text) chosen.set("q", text);
  if (environment) chosen.set("environment", environment);
  return chosen.size ? `#/requests?${chosen}` : "#/requests";
}

/**
 * The search box; submitting it routes to #/requests?q=<text>, keeping the environment the
 * page shows (`environment`, from the address).
 */
export function searchForm(query, environment = "") {
  const input = h("input", {
    id: "search-text",
    type: "search",
    name: "q",
    value: query,
    placeholder: "Search the request log",
  });
  const form = h(
    "form",
    { class: "search", role: "search", "aria-label": "Search requests" },
    h("label", { for: "search-text", class: "visually-hidden" }, "Search text"),
    input,
    h("button", { type: "submit" }, "Search"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    goTo(searchHref(input.value.trim(), environment), form);
  });
  return form;
}

/**
 * The hits' filter form: the environment picker every list has, with Apply (to the search in
 * the picked environment) and Clear (the search in the default view).
 */
export function searchFilters(query, filters) {
  const form = h(
    "form",
    { class: "filters", role: "search", "aria-label": "Filter search hits" },
    environmentField(filters, "search-environment"),
    h(
      "div",
      { class: "actions" },
      h("button", { type: "submit" }, "Apply"),
      h("a", { class: "button quiet", href: searchHref(query, "") }, "Clear"),
    ),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    goTo(searchHref(query, form.elements.namedItem("environment").value), form);
  });
  return form;
}

/** The hits of `query` in `environment` (none: the API's default), a page at a time ("Load
 * more" follows the cursor). */
export async function showHits(container, query, environment = "") {
  const list = h("ol", { class: "hits" });
  // The hit's page links back to this search, environment and all.
  const back = new URLSearchParams(environment ? { q: query, environment } : { q: query });
  await paged(container, list, {
    loading: "Searching…",
    fetchPage: (cursor) =>
      api("/requests/search", { query: { query, limit: PAGE_SIZE, cursor, environment } }),
    add: (hits) => list.append(...hits.map((hit) => hitItem(hit, back))),
    describe: (shown, hasMore) => hitSummary(shown, hasMore, query),
  });
}

function hitSummary(shown, hasMore, query) {
  if (shown === 0) return `No requests contain “${query}”.`;
  const noun = shown === 1 ? "request contains" : "requests contain";
  return `${fmt.count(shown)} ${noun} “${query}”${hasMore ? " (more to load)" : ""}.`;
}

function hitItem(hit, back) {
  const href = `#/requests/${encodeURIComponent(hit.id)}?from=${encodeURIComponent(String(back))}`;
  return h(
    "li",
    { class: "card hit" },
    h(
      "p",
      { class: "hit-head" },
      h("a", { href, class: "mono" }, fmt.time(hit.created_at)),
      " ",
      h("span", {}, hit.prompt_name || "Unnamed call"),
    ),
    h(
      "dl",
      { class: "facts" },
      Object.entries(hit.highlight_runs).map(([fieldName, runs]) => [
        h("dt", { class: "mono" }, fieldName),
        h("dd", { class: "snippet" }, highlighted(runs)),
      ]),
    ),
  );
}
