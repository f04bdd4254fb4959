// #/settings/keys: the project's API keys (POST and GET /v1/keys; docs/api-notes.md, "Keys and
// scopes"). A new key gets `ingest` and `prompts:read` unless more are ticked: what the SDK
// inside an application needs, and nothing that reads the log or changes the registry. The
// key is shown once, when it is made; the list never holds it.

import { api, messageOf } from "./api.js";
import { copy, h, replace } from "./dom.js";
import * as fmt from "./format.js";
import { say } from "./settings.js";

// Each scope, whether a new key has it unless unticked, and what it allows.
const SCOPES = [
  ["ingest", true, "Log records, OTLP spans, scores and an experiment's results."],
  ["prompts:read", true, "Read prompts, their versions, labels and templates."],
  ["read", false, "Read everything but keys and the audit log: the request log, traces, users…"],
  ["write", false, "Every write a member makes: prompts, labels, datasets, experiments, runs."],
  [
    "admin",
    false,
    "Everything: keys, members, protected labels, connections, deleting records, the audit log.",
  ],
];

const COLUMNS = ["Name", "Key", "Scopes", "Made by", "Last used", "Expires", "Status"];

function cell(label, ...content) {
  return h("td", { "data-label": label }, ...content);
}

function when(iso, none) {
  return iso ? fmt.time(iso) : h("span", { class: "muted" }, none);
}

/** #/settings/keys, drawn into `body`. */
export async function showKeys(body) {
  const { data: keys } = await api("/keys");
  const made = h("div", { class: "new-key hidden", role: "status" });
  const status = h("p", { class: "note hidden", role: "status" });
  const boxes = SCOPES.map(([scope, checked]) =>
    h("input", { type: "checkbox", id: `scope-${scope}`, value: scope, checked }),
  );
  const name = h("input", { id: "key-name", autocomplete: "off", placeholder: "checkout" });
  const expires = h("input", {
    id: "key-expires",
    autocomplete: "off",
    placeholder: "90d",
    pattern: "[0-9]+[smhd]?",
    title: "A number of seconds, or with a unit: 90d, 12h, 30m, 45s",
  });

  async function create(event) {
    event.preventDefault();
    const scopes = boxes.filter((box) => box.checked).map((box) => box.value);
    if (!scopes.length) return say(status, "Tick at least one scope.", true);
    const wanted = { scopes };
    if (name.value.trim()) wanted.name = name.value.trim();
    if (expires.value.trim()) wanted.expires_in = expires.value.trim();
    say(status, "Making the key…");
    let key;
    try {
      key = (await api("/keys", { method: "POST", body: wanted })).data;
    } catch (error) {
      return say(status, messageOf(error), true);
    }
    await showKeys(body);
    showOnce(body.querySelector(".new-key"), key);
  }

  replace(
    body,
    made,
    h(
      "section",
      { class: "card" },
      h("h2", {}, "Make a key"),
      h(
        "form",
        { class: "key-form", "aria-label": "Make a key", onsubmit: create },
        h(
          "fieldset",
          { class: "scopes" },
          h("legend", {}, "Scopes"),
          SCOPES.map(([scope, , text], index) =>
            h(
              "div",
              { class: "scope" },
              boxes[index],
              h("label", { for: boxes[index].id }, h("code", {}, scope), " — ", text),
            ),
          ),
        ),
        h(
          "p",
          { class: "muted" },
          "The SDK inside an application needs ingest and prompts:read only. A key never " +
            "holds a scope you do not hold.",
        ),
        h("div", { class: "field" }, h("label", { for: name.id }, "Name (optional)"), name),
        h(
          "div",
          { class: "field" },
          h("label", { for: expires.id }, "Expires in (optional)"),
          expires,
          h("span", { class: "hint" }, "90d, 12h, 30m; empty: never"),
        ),
        h("div", { class: "actions" }, h("button", { type: "submit" }, "Make key")),
        status,
      ),
    ),
    h(
      "section",
      { class: "card" },
      h("h2", {}, "Keys"),
      keys.length
        ? h(
            "div",
            { class: "table-wrap" },
            h(
              "table",
              { class: "records listing keys", "aria-label": "API keys" },
              h(
                "thead",
                {},
                h("tr", {}, COLUMNS.map((label) => h("th", { scope: "col" }, label))),
              ),
              h("tbody", {}, keys.map(keyRow)),
            ),
          )
        : h("p", { class: "muted" }, "No key."),
      h(
        "p",
        { class: "muted" },
        "To revoke a key, or to replace them all: promptrail keys revoke KEY_ID and " +
          "promptrail keys rotate on the collector's machine.",
      ),
    ),
  );
}

function keyRow(key) {
  return h(
    "tr",
    {},
    h(
      "td",
      { class: "lead", "data-label": COLUMNS[0] },
      key.name || h("span", { class: "muted" }, "unnamed"),
    ),
    cell(COLUMNS[1], h("code", {}, key.key_id)),
    cell(
      COLUMNS[2],
      h("span", { class: "scope-list" }, key.scopes.map((scope) => h("code", {}, scope))),
    ),
    cell(COLUMNS[3], key.created_by || h("span", { class: "muted" }, "—")),
    cell(COLUMNS[4], when(key.last_used_at, "never")),
    cell(COLUMNS[5], when(key.expires_at, "never")),
    cell(COLUMNS[6], key.status),
  );
}

/** The new key, this once, with a copy button. */
function showOnce(box, key) {
  const note = h("span", { class: "copy-note", role: "status" });
  const value = h("code", { class: "secret" }, key.api_key);
  replace(
    box,
    h("h2", {}, "Your new key"),
    h(
      "p",
      {},
      "Copy it now: it is shown this once. It has ",
      key.scopes.join(", "),
      key.expires_at ? ` and expires ${fmt.time(key.expires_at)}.` : " and does not expire.",
    ),
    h(
      "div",
      { class: "secret-row" },
      value,
      h(
        "button",
        {
          type: "button",
          onclick: async () =>
            replace(note, (await copy(key.api_key)) ? "Copied." : "Select the key to copy it."),
        },
        "Copy",
      ),
      note,
    ),
  );
  box.className = "new-key card";
}
