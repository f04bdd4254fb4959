// Every element of the console is built here, from text: record data (LLM output, variables,
// metadata) is untrusted and never passes through an HTML parser.

import { NO_PRICE, cost, count } from "./format.js";

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

/** A cost: "—" when the model has no price (`known` false; the reason on hover), never "$0". */
export function costText(usd, known) {
  if (known !== false) return cost(usd);
  return h("span", { class: "unknown-cost", title: `Cost unknown: ${NO_PRICE}` }, "—");
}

/** A record's status as a coloured badge. */
export function statusBadge(status) {
  return h("span", { class: `badge ${status === "error" ? "bad" : "good"}` }, status);
}

/** A card headed `title` holding `content` (`className` adds classes, e.g. "wide"). */
export function section(title, content, className = "") {
  return h(
    "section",
    { class: className ? `card ${className}` : "card" },
    h("h2", {}, title),
    content,
  );
}

/** A form field: `control` (which has its id) under its label, with an optional hint below. */
export function field(label, control, hint = "") {
  return h(
    "div",
    { class: "field" },
    h("label", { for: control.id }, label),
    control,
    hint ? h("span", { class: "hint" }, hint) : null,
  );
}

// Past these a value is shown cut, with a button for the rest: a 1 MB metadata value laid out
// whole made a record's page 300,000 px tall.
const SHORT_CHARS = 600;
const SHORT_LINES = 12;

/**
 * A value as a <pre>: a long one (over ~600 characters or 12 lines) shows its start with
 * "Show all" (the whole value, in a box that scrolls) and "Copy" (the whole value).
 */
export function longText(value, className = "") {
  const text = asText(value);
  const lines = text.split("\n", SHORT_LINES + 1);
  if (text.length <= SHORT_CHARS && lines.length <= SHORT_LINES) {
    return h("pre", { class: className || null }, text);
  }
  const start = lines.slice(0, SHORT_LINES).join("\n").slice(0, SHORT_CHARS);
  const pre = h("pre", { class: `${className} clipped`.trim() }, `${start}…`);
  const size = `${count(text.length)} characters`;
  const toggle = h(
    "button",
    { type: "button", class: "quiet small", "aria-expanded": "false" },
    `Show all (${size})`,
  );
  toggle.addEventListener("click", () => {
    const open = toggle.getAttribute("aria-expanded") !== "true";
    replace(pre, open ? text : `${start}…`);
    pre.classList.toggle("clipped", !open);
    pre.classList.toggle("expanded", open);
    toggle.setAttribute("aria-expanded", String(open));
    replace(toggle, open ? "Show less" : `Show all (${size})`);
  });
  const note = h("span", { class: "copy-note", role: "status" });
  const copyButton = h("button", { type: "button", class: "quiet small" }, "Copy");
  copyButton.addEventListener("click", async () => {
    replace(note, (await copy(text)) ? "Copied." : "Could not copy: select the text instead.");
  });
  const actions = h("div", { class: "long-actions" }, toggle, copyButton, note);
  return h("div", { class: "long-value" }, pre, actions);
}

/**
 * Put `text` on the clipboard. The Clipboard API exists only in secure contexts (https,
 * localhost); a collector reached over plain http on a LAN falls back to copying a selection.
 */
export async function copy(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const box = h("textarea", { class: "visually-hidden", "aria-hidden": "true" });
    box.value = text;
    document.body.append(box);
    box.select();
    const done = document.execCommand("copy");
    box.remove();
    return done;
  }
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

/**
 * Go to route `target` (reloading it when it is the one shown); `from`'s view is busy till
 * then.
 */
export function goTo(target, from = null) {
  from?.closest("main")?.setAttribute("aria-busy", "true");
  if (window.location.hash === target) window.dispatchEvent(new HashChangeEvent("hashchange"));
  else window.location.hash = target;
}
