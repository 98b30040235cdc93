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

// Safe markdown: the few marks an agent's question uses (a person's answer is shown as
// typed), drawn as elements with text nodes only. No HTML in the text is ever parsed, and
// a link is kept only when it is http(s), opened without the page's referrer or a handle
// on the page.
// (A general renderer would need a sanitizer after it; building nodes needs neither.)
// A link always shows the host it really goes to after its words, and words that name
// another host get no link at all: `[https://a.example](https://b.example)` is the text
// "https://a.example (b.example)", never a link that reads as one place and goes to another.
const INLINE = /(`[^`\n]+`)|(\*\*[^*\n]+\*\*)|(\*[^*\n]+\*|_[^_\n]+_)|(\[[^\]\n]+\]\([^)\s]+\))/;
// A host named in words (`docs.example.org`, `www.bank.example`): labels, dots, a final
// label of letters. Unicode letters too, so a look-alike host is caught as another host.
const NAMED_HOST = /(?:[\p{L}\p{N}](?:[\p{L}\p{N}-]*[\p{L}\p{N}])?\.)+\p{L}[\p{L}-]*\p{L}/gu;

/** Inline marks of `text`: `code`, **strong**, *emphasis*, [links](https://…). */
export function inlineMarkdown(text) {
  const nodes = [];
  let rest = String(text ?? "");
  for (let found = rest.match(INLINE); found; found = rest.match(INLINE)) {
    if (found.index) nodes.push(rest.slice(0, found.index));
    const [whole, code, strong, em, link] = found;
    if (code) nodes.push(h("code", {}, code.slice(1, -1)));
    else if (strong) nodes.push(h("strong", {}, strong.slice(2, -2)));
    else if (em) nodes.push(h("em", {}, em.slice(1, -1)));
    else if (link) nodes.push(linkOf(link));
    rest = rest.slice(found.index + whole.length);
  }
  if (rest) nodes.push(rest);
  return nodes;
}

function linkOf(source) {
  const [, words, target] = source.match(/^\[([^\]]+)\]\((.+)\)$/);
  let url;
  try {
    url = new URL(target);
  } catch {
    return source;
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") return words;
  if (namesAnotherHost(words, url.hostname)) return `${words} (${url.hostname})`;
  // The host is drawn after the words by the style sheet (`a[data-host]::after`): seen,
  // and read out as part of the link's name, while the words stay the link's text.
  return h(
    "a",
    {
      href: url.href,
      rel: "noopener noreferrer nofollow",
      target: "_blank",
      "data-host": url.hostname,
    },
    words,
  );
}

/** Whether `words` name a host other than `host` (both compared as a URL spells them). */
function namesAnotherHost(words, host) {
  const bare = (name) => name.toLowerCase().replace(/^www\./, "");
  for (const [named] of words.matchAll(NAMED_HOST)) {
    let spelled;
    try {
      spelled = new URL(`http://${named}`).hostname;
    } catch {
      return true; // not even a host: a link under it would still read as one
    }
    if (bare(spelled) !== bare(host)) return true;
  }
  return false;
}

/** Paragraphs (a blank line apart), lists ("- " lines) and line breaks, with inline marks. */
export function markdown(text) {
  const blocks = String(text ?? "").trim().split(/\n\s*\n/);
  return blocks.filter(Boolean).map((block) => {
    const lines = block.split("\n");
    if (lines.every((line) => /^\s*[-*] /.test(line)))
      return h("ul", {}, lines.map((line) => h("li", {}, inlineMarkdown(line.replace(/^\s*[-*] /, "")))));
    const parts = lines.flatMap((line, i) => (i ? [h("br"), ...inlineMarkdown(line)] : inlineMarkdown(line)));
    return h("p", {}, parts);
  });
}
