// The stock AG-UI client (`@ag-ui/client` HttpAgent), unmodified, driven line by line
// from stdin.
//
// It is given only the endpoint's URL and its headers, as any AG-UI app would be, and
// answers interrupts as the protocol documents it: `{interruptId, status, payload}`,
// nothing else. Each command prints one JSON line describing what the client saw:
//   run <prompt>        a new user message, then a run
//   answer <json>       resume every pending interrupt: {interruptId: payload}
//   cancel              resume every pending interrupt as cancelled
//   entries <json>      resume with these entries, as given
//   replay              send the last resume again (an app retrying a lost answer)
//   reconnect           a new client on the same thread (a reload): one run, no message
import { createInterface } from "node:readline";
import { HttpAgent, buildResumeArray } from "@ag-ui/client";

const [url, token, threadId] = process.argv.slice(2);
const connect = () => new HttpAgent({ url, headers: { Authorization: `Bearer ${token}` }, threadId });
let agent = connect();
let counter = 0;
let lastResume = null;

function argumentsAreJson() {
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

async function run(parameters) {
  const raw = [];
  let error = null;
  let runError = null;
  try {
    await agent.runAgent(parameters, {
      onEvent: ({ event }) => raw.push(event),
      onRunErrorEvent: ({ event }) => {
        runError = { code: event.code ?? null, message: event.message };
      },
    });
  } catch (failure) {
    error = String(failure.message ?? failure);
  }
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
    argumentsAreJson: argumentsAreJson(),
    toolCalls: agent.messages.flatMap((m) => m.toolCalls ?? []).length,
  };
}

function entries(responses, cancelled) {
  const byId = {};
  for (const interrupt of agent.pendingInterrupts) {
    byId[interrupt.id] = cancelled
      ? { status: "cancelled" }
      : { status: "resolved", payload: responses[interrupt.id] };
  }
  return buildResumeArray(agent.pendingInterrupts, byId);
}

async function resume(entries) {
  lastResume = entries;
  return run({ resume: entries });
}

const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  const [command, ...rest] = line.split(" ");
  const argument = rest.join(" ");
  let result;
  if (command === "run") {
    counter += 1;
    agent.addMessage({ id: `user-${threadId}-${counter}`, role: "user", content: argument });
    result = await run({});
  } else if (command === "answer") {
    result = await resume(entries(JSON.parse(argument), false));
  } else if (command === "cancel") {
    result = await resume(entries({}, true));
  } else if (command === "entries") {
    result = await resume(JSON.parse(argument));
  } else if (command === "replay") {
    result = await run({ resume: lastResume });
  } else if (command === "reconnect") {
    agent = connect();
    result = await run({});
  } else {
    result = { error: `unknown command ${command}` };
  }
  process.stdout.write(`${JSON.stringify(result)}\n`);
}
