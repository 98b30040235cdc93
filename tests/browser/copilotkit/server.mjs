// CopilotKit's runtime serving Interlock's endpoint as a stock `HttpAgent` (its URL and a
// Bearer token, nothing else), and the page that talks to it, on one 127.0.0.1 origin:
//   node server.mjs <endpoint url> <token> <page dir> [--resync] [--port N]
// `/api/copilotkit/*` is the runtime; anything else is a file of <page dir> (the bundle
// and index.html). With --resync, the runtime's runner asks Interlock where a thread
// stands when a page connects (resync-runner.mjs), so a reload after this process
// restarted still shows the open card; --port lets a restarted runtime keep its origin.
// Prints `READY <port>` once listening.
import { createServer } from "node:http";
import { readFile } from "node:fs/promises";
import { extname, join, normalize } from "node:path";
import { HttpAgent } from "@ag-ui/client";
import { CopilotRuntime } from "@copilotkit/runtime/v2";
import { createCopilotNodeListener } from "@copilotkit/runtime/v2/node";
import { ResyncRunner } from "./resync-runner.mjs";

const [url, token, pageDir, ...options] = process.argv.slice(2);
const resync = options.includes("--resync");
const port = options.includes("--port") ? Number(options[options.indexOf("--port") + 1]) : 0;
const headers = { Authorization: `Bearer ${token}` };
const runtime = new CopilotRuntime({
  agents: { default: new HttpAgent({ url, headers }) },
  ...(resync ? { runner: new ResyncRunner({ url }) } : {}),
});
const copilotkit = createCopilotNodeListener({
  runtime,
  basePath: "/api/copilotkit",
  activateChannels: false,
});
const TYPES = { ".html": "text/html", ".js": "text/javascript", ".css": "text/css" };
// A page file is a name in <page dir>, nothing above it.
async function page(request, response) {
  const path = new URL(request.url, "http://127.0.0.1").pathname;
  const name = normalize(path === "/" ? "index.html" : path.slice(1));
  if (name.startsWith("..") || name.includes("/")) {
    response.writeHead(404).end();
    return;
  }
  try {
    const body = await readFile(join(pageDir, name));
    response.writeHead(200, {
      "Content-Type": TYPES[extname(name)] ?? "application/octet-stream",
      "Cache-Control": "no-store",
    });
    response.end(body);
  } catch {
    response.writeHead(404).end();
  }
}
const server = createServer((request, response) => {
  if (request.url.startsWith("/api/copilotkit")) return copilotkit(request, response);
  return page(request, response);
});
// A test that loses its handle on this process must not leave it serving.
server.requestTimeout = 60_000;
await new Promise((ready) => server.listen(port, "127.0.0.1", ready));
process.stdout.write(`READY ${server.address().port}\n`);
const stop = () => server.close(() => process.exit(0));
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
process.stdin.on("end", stop); // the test's pipe closed: it is gone
process.stdin.resume();
