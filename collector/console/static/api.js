// The console talks to the collector only through the public /v1 API, as any client does.
// The API key lives in this tab's session storage and travels in the X-API-Key header: never
// in a URL (which would land in access logs and browser history).

const STORAGE_KEY = "promptrail.apiKey";

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
  /** Called when the API stops accepting the stored key (revoked, or a new data directory). */
  onExpired: () => {},
  get key() {
    return sessionStorage.getItem(STORAGE_KEY);
  },
  signIn(key) {
    sessionStorage.setItem(STORAGE_KEY, key);
  },
  signOut() {
    sessionStorage.removeItem(STORAGE_KEY);
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
  const headers = { "X-API-Key": key || "" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(apiUrl(path, query), {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: "no-store",
  });
  if (!response.ok) {
    const error = new ApiError(response.status, await errorOf(response));
    if (error.status === 401 && key === session.key) {
      session.signOut();
      session.onExpired();
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
