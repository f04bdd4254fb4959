// A trace as a tree of its records (every kind: model calls, embeddings, chains, agents, tools,
// retrievers, spans), nested by parent_span_id, each with a bar placing its start and duration
// within the whole trace: the tree and the waterfall in one list. The trace is read whole,
// page after page of GET /v1/traces/{id}, up to MAX_RECORDS.

import { ApiError, api } from "./api.js";
import { h, statusBadge } from "./dom.js";
import * as fmt from "./format.js";

// The API's largest page, and how many records a trace view reads (a runaway agent loop can
// log tens of thousands; past this the view says how many it left out).
const TRACE_PAGE = 1000;
const MAX_RECORDS = 2000;

/**
 * The trace `traceId` read whole: `{trace, items, complete}`, its summary (the API's detail
 * without items), its records oldest first, and whether all of them were read. Null when the
 * trace is unknown (404 TRACE_NOT_FOUND).
 */
export async function readTrace(traceId) {
  const items = [];
  let trace = null;
  let cursor;
  do {
    let page;
    try {
      page = await api(`/traces/${encodeURIComponent(traceId)}`, {
        query: { limit: TRACE_PAGE, cursor },
      });
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) return null;
      throw error;
    }
    const { items: pageItems, ...summary } = page.data;
    trace = summary;
    items.push(...pageItems);
    cursor = page.pagination.has_more ? page.pagination.next_cursor : null;
  } while (cursor && items.length < MAX_RECORDS);
  return { trace, items, complete: !cursor };
}

/** The "Trace" card of a record's detail, or null when the record is in no trace. */
export async function traceSection(record) {
  if (!record.trace_id) return null;
  const found = await readTrace(record.trace_id);
  if (found === null) return null;
  return h(
    "section",
    { class: "card wide trace" },
    h(
      "div",
      { class: "card-head" },
      h("h2", {}, "Trace"),
      h("a", { href: traceHref(record.trace_id) }, "Open the trace"),
    ),
    traceTree(found, record.id),
  );
}

/** The route of the trace page of `traceId`. */
export function traceHref(traceId) {
  return `#/traces/${encodeURIComponent(traceId)}`;
}

/**
 * A trace's records as a tree with a waterfall: a line saying how many over how long, then one
 * row per record (`currentId`'s marked). `found` is what `readTrace` answers.
 */
export function traceTree({ trace, items, complete }, currentId = null) {
  if (!items.length) return h("p", { class: "muted" }, "No records in this trace.");
  const roots = buildTree(items);
  const { start, end } = extent(items);
  const noun = items.length === 1 ? "span" : "spans";
  return [
    h(
      "p",
      { class: "muted" },
      `${fmt.count(items.length)} ${noun} over ${fmt.duration(end - start)}`,
      complete
        ? ""
        : ` (the first ${fmt.count(items.length)} of ${fmt.count(trace.records)} shown)`,
    ),
    timeAxis(end - start),
    h(
      "ul",
      { class: "trace-tree", role: "tree", "aria-label": "Spans of the trace" },
      flatten(roots).map((item) => row(item, currentId, start, end)),
    ),
  ];
}

/**
 * The waterfall's scale over the bars' column: ticks at round times (0, 0.5, 1 ms; 0, 200,
 * 400 ms; 0, 5, 10 s), each placed where that time falls on the tracks. It takes the rows'
 * grid, so it lines up with their tracks at any width (a phone, whose rows put the track on a
 * line of its own, does without it).
 */
function timeAxis(total) {
  const { step, ticks } = axisTicks(total);
  const labels = ticks.map((ms) => {
    const label = h("span", { class: "trace-tick" }, tickText(ms, step, total));
    const at = total > 0 ? (ms / total) * 100 : 0;
    // Set through the CSSOM: the CSP allows no style attribute. A label near the right end
    // ends at its time rather than run past the track.
    label.style.left = `${at}%`;
    if (at > 85) label.classList.add("end");
    else if (at > 0) label.classList.add("mid");
    return label;
  });
  return h(
    "div",
    { class: "trace-span trace-axis", "aria-hidden": "true" },
    h("span", {}),
    h("span", {}),
    h("span", {}),
    h("span", {}),
    h("span", { class: "trace-ticks" }, labels),
  );
}

/** Round ticks over 0..`total` ms: a step of 1, 2, 2.5 or 5 times a power of ten, 2-5 ticks. */
function axisTicks(total) {
  if (!(total > 0)) return { step: 1, ticks: [0] };
  const rough = total / 4;
  const power = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * power).find((s) => s >= rough);
  const ticks = [];
  // A tolerance, so that 3 × 0.1 counts as within 0.3.
  for (let i = 0; i * step <= total * (1 + 1e-9); i++) ticks.push(i * step);
  return { step, ticks };
}

/** A tick's label: "0.5 ms", "400 ms" under a second's trace, "1.5 s" from one. */
function tickText(ms, step, total) {
  const [value, unit, unitStep] = total >= 1000 ? [ms / 1000, "s", step / 1000] : [ms, "ms", step];
  // As many decimals as the step has ("0.25" two, "5" none).
  let decimals = 0;
  while (
    decimals < 6 &&
    Math.abs(Math.round(unitStep * 10 ** decimals) - unitStep * 10 ** decimals) > 1e-6
  ) {
    decimals++;
  }
  const text = value.toLocaleString("en-US", { maximumFractionDigits: decimals });
  return `${text} ${unit}`;
}

/**
 * Nest records by parent_span_id. A record whose parent is not on the page is a root; so is
 * one caught in a cycle of parents (data a client logged), so that every record shows once.
 */
function buildTree(spans) {
  const items = spans.map((span) => ({ span, children: [] }));
  const bySpanId = new Map();
  for (const item of items) if (item.span.span_id) bySpanId.set(item.span.span_id, item);
  const roots = [];
  for (const item of items) {
    const parent = item.span.parent_span_id && bySpanId.get(item.span.parent_span_id);
    if (parent && !descendsFrom(parent, item, bySpanId)) parent.children.push(item);
    else roots.push(item);
  }
  const byStart = (a, b) =>
    startOf(a.span) - startOf(b.span) || a.span.id.localeCompare(b.span.id);
  for (const item of items) item.children.sort(byStart);
  return roots.sort(byStart);
}

/** Whether `item` is `ancestor` or has it among its parents (following parent_span_id). */
function descendsFrom(item, ancestor, bySpanId) {
  const seen = new Set();
  for (let at = item; at && !seen.has(at); at = bySpanId.get(at.span.parent_span_id)) {
    if (at === ancestor) return true;
    seen.add(at);
  }
  return false;
}

function startOf(span) {
  return new Date(span.created_at).getTime();
}

function extent(spans) {
  const starts = spans.map(startOf);
  const ends = spans.map((s) => startOf(s) + (s.latency_ms || 0));
  return { start: Math.min(...starts), end: Math.max(...ends) };
}

/**
 * The tree's rows in reading order (parents before their children), with their depth and the
 * span of time their bar covers: a child's bar is clamped within its parent's (clocks of two
 * processes, or a latency measured around more than the call, can put a child's end past its
 * parent's, and a bar running out of its parent reads as a wrong tree).
 */
function flatten(items, depth = 0, out = [], within = null) {
  for (const item of items) {
    let from = startOf(item.span);
    let to = from + (item.span.latency_ms || 0);
    if (within) {
      from = Math.min(Math.max(from, within.from), within.to);
      to = Math.min(Math.max(to, from), within.to);
    }
    const bar = { from, to };
    out.push({ ...item, depth, bar });
    flatten(item.children, depth + 1, out, bar);
  }
  return out;
}

/**
 * One span's row. Rows are a flat list (depth shown by indenting the name and by aria-level)
 * so that every row's bar track has the same width and place: the bars of all depths share
 * one time axis.
 */
function row(item, currentId, start, end) {
  const { span, depth } = item;
  const total = Math.max(end - start, 1);
  const bar = h("span", { class: `trace-bar${span.status === "error" ? " bad" : ""}` });
  // Set through the CSSOM: the CSP allows no style attribute.
  bar.style.left = `${((item.bar.from - start) / total) * 100}%`;
  bar.style.width = `${Math.max(((item.bar.to - item.bar.from) / total) * 100, 0.5)}%`;
  const current = span.id === currentId;
  const label = span.span_name || span.prompt_name || span.id;
  const name = h(
    "a",
    {
      href: `#/requests/${encodeURIComponent(span.id)}`,
      "aria-current": current ? "page" : null,
      title: label, // a long name is cut to the column's width (on a phone it wraps instead)
    },
    label,
  );
  const elbow = depth ? h("span", { class: "trace-elbow", "aria-hidden": "true" }, "└ ") : null;
  // Every kind is shown: the model calls and the chains, tools and retrievers around them.
  const kind = h("span", { class: `kind-tag kind-${kindOf(span)}` }, kindOf(span));
  const nameCell = h("span", { class: "trace-name" }, elbow, kind, name);
  nameCell.style.paddingLeft = `${depth * 1.25}rem`;
  return h(
    "li",
    {
      role: "treeitem",
      "aria-level": depth + 1,
      "aria-expanded": item.children.length ? "true" : null,
      class: `trace-span${current ? " current" : ""}`,
    },
    nameCell,
    h("span", { class: "mono muted trace-model" }, span.model || ""),
    h("span", {}, statusBadge(span.status)),
    h("span", { class: "trace-duration" }, fmt.duration(span.latency_ms)),
    h("span", { class: "trace-track", "aria-hidden": "true" }, bar),
  );
}

const KINDS = new Set(["llm", "embedding", "chain", "agent", "tool", "retriever", "span"]);

/** A record's kind as the API gives it (a record stored before kinds existed reads "llm"). */
export function kindOf(record) {
  return KINDS.has(record.kind) ? record.kind : "llm";
}
