// The console's shell: sign-in, navigation and the hash router (#/requests…, #/prompts…,
// #/analytics).
// Hash routes keep the collector's own paths free for the API and need no server routes.

import { showAnalytics } from "./analytics.js";
import { ApiError, api, messageOf, session } from "./api.js";
import { showCompare } from "./compare.js";
import { showDataset, showDatasets } from "./datasets.js";
import { h, replace } from "./dom.js";
import { showExperiment, showExperiments } from "./experiments.js";
import { showDiff, showPrompt } from "./prompt_detail.js";
import { showEditPrompt, showNewPrompt, showPrompts } from "./prompt_list.js";
import { showRequest, showRequests } from "./requests.js";
import { showReview } from "./review.js";
import { showSession, showSessions } from "./sessions.js";
import { showTrace, showTraces } from "./traces.js";
import { showUser, showUsers } from "./users.js";

const main = document.getElementById("view");
// The element the current route renders into (see run): the routes below read it when called.
let view = main;
const nav = document.getElementById("nav");
const account = document.getElementById("account");

const SECTIONS = [
  ["#/requests", "Requests"],
  ["#/traces", "Traces"],
  ["#/sessions", "Sessions"],
  ["#/users", "Users"],
  ["#/prompts", "Prompts"],
  ["#/review", "Review"],
  ["#/analytics", "Analytics"],
  ["#/datasets", "Datasets"],
  ["#/experiments", "Experiments"],
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
];

function route() {
  if (!session.key) return showSignIn();
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
    SECTIONS.map(([href, label]) =>
      h("a", { href, "aria-current": hash.startsWith(href) ? "page" : null }, label),
    ),
  );
  replace(account, h("button", { type: "button", class: "quiet", onclick: signOut }, "Sign out"));
}

function signOut() {
  session.signOut();
  showSignIn("Signed out.");
}

function showSignIn(message = "") {
  routes += 1; // a route still loading must not draw over the form
  replace(nav);
  replace(account);
  const input = h("input", {
    id: "api-key",
    type: "password",
    autocomplete: "off",
    spellcheck: "false",
    required: true,
  });
  const note = h("p", { class: message ? "note" : "note hidden", role: "status" }, message);
  const form = h(
    "form",
    { class: "sign-in", onsubmit: (event) => signIn(event, input, note) },
    h("h1", {}, "Sign in"),
    h(
      "p",
      {},
      "Paste an API key of your project. It stays in this browser tab (session storage) and is " +
        "sent only to this collector, in a request header.",
    ),
    h("label", { for: "api-key" }, "API key"),
    input,
    h("button", { type: "submit" }, "Sign in"),
    note,
  );
  replace(main, form);
  input.focus();
}

async function signIn(event, input, note) {
  event.preventDefault();
  const key = input.value.trim();
  note.className = "note";
  replace(note, "Checking the key…");
  main.setAttribute("aria-busy", "true");
  try {
    await api("/requests", { query: { limit: 1 }, key });
  } catch (error) {
    main.removeAttribute("aria-busy");
    note.className = "note error";
    note.setAttribute("role", "alert");
    if (error instanceof ApiError && error.status === 401) {
      return replace(note, "This API key was not accepted. Check it and paste it again.");
    }
    return replace(note, messageOf(error));
  }
  session.signIn(key);
  if (!window.location.hash.startsWith("#/")) window.location.hash = "#/requests";
  else route();
}

session.onExpired = () =>
  showSignIn("This API key is no longer accepted. Paste a valid key to sign in again.");
window.addEventListener("hashchange", route);
route();
