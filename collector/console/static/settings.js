// #/settings/<page>: the project's members and roles, API keys and protected labels, for its
// admins (docs/api-notes.md, "Accounts" and "Keys and scopes"). Other roles do not see the
// section (roles.js); the collector refuses them anyway.

import { api, session } from "./api.js";
import { h, replace } from "./dom.js";
import { showConnections } from "./connections.js";
import { showAudit } from "./settings_audit.js";
import { showKeys } from "./settings_keys.js";
import { showMembers } from "./settings_members.js";

const PAGES = [
  ["members", "Members and roles", showMembers],
  ["keys", "API keys", showKeys],
  ["labels", "Protected labels", showLabels],
  ["audit", "Audit log", showAudit],
  ["connections", "Connections", showConnections],
];

/**
 * The project the settings are of: the user's chosen one, or a key's own (read off its project's
 * key list, which an admin key may read; the development key's is "default").
 */
export async function projectName() {
  if (session.account) return session.project;
  const { data } = await api("/keys");
  return data.length ? data[0].project : "default";
}

/** The path of one of the project's routes, its name encoded. */
export function projectPath(project, rest) {
  return `/projects/${encodeURIComponent(project)}${rest}`;
}

/** #/settings/<page>?<filters>: the tabs, then the page (the audit log reads `filters`). */
export async function showSettings(view, page, filters) {
  const found = PAGES.find(([name]) => name === page) || PAGES[0];
  const project = await projectName();
  const body = h("div", { class: "settings-body" });
  replace(
    view,
    h(
      "div",
      { class: "page-head" },
      h("h1", {}, "Settings"),
      h("span", { class: "muted" }, `Project ${project}`),
    ),
    h(
      "nav",
      { class: "tabs", "aria-label": "Settings" },
      PAGES.map(([name, label]) =>
        h(
          "a",
          { href: `#/settings/${name}`, "aria-current": name === found[0] ? "page" : null },
          label,
        ),
      ),
    ),
    body,
  );
  await found[2](body, project, filters);
}

/** Say `message` in `status` (an error in red, read out at once). */
export function say(status, message, error = false) {
  status.className = error ? "note error" : "note";
  status.setAttribute("role", error ? "alert" : "status");
  replace(status, message);
}

/** #/settings/labels: the labels only an admin may attach, move or remove. */
async function showLabels(body, project) {
  const path = projectPath(project, "/protected-labels");
  const { data } = await api(path);
  const labels = [...(data.labels || [])];
  const list = h("ul", { class: "chips", "aria-label": "Protected labels" });
  const status = h("p", { class: "note hidden", role: "status" });
  const input = h("input", {
    id: "new-protected-label",
    autocomplete: "off",
    spellcheck: "false",
    placeholder: "production",
  });
  const draw = () =>
    replace(
      list,
      labels.length ? null : h("li", { class: "muted" }, "No label is protected."),
      labels.map((label, index) =>
        h(
          "li",
          { class: "chip" },
          h("span", { class: "label" }, label),
          h(
            "button",
            {
              type: "button",
              class: "quiet small",
              "aria-label": `Unprotect ${label}`,
              onclick: () => {
                labels.splice(index, 1);
                draw();
              },
            },
            "×",
          ),
        ),
      ),
    );
  const add = (event) => {
    event.preventDefault();
    const label = input.value.trim();
    if (label && !labels.includes(label)) labels.push(label);
    input.value = "";
    draw();
  };
  const save = async () => {
    say(status, "Saving…");
    try {
      const answer = await api(path, { method: "PUT", body: { labels } });
      labels.splice(0, labels.length, ...(answer.data.labels || []));
      draw();
      say(status, "Saved.");
    } catch (error) {
      say(status, error.message, true);
    }
  };
  draw();
  replace(
    body,
    h(
      "section",
      { class: "card" },
      h("h2", {}, "Protected labels"),
      h(
        "p",
        { class: "muted" },
        "Only an admin (or a key with the admin scope) may attach, move or remove these " +
          "labels, or create or edit a version naming one. Members still make versions and " +
          "move the other labels.",
      ),
      list,
      h(
        "form",
        { class: "inline-form", "aria-label": "Protect a label", onsubmit: add },
        h("label", { for: input.id }, "Label"),
        input,
        h("button", { type: "submit", class: "quiet" }, "Add"),
      ),
      h("div", { class: "actions" }, h("button", { type: "button", onclick: save }, "Save")),
      status,
    ),
  );
}
