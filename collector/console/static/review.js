// The review queue: the records of a prompt with no score of a name yet (GET /v1/requests
// ?unscored=<name>), oldest first, one at a time, with next/previous (buttons, or j/k and n/p)
// that never leave the page. Saving a score moves on to the next record.

import { api } from "./api.js";
import { field, h, replace } from "./dom.js";
import * as fmt from "./format.js";
import { environmentField } from "./environments.js";
import { PAGE_SIZE, filterForm } from "./paging.js";
import { detailSections } from "./requests.js";
import { scoreConfigs, scoresSection } from "./scores.js";

// The list API answers newest first; the queue reads up to this many ids of the unscored
// records and turns them round, so a queue longer than this starts at its 1,000 newest.
const MOST_QUEUED = 1000;

// The keydown handler of the queue on show: one at a time, removed when the page changes.
let shortcuts = null;

/** #/review?prompt_name=<prompt>&name=<score name> */
export async function showReview(view, chosen) {
  if (shortcuts) window.removeEventListener("keydown", shortcuts);
  shortcuts = null;
  const prompt = chosen.get("prompt_name") || "";
  const name = chosen.get("name") || "";
  const environment = chosen.get("environment") || "";
  const configs = await scoreConfigs();
  const status = h("p", { class: "summary", role: "status" });
  const stage = h("div", { class: "review-stage" });
  replace(
    view,
    h("h1", {}, "Review queue"),
    queueForm(prompt, name, configs, chosen),
    h(
      "p",
      { class: "muted keys" },
      "Records with no score of this name yet, oldest first. Keys: ",
      h("kbd", {}, "j"),
      " or ",
      h("kbd", {}, "n"),
      " next, ",
      h("kbd", {}, "k"),
      " or ",
      h("kbd", {}, "p"),
      " previous (outside a text box or a list); Enter saves the score.",
    ),
    status,
    stage,
  );
  if (!name) return replace(status, "Choose a score name (and a prompt) to review.");
  replace(status, "Loading…");
  const ids = await unscoredIds(prompt, name, environment);
  if (ids.length === 0) return replace(status, "Nothing to review: every record has this score.");

  let index = 0;
  const scored = new Set();
  const nav = h("div", { class: "review-nav" });
  const holder = h("div", { class: "review-record" });
  replace(stage, nav, holder);
  const go = async (to) => {
    if (to < 0 || to >= ids.length) return;
    index = to;
    view.setAttribute("aria-busy", "true");
    try {
      await showItem();
    } finally {
      view.removeAttribute("aria-busy");
    }
  };
  const showItem = async () => {
    const { data: record } = await api(`/requests/${encodeURIComponent(ids[index])}`);
    const left = ids.length - scored.size;
    replace(
      status,
      `Record ${fmt.count(index + 1)} of ${fmt.count(ids.length)} (${fmt.count(left)} to score).`,
    );
    replace(
      nav,
      h(
        "button",
        { type: "button", class: "quiet", disabled: index === 0, onclick: () => go(index - 1) },
        "← Previous",
      ),
      h(
        "button",
        {
          type: "button",
          class: "quiet",
          disabled: index === ids.length - 1,
          onclick: () => go(index + 1),
        },
        "Next →",
      ),
      h("a", { href: `#/requests/${encodeURIComponent(record.id)}` }, "Open the record"),
    );
    const scores = scoresSection(record, configs, {
      name,
      onSaved: () => {
        scored.add(record.id);
        if (index < ids.length - 1) go(index + 1);
        else
          replace(
            status,
            `Record ${fmt.count(index + 1)} of ${fmt.count(ids.length)}: queue done.`,
          );
      },
    });
    replace(
      holder,
      h(
        "h2",
        { class: "review-title" },
        record.prompt_name || "Unnamed call",
        ` v${record.version ?? "?"}`,
        " · ",
        fmt.time(record.created_at),
      ),
      h(
        "div",
        { class: "review-layout" },
        h("div", { class: "review-cards" }, reviewedCards(record)),
        scores,
      ),
    );
    // The value is where a reviewer starts: the first control of the form that takes one. No
    // scrolling to it: on a phone the output, above the form, is read first.
    holder
      .querySelector(".score-value input, .score-value select")
      ?.focus({ preventScroll: true });
  };
  shortcuts = (event) => {
    if (!document.body.contains(stage)) {
      window.removeEventListener("keydown", shortcuts);
      return;
    }
    // The keys are letters no number takes, so they work from the focused value too.
    const target = event.target;
    const typing =
      target instanceof HTMLTextAreaElement ||
      target instanceof HTMLSelectElement ||
      (target instanceof HTMLInputElement &&
        !["radio", "checkbox", "number"].includes(target.type));
    if (typing || event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.key === "j" || event.key === "n") go(index + 1);
    else if (event.key === "k" || event.key === "p") go(index - 1);
  };
  window.addEventListener("keydown", shortcuts);
  await showItem();
}

/** What a reviewer judges, first: the error or output, then the input, then the summary. */
function reviewedCards(record) {
  const [summary, error, variables, input, output] = detailSections(record);
  return [error, output, input, variables, summary];
}

/** The ids of the records to review, oldest first. */
async function unscoredIds(prompt, name, environment) {
  const ids = [];
  let cursor;
  do {
    const page = await api("/requests", {
      query: {
        prompt_name: prompt,
        unscored: name,
        environment: environment || undefined,
        limit: PAGE_SIZE * 2,
        cursor,
      },
    });
    ids.push(...page.data.map((record) => record.id));
    cursor = page.pagination.has_more ? page.pagination.next_cursor : null;
  } while (cursor && ids.length < MOST_QUEUED);
  return ids.slice(0, MOST_QUEUED).reverse();
}

function queueForm(prompt, name, configs, chosen) {
  const names = h(
    "datalist",
    { id: "queue-names" },
    [...configs.keys()].map((config) => h("option", { value: config })),
  );
  return filterForm("#/review", "Choose the queue", [
    field(
      "Prompt",
      h("input", {
        id: "queue-prompt",
        name: "prompt_name",
        type: "text",
        value: prompt,
        placeholder: "any prompt",
      }),
    ),
    field(
      "Score name",
      h("input", {
        id: "queue-name",
        name: "name",
        type: "text",
        value: name,
        list: "queue-names",
        placeholder: "e.g. helpfulness",
      }),
    ),
    environmentField(chosen, "queue-environment"),
    names,
  ]);
}
