// Answer fields drawn from a responseSchema, checked with the rules the server applies.
//
// Each field is `{name, el, read(), showError(message), focus()}`; `read()` returns the
// value to send, or undefined when the person left it empty.

import { h, uid } from "./dom.js";

const EMAIL = /^[^@\s]+@[^@\s]+\.[^@\s]+$/;

/** Why `value` breaks `schema`, as a sentence, or null. */
export function problem(schema, value, required, noun = "value") {
  const empty = value === undefined || value === "" || (Array.isArray(value) && !value.length);
  if (empty) {
    if (!required) return null;
    return schema.enum || schema.items?.enum ? "Choose an option." : "Required.";
  }
  if (schema.enum && !schema.enum.includes(value)) return "Choose one of the listed options.";
  if (schema.type === "array") return arrayProblem(schema, value, noun);
  if (schema.type === "string") {
    if (schema.maxLength !== undefined && value.length > schema.maxLength) {
      return `At most ${schema.maxLength} characters.`;
    }
    if (schema.pattern && !new RegExp(schema.pattern).test(value)) {
      return `“${value}” is not a valid ${noun}.`;
    }
    if (schema.format === "email" && !EMAIL.test(value)) return "Not an email address.";
  }
  if (schema.type === "integer" || schema.type === "number") return numberProblem(schema, value);
  return null;
}

function arrayProblem(schema, value, noun) {
  const low = schema.minItems ?? 0;
  const high = schema.maxItems;
  if (value.length < low || (high !== undefined && value.length > high)) {
    if (schema.items?.enum)
      return `Choose ${high === undefined ? `at least ${low}` : `${low} to ${high}`}.`;
    return `At most ${high} ${noun}s.`;
  }
  if (schema.uniqueItems && new Set(value).size !== value.length) return "Choose each once.";
  for (const item of value) {
    const found = problem(schema.items || {}, item, true, noun);
    if (found) return found;
  }
  return null;
}

function numberProblem(schema, value) {
  const whole = schema.type === "integer";
  if (!Number.isFinite(value) || (whole && !Number.isInteger(value))) {
    return whole ? "Enter a whole number." : "Enter a number.";
  }
  const { minimum: low, maximum: high } = schema;
  if ((low !== undefined && value < low) || (high !== undefined && value > high)) {
    return `Enter a number from ${low ?? "−∞"} to ${high ?? "∞"}.`;
  }
  return null;
}

/** The property a server message names: "answer: …" or "…schema: packages.0: …". */
export function fieldOf(message) {
  const detail = message.replace(/^.*?response schema: /, "");
  return /^([A-Za-z_]\w*)[.:]/.exec(detail)?.[1] ?? null;
}

/** One labelled control for one property of an object schema, holding `initial` if given. */
export function field(name, schema, required, label, initial) {
  const id = uid(name);
  const error = h("p", { id: `${id}-error`, class: "error", hidden: true });
  const text = required ? label : `${label} (optional)`;
  const made = withError(name, control(id, schema, text, error), error);
  if (initial !== undefined && initial !== null) made.set(initial);
  return made;
}

function control(id, schema, text, error) {
  if (schema.enum) return choices(id, "radio", schema.enum, text, error);
  if (schema.type === "array" && schema.items?.enum) {
    return choices(id, "checkbox", schema.items.enum, `${text} ${rangeHint(schema)}`, error);
  }
  if (schema.type === "boolean") return checkbox(id, text, error);
  if (schema.type === "integer" || schema.type === "number") return number(id, schema, text, error);
  return textual(id, schema, text, error);
}

function withError(name, { el, read, controls, set }, error) {
  return {
    name,
    el,
    read,
    set,
    showError(message) {
      error.textContent = message || "";
      error.hidden = !message;
      for (const control of controls)
        control.setAttribute("aria-invalid", message ? "true" : "false");
    },
    focus: () => controls[0].focus(),
  };
}

function rangeHint(schema) {
  const low = schema.minItems ?? 0;
  return schema.maxItems === undefined
    ? `(at least ${low})`
    : `(choose ${low} to ${schema.maxItems})`;
}

function choices(id, type, options, legend, error) {
  const inputs = options.map((option, i) =>
    h("input", { type, id: `${id}-${i}`, name: id, value: option, "aria-describedby": error.id }),
  );
  const el = h(
    "fieldset",
    { class: "field choices" },
    h("legend", {}, legend),
    inputs.map((input, i) =>
      h("div", { class: "option" }, input, h("label", { for: input.id }, options[i])),
    ),
    error,
  );
  const checked = () => inputs.filter((i) => i.checked).map((i) => i.value);
  const read = type === "radio" ? () => checked()[0] : checked;
  const set = (value) => {
    const wanted = [].concat(value).map(String);
    for (const input of inputs) input.checked = wanted.includes(input.value);
  };
  return { el, read, controls: inputs, set };
}

function checkbox(id, label, error) {
  const input = h("input", { type: "checkbox", id, "aria-describedby": error.id });
  const el = h("div", { class: "field option" }, input, h("label", { for: id }, label), error);
  return { el, read: () => input.checked, set: (v) => (input.checked = v === true), controls: [input] };
}

function number(id, schema, label, error) {
  const input = h("input", {
    type: "number",
    id,
    min: schema.minimum,
    max: schema.maximum,
    step: schema.type === "integer" ? 1 : "any",
    inputmode: schema.type === "integer" ? "numeric" : "decimal",
    "aria-describedby": error.id,
  });
  const el = h("div", { class: "field" }, h("label", { for: id }, label), input, error);
  return {
    el,
    read: () => (input.value === "" ? undefined : Number(input.value)),
    set: (value) => (input.value = String(value)),
    controls: [input],
  };
}

function textual(id, schema, label, error) {
  const long = schema.maxLength === undefined || schema.maxLength > 200;
  const count = h("p", { id: `${id}-count`, class: "count" });
  const attrs = { id, "aria-describedby": `${id}-count ${error.id}` };
  const input = long
    ? h("textarea", { ...attrs, rows: 3 })
    : h("input", { ...attrs, type: schema.format === "email" ? "email" : "text" });
  const update = () => {
    const max = schema.maxLength;
    count.textContent = max === undefined ? "" : `${input.value.length} / ${max} characters`;
    count.classList.toggle("over", max !== undefined && input.value.length > max);
  };
  input.addEventListener("input", update);
  update();
  const el = h("div", { class: "field" }, h("label", { for: id }, label), input, count, error);
  return {
    el,
    read: () => (input.value.trim() === "" ? undefined : input.value),
    set: (value) => {
      input.value = typeof value === "string" ? value : JSON.stringify(value);
      update();
    },
    controls: [input],
  };
}

/**
 * An editable list of names (an array of strings, like a card's packages): remove an
 * entry, or add one that passes the item pattern. Nothing else is editable.
 */
export function listField(name, schema, initial, label, noun) {
  const id = uid(name);
  const error = h("p", { id: `${id}-error`, class: "error", role: "alert", hidden: true });
  const names = [...initial];
  const list = h("ul", { class: "names" });
  const input = h("input", {
    id,
    autocapitalize: "off",
    spellcheck: "false",
    "aria-describedby": error.id,
  });
  const result = withError(name, { el: null, read: () => [...names], controls: [input] }, error);
  const entry = (n, i) => {
    const label = `Remove ${noun} ${n}`;
    const button = {
      type: "button",
      class: "small",
      "aria-label": label,
      onclick: () => remove(i),
    };
    return h("li", {}, h("code", {}, n), h("button", button, "Remove"));
  };
  const none = () => [h("li", { class: "empty" }, `No ${noun}s.`)];
  const draw = () => list.replaceChildren(...(names.length ? names.map(entry) : none()));
  const remove = (i) => {
    names.splice(i, 1);
    draw();
    input.focus();
  };
  const add = () => {
    const value = input.value.trim();
    if (!value) return;
    const found = names.includes(value)
      ? `${value} is already listed.`
      : problem(schema, [...names, value], false, noun);
    result.showError(found);
    if (found) return;
    names.push(value);
    input.value = "";
    draw();
  };
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter") {
      event.preventDefault();
      add();
    }
  });
  draw();
  result.el = h(
    "fieldset",
    { class: `field list list-${name}` },
    h("legend", {}, label),
    list,
    h("label", { for: id }, `Add a ${noun}`),
    h("div", { class: "row" }, input, h("button", { type: "button", onclick: add }, "Add")),
    error,
  );
  return result;
}

// Declining an MCP server's question --------------------------------------------

/** Whether a card holds an MCP server's input request (`interlock.elicitation`). */
export function isElicitation(card) {
  return card?.source === "mcp";
}

const declined = new WeakSet();

/**
 * Give every MCP card of `shown` (a card, or a group of cards) a Decline button beside
 * Send. A press answers with status `cancelled`, which the server turns into MCP's
 * `decline`: a form sent with its box left unticked would be an `accept` whose content
 * happens to say no, and a server may read that as consent.
 */
export function offerDecline(shown) {
  const group = shown.cards ? shown : null;
  for (const one of group ? group.cards : [shown]) {
    if (!isElicitation(one.request.card)) continue;
    const draw = () => addDecline(one, group);
    draw();
    // The form is drawn again when an interrupted answer is reopened: it gets one too.
    new MutationObserver(draw).observe(one.el, { childList: true });
    const end = one.end.bind(one);
    one.end = (reason) => {
      end(reason);
      // Declined here, the run went on with the refusal: "cancelled" would say otherwise.
      if (reason === "cancelled" && declined.has(one))
        one.outcome.textContent = "Declined: the tool was told you said no.";
    };
  }
}

function addDecline(one, group) {
  const actions = one.form?.querySelector(".actions");
  if (!actions || actions.querySelector(".decline")) return;
  const press = () => decline(one, group);
  actions.append(h("button", { type: "button", class: "decline", onclick: press }, "Decline"));
}

/**
 * Decline `one`. In a group, the other questions of the same tool call still open are
 * declined with it: they only served the call the person just refused, and all answers
 * go in one resume, so one press is enough.
 */
function decline(one, group) {
  const call = one.request.card.tool_use_id;
  const others = (group?.cards || []).filter(
    (other) =>
      other !== one &&
      other.answerable &&
      !group.chosen.has(other.request.interruptId) &&
      isElicitation(other.request.card) &&
      other.request.card.tool_use_id === call,
  );
  for (const card of [...others, one]) {
    declined.add(card);
    card.answer("cancelled", null);
  }
}
