// The card page: one chat's thread, its open request as a card, and its approvals.
//
// Everything shown comes from the API: a reload reads the thread (GET turns), the open
// request (GET request, which also issues a fresh secret) and the approvals again.

import { ApiError, forgetToken, newId, openSession, rememberToken } from "./api.js";
import {
  answerText,
  cardFor,
  decisionOf,
  fieldLabels,
  fromInterrupts,
  toolLabel,
} from "./card.js";
import { h, when } from "./dom.js";
import { offerDecline } from "./form.js";

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const chat = params.get("chat") || newId("chat");
const POLL_MS = 1000;
const POLL_TRIES = 60;
// How often the inbox is read: a card answered in another tab, on a phone or in team
// chat leaves it within a few seconds.
const INBOX_MS = 3000;
const UNREACHABLE =
  "Interlock could not be reached, so your answer may not have arrived. " +
  "Press it again to retry: an answer is only ever carried out once.";
const TITLE = document.title;

let api = null;
let card = null;
let sending = null; // the card whose answer this window is sending, if any
let working = false;
// The field labels of every card this page showed, by interrupt id: the history tells
// an answer in the words its card used.
const labelsOf = new Map();
// Each tool call's line, by call id: drawn once, when the model makes the call, and told
// how the call went as that becomes known, across the run that paused on a card and the
// run that resumed it.
const toolLines = new Map();
// The calls an open card stands for, by id: their lines wait on it until it settles.
const waiting = new Set();
// The calls this page's cards stand for, by id: a reloaded page that never saw one made
// still names it when the resumed run tells its result.
const askedCalls = new Map();

async function start() {
  if (params.get("chat") !== chat) {
    params.set("chat", chat); // so that a reload comes back to this chat
    history.replaceState(null, "", `?${params}`);
  }
  $("chat-id").textContent = chat;
  const fresh = new URLSearchParams(params);
  fresh.delete("chat");
  $("new-chat").href = `?${fresh}`; // a new chat, as the same (local) user
  const session = await openSession(params);
  if (session.leaving) return; // on the way to the hosted sign-in, or back from it
  if (session.signIn) return signIn();
  api = session.api;
  $("user").textContent = `Signed in as ${api.who}`;
  if (session.signOut) {
    $("sign-out").href = session.signOut;
    $("sign-out").hidden = false;
    $("sign-out").addEventListener("click", forgetToken);
  }
  $("composer").addEventListener("submit", send);
  $("inbox-filter").addEventListener("change", () => watchInbox().catch(report));
  await Promise.all([loadThread(), loadApprovals()]);
  await loadRequest();
  // After the card: the history tells its answers in the card's words.
  await loadHistory();
  await watchInbox();
  // Writing opens once the thread and any open card are drawn: a message typed into a
  // page still loading would otherwise be lost under them.
  setWorking(working);
  document.body.dataset.ready = "true";
}

function signIn() {
  const form = $("sign-in").content.firstElementChild.cloneNode(true);
  $("composer").replaceWith(form);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    rememberToken(form.querySelector("input").value);
    location.reload();
  });
}

// The thread ------------------------------------------------------------------

async function loadThread() {
  const { turns } = await api.turns(chat);
  $("thread").replaceChildren();
  toolLines.clear();
  waiting.clear();
  if (!turns.length) $("thread").append(intro());
  for (const turn of turns) {
    // A saved answer keeps a summary of its tool activity: show it before the answer.
    (turn.tools || []).forEach((tool, i) => drawSaved(`saved:${turn.seq}:${i}`, tool));
    say(turn.role === "user" ? "user" : "agent", turn.text);
  }
}

/** What a new chat says before anything was asked. */
function intro() {
  return h(
    "li",
    { class: "msg intro" },
    h(
      "p",
      {},
      "Ask the agent for something. When it needs your decision, a card appears here, " +
        "and in your team chat if your account is linked. Try “Please download the " +
        "reference table”, “send the report” or “Please write a summary”.",
    ),
  );
}

function say(role, text) {
  document.querySelector("#thread .intro")?.remove();
  const who = { user: "You", agent: "Agent", tool: "Tool" }[role];
  const item = h(
    "li",
    { class: `msg ${role}` },
    h("span", { class: "who" }, who),
    h("p", {}, text),
  );
  $("thread").append(item);
  return item;
}

/**
 * A tool call's line follows the stream: drawn as the model makes the call (once, however
 * often a stream names it), told its result when there is one; when the run pauses, the
 * calls its card stands for wait on it, and a call with neither result nor card was not
 * run. `run` holds what this stream drew, in order, and the calls it made.
 */
function followTool(event, run) {
  const id = event.toolCallId;
  if (event.type === "TOOL_CALL_START" && !toolLines.has(id)) {
    run.made.add(id);
    run.items.push(drawnCall(id, { name: event.toolCallName, args: "" }).line);
  } else if (event.type === "TOOL_CALL_ARGS" && run.made.has(id)) {
    toolLines.get(id).args += event.delta;
    drawCall(toolLines.get(id));
  } else if (event.type === "TOOL_CALL_RESULT") {
    // A call made in a stream this page never saw (it was reloaded since): drawn now.
    if (!toolLines.has(id)) run.items.push(drawnCall(id, askedCalls.get(id)).line);
    const call = toolLines.get(id);
    call.result = event.content;
    call.asked ||= askedCalls.has(id);
    call.joined = call.result.startsWith(MERGED) ? joinedBy(call) : null;
    waiting.delete(id);
    drawCall(call);
  } else if (event.type === "RUN_FINISHED") {
    for (const { toolCallId } of event.outcome?.interrupts || []) {
      const call = toolLines.get(toolCallId);
      if (!call || call.result !== null) continue;
      call.state = "waiting";
      call.asked = true;
      waiting.add(toolCallId);
    }
    for (const made of run.made) {
      const call = toolLines.get(made);
      if (call.result === null && call.state === "running") call.state = "not run";
    }
    for (const id of new Set([...run.made, ...waiting])) drawCall(toolLines.get(id));
  }
}

/** A saved turn's call, told as its line read when the run ended (a turn saved before
 * calls kept their results tells only its status). */
function drawSaved(id, tool) {
  const call = drawnCall(id, { name: tool.name, args: JSON.stringify(tool.input || {}) });
  call.state = tool.status;
  if (typeof tool.result === "string") {
    call.result = tool.result;
    call.joined = call.result.startsWith(MERGED) ? joinedBy(call) : null;
  }
  drawCall(call);
}

// How Interlock tells the model a call was merged into another of its step's calls.
const MERGED = "Merged into";

/** Draw a new line for call `id` (a name and its arguments as JSON text). */
function drawnCall(id, { name = "tool", args = "" } = {}) {
  const call = { id, name, args, result: null, state: "running", asked: false, joined: null };
  call.line = say("tool", "");
  toolLines.set(id, call);
  drawCall(call);
  return call;
}

/** The call a merged call joined: the nearest call of the same tool before it that was
 * not itself merged (a step's first such call, which asks for them all). */
function joinedBy(merged) {
  const before = [...toolLines.values()];
  before.splice(before.indexOf(merged));
  return before.reverse().find((c) => c.name === merged.name && !c.result?.startsWith(MERGED)) || null;
}

function drawCall(call) {
  call.line.querySelector("p").textContent = `${callLabel(call)}: ${shorten(callStatus(call), 140)}`;
}

/** What was called, and on what. */
function callLabel(call) {
  let args = {};
  try {
    args = JSON.parse(call.args || "{}");
  } catch {
    /* shown without arguments */
  }
  const subject = args.url || args.recipient || args.prompt || args.reason || "";
  return `${toolLabel(call.name)}${subject ? ` (${shorten(subject, 60)})` : ""}`;
}

/** How the call went, as far as the page knows. */
function callStatus(call) {
  if (call.result === null) {
    return { running: "running…", waiting: "waiting for your answer" }[call.state] || call.state;
  }
  if (call.joined) return `merged into ${callLabel(call.joined)}`;
  // An answer to a card is shown on the card; its JSON here is for the model.
  const said = call.result.startsWith("The user answered") ? "" : firstSentence(call.result);
  if (!call.asked) return said;
  return said ? `answered — ${said}` : "answered";
}

/** The tool lines that waited on a card say how it ended, once it did (unless the run it
 * resumed already told their results). */
function stopWaiting(state) {
  const word = { done: "answered", expired: "expired", cancelled: "cancelled" }[state] || state;
  for (const call of [...waiting].map((id) => toolLines.get(id)).filter(Boolean)) {
    call.state = word;
    drawCall(call);
  }
  waiting.clear();
}

/** What a person needs of a tool's result: its first sentence (the rest guides the model). */
function firstSentence(text) {
  const line = text.split("\n")[0];
  const end = line.search(/[.!?](\s|$)/);
  return end < 0 ? line : line.slice(0, end + 1);
}

function shorten(text, max) {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/**
 * What the page shows while a run streams, as it happens: the agent's text as the model
 * writes it, and a line per tool call. Returns the event handler, the ids of the messages
 * it drew, and everything it drew, in order (`items`).
 */
function live() {
  const drawn = new Map();
  const run = { items: [], made: new Set() };
  const onEvent = (event) => {
    if (event.type === "TEXT_MESSAGE_START") {
      drawn.set(event.messageId, say("agent", ""));
      run.items.push(drawn.get(event.messageId));
    }
    if (event.type === "TEXT_MESSAGE_CONTENT" && drawn.has(event.messageId)) {
      drawn.get(event.messageId).querySelector("p").textContent += event.delta;
    }
    followTool(event, run);
  };
  /** Take back what a run that failed drew: it did not happen as drawn. */
  const undo = () => {
    for (const item of run.items) item.remove();
    for (const id of run.made) toolLines.delete(id);
  };
  return { onEvent, drawn, items: run.items, undo };
}

/** What a run's summary adds to what streamed: messages it did not stream, and its card. */
function showRun(run, drawn = new Map()) {
  for (const { id, text } of run.texts) if (!drawn.has(id)) say("agent", text);
  if (run.interrupts.length) showCard(fromInterrupts(run.interrupts));
  loadApprovals().catch(report);
}

async function send(event) {
  event.preventDefault();
  const text = $("prompt").value.trim();
  if (!text || working) return;
  retireCard();
  const mine = say("user", text);
  $("prompt").value = "";
  setWorking(true, "The agent is working…");
  const streaming = live();
  try {
    showRun(await api.run(chat, text, streaming.onEvent), streaming.drawn);
    report("");
  } catch (error) {
    streaming.undo();
    mine.remove();
    $("prompt").value = text;
    if (error.code === "pending_interrupt") await loadRequest();
    report(error);
  } finally {
    setWorking(false);
  }
}

// The card --------------------------------------------------------------------

async function loadRequest() {
  try {
    showCard(await api.request(chat));
  } catch (error) {
    if (error.code !== "unknown") report(error); // unknown: the chat never paused
  }
}

function showCard(request) {
  retireCard();
  for (const part of [request, ...(request.alsoAsked || [])]) {
    labelsOf.set(part.interruptId, fieldLabels(part));
    const id = part.toolCallId || part.card?.tool_use_id;
    const args = JSON.stringify(part.card?.summary || {});
    if (id) askedCalls.set(id, { name: part.card?.tool, args });
  }
  card = cardFor(request, { answer, dismiss, settled: () => setWorking(working) });
  offerDecline(card); // an MCP server's question can be declined with one press
  $("card-slot").append(card.el);
  setWorking(working);
  card.el.focus({ preventScroll: true });
  // In view as it appears, buttons included (at 360 px too): its end when it fits the
  // window, else its start, with the heading first.
  const fits = card.el.getBoundingClientRect().height <= window.innerHeight;
  card.el.scrollIntoView({ block: fits ? "end" : "start" });
  if (request.state === "claimed") waitForAnswer().catch(report);
}

/**
 * An earlier, settled card moves into the thread as a record of what was decided
 * (before `next`, the first message of the run that answered it, when that streamed).
 */
function retireCard(next = null) {
  if (card && !card.open) stopWaiting(card.state);
  if (card && !card.answerable) {
    $("thread").insertBefore(h("li", { class: "msg record" }, card.el), next);
  } else card?.el.remove();
  card = null;
}

/** Send the person's answer; whatever the server says, show one stored outcome. */
async function answer(status, payload, retried = false) {
  const shown = card;
  shown.busy(true); // the card says "Sending your answer…"
  // Until the server answers, this window's own answer is what is in flight: the polls
  // that watch for answers given elsewhere must not redraw the card or the thread.
  sending = shown;
  setWorking(true, "");
  const streaming = live();
  const onEvent = (event) => {
    // The run began: the answer was taken, and what follows is the agent going on.
    if (event.type === "RUN_STARTED") shown.taken();
    streaming.onEvent(event);
  };
  try {
    const run = await api.resume(chat, shown.request, shown.answers(status, payload), onEvent);
    // The card tells the time the server recorded the answer, as the history does.
    const events = await loadHistory().catch((failure) => (report(failure), []));
    const decidedAt = decidedAtOf(shown, events);
    if (run.result?.outcome === "replayed") {
      streaming.undo();
      shown.finish({ ...run.result, decidedAt }, true);
      await loadThread(); // the answer was given elsewhere: show the stored thread
    } else {
      shown.finish({ decision: decisionOf(payload), ...run.result, decidedAt });
      retireCard(streaming.items[0] ?? null);
      showRun(run, streaming.drawn);
    }
  } catch (error) {
    await answerFailed(shown, error, status, payload, retried).catch((failure) => {
      shown.busy(false);
      report(failure);
    });
  } finally {
    if (sending === shown) sending = null;
    setWorking(false);
    // The answer is in: the focus goes back to writing, unless a new card took it.
    if (!card?.answerable) $("prompt").focus();
  }
}

/** Set the open card aside: the request is cancelled and nothing it asked about runs. */
async function dismiss(shown) {
  shown.busy(true);
  try {
    await api.cancel(chat);
    shown.end("dismissed");
    await loadHistory().catch(report);
  } catch (error) {
    if (error instanceof ApiError && ["expired", "cancelled", "unknown"].includes(error.code))
      return shown.end(error.code);
    // Answered meanwhile, or the server unreachable: show what is true now.
    shown.busy(false);
    if (error instanceof ApiError) return loadRequest();
    shown.unreachable(UNREACHABLE);
  }
}

async function answerFailed(shown, error, status, payload, retried) {
  if (!(error instanceof ApiError)) {
    // No answer from the server at all (it is down, or the network is): say what that
    // means for the answer on the card itself, and leave it answerable to press again.
    return shown.unreachable(UNREACHABLE);
  }
  if (error.code === "invalid_payload") return shown.refused(error.message);
  if (["expired", "cancelled", "timed_out", "unknown"].includes(error.code))
    return shown.end(error.code);
  if (error.code === "refused" || error.code === "in_progress") {
    // Another tab or a reload read the request since this card was drawn (its secret
    // rotated), or is answering it right now: read it again and show what is true.
    const view = await api.request(chat);
    const answerable = view.state === "pending" || (view.interrupted && !view.binding);
    if (answerable && !retried) {
      shown.show(view);
      return answer(status, payload, true);
    }
    return settle(shown, view);
  }
  if (error.code === "decision_binding") {
    // Another window's answer was acted on and stands: the card shows it at once, with
    // nothing left to press, rather than live buttons under an error.
    await Promise.all([settle(shown, await api.request(chat)), loadHistory()]);
    return shown.overruled(error.message);
  }
  shown.busy(false);
  report(error);
}

async function settle(shown, view) {
  shown.show(view);
  if (view.state === "claimed") return waitForAnswer();
  if (view.state === "done") await loadThread();
}

async function waitForAnswer() {
  const shown = card;
  for (let i = 0; i < POLL_TRIES && shown === card; i += 1) {
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    const view = await api.request(chat);
    if (shown !== card || sending === shown) return; // answered here meanwhile
    if (view.state !== "claimed") return settle(shown, view);
    // Each read hands out a fresh secret: the card answers with the newest, or a person
    // answering an interrupted card would be refused by this very poll.
    shown.renew(view.secret);
  }
}

// Inbox and history -----------------------------------------------------------

let inboxTimer = null;
// How many pages of the inbox the person has opened ("Show more"): each read reads them all.
let inboxPages = 1;

/** Read the inbox now and every few seconds; the tab's title counts what waits. */
async function watchInbox() {
  clearTimeout(inboxTimer);
  try {
    const { requests, more } = await readInbox();
    showInbox(requests, more);
    // This chat's card was answered elsewhere (another tab, a phone, team chat): show it.
    // With pages left unread, a card not listed may be on one of them: nothing is known.
    const gone = !more && !requests.some((r) => r.chatId === chat);
    if (card?.answerable && gone && !typingIn(card) && sending !== card) {
      await Promise.all([loadThread(), loadRequest(), loadHistory()]);
    } else if (card?.state === "expired") {
      // An expired card waits for the sweeper, which times the request out and lets the
      // agent go on without it: once it has, the card says so and the thread shows what
      // the agent did.
      const shown = card;
      const view = await api.request(chat);
      if (view.state === "done" && shown === card)
        await Promise.all([settle(shown, view), loadHistory()]);
    }
  } catch (error) {
    if (!(error instanceof ApiError) || error.status === 401) throw error;
  } finally {
    inboxTimer = setTimeout(() => watchInbox().catch(report), INBOX_MS);
  }
}

/** The pages of the inbox the person opened, and whether more follow. */
async function readInbox() {
  const requests = [];
  let next = null;
  for (let read = 0; read < inboxPages && (read === 0 || next); read += 1) {
    const page = await api.inbox(next);
    requests.push(...page.requests);
    next = page.next ?? null;
  }
  return { requests, more: Boolean(next) };
}

function showInbox(requests, more) {
  const count = `${requests.length}${more ? "+" : ""}`;
  document.title = requests.length ? `(${count}) ${TITLE}` : TITLE;
  const rows = requests.map((r) => {
    const here = r.chatId === chat;
    const link = h(
      "a",
      { href: `?${new URLSearchParams({ ...Object.fromEntries(params), chat: r.chatId })}` },
      r.title,
    );
    const meta = [
      kindLabel(r.kind),
      r.risk ? `${r.risk} risk` : null,
      r.state === "claimed" ? "being carried out" : `until ${when(r.expiresAt)}`,
      `asked ${age(r.createdAt)} in ${r.chatId}`,
    ];
    return h(
      "li",
      {
        class: here ? "here" : "",
        "aria-current": here ? "true" : null,
        "data-state": r.state,
        hidden: !shows(r.state),
      },
      here ? h("strong", {}, r.title) : link,
      r.details?.length ? h("span", { class: "details" }, r.details.join(" · ")) : null,
      h("span", { class: "meta" }, meta.filter(Boolean).join(" · ")),
    );
  });
  const shown = rows.filter((row) => !row.hidden).length;
  const empty = requests.length ? "Nothing here with this filter." : "Nothing is waiting for you.";
  const further = more
    ? h(
        "li",
        { class: "more" },
        h("button", { type: "button", onclick: showMore }, "Show more waiting for you"),
      )
    : null;
  const nothing = shown || more ? [] : [h("li", { class: "empty" }, empty)];
  $("inbox").replaceChildren(...rows, ...nothing, ...(further ? [further] : []));
}

/** Open one more page of the inbox; the focus stays where the list goes on. */
async function showMore() {
  inboxPages += 1;
  const before = $("inbox").querySelectorAll("li:not(.more)").length;
  await watchInbox();
  $("inbox").querySelectorAll("li:not(.more)")[before]?.querySelector("a")?.focus();
}

/** Whether the person is writing in the card (a redraw would wipe what they typed). */
function typingIn(shown) {
  const active = document.activeElement;
  return shown.el.contains(active) && active.matches("input, textarea, select");
}

/** Which inbox rows the status filter shows: all, those to answer, those being carried out. */
function shows(state) {
  const wanted = $("inbox-filter")?.value || "all";
  return wanted === "all" || wanted === state;
}

/** How long ago, in words a glance reads: "just now", "5 min ago", "3 h ago". */
function age(iso) {
  const minutes = Math.floor((Date.now() - Date.parse(iso)) / 60_000);
  if (minutes < 1) return "just now";
  if (minutes < 60) return `${minutes} min ago`;
  const hours = Math.floor(minutes / 60);
  return hours < 48 ? `${hours} h ago` : `${Math.floor(hours / 24)} d ago`;
}

async function loadHistory() {
  const { events } = await api.events(chat);
  const kinds = ["decision", "timed_out", "cancelled", "recovered", "given_up"];
  const settled = events.filter((e) => kinds.includes(e.type));
  const rows = settled.reverse().map((e) => {
    const what =
      e.type === "decision"
        ? decidedLabel(e.detail.decision) +
          (e.detail.replaced ? ` (replacing ${decisionLabel(e.detail.replaced)}, not yet acted on)` : "")
        : e.type === "recovered"
          ? `Continued after an interruption: ${decisionLabel(e.detail.decision)}`
          : e.type === "given_up"
            ? `Given up: ${String(e.detail.reason || "").replace(/^given up: /, "")}`
            : decisionLabel(e.type);
    const by =
      e.type === "timed_out"
        ? "nobody answered in time"
        : e.type === "recovered" || e.type === "given_up"
          ? "by Interlock"
          : `by ${e.actor}`;
    const from = e.detail.source ? ` via ${sourceLabel(e.detail.source)}` : "";
    const answer = answerText(e.detail.answer, labelsOf.get(e.detail.interrupt_id));
    return h(
      "li",
      {},
      h("strong", {}, what),
      h("span", { class: "meta" }, `${by}${from} · ${when(new Date(e.at_ms).toISOString())}`),
      // As typed: a bucket_name or a *value* is text, never markup.
      answer ? h("span", { class: "answer" }, answer) : "",
    );
  });
  $("history").replaceChildren(...(rows.length ? rows : [h("li", { class: "empty" }, "Nothing answered yet.")]));
  return events;
}

/** When the server recorded the answer to `shown`'s request (its latest `decision`
 * event), or undefined when the trail has none. */
function decidedAtOf(shown, events) {
  const id = shown.request.interruptId;
  const decided = events
    .filter((e) => e.type === "decision" && e.detail.interrupt_id === id)
    .at(-1);
  return decided ? new Date(decided.at_ms).toISOString() : undefined;
}

function kindLabel(kind) {
  return { approval: "Approval", question: "Question", info: "Details" }[kind] || kind;
}

function decisionLabel(decision) {
  return (
    {
      approved: "Approved",
      rejected: "Denied",
      rejected_with_feedback: "Denied with feedback",
      answered: "Answered",
      cancelled: "Cancelled",
      timed_out: "Timed out",
      defaulted: "Answered with the default",
    }[decision] || "Settled"
  );
}

/** A person's own decision: a card they cancelled is one they declined to answer (an MCP
 * server hears `decline`), unlike a request cancelled as a whole. */
function decidedLabel(decision) {
  return decision === "cancelled" ? "Declined" : decisionLabel(decision);
}

function sourceLabel(source) {
  return { api: "the card page", slack: "Slack", telegram: "Telegram" }[source] || source;
}

// Approvals -------------------------------------------------------------------

async function loadApprovals() {
  const { approvals, preapproved } = await api.approvals(chat);
  const rows = (items, revocable, none) =>
    items.length
      ? items.map((a) => approvalRow(a, revocable))
      : [h("li", { class: "empty" }, none)];
  $("approvals").replaceChildren(...rows(approvals, true, "Nothing approved yet."));
  $("preapproved").replaceChildren(...rows(preapproved, false, "None."));
}

function approvalRow(approval, revocable) {
  const kind = h("span", { class: "kind" }, approval.kind === "site" ? "Site" : "Package");
  const what = h("span", { class: "what" }, kind, " ", h("strong", {}, approval.name));
  if (!revocable) return h("li", {}, what);
  const label = `Revoke ${approval.kind} ${approval.name}`;
  const button = { type: "button", class: "small", "aria-label": label };
  return h("li", {}, what, h("button", { ...button, onclick: () => revoke(approval) }, "Revoke"));
}

async function revoke(approval) {
  try {
    await api.revoke(chat, approval.kind, approval.name);
    report(`Revoked ${approval.name}: the agent asks again from the next turn.`);
    say("tool", `Revoked the approval of ${approval.kind} ${approval.name}.`);
    await loadApprovals();
    $("approvals-title").focus();
  } catch (error) {
    report(error);
  }
}

// Status ----------------------------------------------------------------------

function setWorking(on, message) {
  working = on;
  // An open request holds the chat: answered or not, a new message waits for its run.
  const waiting = Boolean(card?.open);
  $("prompt").disabled = on || waiting;
  $("composer").querySelector("button").disabled = on || waiting;
  // A held composer stays in the flow: pinned, it would cover the card's buttons.
  $("composer").classList.toggle("held", waiting);
  $("composer-hint").textContent = !waiting
    ? ""
    : card.answerable
      ? "Answer the request above before you send a new message."
      : "The answer above is being carried out; write again once it is done.";
  if (message !== undefined) report(message);
}

function report(what) {
  const status = $("status");
  status.textContent = what instanceof Error ? `Something went wrong: ${what.message}` : what;
  status.classList.toggle("error", what instanceof Error);
}

start().catch(report);
