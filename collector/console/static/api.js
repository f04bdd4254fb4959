// The console talks to the collector only through the public /v1 API, as any client does.
// A signed-in user's session is the collector's HttpOnly cookie (same origin, so fetch sends
// it); its CSRF token is kept in memory (GET /v1/auth/me answers it again after a reload) and
// sent as X-CSRF-Token on every write, the chosen project as X-Promptrail-Project.
// An API key (the single-user default) lives in this tab's session storage and travels in the
// X-API-Key header: never in a URL (which would land in access logs and browser history).

const STORAGE_KEY = "promptrail.apiKey";
const PROJECT_KEY = "promptrail.project";

/** An error answer of the API: status, and the contract's {type, code, message, details}. */
export class ApiError extends Error {
  constructor(status, error) {
    super(error.message || `HTTP ${status}`);
    this.status = status;
    this.code = error.code || "";
    this.details = error.details || {};
  }
}

export const session = {
  /** Called when the API stops accepting the key or the session (revoked, signed out). */
  onExpired: () => {},
  /** The signed-in user: {user, projects: [{name, role}], csrf_token}; null with a key. */
  account: null,
  get key() {
    return sessionStorage.getItem(STORAGE_KEY);
  },
  /** Whether a key or a user session speaks for this tab. */
  get signedIn() {
    return Boolean(this.key || this.account);
  },
  /** The project a user acts in: the one chosen in this tab, else the user's first. */
  get project() {
    const projects = this.account ? this.account.projects : [];
    const chosen = sessionStorage.getItem(PROJECT_KEY);
    if (projects.some((project) => project.name === chosen)) return chosen;
    return projects.length ? projects[0].name : "";
  },
  set project(name) {
    sessionStorage.setItem(PROJECT_KEY, name);
  },
  /** The user's role in the chosen project; null for a key (its scopes decide, server-side). */
  get role() {
    if (!this.account) return null;
    const found = this.account.projects.find((project) => project.name === this.project);
    return found ? found.role : null;
  },
  signIn(key) {
    sessionStorage.setItem(STORAGE_KEY, key);
  },
  /** Keep a signed-in user's answer of POST /v1/auth/login or GET /v1/auth/me. */
  signInAs(account) {
    this.account = account;
  },
  signOut() {
    sessionStorage.removeItem(STORAGE_KEY);
    this.account = null;
  },
};

/** Build /v1<path>?<query>, leaving out empty values. */
export function apiUrl(path, query = {}) {
  const url = new URL(`/v1${path}`, window.location.origin);
  for (const [name, value] of Object.entries(query)) {
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(name, value);
  }
  return url;
}

/** Fetch /v1<path> with the key; resolve to the raw Response, reject with ApiError. */
export async function request(path, { method = "GET", query, body, key = session.key } = {}) {
  const headers = {};
  if (key) headers["X-API-Key"] = key;
  else if (session.account) {
    headers["X-Promptrail-Project"] = session.project;
    if (method !== "GET") headers["X-CSRF-Token"] = session.account.csrf_token;
  }
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(apiUrl(path, query), {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: "no-store",
    credentials: "same-origin",
  });
  if (!response.ok) {
    const error = new ApiError(response.status, await errorOf(response));
    // Only a refusal of this tab's own credentials signs it out: not a key being checked on
    // the form, nor a wrong password.
    if (error.status === 401 && session.signedIn && key === session.key) {
      const wasKey = Boolean(session.key);
      session.signOut();
      session.onExpired(wasKey);
    }
    throw error;
  }
  return response;
}

/** Fetch /v1<path> and resolve to its JSON body. */
export async function api(path, options) {
  return (await request(path, options)).json();
}

async function errorOf(response) {
  try {
    const body = await response.json();
    if (body && body.error) return body.error;
  } catch {
    // Not the contract's error body (a proxy's page, say): fall through to the status.
  }
  return { message: `${response.status} ${response.statusText}` };
}

/** One line for an error: the API's message and code, or the browser's. */
export function messageOf(error) {
  if (error instanceof ApiError) return `${error.message} (${error.code || error.status})`;
  return `Could not reach the collector: ${error.message}`;
}

/** Read a streamed response's `data: <json>` blocks, calling `onEvent` with each event. */
export async function readEvents(response, onEvent) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = block
        .split("\n")
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).trimStart())
        .join("\n");
      if (data) onEvent(JSON.parse(data));
    }
  }
}
