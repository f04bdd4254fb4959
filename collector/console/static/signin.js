// The sign-in page (docs/security.md, "Accounts"): e-mail and password (POST /v1/auth/login
// sets the session cookie and answers the CSRF token), "Sign in with SSO" when the collector
// has an identity provider, and the API key of the single-user default (the development key
// printed at first start), kept in this tab only.

import { ApiError, api, messageOf, session } from "./api.js";
import { h, replace } from "./dom.js";

/** Whether the collector offers SSO: its login route answers a redirect to the provider. */
async function ssoConfigured() {
  try {
    const response = await fetch("/v1/auth/oidc/login", {
      redirect: "manual",
      cache: "no-store",
    });
    return response.type === "opaqueredirect" || response.ok;
  } catch {
    return false;
  }
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
export function showSignIn(main, { message = "", focusKey = false, done }) {
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
  const sso = h("p", { class: "sso hidden" });
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
      sso,
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
  ssoConfigured().then((offered) => {
    if (!offered) return;
    sso.classList.remove("hidden");
    // A plain link: the browser goes to the provider and comes back signed in (a cookie).
    const link = document.createElement("a");
    link.className = "button quiet";
    link.setAttribute("href", "/v1/auth/oidc/login");
    link.textContent = "Sign in with SSO";
    replace(sso, link);
  });
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
