// The command loop both front-end drivers share. A driver gives it a session: the
// client's current agent, how that client runs it, and how it reconnects. Each command
// (one line on stdin) prints one JSON line describing what the client saw:
//   run <prompt>        a new user message, then a run
//   answer <json>       resume every pending interrupt: {interruptId: payload}
//   cancel              resume every pending interrupt as cancelled
//   entries <json>      resume with these entries, as given
//   replay              send the last resume again (an app retrying a lost answer)
//   reconnect           a new client on the same thread (a reload): one run, no message
// Interrupts are answered as the protocol documents it, `{interruptId, status,
// payload}`, and nothing else: no Interlock-specific field is ever sent.
import { createInterface } from "node:readline";
import { buildResumeArray } from "@ag-ui/client";

function argumentsAreJson(agent) {
  for (const message of agent.messages) {
    for (const call of message.toolCalls ?? []) {
      try {
        JSON.parse(call.function.arguments);
      } catch {
        return false;
      }
    }
  }
  return true;
}

async function run(session, parameters) {
  const raw = [];
  let error = null;
  let runError = null;
  const subscriber = {
    onEvent: ({ event }) => {
      raw.push(event);
    },
    onRunErrorEvent: ({ event }) => {
      runError = { code: event.code ?? null, message: event.message };
    },
  };
  try {
    await session.run(parameters, subscriber);
  } catch (failure) {
    error = String(failure.message ?? failure);
  }
  const agent = session.agent;
  const finished = agent.messages.filter((m) => m.role === "assistant" && typeof m.content === "string");
  return {
    events: raw.map((e) => e.type),
    raw,
    error,
    runError,
    pending: agent.pendingInterrupts.map((i) => ({
      id: i.id,
      card: i.metadata?.card?.type,
      schema: i.responseSchema,
      toolCallId: i.toolCallId ?? null,
    })),
    lastText: finished.at(-1)?.content ?? null,
    messages: agent.messages,
    argumentsAreJson: argumentsAreJson(agent),
    toolCalls: agent.messages.flatMap((m) => m.toolCalls ?? []).length,
  };
}

function entries(agent, responses, cancelled) {
  const byId = {};
  for (const interrupt of agent.pendingInterrupts) {
    byId[interrupt.id] = cancelled
      ? { status: "cancelled" }
      : { status: "resolved", payload: responses[interrupt.id] };
  }
  return buildResumeArray(agent.pendingInterrupts, byId);
}

/** Read commands until stdin closes; `session` is the client under test. */
export async function drive(session, threadId) {
  let counter = 0;
  let lastResume = null;
  const resume = (given) => {
    lastResume = given;
    return run(session, { resume: given });
  };
  for await (const line of createInterface({ input: process.stdin })) {
    const [command, ...rest] = line.split(" ");
    const argument = rest.join(" ");
    let result;
    if (command === "run") {
      counter += 1;
      session.agent.addMessage({ id: `user-${threadId}-${counter}`, role: "user", content: argument });
      result = await run(session, {});
    } else if (command === "answer") {
      result = await resume(entries(session.agent, JSON.parse(argument), false));
    } else if (command === "cancel") {
      result = await resume(entries(session.agent, {}, true));
    } else if (command === "entries") {
      result = await resume(JSON.parse(argument));
    } else if (command === "replay") {
      result = await run(session, { resume: lastResume });
    } else if (command === "reconnect") {
      await session.reconnect();
      result = await run(session, {});
    } else {
      result = { error: `unknown command ${command}` };
    }
    process.stdout.write(`${JSON.stringify(result)}\n`);
  }
}
