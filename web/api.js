// Talking to the Interlock API: signing in, the JSON routes, and AG-UI runs.
//
// Runs stream back as `text/event-stream`: the page reads the body as it arrives and
// hands each AG-UI event to the caller (text is shown as the model writes it), then
// summarises the whole run.

import { beginSignIn, claims, finishSignIn, signOutUrl } from "./auth.js";

const TOKEN_KEY = "interlock.idToken";

/** An error reply of the API: `{"error": {"code", "message"}}` plus the HTTP status. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/**
 * Who the page talks as, and to which API.
 *
 * Deployed: a `config.json` next to the page names the API URL, the user pool client and
 * the hosted UI (`authUrl`); the page signs in there (`auth.js`) and uses the ID token.
 * Local (`./dev serve`): no config.json, and the local server hands out a development
 * token. Returns `{api, signOut}`; `{leaving: true}` while the page goes to sign in or
 * back from it; or, for a config.json without `authUrl`, `{signIn: config}` (a pasted
 * token).
 */
export async function openSession(pageParams) {
  const config = await fetch("config.json", { cache: "no-store" })
    .then((r) => (r.ok ? r.json() : null))
    .catch(() => null);
  if (config?.authUrl) return hostedSession(config, pageParams);
  if (config) {
    const token = sessionStorage.getItem(TOKEN_KEY);
    return token ? { api: new Api(config.apiUrl, token, "signed in") } : { signIn: config };
  }
  const query = new URLSearchParams();
  for (const key of ["user", "groups"]) {
    if (pageParams.has(key)) query.set(key, pageParams.get(key));
  }
  const response = await fetch(`local/session?${query}`, { cache: "no-store" });
  if (!response.ok) throw new Error("No config.json and no local session endpoint.");
  const session = await response.json();
  return { api: new Api(session.apiBase, session.token, `${session.user} (local)`) };
}

async function hostedSession(config, pageParams) {
  const done = await finishSignIn(config, pageParams);
  if (done) {
    rememberToken(done.idToken);
    location.replace(done.back); // the page as it was before signing in, chat included
    return { leaving: true };
  }
  const token = sessionStorage.getItem(TOKEN_KEY);
  const { email, exp } = token ? claims(token) : {};
  if (!token || (exp && exp * 1000 <= Date.now())) {
    await beginSignIn(config);
    return { leaving: true };
  }
  return { api: new Api(config.apiUrl, token, email || "signed in"), signOut: signOutUrl(config) };
}

export function rememberToken(token) {
  sessionStorage.setItem(TOKEN_KEY, token.trim());
}

export function forgetToken() {
  sessionStorage.removeItem(TOKEN_KEY);
}

export class Api {
  constructor(base, token, who) {
    this.base = (base || "").replace(/\/$/, "");
    this.token = token;
    this.who = who;
  }

  async call(method, path, body, onEvent = () => {}) {
    const headers = { Authorization: this.token };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const response = await fetch(this.base + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
    });
    const type = response.headers.get("Content-Type") || "";
    if (response.status === 401) sessionStorage.removeItem(TOKEN_KEY); // signed out: sign in again
    if (!response.ok) {
      const reply = type.includes("json") ? await response.json().catch(() => null) : null;
      const error = reply?.error ?? { code: "system_error", message: `HTTP ${response.status}` };
      throw new ApiError(response.status, error.code, error.message);
    }
    if (type.startsWith("text/event-stream")) return readRun(await readEvents(response, onEvent));
    return response.json();
  }

  /** Start a turn: an AG-UI RunAgentInput whose threadId is the chat. */
  run(chat, text, onEvent) {
    const message = { id: newId("msg"), role: "user", content: text };
    return this.call("POST", "/runs", runInput(chat, [message]), onEvent);
  }

  /**
   * Answer the open request: one resume entry per interrupt it holds, each carrying
   * the request's secret. `answers` is a list of { interruptId, status, payload }.
   */
  resume(chat, request, answers, onEvent) {
    const resume = answers.map(({ interruptId, status, payload }) => ({
      interruptId,
      status,
      payload,
      metadata: { secret: request.secret },
    }));
    return this.call("POST", "/resume", { ...runInput(chat, []), resume }, onEvent);
  }

  request(chat) {
    return this.call("GET", `/chats/${encodeURIComponent(chat)}/request`);
  }

  /** A page of the signed-in user's open requests in every chat, newest first; `page`
   * is the `next` of the page before (none: the first page). */
  inbox(page) {
    return this.call("GET", page ? `/inbox?${new URLSearchParams({ page })}` : "/inbox");
  }

  /** The chat's audit trail (decisions, timeouts, cancellations...). */
  events(chat) {
    return this.call("GET", `/chats/${encodeURIComponent(chat)}/events`);
  }

  turns(chat) {
    return this.call("GET", `/chats/${encodeURIComponent(chat)}/turns`);
  }

  approvals(chat) {
    return this.call("GET", `/chats/${encodeURIComponent(chat)}/approvals`);
  }

  /** Cancel the chat's open request (a card set aside unanswered). */
  cancel(chat) {
    return this.call("DELETE", `/chats/${encodeURIComponent(chat)}/request`);
  }

  revoke(chat, kind, name) {
    const path = [chat, "approvals", kind, name].map(encodeURIComponent).join("/");
    return this.call("DELETE", `/chats/${path}`);
  }
}

function runInput(chat, messages) {
  return {
    threadId: chat,
    runId: newId("run"),
    state: {},
    messages,
    tools: [],
    context: [],
    forwardedProps: {},
  };
}

export function newId(prefix) {
  const bytes = crypto.getRandomValues(new Uint8Array(6));
  return prefix + "-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Every AG-UI event of a streamed SSE body, each handed to `onEvent` as it arrives. */
async function readEvents(response, onEvent) {
  const events = [];
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  const take = (frames) => {
    for (const event of parseEvents(frames)) {
      events.push(event);
      onEvent(event);
    }
  };
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n/g, "\n");
    const end = buffer.lastIndexOf("\n\n");
    if (end < 0) continue;
    take(buffer.slice(0, end));
    buffer = buffer.slice(end + 2);
  }
  take(buffer + decoder.decode());
  return events;
}

/** Every AG-UI event of SSE frames (heartbeats, which carry no data, are skipped). */
export function parseEvents(body) {
  const events = [];
  for (const frame of body.replace(/\r\n/g, "\n").split("\n\n")) {
    const data = frame
      .split("\n")
      .filter((line) => line.startsWith("data:"))
      .map((line) => line.slice(5).replace(/^ /, ""));
    if (data.length) events.push(JSON.parse(data.join("\n")));
  }
  return events;
}

// Every tool call the page saw start, by id: a later run may carry only its result.
const started = new Map();

/**
 * One run, summarised: tool calls (name, arguments, result), the agent's messages,
 * the interrupt it paused on (if any) and RUN_FINISHED.result (if it ended).
 */
export function readRun(events) {
  const calls = new Map();
  const result = (id) => {
    // A call the run was paused in started in an earlier stream: only its result is new.
    if (!calls.has(id)) calls.set(id, { ...(started.get(id) || { name: "tool", args: "" }) });
    return calls.get(id);
  };
  const messages = new Map();
  let finished = null;
  for (const event of events) {
    switch (event.type) {
      case "TOOL_CALL_START":
        calls.set(event.toolCallId, { name: event.toolCallName, args: "", result: null });
        started.set(event.toolCallId, calls.get(event.toolCallId));
        break;
      case "TOOL_CALL_ARGS":
        calls.get(event.toolCallId).args += event.delta;
        break;
      case "TOOL_CALL_RESULT":
        result(event.toolCallId).result = event.content;
        break;
      case "TEXT_MESSAGE_CONTENT":
        messages.set(event.messageId, (messages.get(event.messageId) || "") + event.delta);
        break;
      case "RUN_ERROR":
        throw new ApiError(500, event.code || "system_error", event.message);
      case "RUN_FINISHED":
        finished = event;
        break;
    }
  }
  const outcome = finished?.outcome;
  return {
    tools: [...calls.values()],
    texts: [...messages].map(([id, text]) => ({ id, text })),
    interrupts: outcome?.type === "interrupt" ? outcome.interrupts : [],
    result: finished?.result ?? null,
  };
}
