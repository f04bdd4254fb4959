// The sign-in page (docs/security.md, "Accounts"): e-mail and password (POST /v1/auth/login
// sets the session cookie and answers the CSRF token), "Sign in with SSO" when the collector
// has an identity provider, and the API key of the single-user default (the development key
// printed at first start), kept in this tab only.

import { ApiError, api, messageOf, session } from "./api.js";
import { h, replace } from "./dom.js";

/**
 * What the collector says before anything is asked of the API (`/console/sign-in.json`): whether
 * SSO is configured and whether this browser's session cookie is live. Asking the API instead
 * would be a refusal (a 404, a 401) at every load of a tab that is not signed in.
 */
export async function signInState() {
  try {
    const response = await fetch("/console/sign-in.json", { cache: "no-store" });
    if (response.ok) return await response.json();
  } catch {
    // The collector unreachable: the sign-in page says so when asked.
  }
  return { sso: false, signed_in: false };
}

function note(message) {
  return h("p", { class: message ? "note" : "note hidden", role: "status" }, message);
}

function say(element, message, error = false) {
  element.className = error ? "note error" : "note";
  element.setAttribute("role", error ? "alert" : "status");
  replace(element, message);
}

/**
 * Draw the sign-in page into `main`; `done()` is called once a user or a key is signed in.
 * `message` is said above the forms (signed out, a session or key no longer accepted), and
 * `focusKey` puts the cursor in the key's field (a key was refused) rather than the e-mail's.
 */
export function showSignIn(main, { message = "", focusKey = false, sso = false, done }) {
  const email = h("input", {
    id: "email",
    type: "email",
    autocomplete: "username",
    required: true,
  });
  const password = h("input", {
    id: "password",
    type: "password",
    autocomplete: "current-password",
    required: true,
  });
  const passwordNote = note("");
  // A plain link: the browser goes to the provider and comes back signed in (a cookie).
  const ssoLink = sso
    ? h("p", { class: "sso" }, link("/v1/auth/oidc/login", "Sign in with SSO"))
    : null;
  const key = h("input", {
    id: "api-key",
    type: "password",
    autocomplete: "off",
    spellcheck: "false",
    required: true,
  });
  const keyNote = note(focusKey ? message : "");
  const page = h(
    "div",
    { class: "sign-in-page" },
    h(
      "form",
      {
        class: "sign-in",
        "aria-label": "Sign in with an account",
        onsubmit: (event) => passwordSignIn(event, main, email, password, passwordNote, done),
      },
      h("h1", {}, "Sign in"),
      note(focusKey ? "" : message),
      h("label", { for: "email" }, "E-mail"),
      email,
      h("label", { for: "password" }, "Password"),
      password,
      h("button", { type: "submit" }, "Sign in"),
      passwordNote,
      ssoLink,
    ),
    h(
      "form",
      {
        class: "sign-in",
        "aria-label": "Sign in with a key",
        onsubmit: (event) => keySignIn(event, main, key, keyNote, done),
      },
      h("h2", {}, "Or use an API key"),
      h(
        "p",
        {},
        "For a collector without accounts: the development key printed at its first start, " +
          "or a key of your project. It stays in this browser tab (session storage) and is " +
          "sent only to this collector, in a request header.",
      ),
      h("label", { for: "api-key" }, "API key"),
      key,
      h("button", { type: "submit", class: "quiet" }, "Use this key"),
      keyNote,
    ),
  );
  replace(main, page);
  (focusKey ? key : email).focus();
}

/** A link to one of the collector's own paths (dom.js's h accepts only in-page routes). */
function link(path, text) {
  const anchor = document.createElement("a");
  anchor.className = "button quiet";
  anchor.setAttribute("href", path);
  anchor.textContent = text;
  return anchor;
}

async function passwordSignIn(event, main, email, password, status, done) {
  event.preventDefault();
  say(status, "Signing in…");
  main.setAttribute("aria-busy", "true");
  let answer;
  try {
    answer = await api("/auth/login", {
      method: "POST",
      body: { email: email.value.trim(), password: password.value },
    });
  } catch (error) {
    main.removeAttribute("aria-busy");
    if (error instanceof ApiError && error.status === 401) {
      return say(status, "Wrong e-mail or password.", true);
    }
    if (error instanceof ApiError && error.status === 429) {
      return say(status, "Too many attempts for this e-mail. Wait a minute and try again.", true);
    }
    return say(status, messageOf(error), true);
  }
  password.value = "";
  session.signInAs(answer.data);
  done();
}

async function keySignIn(event, main, input, status, done) {
  event.preventDefault();
  const key = input.value.trim();
  say(status, "Checking the key…");
  main.setAttribute("aria-busy", "true");
  try {
    await api("/requests", { query: { limit: 1 }, key });
  } catch (error) {
    main.removeAttribute("aria-busy");
    if (error instanceof ApiError && error.status === 401) {
      return say(status, "This API key was not accepted. Check it and paste it again.", true);
    }
    return say(status, messageOf(error), true);
  }
  session.signIn(key);
  done();
}
