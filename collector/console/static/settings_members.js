// #/settings/members: the project's members and their roles (GET/PUT/DELETE
// /v1/projects/{project}/members/{email}). Only an owner gives, changes or takes the owner or
// admin role: an admin sees those members' roles as text and cannot pick those roles, and the
// collector's refusal is shown as it answers (docs/api-notes.md, "Accounts").

import { api, messageOf } from "./api.js";
import { h, replace } from "./dom.js";
import * as fmt from "./format.js";
import { ROLES, ROLE_TEXT, can } from "./roles.js";
import { projectPath, say } from "./settings.js";

const COLUMNS = ["E-mail", "Name", "Role", "Set by", "Added", ""];

/** The roles the caller may give: every one for an owner, none of owner and admin else. */
function givable() {
  return can("owner") ? ROLES : ROLES.filter((role) => role !== "owner" && role !== "admin");
}

function roleSelect(id, chosen, label) {
  return h(
    "select",
    { id, "aria-label": label },
    givable().map((role) => h("option", { value: role, selected: role === chosen }, role)),
  );
}

function cell(label, ...content) {
  return h("td", { "data-label": label }, ...content);
}

/** #/settings/members of `project`, drawn into `body`. */
export async function showMembers(body, project) {
  const { data: members } = await api(projectPath(project, "/members"));
  const status = h("p", { class: "note hidden", role: "status" });
  const reload = () => showMembers(body, project);
  const memberPath = (email) => projectPath(project, `/members/${encodeURIComponent(email)}`);

  async function write(method, email, role, done) {
    say(status, method === "DELETE" ? `Removing ${email}…` : `Saving ${email}…`);
    try {
      await api(memberPath(email), { method, body: role ? { role } : undefined });
    } catch (error) {
      say(status, messageOf(error), true);
      return;
    }
    await reload();
    say(body.querySelector(".note"), done);
  }

  const rows = members.map((member, index) => {
    // Only an owner touches an owner or an admin; a select for them would only be refused.
    const fixed = (member.role === "owner" || member.role === "admin") && !can("owner");
    const select = fixed ? null : roleSelect(`member-role-${index}`, member.role, member.email);
    select?.addEventListener("change", () =>
      write("PUT", member.email, select.value, `${member.email} is now ${select.value}.`),
    );
    const remove = fixed
      ? null
      : h(
          "button",
          {
            type: "button",
            class: "quiet small",
            "aria-label": `Remove ${member.email}`,
            onclick: () => write("DELETE", member.email, null, `${member.email} was removed.`),
          },
          "Remove",
        );
    return h(
      "tr",
      {},
      h("td", { class: "lead", "data-label": COLUMNS[0] }, member.email),
      cell(COLUMNS[1], member.name || h("span", { class: "muted" }, "—")),
      cell(COLUMNS[2], select || h("span", { class: "tag" }, member.role)),
      cell(COLUMNS[3], member.role_source === "sso" ? "SSO groups" : "by hand"),
      cell(COLUMNS[4], fmt.time(member.added_at)),
      cell(COLUMNS[5], remove),
    );
  });

  const email = h("input", { id: "new-member-email", type: "email", required: true });
  const role = roleSelect("new-member-role", "member", "Role");
  role.removeAttribute("aria-label");
  const add = (event) => {
    event.preventDefault();
    const address = email.value.trim();
    write("PUT", address, role.value, `${address} is now ${role.value}.`);
  };

  replace(
    body,
    h(
      "section",
      { class: "card" },
      h("h2", {}, "Members"),
      h(
        "div",
        { class: "table-wrap" },
        h(
          "table",
          { class: "records listing members", "aria-label": "Members" },
          h("thead", {}, h("tr", {}, COLUMNS.map((name) => h("th", { scope: "col" }, name)))),
          h("tbody", {}, rows),
        ),
      ),
      status,
    ),
    h(
      "section",
      { class: "card" },
      h("h2", {}, "Add a member"),
      h(
        "p",
        { class: "muted" },
        "The person needs an account on this collector (made by an instance admin, or by " +
          "signing in with SSO once).",
      ),
      h(
        "form",
        { class: "inline-form", "aria-label": "Add a member", onsubmit: add },
        h("label", { for: email.id }, "E-mail"),
        email,
        h("label", { for: role.id }, "Role"),
        role,
        h("button", { type: "submit" }, "Add"),
      ),
    ),
    h(
      "section",
      { class: "card" },
      h("h2", {}, "What each role may do"),
      h(
        "dl",
        { class: "facts roles" },
        ROLES.map((name) => [h("dt", {}, name), h("dd", {}, ROLE_TEXT[name])]),
      ),
      can("owner")
        ? null
        : h("p", { class: "muted" }, "Only an owner gives, changes or takes the owner and " +
            "admin roles."),
    ),
  );
}
