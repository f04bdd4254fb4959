// One prompt: its newest version, labels (attach, move, remove), version history with
// rollback, the run panel, and the side-by-side diff of two versions.

import { api, messageOf, session } from "./api.js";
import { chatSections, messageList } from "./chat_messages.js";
import { changeList, diffTable } from "./diff.js";
import { facts, goTo, h, replace, section } from "./dom.js";
import { experimentForm } from "./experiments.js";
import * as fmt from "./format.js";
import { PAGE_SIZE, paged } from "./paging.js";
import { playgroundLink, sourceRunLink } from "./playground.js";
import { promptHref } from "./prompt_list.js";
import { runPanel } from "./run.js";
import { can } from "./roles.js";
import { WINDOWS, outcomesCard } from "./version_outcomes.js";

/** The playground's address of version `version` of prompt `name`. */
const versionQuery = (name, version) =>
  new URLSearchParams({ prompt: name, version }).toString();

/** Run an action of the page; on success reload the page, on failure say why in `note`. */
function action(note, act) {
  return async (event) => {
    event?.preventDefault();
    try {
      await act();
      goTo(window.location.hash);
    } catch (error) {
      replace(note, h("span", { class: "error", role: "alert" }, messageOf(error)));
    }
  };
}

/** #/prompts/<name> */
export async function showPrompt(view, name) {
  const path = `/prompts/${encodeURIComponent(name)}`;
  // The versions come a page at a time (issue 35): the pickers offer the newest page (and
  // whatever a label points at); the history's "Load more" follows the cursor.
  const [{ data: prompt }, firstPage, { data: labels }] = await Promise.all([
    api(path),
    api(`${path}/versions?${new URLSearchParams({ limit: PAGE_SIZE })}`),
    api(`${path}/labels`),
  ]);
  const versions = firstPage.data;
  const note = h("p", { class: "action-note", role: "status" });
  // The prompt's own created_at is its first version's: the shown version has its own time.
  const shown = versions.find((v) => v.version === prompt.version) ?? prompt;
  replace(
    view,
    h("a", { class: "back", href: "#/prompts" }, "← Prompts"),
    h(
      "div",
      { class: "page-head" },
      h("h1", {}, prompt.name),
      h(
        "div",
        { class: "export" },
        can("write")
          ? h("a", { class: "button quiet", href: promptHref(name, "/edit") }, "Edit")
          : null,
        can("write") ? playgroundLink(versionQuery(name, prompt.version)) : null,
        // Its records still to score, oldest first (the queue asks which score name).
        can("score") &&
          h(
          "a",
          {
            class: "button quiet",
            href: `#/review?${new URLSearchParams({ prompt_name: name })}`,
          },
          "Review records",
        ),
      ),
    ),
    note,
    h(
      "div",
      { class: "detail" },
      prompt.type === "chat"
        ? await chatVersionCards(path, prompt, versions)
        : section(`Version ${prompt.version}`, [
            facts([
              ["Model", prompt.model],
              ["Created (UTC)", fmt.time(shown.created_at)],
              ["Source run", sourceRunLink(prompt)],
              ["Id", h("span", { class: "mono" }, prompt.id)],
            ]),
            h("pre", { class: "template" }, prompt.template),
          ]),
      // A run and an experiment are writes (records, results): hidden from who may not write.
      can("write") ? section("Run", await runPanel(name, prompt.version)) : null,
      // Issue 33: the shown version over a dataset, as an experiment.
      can("write")
        ? section("Run over a dataset", await experimentForm(name, prompt.version))
        : null,
      section("Labels", labelTable(path, labels, versions, note, await protectedLabels())),
      section("Compare versions", comparePicker(name, versions)),
    ),
    section("Version history", await history(path, firstPage, note), "wide"),
  );
}

/**
 * A chat prompt's version as cards: its messages, then tools, answer format and variables.
 * "Version shown" redraws them with another version (the newest page's, or a label's).
 */
async function chatVersionCards(path, prompt, versions) {
  const holder = h("div", { class: "chat-version wide" });
  const picker = versionSelect("shown-version", versions, prompt.version);
  const draw = async (number) => {
    const { data: version } = await api(`${path}/versions/${number}`);
    replace(
      holder,
      section(`Version ${version.version}`, [
        h(
          "div",
          { class: "attach shown-pick" },
          h("label", { for: picker.id }, "Version shown"),
          picker,
        ),
        facts([
          ["Type", "chat"],
          ["Model", version.model],
          ["Parameters", h("span", { class: "mono" }, JSON.stringify(version.parameters ?? {}))],
          ["Created (UTC)", fmt.time(version.created_at)],
          ["Labels", version.labels?.join(", ")],
          ["Source run", sourceRunLink(version)],
          ["Id", h("span", { class: "mono" }, prompt.id)],
        ]),
        messageList(version.messages),
      ]),
      h(
        "div",
        { class: "detail chat-extras" },
        chatSections(version).map(([title, content]) => section(title, content)),
      ),
    );
  };
  picker.addEventListener("change", () => draw(Number(picker.value)));
  await draw(prompt.version);
  return holder;
}

function versionSelect(id, versions, chosen) {
  // Only the newest page of versions is loaded: a label may point further back.
  const numbers = versions.map((v) => v.version);
  if (chosen !== undefined && !numbers.includes(chosen)) numbers.push(chosen);
  return h(
    "select",
    { id },
    numbers.map((n) => h("option", { value: n, selected: n === chosen }, `v${n}`)),
  );
}

/**
 * The labels a member may not attach, move or remove (docs/api-notes.md, "Protected labels"):
 * asked only of a signed-in member; an admin (and a key, whose scopes the console does not
 * know) is shown every control, a viewer none.
 */
async function protectedLabels() {
  if (!session.account || !can("write") || can("admin")) return new Set();
  try {
    const path = `/projects/${encodeURIComponent(session.project)}/protected-labels`;
    return new Set((await api(path)).data.labels);
  } catch {
    return new Set(); // the collector still refuses what the member may not do
  }
}

function labelTable(path, labels, versions, note, locked) {
  const rows = labels.map((label) => {
    const target = versionSelect(`move-${label.label}`, versions, label.version);
    const move = action(note, () =>
      api(`${path}/labels/${encodeURIComponent(label.label)}`, {
        method: "PUT",
        body: { version: Number(target.value) },
      }),
    );
    const remove = action(note, () =>
      api(`${path}/labels/${encodeURIComponent(label.label)}`, { method: "DELETE" }),
    );
    const controls = h(
      "td",
      { class: "label-actions" },
      h("label", { for: target.id, class: "visually-hidden" }, `Move ${label.label} to`),
      target,
      h("button", { type: "button", class: "quiet", onclick: move }, `Move ${label.label}`),
      h("button", { type: "button", class: "quiet", onclick: remove }, `Remove ${label.label}`),
    );
    const lockedText = locked.has(label.label) ? "protected: an admin moves it" : "";
    return h(
      "tr",
      {},
      h("th", { scope: "row" }, h("span", { class: "badge label" }, label.label)),
      h("td", {}, `v${label.version}`),
      can("write") && !locked.has(label.label)
        ? controls
        : h("td", { class: "muted" }, lockedText),
    );
  });
  const name = h("input", { id: "new-label", placeholder: "e.g. production", required: true });
  const version = versionSelect("new-label-version", versions, versions[0]?.version);
  const attach = h(
    "form",
    {
      class: "attach",
      onsubmit: action(note, () =>
        api(`${path}/labels/${encodeURIComponent(name.value.trim())}`, {
          method: "PUT",
          body: { version: Number(version.value) },
        }),
      ),
    },
    h("label", { for: name.id }, "Label"),
    name,
    h("label", { for: version.id }, "on"),
    version,
    h("button", { type: "submit" }, "Attach"),
  );
  return [
    rows.length
      ? h("table", { class: "kv labels" }, h("tbody", {}, rows))
      : h("p", { class: "muted" }, "No labels yet."),
    can("write") ? attach : null,
  ];
}

/** From and to: the prompt page's (newest two versions chosen) and the diff page's. */
function comparePicker(name, versions, chosen = [], days = null) {
  const older = versionSelect(
    "compare-a",
    versions,
    chosen[0] ?? versions[1]?.version ?? versions[0]?.version,
  );
  const newer = versionSelect("compare-b", versions, chosen[1] ?? versions[0]?.version);
  return h(
    "form",
    {
      class: "attach",
      "aria-label": "Compare versions",
      onsubmit: (event) => {
        event.preventDefault();
        const window_ = days ? `&days=${days}` : "";
        window.location.hash = promptHref(
          name,
          `/diff?a=${older.value}&b=${newer.value}${window_}`,
        );
      },
    },
    h("label", { for: older.id }, "Version"),
    older,
    h("label", { for: newer.id }, "with"),
    newer,
    h("button", { type: "submit" }, "Show diff"),
  );
}

/** The version history, one page at a time: `firstPage` is shown, "Load more" adds the next. */
async function history(path, firstPage, note) {
  const newest = firstPage.data[0]?.version;
  const body = h("tbody", {});
  const table = h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      { class: "records versions phone-cards" },
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          ["Version", "Created (UTC)", "Model", "Labels", "Note", ""].map((l) =>
            h("th", { scope: "col" }, l),
          ),
        ),
      ),
      body,
    ),
  );
  const container = h("div", { class: "version-history" });
  await paged(container, table, {
    loading: "Loading versions…",
    fetchPage: (cursor) =>
      cursor === undefined
        ? firstPage
        : api(`${path}/versions?${new URLSearchParams({ limit: PAGE_SIZE, cursor })}`),
    add: (items) => body.append(...historyRows(path, items, newest, note)),
    describe: (shown, hasMore) =>
      hasMore ? `Newest ${shown} versions` : `${shown} version${shown === 1 ? "" : "s"}`,
  });
  return container;
}

function historyRows(path, versions, newest, note) {
  const promptName = decodeURIComponent(path.split("/").pop());
  return versions.map((v) =>
    h(
      "tr",
      {},
      h("td", { class: "lead" }, `v${v.version}`),
      h("td", { class: "mono", "data-label": "Created (UTC)" }, fmt.time(v.created_at)),
      h("td", { "data-label": "Model" }, v.model),
      h(
        "td",
        { "data-label": "Labels" },
        v.labels.map((label) => h("span", { class: "badge label" }, label)),
      ),
      h("td", { class: "muted", "data-label": "Note" }, v.note ?? ""),
      h(
        "td",
        { class: "actions-cell" },
        can("write") ? playgroundLink(versionQuery(promptName, v.version)) : "",
        v.version === newest || !can("write")
          ? ""
          : h(
              "button",
              {
                type: "button",
                class: "quiet",
                onclick: action(note, () =>
                  api(`${path}/rollback`, { method: "POST", body: { version: v.version } }),
                ),
              },
              `Roll back to v${v.version}`,
            ),
      ),
    ),
  );
}

/**
 * #/prompts/<name>/diff?a=N&b=M&days=D: what changed from version N to M and, beside it, the
 * two versions' outcomes over the last D days (30 by default). A text prompt's template,
 * model and parameters are compared line by line, as before chat prompts; a chat prompt's
 * changes are the diff route's, per message, tool and parameter.
 */
export async function showDiff(view, name, query) {
  const path = `/prompts/${encodeURIComponent(name)}`;
  const [a, b] = [query.get("a"), query.get("b")];
  const days = Number(query.get("days")) || WINDOWS[0][0];
  const [{ data: left }, { data: right }, { data: versions }] = await Promise.all([
    api(`${path}/versions/${encodeURIComponent(a)}`),
    api(`${path}/versions/${encodeURIComponent(b)}`),
    api(`${path}/versions?${new URLSearchParams({ limit: PAGE_SIZE })}`),
  ]);
  const json = (value) => JSON.stringify(value, null, 2);
  const [l, r] = [`v${left.version}`, `v${right.version}`];
  const hrefOf = (from, to, window) =>
    promptHref(name, `/diff?${new URLSearchParams({ a: from, b: to, days: window })}`);
  let changes;
  if (left.type === "chat" || right.type === "chat") {
    const { data } = await api(`${path}/diff`, {
      query: { from: left.version, to: right.version },
    });
    changes = [section("Changes", changeList(data.changes, l, r), "wide")];
  } else {
    changes = [
      section(
        "Template",
        h("div", { class: "table-wrap" }, diffTable(left.template, right.template, l, r)),
        "wide",
      ),
      section("Model", diffTable(left.model, right.model, l, r), "wide"),
      section(
        "Parameters",
        diffTable(json(left.parameters), json(right.parameters), l, r),
        "wide",
      ),
    ];
  }
  let outcomes;
  try {
    outcomes = await outcomesCard(name, left.version, right.version, days, (n) =>
      hrefOf(left.version, right.version, n),
    );
  } catch (error) {
    outcomes = h("p", { class: "error" }, messageOf(error));
  }
  replace(
    view,
    h("a", { class: "back", href: promptHref(name) }, `← ${name}`),
    h("h1", {}, `${name}: v${left.version} → v${right.version}`),
    comparePicker(name, versions, [left.version, right.version], days),
    h(
      "div",
      { class: "diff-layout" },
      h("div", { class: "diff-main" }, changes),
      section("Outcomes", outcomes, "outcomes-card"),
    ),
  );
}
