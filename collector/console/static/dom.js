// Every element of the console is built here, from text: record data (LLM output, variables,
// metadata) is untrusted and never passes through an HTML parser.

/**
 * Make an element. Attributes are set one by one; children are nodes or text (never markup).
 * `on<event>` attributes take functions. `href` may only be an in-page route ("#/...") or a
 * blob: URL the console made itself, so no record can turn into a javascript: link.
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (name === "class") el.className = value;
    else if (name === "href") el.setAttribute("href", safeHref(value));
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

function safeHref(value) {
  const href = String(value);
  if (href.startsWith("#/") || href.startsWith("blob:")) return href;
  throw new Error(`refusing link target ${JSON.stringify(href)}`);
}

/** Append children: nodes as they are, anything else as a text node. */
export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** Replace an element's children. */
export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

/** A value as readable text: strings as they are, everything else as indented JSON. */
export function asText(value) {
  if (typeof value === "string") return value;
  return JSON.stringify(value, null, 2);
}

/** A record's status as a coloured badge. */
export function statusBadge(status) {
  return h("span", { class: `badge ${status === "error" ? "bad" : "good"}` }, status);
}

/** A <dl> of [term, description] pairs; empty descriptions are left out. */
export function facts(pairs) {
  const dl = h("dl", { class: "facts" });
  for (const [term, description] of pairs) {
    if (description === undefined || description === null || description === "") continue;
    dl.append(h("dt", {}, term), h("dd", {}, description));
  }
  return dl;
}

/** Go to route `target` (reloading it when it is the one shown); `from`'s view is busy till then. */
export function goTo(target, from = null) {
  from?.closest("main")?.setAttribute("aria-busy", "true");
  if (window.location.hash === target) window.dispatchEvent(new HashChangeEvent("hashchange"));
  else window.location.hash = target;
}
