// One page of records at a time: a list shows the API's first page, and "Load more" follows
// the cursor, so a page costs the same at 10M records as at 100.

import { messageOf } from "./api.js";
import { goTo, h, replace } from "./dom.js";

/** Records (or prompts, or hits) asked for per page: one screenful and a bit. */
export const PAGE_SIZE = 50;

/**
 * Fill `container` with a status line, `content` and a "Load more" button.
 * `fetchPage(cursor)` answers an API page; `add(items)` puts its items into `content`;
 * `describe(shown, hasMore)` is the status line's text.
 */
export async function paged(container, content, { loading, fetchPage, add, describe }) {
  const summary = h("p", { class: "summary", role: "status" }, loading);
  const more = h("button", { type: "button", class: "more hidden" }, "Load more");
  replace(container, summary, content, more);
  let shown = 0;
  const load = async (cursor) => {
    more.disabled = true;
    const page = await fetchPage(cursor);
    add(page.data);
    shown += page.data.length;
    const next = page.pagination.has_more ? page.pagination.next_cursor : null;
    replace(summary, describe(shown, next !== null));
    more.classList.toggle("hidden", next === null);
    more.disabled = false;
    more.onclick = () =>
      load(next).catch((error) =>
        replace(summary, h("span", { class: "error" }, messageOf(error))),
      );
  };
  await load(undefined);
}

/**
 * The filter form of the list at `route` (e.g. "#/requests"): `fields`, then Apply and Clear.
 * Applying routes to `route?<each named control that is filled>`, so filters live in the address.
 */
export function filterForm(route, label, fields, className = "filters") {
  const form = h(
    "form",
    { class: className, role: "search", "aria-label": label },
    fields,
    h(
      "div",
      { class: "actions" },
      h("button", { type: "submit" }, "Apply"),
      h("a", { class: "button quiet", href: route }, "Clear"),
    ),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const chosen = new URLSearchParams();
    for (const control of form.querySelectorAll("input[name], select[name]")) {
      if (control.value.trim()) chosen.set(control.name, control.value.trim());
    }
    // Applying the filters already shown reloads the list (new records may have arrived).
    goTo(chosen.size ? `${route}?${chosen}` : route, form);
  });
  return form;
}
