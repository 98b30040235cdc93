// A CopilotKit React app as its users write one: the provider pointed at its runtime,
// CopilotKit's own chat, and CopilotKit's `useInterrupt` rendering Interlock's AG-UI
// interrupt as a card. Nothing Interlock-specific travels: an answer is the payload the
// interrupt's `responseSchema` asks for, and the secret goes back by itself in the
// agent's state (Interlock's STATE_SNAPSHOT), as the AG-UI protocol carries state.
//
// The page is opened as /?thread=<id>; the thread id makes CopilotChat connect to the
// thread on load (a reload restores it through the runtime's `connect`).
import { StrictMode, useState } from "react";
import { createRoot } from "react-dom/client";
import {
  CopilotChat,
  CopilotKitProvider,
  useAgent,
  useInterrupt,
} from "@copilotkit/react-core/v2";
import "@copilotkit/react-core/v2/styles.css";

const thread = new URLSearchParams(window.location.search).get("thread") ?? undefined;

// Errors CopilotKit reports (none is expected: Interlock tells a refused answer in a run
// that finishes): shown on the page, and kept for the test to read.
window.__copilotkitErrors = [];

function Arguments({ card }) {
  const shown = card.summary ?? card.input ?? {};
  const entries = Object.entries(shown);
  if (!entries.length) return null;
  return (
    <dl className="arguments">
      {entries.map(([name, value]) => (
        <div key={name}>
          <dt>{name}</dt>
          <dd>{typeof value === "string" ? value : JSON.stringify(value)}</dd>
        </div>
      ))}
    </dl>
  );
}

// The choices a card offers, read from its response schema: a question's options, or
// approve / deny for a tool call.
function choices(interrupt) {
  const properties = interrupt.responseSchema?.properties ?? {};
  const options = properties.answer?.enum;
  if (options) return options.map((option) => ({ label: option, payload: { answer: option } }));
  return [
    { label: "Approve", payload: { decision: "approve" } },
    { label: "Deny", payload: { decision: "reject" } },
  ];
}

function InterlockCard({ interrupt, resolve }) {
  const [sent, setSent] = useState(null);
  const card = interrupt.metadata?.card ?? {};
  const question = card.type === "question";
  const answer = async ({ label, payload }) => {
    setSent(label);
    try {
      await resolve(payload, interrupt.id);
    } catch (error) {
      window.__copilotkitErrors.push(String(error?.message ?? error));
    } finally {
      // The answer's run is over: a card still shown was offered again, to answer anew.
      setSent(null);
    }
  };
  const title = question ? "The agent asks" : `The agent wants to run ${card.tool ?? "a tool"}`;
  return (
    <section className="interlock-card" aria-labelledby={`title-${interrupt.id}`}>
      <h2 id={`title-${interrupt.id}`}>{title}</h2>
      {question ? <p className="question">{interrupt.message}</p> : <Arguments card={card} />}
      <div className="actions">
        {choices(interrupt).map((choice) => (
          <button
            key={choice.label}
            type="button"
            disabled={sent !== null}
            onClick={() => answer(choice)}
          >
            {choice.label}
          </button>
        ))}
      </div>
    </section>
  );
}

function Interrupts() {
  useInterrupt({
    render: ({ interrupt, resolve }) =>
      interrupt ? <InterlockCard key={interrupt.id} interrupt={interrupt} resolve={resolve} /> : <></>,
  });
  return null;
}

// The chat's agent, for a test to read what the client holds (its pending interrupts).
function Probe() {
  const { agent } = useAgent();
  window.__copilotkitAgent = agent;
  return null;
}

function Errors() {
  const [said, setSaid] = useState([]);
  window.__copilotkitShowError = (text) => setSaid((before) => [...before, text]);
  return (
    <div role="status" className="errors">
      {said.map((text, n) => (
        <p key={n}>{text}</p>
      ))}
    </div>
  );
}

// CopilotKit's chat input draws its send and add buttons as icons with no accessible
// name; its slot props name them, as any app meeting WCAG would.
const INPUT = {
  sendButton: { "aria-label": "Send" },
  addMenuButton: { "aria-label": "Add attachments or tools" },
};

function App() {
  const onError = ({ error, code }) => {
    const text = `${code}: ${error?.code ?? ""} ${error?.message ?? error}`;
    window.__copilotkitErrors.push(text);
    window.__copilotkitShowError?.(text);
  };
  return (
    <CopilotKitProvider runtimeUrl="/api/copilotkit" enableInspector={false} onError={onError}>
      <main>
        <h1>Interlock in CopilotKit</h1>
        <Interrupts />
        <Probe />
        <CopilotChat
          threadId={thread}
          labels={{ chatInputPlaceholder: "Message to the agent" }}
          input={INPUT}
        />
        <Errors />
      </main>
    </CopilotKitProvider>
  );
}

createRoot(document.getElementById("root")).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
document.body.dataset.ready = "";
