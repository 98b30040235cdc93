// An AgentRunner for CopilotKit's runtime that restores a thread from Interlock, not from
// the runtime's memory. CopilotKit's default runner (InMemoryAgentRunner) answers a
// page's `connect` by replaying the events it kept in this process; after a restart it
// has none, and the page comes back without its open card. Interlock holds the thread:
// a run with no new message is a resync (MESSAGES_SNAPSHOT of the saved turns and the
// call the open interrupt waits on, STATE_SNAPSHOT with a fresh secret, RUN_FINISHED
// with the open interrupts, or a plain finish when nothing is open). So `connect` is
// that run, and its events go to the page as they are. Runs stay the in-memory runner's.
import { randomUUID } from "node:crypto";
import { HttpAgent } from "@ag-ui/client";
import { InMemoryAgentRunner } from "@copilotkit/runtime/v2";
import { Observable, from, mergeMap } from "rxjs";

export class ResyncRunner extends InMemoryAgentRunner {
  #resyncs = new Map();

  /** @param {{url: string}} options Interlock's AG-UI endpoint (`…/runs`). */
  constructor({ url, ...options }) {
    super(options);
    this.url = url;
  }

  connect(request) {
    // A run this process is streaming right now is followed live, as the default does.
    return from(this.isRunning({ threadId: request.threadId })).pipe(
      mergeMap((running) => (running ? super.connect(request) : this.resync(request))),
    );
  }

  /**
   * Interlock's own resync of the thread, with the headers the runtime's agent carries.
   *
   * Each resync issues a new secret and retires the one before, and CopilotChat may
   * connect twice in a row as it mounts (the first connect dropped by the page). So a
   * thread's resyncs go to Interlock one after another, in the order the page asked,
   * each allowed to finish even when its page went away: the last one the page kept is
   * the last one Interlock saw. One whose page left before its turn is not sent.
   */
  resync({ threadId, headers }) {
    return new Observable((subscriber) => {
      let wanted = true;
      const previous = this.#resyncs.get(threadId) ?? Promise.resolve();
      const turn = previous.then(
        () =>
          new Promise((finished) => {
            if (!wanted) return finished();
            const agent = new HttpAgent({ url: this.url, headers: headers ?? {}, threadId });
            const input = {
              threadId,
              runId: randomUUID(),
              messages: [],
              state: {},
              tools: [],
              context: [],
              forwardedProps: {},
            };
            agent.run(input).subscribe({
              next: (event) => wanted && subscriber.next(event),
              error: (error) => {
                if (wanted) subscriber.error(error);
                finished();
              },
              complete: () => {
                if (wanted) subscriber.complete();
                finished();
              },
            });
          }),
      );
      this.#resyncs.set(threadId, turn);
      turn.then(() => {
        if (this.#resyncs.get(threadId) === turn) this.#resyncs.delete(threadId);
      });
      return () => {
        wanted = false;
      };
    });
  }
}
