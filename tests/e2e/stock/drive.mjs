// The stock AG-UI client (`@ag-ui/client` HttpAgent), unmodified: given only the
// endpoint's URL and its headers, as any AG-UI app would be. Commands: commands.mjs.
import { HttpAgent } from "@ag-ui/client";
import { drive } from "./commands.mjs";

const [url, token, threadId] = process.argv.slice(2);
const connect = () => new HttpAgent({ url, headers: { Authorization: `Bearer ${token}` }, threadId });
const session = {
  agent: connect(),
  run(parameters, subscriber) {
    return this.agent.runAgent(parameters, subscriber);
  },
  async reconnect() {
    this.agent = connect();
  },
};
await drive(session, threadId);
