// The console's shell: sign-in, navigation, the project switcher and the hash router
// (#/requests…, #/prompts…, #/analytics, #/settings/…).
// Hash routes keep the collector's own paths free for the API and need no server routes.

import { showAnalytics } from "./analytics.js";
import { ApiError, api, messageOf, session } from "./api.js";
import { showCompare } from "./compare.js";
import { showDataset, showDatasets } from "./datasets.js";
import { h, replace } from "./dom.js";
import { showEvaluator, showEvaluators, showNewEvaluator } from "./evaluators.js";
import { showExperiment, showExperiments } from "./experiments.js";
import { showPlayground } from "./playground.js";
import { showDiff, showPrompt } from "./prompt_detail.js";
import { showEditPrompt, showNewPrompt, showPrompts } from "./prompt_list.js";
import { showRequest, showRequests } from "./requests.js";
import { showReview } from "./review.js";
import { can } from "./roles.js";
import { showRule } from "./rule_detail.js";
import { showRuleForm, showRules } from "./rules.js";
import { showSettings } from "./settings.js";
import { showSignIn, signInState } from "./signin.js";
import { showSession, showSessions } from "./sessions.js";
import { showTrace, showTraces } from "./traces.js";
import { showUser, showUsers } from "./users.js";

const main = document.getElementById("view");
// The element the current route renders into (see run): the routes below read it when called.
let view = main;
const nav = document.getElementById("nav");
const account = document.getElementById("account");

// Each section and what the role must be able to do to see it (roles.js): an annotator reads
// no prompts or experiments, and only an admin manages the project's settings.
const SECTIONS = [
  ["#/requests", "Requests"],
  ["#/traces", "Traces"],
  ["#/sessions", "Sessions"],
  ["#/users", "Users"],
  ["#/prompts", "Prompts", "readPrompts"],
  ["#/playground", "Playground", "write"],
  ["#/review", "Review", "score"],
  ["#/analytics", "Analytics"],
  ["#/datasets", "Datasets"],
  ["#/experiments", "Experiments", "readPrompts"],
  ["#/rules", "Evaluation", "readPrompts"],
  ["#/settings", "Settings", "admin"],
];
const name = (encoded) => decodeURIComponent(encoded);
const params = (query) => new URLSearchParams(query || "");

const ROUTES = [
  [
    /^#\/requests\/([^/?]+)(?:\?(.*))?$/,
    (id, query) => showRequest(view, decodeURIComponent(id), params(query).get("from") || ""),
  ],
  [/^#\/requests(?:\?(.*))?$/, (query) => showRequests(view, params(query))],
  // "+new" is no prompt name: names start with a letter, a digit or "_".
  [/^#\/prompts\/\+new$/, () => showNewPrompt(view)],
  [/^#\/prompts\/([^/?]+)\/edit$/, (encoded) => showEditPrompt(view, name(encoded))],
  [
    /^#\/prompts\/([^/?]+)\/diff(?:\?(.*))?$/,
    (encoded, q) => showDiff(view, name(encoded), params(q)),
  ],
  [/^#\/prompts\/([^/?]+)$/, (encoded) => showPrompt(view, name(encoded))],
  [/^#\/prompts(?:\?(.*))?$/, (query) => showPrompts(view, params(query))],
  [/^#\/playground(?:\?(.*))?$/, (query) => showPlayground(view, params(query))],
  [/^#\/review(?:\?(.*))?$/, (query) => showReview(view, params(query))],
  [/^#\/analytics(?:\?(.*))?$/, (query) => showAnalytics(view, params(query))],
  [/^#\/datasets\/([^/?]+)$/, (encoded) => showDataset(view, name(encoded))],
  [/^#\/datasets(?:\?(.*))?$/, () => showDatasets(view)],
  // "compare" is no experiment id: ids start with "exp_".
  [/^#\/experiments\/compare(?:\?(.*))?$/, (query) => showCompare(view, params(query))],
  [/^#\/experiments\/([^/?]+)$/, (encoded) => showExperiment(view, name(encoded))],
  [/^#\/experiments(?:\?(.*))?$/, (query) => showExperiments(view, params(query))],
  [/^#\/traces\/([^/?]+)$/, (encoded) => showTrace(view, name(encoded))],
  [/^#\/traces(?:\?(.*))?$/, (query) => showTraces(view, params(query))],
  [/^#\/sessions\/([^/?]+)$/, (encoded) => showSession(view, name(encoded))],
  [/^#\/sessions(?:\?(.*))?$/, (query) => showSessions(view, params(query))],
  [/^#\/users\/([^/?]+)$/, (encoded) => showUser(view, name(encoded))],
  [/^#\/users(?:\?(.*))?$/, (query) => showUsers(view, params(query))],
  // "+new" is neither an evaluator name's nor a rule id's start ("rule_").
  [/^#\/evaluators\/\+new$/, () => showNewEvaluator(view)],
  [/^#\/evaluators\/([^/?]+)$/, (encoded) => showEvaluator(view, name(encoded))],
  [/^#\/evaluators(?:\?(.*))?$/, () => showEvaluators(view)],
  [/^#\/rules\/\+new$/, () => showRuleForm(view)],
  [/^#\/rules\/([^/?]+)\/edit$/, (encoded) => showRuleForm(view, name(encoded))],
  [/^#\/rules\/([^/?]+)$/, (encoded) => showRule(view, name(encoded))],
  [/^#\/rules(?:\?(.*))?$/, () => showRules(view)],
  [
    /^#\/settings(?:\/([a-z]+))?(?:\?(.*))?$/,
    (page, query) => showSettings(view, page || "members", params(query)),
  ],
];

// A tab with no key asks once whether the browser holds a live session cookie (a reload, the
// way back from SSO) and whether SSO is offered; after that, only signing in makes a session.
let signInOptions = null;

async function route() {
  if (signInOptions === null) {
    signInOptions = await signInState();
    if (!session.signedIn && signInOptions.signed_in) {
      try {
        session.signInAs((await api("/auth/me")).data);
      } catch {
        // Ended in between: the sign-in page.
      }
    }
  }
  if (!session.signedIn) return signInPage();
  const hash = window.location.hash || "#/requests";
  showChrome(hash);
  for (const [pattern, show] of ROUTES) {
    const match = pattern.exec(hash);
    if (match) return run(() => show(...match.slice(1)));
  }
  window.location.hash = "#/requests";
}

// Each route renders into its own element. A route still loading when the next one starts (a
// quick click, Back) then fills an element no longer shown, instead of drawing over the newer
// page; the page shown stays until the new route draws its first element.
let routes = 0;

async function run(show) {
  const turn = ++routes;
  const page = h("div", { class: "route" });
  for (const pending of main.querySelectorAll(":scope > .route:empty")) pending.remove();
  new MutationObserver((_, observer) => {
    observer.disconnect();
    if (turn === routes) replace(main, page);
  }).observe(page, { childList: true });
  main.append(page);
  view = page;
  // aria-busy tells assistive technology (and the browser tests) that the view is loading.
  main.setAttribute("aria-busy", "true");
  try {
    await show();
  } catch (error) {
    if (turn === routes) failed(page, error);
  } finally {
    if (turn === routes) main.removeAttribute("aria-busy");
  }
}

function failed(page, error) {
  // A key the API stopped accepting has already led back to the sign-in form.
  if (error instanceof ApiError && error.status === 401) return;
  replace(page, h("p", { class: "error", role: "alert" }, messageOf(error)));
}

function showChrome(hash) {
  replace(
    nav,
    SECTIONS.filter(([, , action]) => !action || can(action)).map(([href, label]) =>
      h("a", { href, "aria-current": within(hash, href) ? "page" : null }, label),
    ),
  );
  replace(
    account,
    session.account ? projectSwitcher(hash) : null,
    session.account ? h("span", { class: "who" }, session.account.user.email) : null,
    h(
      "button",
      {
        type: "button",
        class: "quiet",
        onclick: signOut,
        title: session.account ? `Signed in as ${session.account.user.email}` : null,
      },
      "Sign out",
    ),
  );
}

/** Whether the route `hash` is in the section at `href` (evaluators are under Evaluation). */
function within(hash, href) {
  return hash.startsWith(href) || (href === "#/rules" && hash.startsWith("#/evaluators"));
}

/** The user's projects and roles (GET /v1/auth/me); choosing one reloads the section's list. */
function projectSwitcher(hash) {
  const chosen = session.project;
  const select = h(
    "select",
    { id: "project", "aria-label": "Project", title: "The project every page shows" },
    session.account.projects.map(({ name: project, role }) =>
      h("option", { value: project, selected: project === chosen }, `${project} · ${role}`),
    ),
  );
  select.addEventListener("change", () => {
    session.project = select.value;
    // A record or prompt of one project is not in another: back to the section's list.
    const section = SECTIONS.find(([href]) => hash.startsWith(href));
    const target = section && (!section[2] || can(section[2])) ? section[0] : "#/requests";
    if (window.location.hash === target) route();
    else window.location.hash = target;
  });
  return select;
}

async function signOut() {
  if (session.account) {
    try {
      await api("/auth/logout", { method: "POST" });
    } catch {
      // Signed out here whatever the collector answered: the cookie ends with its session.
    }
  }
  session.signOut();
  signInPage("Signed out.");
}

function signInPage(message = "", focusKey = false) {
  routes += 1; // a route still loading must not draw over the form
  main.removeAttribute("aria-busy");
  replace(nav);
  replace(account);
  showSignIn(main, {
    message,
    focusKey,
    sso: Boolean(signInOptions?.sso),
    // Back to the page the user was on (the address kept it), or the request log.
    done: () => {
      if (!window.location.hash.startsWith("#/")) window.location.hash = "#/requests";
      else route();
    },
  });
}

session.onExpired = (wasKey) =>
  wasKey
    ? signInPage("This API key is no longer accepted. Paste a valid key to sign in again.", true)
    : signInPage("Your session has ended. Sign in again to go back where you were.");
window.addEventListener("hashchange", route);
route();
