// Full-text search of the request log: hits with the API's highlight runs, built as text nodes.

import { api } from "./api.js";
import { goTo, h } from "./dom.js";
import * as fmt from "./format.js";
import { PAGE_SIZE, paged } from "./paging.js";

/**
 * The nodes of one field's highlight: the API's runs ({text, match}) as text nodes, each match
 * in a <mark> made by the console, so no part of a record is ever parsed.
 */
export function highlighted(runs) {
  return runs.map((run) => (run.match ? h("mark", {}, run.text) : run.text));
}

/** The search box; submitting it routes to #/requests?q=<text>. */
export function searchForm(query) {
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
    const text = input.value.trim();
    const target = text ? `#/requests?${new URLSearchParams({ q: text })}` : "#/requests";
    goTo(target, form);
  });
  return form;
}

/** The hits of `query`, a page at a time ("Load more" follows the cursor). */
export async function showHits(container, query) {
  const list = h("ol", { class: "hits" });
  const back = new URLSearchParams({ q: query }).toString();
  await paged(container, list, {
    loading: "Searching…",
    fetchPage: (cursor) => api("/requests/search", { query: { query, limit: PAGE_SIZE, cursor } }),
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
  const href = `#/requests/${encodeURIComponent(hit.id)}?from=${encodeURIComponent(back)}`;
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
