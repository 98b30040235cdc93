// The card: what the agent asks, the controls to answer it, and how it ended.
//
// A card is drawn from an open request: the AG-UI interrupt of a run that paused, or the
// JSON view of GET /chats/{chat}/request. Approvals get Approve / Deny / Deny with
// feedback; any other kind gets a form drawn from its responseSchema.

import { duration, h, markdown, uid, when } from "./dom.js";
import { field, fieldOf, listField, problem } from "./form.js";

export const LABELS = {
  approved: "Approved",
  rejected: "Denied",
  rejected_with_feedback: "Denied with feedback",
  answered: "Answered",
  cancelled: "Cancelled",
  timed_out: "Timed out",
};

const ENDED = {
  expired: "This request has expired ({at}). It can no longer be answered.",
  timed_out: "This request has expired ({at}): nobody answered it in time.",
  cancelled: "This request was cancelled. It can no longer be answered.",
  dismissed: "Dismissed: nothing it asked about was done. It can no longer be answered.",
  unknown: "This request no longer exists.",
};

/**
 * The request view of a run's AG-UI interrupts (the shape GET …/request returns): the
 * first, with the others of the same pause in `alsoAsked`.
 */
export function fromInterrupts([first, ...others]) {
  const metadata = first.metadata || {};
  return {
    ...asView(first),
    state: metadata.state || "pending",
    expiresAt: metadata.expiresAt,
    secret: metadata.secret,
    alsoAsked: others.map(asView),
  };
}

function asView(interrupt) {
  return {
    interruptId: interrupt.id,
    card: interrupt.metadata?.card || { reason: interrupt.message },
    responseSchema: interrupt.responseSchema || { properties: {} },
  };
}

/** A card, or a group of cards when one pause asked several things at once. */
export function cardFor(request, callbacks) {
  return request.alsoAsked?.length ? new CardGroup(request, callbacks) : new Card(request, callbacks);
}

export class Card {
  /**
   * @param request an open request view
   * @param answer async (status, payload) => void, called when the person answers
   * @param settled called once the card can no longer be answered
   */
  constructor(request, { answer, settled, dismiss }) {
    this.request = request;
    this.answer = answer;
    this.settled = settled;
    this.dismiss = dismiss;
    this.fields = new Map();
    const titleId = uid("card-title");
    const card = request.card;
    this.el = h("section", { class: "card", tabindex: -1, "aria-labelledby": titleId });
    this.timer = h("p", { class: "expiry" });
    this.error = h("p", { class: "error", role: "alert", hidden: true });
    this.outcome = h("p", { class: "outcome", role: "status" });
    this.note = h("p", { class: "note", hidden: true });
    // Interlock's heading and the facts it checked come first; the words of whoever
    // asked follow, apart and labelled as theirs, so they cannot pass for either.
    this.el.append(
      h("h2", { id: titleId }, titleOf(card)),
      facts(card, this.editsPackages()),
      ownWords(card, this.isApproval()),
      rawCall(card),
      this.note,
      this.timer,
      this.error,
      this.outcome,
    );
    this.show(request);
  }

  /** Draw the state of `request` (a fresh view may carry a new secret or an outcome). */
  show(request) {
    this.request = request;
    this.el.dataset.state = request.state;
    if (request.state === "done") return this.finish(request, true);
    if (request.state === "expired" || request.state === "cancelled")
      return this.end(request.state);
    if (request.state === "claimed" && (request.binding || !request.secret))
      return this.continuing(request);
    if (request.state === "claimed") {
      // Interrupted before anything was done: the recorded answer runs unless changed.
      this.el.dataset.state = "pending";
      this.note.textContent = `${request.decided || "Your answer"} was interrupted before anything was done with it. It will be carried out unless you answer differently now.`;
      this.note.hidden = false;
    } else this.note.hidden = true;
    if (!this.form) this.drawForm();
    this.busy(false);
    this.tick();
    this.clock ??= setInterval(() => this.tick(), 1000);
  }

  /** Someone's answer is being carried out: say whose, and offer nothing to press. */
  continuing(request) {
    this.form?.remove();
    this.form = null;
    this.controls = null;
    this.note.hidden = true;
    const after = request.interrupted ? " after an interruption" : "";
    this.outcome.textContent =
      request.binding || request.interrupted
        ? `${request.decided || "Answered"}: continuing${after}…`
        : "Being answered in another window…";
  }

  get answerable() {
    return this.el.dataset.state === "pending";
  }

  get state() {
    return this.el.dataset.state;
  }

  /** Pending or being carried out: the chat has no room for a new message yet. */
  get open() {
    return ["pending", "claimed"].includes(this.el.dataset.state);
  }

  editsPackages() {
    return Boolean(this.request.responseSchema.properties?.packages);
  }

  /** Whether the answer grants something (Approve / Deny) rather than supplies it. */
  isApproval() {
    return Boolean(this.request.responseSchema.properties?.decision?.enum?.includes("approve"));
  }

  drawForm() {
    const schema = this.request.responseSchema;
    const approval = this.isApproval();
    this.controls = h("fieldset", { class: "plain" });
    this.form = h(
      "form",
      { class: "answer", novalidate: true, onsubmit: (e) => e.preventDefault() },
      this.controls,
    );
    if (approval) this.drawApproval(schema);
    else this.drawQuestion(schema);
    this.timer.after(this.form);
  }

  drawApproval(schema) {
    if (this.editsPackages()) {
      const packages = schema.properties.packages;
      const named = this.request.card.packages || [];
      const list = listField(
        "packages",
        packages,
        named,
        named.length ? "Packages to install" : "Packages to allow as well",
        "package name",
      );
      if (named.length) this.add(list);
      else {
        // The agent asked for none: the list stays folded away until wanted.
        const box = h("div", { class: "more-packages", hidden: true });
        const open = h(
          "button",
          {
            type: "button",
            class: "small",
            "aria-expanded": "false",
            onclick: () => {
              box.hidden = false;
              open.setAttribute("aria-expanded", "true");
              open.hidden = true;
              list.focus();
            },
          },
          "Allow packages as well…",
        );
        this.controls.append(open, box);
        this.add(list, box);
      }
    }
    if (schema.properties.urls) {
      const named = this.request.card.urls || [];
      this.add(listField("urls", schema.properties.urls, named, "URLs to download", "URL"));
    }
    if (schema.properties.edits) this.drawEdits(schema.properties.edits);
    const feedback = h(
      "fieldset",
      { class: "feedback", hidden: true },
      h("legend", {}, "Tell the agent why, and what to do instead"),
    );
    const toggle = h(
      "button",
      {
        type: "button",
        "aria-expanded": "false",
        onclick: () => this.toggleFeedback(feedback, toggle),
      },
      "Deny with feedback",
    );
    this.controls.append(
      h(
        "div",
        { class: "actions" },
        h("button", { type: "button", class: "primary", onclick: () => this.approve() }, "Approve"),
        h("button", { type: "button", onclick: () => this.submit({ decision: "reject" }) }, "Deny"),
        toggle,
        this.dismissButton(),
      ),
      feedback,
    );
    // The feedback fields this card's schema offers (a confirmation takes a reason only).
    for (const name of ["reason", "suggestion"].filter((n) => schema.properties[n])) {
      const label = name === "reason" ? "Reason" : "Suggestion for the agent";
      this.add(field(name, schema.properties[name], false, label), feedback);
    }
    feedback.append(
      h("button", { type: "button", onclick: () => this.denyWithFeedback() }, "Send denial"),
    );
  }

  /** A field per argument the tool's policy lets a person change, holding the agent's
   * value: what is changed is shown side by side with it before the approval is sent. */
  drawEdits(schema) {
    const editable = this.request.card.editable || {};
    const box = h(
      "fieldset",
      { class: "edits" },
      h("legend", {}, "Change before approving (optional)"),
    );
    for (const [name, property] of Object.entries(schema.properties || {})) {
      const label = name.replaceAll("_", " ");
      this.add(field(`edit-${name}`, property, true, label, editable[name]?.value), box);
    }
    this.controls.append(box);
  }

  drawQuestion(schema) {
    const required = new Set(schema.required || []);
    if (!schema.properties) {
      // Any JSON value (an interrupt that declared no schema): answered as text.
      this.freeText = true;
      this.add(field("answer", { type: "string", maxLength: 4000 }, true, "Your answer"));
    }
    for (const [name, property] of Object.entries(schema.properties || {})) {
      const label =
        property.title || (name === "answer" ? "Your answer" : name.replaceAll("_", " "));
      this.add(field(name, property, required.has(name), label));
    }
    // A question's default is chosen already: one click sends it.
    const preset = this.request.card.default;
    if (preset !== undefined && preset !== null) this.fields.get("answer")?.set?.(preset);
    this.controls.append(
      h(
        "div",
        { class: "actions" },
        h(
          "button",
          { type: "button", class: "primary", onclick: () => this.sendForm() },
          "Send answer",
        ),
        this.dismissButton(),
      ),
    );
  }

  /** Set the request aside without answering it: it is cancelled, and nothing it asked
   * about is done (the agent's run ends there). Offered where the page can cancel. */
  dismissButton() {
    // An MCP server's question has its own Decline, which the server hears: one way out.
    if (!this.dismiss || this.request.card.source === "mcp") return "";
    return h(
      "button",
      { type: "button", class: "dismiss", onclick: () => this.dismiss(this) },
      "Dismiss",
    );
  }

  add(control, parent = this.controls) {
    this.fields.set(control.name, control);
    parent.append(control.el);
  }

  toggleFeedback(feedback, toggle) {
    feedback.hidden = !feedback.hidden;
    toggle.setAttribute("aria-expanded", String(!feedback.hidden));
    if (!feedback.hidden) this.fields.get("reason").focus();
  }

  approve() {
    const payload = { decision: "approve" };
    if (this.editsPackages()) payload.packages = this.fields.get("packages").read();
    if (this.fields.has("urls")) payload.urls = this.fields.get("urls").read();
    const edits = this.edits();
    if (edits === null) return; // an edit breaks its schema: said next to the field
    if (Object.keys(edits).length) payload.edits = edits;
    const changes = this.changes(payload);
    if (!changes.length) return this.submit(payload);
    this.review(changes, payload);
  }

  /** The arguments changed from the agent's values, or null when one breaks its rules. */
  edits() {
    const schema = this.request.responseSchema.properties.edits?.properties || {};
    const editable = this.request.card.editable || {};
    const edits = {};
    let first = null;
    this.clearErrors();
    for (const [name, property] of Object.entries(schema)) {
      const control = this.fields.get(`edit-${name}`);
      const value = control.read();
      const found = problem(property, value, true);
      if (found) {
        control.showError(found);
        first ??= control;
      } else if (JSON.stringify(value) !== JSON.stringify(editable[name]?.value)) {
        edits[name] = value;
      }
    }
    if (first) {
      first.focus();
      return null;
    }
    return edits;
  }

  /** What this approval changes from the agent's call, as [what, was, becomes] rows. */
  changes(payload) {
    const card = this.request.card;
    const rows = Object.entries(payload.edits || {}).map(([name, value]) => [
      name.replaceAll("_", " "),
      shown(card.editable?.[name]?.value),
      shown(value),
    ]);
    // A changed URL list changes which sites are approved: it is reviewed too. (The
    // package list is edited in place, each entry shown as it is added or removed.)
    if (payload.urls && shown(payload.urls) !== shown(card.urls || []))
      rows.push(["URLs", shown(card.urls || []), shown(payload.urls)]);
    return rows;
  }

  /** Show the changes beside the agent's values; the approval goes only once confirmed. */
  review(changes, payload) {
    const actions = this.controls.querySelector(".actions");
    const titleId = uid("review");
    const close = () => {
      panel.remove();
      actions.hidden = false;
    };
    const back = () => {
      close();
      actions.querySelector("button").focus();
    };
    const confirm = h(
      "button",
      { type: "button", class: "primary", onclick: () => (close(), this.submit(payload)) },
      "Approve with these changes",
    );
    const panel = h(
      "div",
      { class: "review", role: "group", "aria-labelledby": titleId },
      h("p", { id: titleId, class: "review-title" }, "You are approving with these changes:"),
      h(
        "ul",
        { class: "diff" },
        changes.map(([what, was, becomes]) =>
          h(
            "li",
            {},
            h("span", { class: "what" }, `${what}: `),
            h("del", {}, was || "(none)"),
            " → ",
            h("ins", {}, becomes || "(none)"),
          ),
        ),
      ),
      h(
        "div",
        { class: "actions" },
        confirm,
        h("button", { type: "button", onclick: back }, "Back"),
      ),
    );
    actions.hidden = true;
    actions.after(panel);
    confirm.focus();
  }

  denyWithFeedback() {
    const payload = { decision: "reject" };
    for (const name of ["reason", "suggestion"].filter((n) => this.fields.has(n))) {
      const value = this.fields.get(name).read();
      if (value !== undefined) payload[name] = value;
    }
    if (!payload.reason && !payload.suggestion) {
      return this.fail("reason", "Say why, or suggest what the agent should do instead.");
    }
    this.submit(payload);
  }

  sendForm() {
    if (this.freeText) {
      const text = this.fields.get("answer").read();
      if (text === undefined) return this.fail("answer", "Write an answer.");
      return this.answer("resolved", text);
    }
    const payload = {};
    for (const [name, control] of this.fields) {
      const value = control.read();
      if (value !== undefined) payload[name] = value;
    }
    this.submit(payload);
  }

  /** Check the answer as the server will, then hand it over. */
  submit(payload) {
    const schema = this.request.responseSchema;
    const required = new Set(schema.required || []);
    this.clearErrors();
    // Every problem at once, next to its field; the first one gets the focus.
    let first = null;
    for (const [name, control] of this.fields) {
      const property = schema.properties[name];
      if (!property) continue; // an argument's edit: checked by `edits()`
      const noun = { packages: "package name", urls: "URL" }[name] || "value";
      const found = problem(property, payload[name], required.has(name), noun);
      if (found) {
        control.showError(found);
        first ??= control;
      }
    }
    if (first) return first.focus();
    this.answer("resolved", payload);
  }

  fail(name, message) {
    const control = this.fields.get(name);
    control.showError(message);
    control.focus();
  }

  clearErrors() {
    for (const control of this.fields.values()) control.showError(null);
    this.error.hidden = true;
  }

  /** The server refused the answer (422): say so next to the field it names. */
  refused(message) {
    this.busy(false);
    const name = fieldOf(message);
    for (const key of [name, `edit-${name}`])
      if (this.fields.has(key)) return this.fail(key, `Not accepted: ${message}`);
    this.error.textContent = `Not accepted: ${message}`;
    this.error.hidden = false;
  }

  busy(on) {
    if (this.controls) this.controls.disabled = on;
    if (on) this.error.hidden = true; // an earlier failure is old news once sent again
    if (on && this.answerable) this.outcome.textContent = "Sending your answer…";
    else if (!on) this.outcome.textContent = "";
  }

  /** A newer read handed out `secret`: answer with it (older ones are refused). */
  renew(secret) {
    this.request = { ...this.request, secret };
  }

  /** The server took the answer and the agent goes on: say so while it runs. */
  taken() {
    if (this.el.dataset.state === "pending") this.outcome.textContent = "Answer taken: the agent continues…";
  }

  /** What this card's answer sends: one resume entry. */
  answers(status, payload) {
    this.sent = payload;
    return [{ interruptId: this.request.interruptId, status, payload }];
  }

  /**
   * The request is answered: by this window now, or earlier (`replayed`). The time is the
   * server's record of the answer (`decidedAt`, what the history shows), never this
   * browser's clock: without one the outcome names no time.
   */
  finish({ decision, answeredAt, decidedAt }, replayed = false) {
    // Nobody answered a request that timed out or was cancelled: say that, not "answered".
    if (decision === "timed_out" || decision === "cancelled") return this.end(decision);
    if (decision === "defaulted") return this.defaulted();
    const label = LABELS[decision] || "Answered";
    const at = decidedAt || answeredAt;
    const stamp = at ? ` at ${when(at)}` : "";
    this.stop("done");
    const said = replayed ? "" : describeAnswer(this.sent, fieldLabels(this.request));
    // The answer as plain text: what a person typed is shown as typed, never as markup.
    if (replayed) this.outcome.textContent = `Already answered${stamp}: ${label}`;
    else this.outcome.textContent = `${label}${stamp}.${said ? ` Your answer: ${said}` : ""}`;
  }

  /** Nobody answered in time and the timeout policy gave the card's default instead. */
  defaulted() {
    this.stop("done");
    const value = describeAnswer({ answer: this.request.card.default ?? [] });
    this.outcome.textContent = value
      ? `Nobody answered in time: the default applies (${value}).`
      : "Nobody answered in time: the default applies.";
  }

  /** Another window's answer stands and this one was refused: say which stands. */
  overruled(message) {
    if (this.state === "done") this.outcome.textContent = `Not taken: ${message}.`;
  }

  /** The answer never reached the server: say so right under the buttons pressed, in
   * view, so the person sees it where they act (the page's status line may be off-screen). */
  unreachable(message) {
    this.busy(false);
    this.alarm(message);
  }

  alarm(message) {
    this.error.textContent = message;
    this.error.hidden = false;
    this.error.scrollIntoView({ block: "nearest" });
  }

  /** The request can no longer be answered: expired, cancelled, timed out or gone. */
  end(reason) {
    this.stop(reason);
    // Given up (its retries ran out): the view says so, never the answer it did not carry out.
    const givenUp = reason === "expired" && this.request.decision === "given_up";
    this.outcome.textContent = givenUp
      ? `${this.request.decided}.`
      : ENDED[reason].replace("{at}", `at ${when(this.request.expiresAt)}`);
  }

  stop(state) {
    clearInterval(this.clock);
    this.clock = null;
    const was = this.el.dataset.state;
    this.el.dataset.state = state;
    this.form?.remove();
    this.timer.remove();
    this.error.hidden = true;
    this.note.hidden = true;
    if (this.el.contains(document.activeElement) || document.activeElement === document.body)
      this.el.focus();
    if (was !== state) this.settled();
  }

  tick() {
    const left = Date.parse(this.request.expiresAt) - Date.now();
    if (left <= 0) return this.end("expired");
    this.timer.replaceChildren(
      "Expires in ",
      h("time", { datetime: this.request.expiresAt }, duration(left)),
    );
  }
}

/**
 * Several cards of one pause (parallel tool calls that each need a person). Each is
 * answered on its own; once every one has an answer they go in one resume, as AG-UI
 * asks. It behaves like a Card towards the page.
 */
export class CardGroup {
  constructor(request, { answer, settled }) {
    this.request = request;
    this.chosen = new Map();
    this.given = new Map();
    this.el = h("section", { class: "card-group", tabindex: -1 });
    this.note = h("p", { class: "group-note", role: "status" });
    this.cards = parts(request).map(
      (part) =>
        new Card(part, {
          answer: (status, payload) => this.choose(part.interruptId, status, payload, answer),
          // However the cards end (answered here or elsewhere, expired, swept), the
          // group's own note and buttons go with the last one.
          settled: (...args) => {
            if (this.cards && !this.open) this.tidy();
            settled(...args);
          },
        }),
    );
    // Each card's heading says which of the group it is: cards asking the same thing
    // (two refunds) stay told apart, by eye and by a screen reader's list of regions.
    this.cards.forEach((card, i) =>
      card.el.querySelector("h2").append(` (${i + 1} of ${this.cards.length})`),
    );
    // Approvals all: one press records the same answer on every card still open.
    const approvals = this.cards.every((card) =>
      card.request.responseSchema?.properties?.decision?.enum?.includes("approve"),
    );
    const press = (label, decision) =>
      h("button", { type: "button", onclick: () => this.all({ decision }, answer) }, label);
    this.actions = approvals
      ? h("div", { class: "group-actions" }, press("Approve all", "approve"), press("Deny all", "reject"))
      : null;
    this.el.append(this.note, ...[this.actions].filter(Boolean), ...this.cards.map((c) => c.el));
    this.remind();
    if (!this.open) this.tidy();
  }

  /** The same answer for every card not answered yet: each records its own. */
  all(payload, answer) {
    for (const card of this.cards) {
      const id = card.request.interruptId;
      if (!this.chosen.has(id)) this.choose(id, "resolved", payload, answer);
    }
  }

  choose(interruptId, status, payload, answer) {
    this.chosen.set(interruptId, { interruptId, status, payload });
    const card = this.cards.find((c) => c.request.interruptId === interruptId);
    this.pressed = card; // the card whose press sends them all: told there if it fails
    card.sent = payload;
    card.busy(true);
    card.outcome.textContent = "Noted; it is sent with the other answers.";
    this.remind();
    if (this.chosen.size === this.cards.length) answer(status, payload);
  }

  remind() {
    const left = this.cards.length - this.chosen.size;
    this.note.textContent = left
      ? `The agent asks ${this.cards.length} things at once; ${left} still to answer. ` +
        "All answers are sent together."
      : "Sending all answers…";
  }

  answers() {
    // Kept apart from `chosen` (cleared when sending ends) to label each card after.
    this.given = new Map(this.chosen);
    return this.cards.map((card) => this.chosen.get(card.request.interruptId));
  }

  get answerable() {
    return this.cards.some((card) => card.answerable);
  }

  get open() {
    return this.cards.some((card) => card.open);
  }

  get state() {
    return this.cards[0].state;
  }

  show(view) {
    this.request = view;
    parts(view).forEach((part, i) => this.cards[i].show(part));
  }

  busy(on) {
    if (!on) this.chosen.clear();
    for (const card of this.cards) card.busy(on);
    this.actions?.querySelectorAll("button").forEach((button) => (button.disabled = on));
    this.remind();
  }

  taken() {
    for (const card of this.cards) card.taken();
  }

  renew(secret) {
    this.request = { ...this.request, secret };
    for (const card of this.cards) card.renew(secret);
  }

  overruled(message) {
    for (const card of this.cards) card.overruled(message);
  }

  unreachable(message) {
    this.busy(false);
    (this.pressed || this.cards.at(-1)).alarm(message);
  }

  refused(message) {
    this.chosen.clear();
    for (const card of this.cards) card.refused(message);
    this.remind();
  }

  /** The group's note and buttons go: nothing is left to answer. */
  tidy() {
    this.note.textContent = "";
    this.actions?.remove();
  }

  /** Each card says its own outcome: the answer given to it here, else the request's. */
  finish(result, replayed = false) {
    this.tidy();
    for (const card of this.cards) {
      const mine = replayed ? undefined : this.given.get(card.request.interruptId);
      const decision = mine ? decisionOf(mine.payload, mine.status) : result.decision;
      card.finish({ ...result, decision }, replayed);
    }
  }

  end(reason) {
    this.tidy();
    for (const card of this.cards) card.end(reason);
  }
}

/** Each interrupt of a request view, as a view of its own sharing its state and secret. */
function parts(request) {
  const shared = { state: request.state, expiresAt: request.expiresAt, secret: request.secret };
  const own = (one) => request.decisions?.[one.interruptId] ?? request.decision;
  const first = { ...request, alsoAsked: undefined, decision: own(request) };
  const others = (request.alsoAsked || []).map((one) => ({
    ...shared,
    answeredAt: request.answeredAt,
    decidedAt: request.decidedAt,
    ...one,
    decision: own(one),
  }));
  return [first, ...others];
}

function titleOf(card) {
  if (card.type === "download") return "Approve downloads?";
  if (card.type === "action" || card.type === "confirm") return `Allow “${toolLabel(card.tool)}”?`;
  if (card.type === "interrupt") return card.tool ? `${toolLabel(card.tool)} asks` : "The agent asks";
  if (card.type === "question") return "The agent asks";
  if (card.type === "info") return "The agent needs some details";
  return "The agent needs your decision";
}

/** The decision one answer records, as the server labels it. */
export function decisionOf(payload, status = "resolved") {
  if (status === "cancelled") return "cancelled";
  if (payload?.decision === "approve") return "approved";
  if (payload?.decision === "reject")
    return payload.suggestion ? "rejected_with_feedback" : "rejected";
  return "answered";
}

/** An answer in words: the choice, the fields, or the reason given. */
export function describeAnswer(payload, labels = {}) {
  if (isObject(payload) && "decision" in payload) return payload.reason ? `“${payload.reason}”` : "";
  return answerText(payload, labels);
}

/**
 * The label a person saw for each field of one card: an information request's field
 * labels, else its schema's titles. An answer is told in these words, not its keys.
 */
export function fieldLabels({ card, responseSchema }) {
  const labels = {};
  for (const [name, property] of Object.entries(responseSchema?.properties || {}))
    if (property?.title) labels[name] = property.title;
  for (const one of card?.fields || []) if (one.label) labels[one.name] = one.label;
  return labels;
}

/** A recorded answer in words: "field: value" pairs, yes/no for booleans, never a raw
 * object. Plain text: keys and values keep their underscores and asterisks as typed. */
export function answerText(answer, labels = {}) {
  if (answer === undefined || answer === null) return "";
  if (!isObject(answer)) return words(answer);
  if ("answer" in answer) return words(answer.answer);
  // Declined, cancelled or timed out: the row's label says it, and no field was given.
  const keys = Object.keys(answer);
  if (keys.length === 1 && keys[0] === "status") return "";
  // An MCP server's answer is recorded inside `content` (interlock.elicitation): the
  // person gave the fields, so the fields are what is shown.
  const fields = keys.length === 1 && isObject(answer.content) ? answer.content : answer;
  return Object.entries(fields)
    .filter(([key]) => key !== "decision" && key !== "fingerprint")
    .map(([key, value]) => `${labels[key] || key.replaceAll("_", " ")}: ${words(value)}`)
    .join("; ");
}

/** One answered value as a person reads it: lists joined, nested fields spelled out. */
function words(value) {
  if (value === true) return "yes";
  if (value === false) return "no";
  if (value === undefined || value === null) return "";
  if (Array.isArray(value)) return value.map(words).join(", ");
  if (isObject(value)) {
    const parts = Object.entries(value).map(
      ([key, inner]) => `${key.replaceAll("_", " ")}: ${words(inner)}`,
    );
    return `(${parts.join("; ")})`;
  }
  return String(value);
}

function isObject(value) {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** A value as the review of changes shows it: text as it is, lists joined. */
function shown(value) {
  if (value === undefined || value === null) return "";
  if (Array.isArray(value)) return value.join(", ");
  return typeof value === "string" ? value : JSON.stringify(value);
}

/** A tool's name as a person reads it: `send_report` is "Send report". */
export function toolLabel(name) {
  const words = String(name || "tool").replace(/[_-]+/g, " ").trim();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

/**
 * The words of whoever asked (the agent's reason or question; an MCP server's request), in
 * a block of their own labelled as theirs. On an approval they are plain text: no link,
 * no bold, markdown shown as typed, so nothing in them can pose as a fact Interlock
 * checked or as a warning. A question keeps safe markdown, whose links show the host
 * they really go to (`dom.js`). An action's reason is Interlock's own sentence, which the
 * heading already says: it has no block.
 */
function ownWords(card, approval) {
  if (card.type === "action" || !card.reason) return "";
  const who = card.source === "mcp" ? "The tool server says:" : "The agent says:";
  const words = approval ? h("p", { class: "typed" }, card.reason) : markdown(card.reason);
  return h(
    "figure",
    { class: "said" },
    h("figcaption", {}, who),
    h("blockquote", { class: "reason" }, words),
  );
}

/** The call as the agent made it (its arguments as stored: secrets already redacted),
 * folded away: for whoever wants to check the exact values before deciding. */
function rawCall(card) {
  if (!card.tool || !card.summary) return "";
  const call = JSON.stringify({ tool: card.tool, arguments: card.summary }, null, 2);
  return h(
    "details",
    { class: "raw-call" },
    h("summary", {}, "The call as the agent made it"),
    h("pre", {}, h("code", {}, call)),
  );
}

/** What the card is about, as a definition list (packages live in the form when editable). */
function facts(card, packagesInForm) {
  const rows = [];
  const list = (items, wrap = (x) => x) =>
    h(
      "ul",
      {},
      items.map((x) => h("li", {}, wrap(x))),
    );
  if (card.sites?.length) rows.push(["Sites", list(card.sites)]);
  if (card.urls?.length) rows.push(["URLs", list(card.urls, (u) => h("code", {}, u))]);
  if (card.packages?.length && !packagesInForm) rows.push(["Packages", list(card.packages)]);
  if (["action", "confirm"].includes(card.type) || (card.type === "interrupt" && card.tool)) {
    rows.push(["Tool", h("code", {}, card.tool)]);
    // The risk has its own row: an argument that names it too would say it twice.
    const params = Object.entries(card.summary || {})
      .filter(([k]) => !(k === "risk" && card.risk))
      .map(
      ([k, v]) => `${k}: ${typeof v === "string" ? v : JSON.stringify(v)}`,
    );
    if (params.length) rows.push(["Details", list(params)]);
  }
  if (card.risk) rows.push(["Risk", h("span", { class: `risk risk-${card.risk}` }, card.risk)]);
  if (card.impact) rows.push(["Expected impact", card.impact]);
  if (!rows.length) return ""; // questions and information requests: the form says it all
  return h(
    "dl",
    { class: "facts" },
    rows.map(([term, value]) => [h("dt", {}, term), h("dd", {}, value)]),
  );
}
