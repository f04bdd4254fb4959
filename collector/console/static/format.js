// How numbers and times read in the console. Times are shown in UTC, as the API returns them.

const integer = new Intl.NumberFormat("en-US");

/** "2026-11-25 14:03:07" (UTC) from an ISO 8601 timestamp. */
export function time(iso) {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return String(iso);
  return date.toISOString().slice(0, 19).replace("T", " ");
}

/** "1,234" */
export function count(value) {
  return integer.format(value ?? 0);
}

/** "$0.0012", "$1.50", "$0": every significant digit down to a millionth of a dollar. */
export function cost(value) {
  if (!value) return "$0";
  let text = Number(value).toFixed(6).replace(/0+$/, "");
  const decimals = text.length - text.indexOf(".") - 1;
  if (decimals < 2) text += "0".repeat(2 - decimals);
  return `$${text}`;
}

/** Why a cost is unknown, said wherever "—" stands for one. */
export const NO_PRICE = "no price for this model";

/** "1,842 ms" */
export function duration(ms) {
  if (ms === null || ms === undefined) return "";
  return `${integer.format(ms)} ms`;
}

/** "1 item shown." / "3 items shown, more to load." for a paged list's status line. */
export function shown(number, noun, plural, more) {
  return `${count(number)} ${number === 1 ? noun : plural} shown${more ? ", more to load" : ""}.`;
}
