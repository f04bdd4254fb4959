// The trace a record belongs to, as a tree of its spans: the records sharing its trace_id
// (one API page of them, through the list's trace_id filter), nested by parent_span_id, each
// with a bar placing its start and duration within the whole trace.

import { api } from "./api.js";
import { h, statusBadge } from "./dom.js";
import * as fmt from "./format.js";

// One page of a trace's records: the list's largest page.
const TRACE_PAGE = 100;

/** The "Trace" card of a record's detail, or null when the record is in no trace. */
export async function traceSection(record) {
  if (!record.trace_id) return null;
  const { data: spans, pagination } = await api("/requests", {
    query: { trace_id: record.trace_id, limit: TRACE_PAGE },
  });
  const roots = buildTree(spans);
  const { start, end } = extent(spans);
  return h(
    "section",
    { class: "card wide trace" },
    h("h2", {}, "Trace"),
    h(
      "p",
      { class: "muted" },
      `${spans.length} span${spans.length === 1 ? "" : "s"} over ${fmt.duration(end - start)}`,
      pagination.has_more ? ` (the ${TRACE_PAGE} newest shown)` : "",
    ),
    h(
      "ul",
      { class: "trace-tree", role: "tree", "aria-label": "Spans of the trace" },
      flatten(roots).map((item) => row(item, record.id, start, end)),
    ),
  );
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
  const nameCell = h("span", { class: "trace-name" }, elbow, name);
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
