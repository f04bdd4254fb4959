// #/settings/connections: the project's own provider credentials (docs/api-notes.md,
// "Connections"). The API never answers a key or a header value, only `api_key_hint`; the key
// typed here goes to the collector once, in the create's body, and the field is emptied at
// once, so the page never shows it again.

import { api, messageOf } from "./api.js";
import { costText, field, h, replace } from "./dom.js";
import * as fmt from "./format.js";
import { say } from "./settings.js";

const PROVIDERS = [
  ["openai", "OpenAI"],
  ["anthropic", "Anthropic"],
  ["openai_compatible", "OpenAI-compatible (vLLM, Ollama, llama.cpp, OpenRouter…)"],
];
const COLUMNS = [
  "Name",
  "Provider",
  "Base URL",
  "Key",
  "Budget / month",
  "Spent this month",
  "Last used",
  "",
];

const cell = (label, ...content) => h("td", { "data-label": label }, ...content);
const path = (name) => `/connections/${encodeURIComponent(name)}`;

/** #/settings/connections, drawn into `body`. */
export async function showConnections(body) {
  const { data: connections } = await api("/connections");
  const status = h("p", { class: "note hidden", role: "status" });
  const reload = async (message, error = false) => {
    await showConnections(body);
    say(body.querySelector(".connections-status"), message, error);
  };
  replace(
    body,
    h(
      "section",
      { class: "card" },
      h("h2", {}, "Connections"),
      h(
        "p",
        { class: "muted" },
        "Runs, experiments, judges and the playground call a model through the connection " +
          "named in it (connection/model), else the oldest connection for its provider, else " +
          "the server's own keys. Keys are stored encrypted and never shown again.",
      ),
      connections.length
        ? h(
            "div",
            { class: "table-wrap" },
            h(
              "table",
              { class: "records listing connections", "aria-label": "Connections" },
              h(
                "thead",
                {},
                h("tr", {}, COLUMNS.map((label) => h("th", { scope: "col" }, label))),
              ),
              h(
                "tbody",
                {},
                connections.map((c) => connectionRow(c, reload)),
              ),
            ),
          )
        : h("p", { class: "muted" }, "No connection: the server's own keys are used."),
      h("p", { class: "note hidden connections-status", role: "status" }),
    ),
    addForm(status, reload),
  );
}

function connectionRow(connection, reload) {
  const name = connection.name;
  const result = h("span", { class: "check-result", role: "status" });
  const check = async () => {
    replace(result, "Checking…");
    try {
      const { data } = await api(`${path(name)}/check`, { method: "POST" });
      replace(
        result,
        h("span", { class: `badge ${data.ok ? "good" : "bad"}` }, data.status),
        ` ${fmt.duration(data.latency_ms)}`,
        data.message && !data.ok ? h("span", { class: "muted" }, ` ${data.message}`) : null,
      );
    } catch (error) {
      replace(result, h("span", { class: "error" }, messageOf(error)));
    }
  };
  const budget = h("input", {
    id: `budget-${name}`,
    type: "number",
    min: 0,
    step: "any",
    class: "budget",
    "aria-label": `Monthly budget of ${name} (USD)`,
    placeholder: "none",
    value: connection.monthly_budget_usd ?? "",
  });
  const saveBudget = async (event) => {
    event.preventDefault();
    const value = budget.value.trim() === "" ? null : Number(budget.value);
    try {
      await api(path(name), { method: "PATCH", body: { monthly_budget_usd: value } });
      await reload(`${name}'s budget is ${value === null ? "none" : fmt.cost(value)} a month.`);
    } catch (error) {
      await reload(messageOf(error), true);
    }
  };
  const remove = async () => {
    if (!window.confirm(`Delete the connection ${name}? Calls will use the next credential.`)) {
      return;
    }
    try {
      await api(path(name), { method: "DELETE" });
      await reload(`${name} was deleted.`);
    } catch (error) {
      await reload(messageOf(error), true);
    }
  };
  return h(
    "tr",
    {},
    h(
      "td",
      { class: "lead", "data-label": COLUMNS[0] },
      name,
      connection.models?.length
        ? h("span", { class: "muted small-note" }, ` ${connection.models.join(", ")}`)
        : null,
    ),
    cell(COLUMNS[1], connection.provider),
    cell(COLUMNS[2], h("span", { class: "mono url" }, connection.base_url ?? "")),
    cell(COLUMNS[3], h("code", {}, connection.api_key_hint)),
    cell(
      COLUMNS[4],
      h(
        "form",
        { class: "budget-form", "aria-label": `Budget of ${name}`, onsubmit: saveBudget },
        budget,
        h("button", { type: "submit", class: "quiet small" }, "Save"),
      ),
    ),
    cell(COLUMNS[5], costText(connection.spend_this_month_usd, true)),
    cell(
      COLUMNS[6],
      connection.last_used_at
        ? fmt.time(connection.last_used_at)
        : h("span", { class: "muted" }, "never"),
    ),
    h(
      "td",
      { class: "actions-cell" },
      h(
        "button",
        { type: "button", class: "quiet", "aria-label": `Check ${name}`, onclick: check },
        "Check",
      ),
      h(
        "button",
        { type: "button", class: "quiet", "aria-label": `Delete ${name}`, onclick: remove },
        "Delete",
      ),
      result,
    ),
  );
}

function addForm(status, reload) {
  const name = h("input", {
    id: "connection-name",
    required: true,
    autocomplete: "off",
    pattern: "[a-z0-9_\\-]{1,64}",
    placeholder: "openai-team",
  });
  const provider = h(
    "select",
    { id: "connection-provider" },
    PROVIDERS.map(([value, text]) => h("option", { value }, text)),
  );
  // A password field: not echoed on screen, not offered by the browser's autofill history.
  const key = h("input", {
    id: "connection-key",
    type: "password",
    required: true,
    autocomplete: "new-password",
    spellcheck: "false",
  });
  const baseUrl = h("input", {
    id: "connection-base-url",
    type: "url",
    autocomplete: "off",
    placeholder: "http://localhost:11434/v1",
  });
  const models = h("input", { id: "connection-models", autocomplete: "off" });
  const budget = h("input", { id: "connection-budget", type: "number", min: 0, step: "any" });
  const create = async (event) => {
    event.preventDefault();
    const body = { name: name.value.trim(), provider: provider.value, api_key: key.value };
    // The key leaves the page with this request and is not kept in it.
    key.value = "";
    if (baseUrl.value.trim()) body.base_url = baseUrl.value.trim();
    const listed = models.value
      .split(",")
      .map((m) => m.trim())
      .filter(Boolean);
    if (listed.length) body.models = listed;
    if (budget.value.trim()) body.monthly_budget_usd = Number(budget.value);
    say(status, "Adding…");
    try {
      await api("/connections", { method: "POST", body });
    } catch (error) {
      const named = error.details?.field ? ` (field: ${error.details.field})` : "";
      return say(status, `${messageOf(error)}${named} Type the key again.`, true);
    }
    await reload(`${body.name} was added. Check it to see that the key works.`);
  };
  return h(
    "section",
    { class: "card" },
    h("h2", {}, "Add a connection"),
    h(
      "form",
      { class: "connection-form", "aria-label": "Add a connection", onsubmit: create },
      field("Name", name, "1-64 of a-z 0-9 _ -; a model written name/model goes through it"),
      field("Provider", provider),
      field("API key", key, "stored encrypted; only its last 4 characters are shown"),
      field("Base URL (optional)", baseUrl, "needed for OpenAI-compatible servers"),
      field("Models (optional)", models, "comma-separated; what it serves"),
      field("Monthly budget, USD (optional)", budget, "calls are refused once it is spent"),
      h("div", { class: "actions" }, h("button", { type: "submit" }, "Add connection")),
      status,
    ),
  );
}
