// The stock AG-UI client (`@ag-ui/client` HttpAgent), driven line by line from stdin.
//
// It is given only the endpoint's URL and its headers, as any AG-UI app would be. Each
// command prints one JSON line describing what the client saw:
//   run <prompt>            a new user message, then a run
//   answer <json>           resume every pending interrupt: {interruptId: payload}
//   cancel                  resume every pending interrupt as cancelled
// The secret each interrupt carries in metadata is passed back in the entry's metadata,
// as an app that renders the card does.
import { createInterface } from "node:readline";
import { HttpAgent, buildResumeArray } from "@ag-ui/client";

const [url, token, threadId] = process.argv.slice(2);
const agent = new HttpAgent({ url, headers: { Authorization: `Bearer ${token}` }, threadId });
let counter = 0;

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
  const events = [];
  let error = null;
  try {
    await agent.runAgent(parameters, { onEvent: ({ event }) => events.push(event.type) });
  } catch (failure) {
    error = String(failure.message ?? failure);
  }
  const finished = agent.messages.filter((m) => m.role === "assistant" && typeof m.content === "string");
  return {
    events,
    error,
    pending: agent.pendingInterrupts.map((i) => ({
      id: i.id,
      card: i.metadata?.card?.type,
      schema: i.responseSchema,
    })),
    lastText: finished.at(-1)?.content ?? null,
    argumentsAreJson: argumentsAreJson(),
    toolCalls: agent.messages.flatMap((m) => m.toolCalls ?? []).length,
  };
}

function entries(responses, cancelled) {
  const byId = {};
  for (const interrupt of agent.pendingInterrupts) {
    const metadata = { secret: interrupt.metadata?.secret };
    byId[interrupt.id] = cancelled
      ? { status: "cancelled", metadata }
      : { status: "resolved", payload: responses[interrupt.id], metadata };
  }
  return buildResumeArray(agent.pendingInterrupts, byId);
}

const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  const [command, ...rest] = line.split(" ");
  const argument = rest.join(" ");
  let result;
  if (command === "run") {
    counter += 1;
    agent.addMessage({ id: `user-${counter}`, role: "user", content: argument });
    result = await run({});
  } else if (command === "answer") {
    result = await run({ resume: entries(JSON.parse(argument), false) });
  } else if (command === "cancel") {
    result = await run({ resume: entries({}, true) });
  } else {
    result = { error: `unknown command ${command}` };
  }
  process.stdout.write(`${JSON.stringify(result)}\n`);
}
