"""The peer: Interlock's download-approval demo as a LangGraph user would write it.

A `StateGraph` with an agent node and a prebuilt `ToolNode` (routed by
`tools_condition`), checkpointed by langgraph-checkpoint-aws's `DynamoDBSaver` in the
configuration its README calls production (TTL, compression, S3 offload). The tool
`request_approval` pauses with `interrupt()`; a `Command(resume=...)` answers it, and
LangGraph re-runs the interrupted tool from its first line with the answer.

The model is a scripted stand-in (no LLM is reachable here): it plays the very steps of
Interlock's demo scenario (`examples/analyst/script.py`, DOWNLOAD), each a function of
the last tool results: fetch (refused: site not approved), ask for approval, fetch
again, answer. The tools answer in the demo's words and download the demo's page, so
both sides carry the same conversation.

Needs the optional requirements: `.venv/bin/pip install -r requirements-peers.txt`.
"""

from __future__ import annotations

import operator
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Annotated, Any, TypedDict
from urllib.parse import urlsplit

import boto3
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, InjectedToolCallId, tool
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import InjectedState, ToolNode, tools_condition
from langgraph.types import Command, interrupt
from langgraph_checkpoint_aws import DynamoDBSaver
from pydantic import ConfigDict

from bench.long_agent import SCRIPT, big_result
from examples.analyst.script import DOWNLOAD
from interlock.agent import Scenario

REGION = "us-east-1"
TTL_S = 7 * 24 * 3600  # the README's production example: a week


class Tally:
    """What one process of the peer did: model calls and tool bodies entered.

    Args:
        download: The side effect `fetch_url` performs once a site is approved.
    """

    def __init__(self, download: Callable[[str], str]) -> None:
        self.download = download
        self.steps: list[int] = []  # the script step each model call played
        self.bodies: list[tuple[str, str]] = []  # (tool, call id) of each body entered
        self._lock = threading.Lock()

    def model_call(self, step: int) -> None:
        with self._lock:
            self.steps.append(step)

    def tool_body(self, name: str, call_id: str) -> None:
        with self._lock:
            self.bodies.append((name, call_id))

    def entered(self) -> dict[str, Any]:
        """Model calls and tool bodies entered, by tool."""
        return {
            "model_calls": len(self.steps),
            "tool_bodies": dict(Counter(n for n, _ in self.bodies)),
        }

    def again(self, before: Tally) -> dict[str, Any]:
        """What this process entered that `before` had entered already: the same
        script step, the same tool call."""
        calls = {call for _, call in before.bodies}
        return {
            "model_calls": sum(1 for step in self.steps if step in before.steps),
            "tool_bodies": dict(Counter(n for n, call in self.bodies if call in calls)),
        }


class State(TypedDict):
    """The conversation, and the sites approved so far in this thread."""

    messages: Annotated[list[AnyMessage], add_messages]
    approved_sites: Annotated[list[str], operator.add]


class ScriptedChat(BaseChatModel):
    """A scripted stand-in chat model: one step of a script per call.

    It plays the scenario whose keyword is in the turn's prompt (else the first), and
    derives the step from the conversation (assistant messages since the last user
    message), as Interlock's `ScriptedModel` does, so any process continues the script
    where a checkpoint left it. The demo's DOWNLOAD scenario unless told otherwise.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)
    tally: Tally
    script: tuple[Scenario, ...] = (DOWNLOAD,)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChat:
        return self  # the script names its tools itself

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        asked = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
        said = str(messages[asked].content).lower()
        scenario = next((s for s in self.script if any(k in said for k in s.keywords)), None)
        steps = (scenario or self.script[0]).steps
        step = sum(1 for m in messages[asked:] if isinstance(m, AIMessage))
        last_ai = max(i for i, m in enumerate(messages) if i == asked or isinstance(m, AIMessage))
        results = [str(m.content) for m in messages[last_ai:] if isinstance(m, ToolMessage)]
        self.tally.model_call(step)
        blocks = (
            steps[step](results)
            if step < len(steps)
            else [{"text": "That is all I had planned for this request."}]
        )
        text = " ".join(b["text"] for b in blocks if "text" in b)
        calls = [
            {"name": b["tool"], "args": b["input"], "id": f"call_{uuid.uuid4().hex[:24]}"}
            for b in blocks
            if "tool" in b
        ]
        message = AIMessage(content=text, tool_calls=calls)
        return ChatResult(generations=[ChatGeneration(message=message)])


def build_tools(tally: Tally) -> list[BaseTool]:
    """`fetch_url` refuses unapproved sites; `request_approval` pauses for a person."""

    @tool
    def fetch_url(
        url: str,
        state: Annotated[dict[str, Any], InjectedState],
        tool_call_id: Annotated[str, InjectedToolCallId],
    ) -> str:
        """Download a web page or file. Only sites approved for this chat can be reached.

        Args:
            url: The http(s) URL to fetch.
        """
        tally.tool_body("fetch_url", tool_call_id)
        site = urlsplit(url).hostname or url
        if site not in state.get("approved_sites", []):
            return (
                f"Blocked: {site} is not approved for this chat. Call request_approval "
                "on its own naming this URL, then fetch it again."
            )
        return tally.download(url)

    @tool
    def request_approval(
        reason: str, urls: list[str], tool_call_id: Annotated[str, InjectedToolCallId]
    ) -> Command[Any] | str:
        """Ask the user to approve downloads from sites for this chat.

        Args:
            reason: One sentence saying why the data is needed.
            urls: The http(s) URLs to download.
        """
        tally.tool_body("request_approval", tool_call_id)
        sites = sorted({urlsplit(u).hostname or u for u in urls})
        answer = interrupt({"reason": reason, "urls": urls, "sites": sites})
        if answer.get("decision") != "approve":
            return f"Denied by the user: {', '.join(sites)}."
        said = f"Approved by the user: sites {', '.join(sites)}. Run the step again now."
        reply = ToolMessage(said, tool_call_id=tool_call_id)
        return Command(update={"approved_sites": sites, "messages": [reply]})

    return [fetch_url, request_approval]


def build_graph(tally: Tally, checkpointer: DynamoDBSaver) -> Any:
    """The agent loop: model, then tools while the model asks for them."""
    return _loop(build_tools(tally), ScriptedChat(tally=tally), checkpointer)


def _loop(tools: list[BaseTool], model: ScriptedChat, checkpointer: DynamoDBSaver) -> Any:
    bound = model.bind_tools(tools)

    def agent(state: State) -> dict[str, Any]:
        return {"messages": [bound.invoke(state["messages"])]}

    builder = StateGraph(State)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


def session() -> boto3.Session:
    """Credentials for the emulator, independent of the caller's environment."""
    return boto3.Session(
        aws_access_key_id="local", aws_secret_access_key="local", region_name=REGION
    )


def create_storage(endpoint: str, table: str, bucket: str) -> None:
    """The table and bucket as the library's CloudFormation sample declares them:
    `PK`/`SK` strings, on-demand, TTL on `ttl`; a bucket for offloaded checkpoints."""
    dynamodb = session().client("dynamodb", endpoint_url=endpoint)
    dynamodb.create_table(
        TableName=table,
        AttributeDefinitions=[
            {"AttributeName": "PK", "AttributeType": "S"},
            {"AttributeName": "SK", "AttributeType": "S"},
        ],
        KeySchema=[
            {"AttributeName": "PK", "KeyType": "HASH"},
            {"AttributeName": "SK", "KeyType": "RANGE"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    dynamodb.update_time_to_live(
        TableName=table, TimeToLiveSpecification={"Enabled": True, "AttributeName": "ttl"}
    )
    session().client("s3", endpoint_url=endpoint).create_bucket(Bucket=bucket)


def saver(endpoint: str, table: str, bucket: str) -> DynamoDBSaver:
    """One process's checkpointer, configured as the README's production example."""
    return DynamoDBSaver(
        table_name=table,
        session=session(),
        region_name=REGION,
        endpoint_url=endpoint,
        ttl_seconds=TTL_S,
        enable_checkpoint_compression=True,
        s3_offload_config={"bucket_name": bucket, "endpoint_url": endpoint},
    )


def build_long_tools(tally: Tally) -> list[BaseTool]:
    """`bench/long_agent.py`'s tools: `start_build` pauses for a person's go-ahead,
    `build_part` returns a line or the same 30 KB build log."""

    @tool
    def start_build(tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Start building the parts, once a person agrees."""
        tally.tool_body("start_build", tool_call_id)
        answer = interrupt({"message": "Build the parts?"})
        return f"The person answered {answer}."

    @tool
    def build_part(
        n: int, tool_call_id: Annotated[str, InjectedToolCallId], big: bool = False
    ) -> str:
        """Build part n; returns its build log."""
        tally.tool_body("build_part", tool_call_id)
        return big_result(n) if big else f"part {n} built"

    return [start_build, build_part]


def build_long_graph(tally: Tally, checkpointer: DynamoDBSaver) -> Any:
    """The same loop with the long-run agent's tools and script (`bench/long_agent.py`)."""
    model = ScriptedChat(tally=tally, script=tuple(SCRIPT))
    return _loop(build_long_tools(tally), model, checkpointer)
