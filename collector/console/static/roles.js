// What the signed-in user's role lets it do, so that the console hides the controls the
// collector would refuse (docs/security.md, "Roles and scopes", is the server's table; this
// mirrors its roles). The collector still decides: a control shown here can be refused there.
// A key's scopes are not known to the console, so a key (the development key has every scope)
// sees every control, and its refusals (403 INSUFFICIENT_SCOPE) say what it lacks.

import { session } from "./api.js";

// Each action and the roles that may take it.
const GRANTS = {
  // Read prompts, experiments, connections, evaluators and rules: every role but annotator.
  readPrompts: ["owner", "admin", "member", "viewer"],
  // Score a record or a trace: annotators too.
  score: ["owner", "admin", "member", "annotator"],
  // Every other write of prompts, labels, datasets, experiments, runs, score configs, exports.
  write: ["owner", "admin", "member"],
  // Protected labels, connections, keys, members, deleting records.
  admin: ["owner", "admin"],
  // Give, change or take the owner or admin role.
  owner: ["owner"],
};

/** Whether the chosen project's role allows `action` (one of GRANTS); a key may do anything
 * but manage owners. */
export function can(action) {
  // A key with the admin scope still manages no owner or admin (the members routes).
  if (session.key) return action !== "owner";
  const role = session.role;
  return role !== null && GRANTS[action].includes(role);
}

/** What each role may do, one sentence each, for the members page. */
export const ROLE_TEXT = {
  owner: "Everything an admin does, and gives or takes the owner and admin roles.",
  admin:
    "Every write, and protected labels, connections, keys, members and deleting records.",
  member: "Reads everything but keys and the audit log; writes prompts, labels, datasets, " +
    "experiments and scores.",
  viewer: "Reads everything but keys and the audit log; writes nothing.",
  annotator: "Reads records, traces, sessions, users, scores and datasets, and writes scores.",
};

export const ROLES = ["owner", "admin", "member", "viewer", "annotator"];
