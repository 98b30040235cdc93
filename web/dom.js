// Small DOM helpers. Text always goes in as text nodes, never as HTML.

/** An element with attributes (`on…` become listeners) and children (strings or nodes). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === false || value === null || value === undefined) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  el.append(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
  return el;
}

let counter = 0;

/** A page-unique id for label/control pairs. */
export function uid(prefix) {
  counter += 1;
  return `${prefix}-${counter}`;
}

/** A moment, in the reader's own locale and time zone. */
export function when(iso) {
  const date = iso ? new Date(iso) : new Date();
  return date.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "medium" });
}

/** "23 h 59 min", "4 min 05 s", "42 s". */
export function duration(ms) {
  const total = Math.ceil(ms / 1000);
  const hours = Math.floor(total / 3600);
  const minutes = Math.floor((total % 3600) / 60);
  const seconds = String(total % 60).padStart(2, "0");
  if (hours) return `${hours} h ${minutes} min`;
  if (minutes) return `${minutes} min ${seconds} s`;
  return `${total} s`;
}
