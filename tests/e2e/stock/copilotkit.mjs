// CopilotKit, unmodified, headless: its runtime (`@copilotkit/runtime`) serving the
// endpoint as a stock `HttpAgent` with the URL and headers only, on 127.0.0.1, and its
// client core (`@copilotkit/core`) talking to that runtime as a CopilotKit app does.
// Commands: commands.mjs.
import { createServer } from "node:http";
import { HttpAgent } from "@ag-ui/client";
import { CopilotKitCore } from "@copilotkit/core";
import { CopilotRuntime } from "@copilotkit/runtime/v2";
import { createCopilotNodeListener } from "@copilotkit/runtime/v2/node";
import { drive } from "./commands.mjs";

const [url, token, threadId] = process.argv.slice(2);
const runtime = new CopilotRuntime({
  agents: { default: new HttpAgent({ url, headers: { Authorization: `Bearer ${token}` } }) },
});
const listener = createCopilotNodeListener({
  runtime,
  basePath: "/api/copilotkit",
  activateChannels: false,
});
const server = createServer(listener);
await new Promise((ready) => server.listen(0, "127.0.0.1", ready));
const runtimeUrl = `http://127.0.0.1:${server.address().port}/api/copilotkit`;
// CopilotKit's core connects to its runtime only where there is a window (the page it
// runs in): this is that page's window, as far as the core looks at one.
globalThis.window ??= {
  location: new URL(runtimeUrl),
  addEventListener() {},
  removeEventListener() {},
};

async function connect() {
  const core = new CopilotKitCore({ runtimeUrl });
  for (let i = 0; i < 200 && !core.getAgent("default"); i += 1) {
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  const agent = core.getAgent("default");
  if (!agent) throw new Error("CopilotKit found no agent at its runtime");
  agent.threadId = threadId;
  return { core, agent };
}

let current = await connect();
const session = {
  get agent() {
    return current.agent;
  },
  async run(parameters, subscriber) {
    // What went wrong reaches a CopilotKit app through the core's onError.
    const failures = [];
    const watching = current.core.subscribe({ onError: ({ error }) => failures.push(error) });
    const subscription = current.agent.subscribe(subscriber);
    try {
      await current.core.runAgent({ agent: current.agent, ...parameters });
    } finally {
      subscription.unsubscribe();
      watching.unsubscribe();
    }
    if (failures.length) throw failures[0];
  },
  async reconnect() {
    current = await connect();
  },
};
try {
  await drive(session, threadId);
} finally {
  server.close();
  process.exit(0);
}
