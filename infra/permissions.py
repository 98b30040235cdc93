"""What each function may do, spelled out action by action.

No `grant_*` helper is used: each one grants more than the code calls (table grants
include DescribeTable, ConditionCheckItem, the indexes...), and a role here should read
like a list of the calls its handler makes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sqs as sqs

from interlock.adapters.schema import (
    ADMIN_PARTITIONS,
    ANSWER_PREFIX,
    CLAIM_ATTRIBUTES,
    DELIVERY_PARTITIONS,
    EXPIRY_INDEX,
    INBOX_INDEX,
    LEASE_INDEX,
    LINK_ATTRIBUTES,
    NOTICE_INDEX,
    SNAPSHOT_PREFIX,
    STEP_PREFIX,
)
from interlock.api.routes import Function

from .settings import ModelChoice
from .storage import StorageRefs

# The API's functions come from the route table; the sweeper (the expiry finder) runs on
# a schedule and the settle function on its queue instead.
FunctionName = Function | Literal["sweeper", "settle"]

# Converse and ConverseStream, which the Strands Bedrock model calls, are authorized as
# these two actions.
MODEL_ACTIONS: Final = ("bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream")
LOG_ACTIONS: Final = ("logs:CreateLogStream", "logs:PutLogEvents")
TRACE_ACTIONS: Final = ("xray:PutTraceSegments", "xray:PutTelemetryRecords")
# `interlock.api.wiring.config` reads the per-agent document with GetParameter, without
# decryption: the document is not secret, so it is a String parameter and no KMS key is
# involved.
CONFIG_ACTIONS: Final = ("ssm:GetParameter",)
# The two ends of a tap handed from the channels function to the resume function: one
# signs it with the hand-over key (an HMAC key), the other verifies the signature.
HandOver = Literal["sign", "verify"]
HAND_OVER_ACTIONS: Final[Mapping[HandOver, str]] = {
    "sign": "kms:GenerateMac",
    "verify": "kms:VerifyMac",
}
# Prefixes of Bedrock's system-defined cross-region inference profiles. Such a profile
# routes each call to the model in one of several regions, chosen by Bedrock.
PROFILE_GEOGRAPHIES: Final = frozenset({"us", "us-gov", "eu", "apac", "jp", "au", "ca", "global"})


@dataclass(frozen=True)
class Rows:
    """Table actions allowed only on the items of some partitions, and (with
    `attributes`) only by requests that name no other attribute."""

    actions: tuple[str, ...]
    partitions: tuple[str, ...]
    attributes: tuple[str, ...] = ()

    def conditions(self) -> dict[str, Any]:
        # ForAllValues: every partition (and attribute) the request names must match.
        tests: dict[str, Any] = {"dynamodb:LeadingKeys": list(self.partitions)}
        found = {"ForAllValues:StringLike": tests}
        if self.attributes:
            found["ForAllValues:StringEquals"] = {"dynamodb:Attributes": list(self.attributes)}
        return found


@dataclass(frozen=True)
class Access:
    """The data-plane calls one function makes.

    Attributes:
        table_actions: DynamoDB actions on the table itself (not on its indexes).
        expiry_index_actions: DynamoDB actions on the sparse expiry index alone.
        reads: S3 key prefixes the function gets objects from.
        writes: S3 key prefixes the function puts objects under.
        lists: S3 key prefixes whose objects may be missing by design (aged out by the
            lifecycle rules). S3 answers a GET for a missing key with 404 NoSuchKey, which
            the blob store reads as "gone", only to a caller that may list the key;
            to anyone else it answers 403, which reads as a store failure.
        invokes_model: Whether the function runs the agent, and so calls Bedrock.
        inbox_index_actions: DynamoDB actions on the sparse inbox index alone.
        rows: Table actions allowed only on some rows (`Rows`).
        claims: Whether the function claims requests and writes a resumed run's records
            (`CLAIM_ATTRIBUTES`); any other is denied every write that names one.
        administers: Whether the function serves the administrators' routes; any other
            is denied every write to their rows (`ADMIN_PARTITIONS`, `LINK_ATTRIBUTES`).
        hand_over: Its end of a screened tap's hand-over: "sign" (the channels function,
            which hands it over) or "verify" (the resume function, which applies it);
            None for every other function, which may do neither with the key.
        reroutes: Whether the function reroutes overdue requests, changing whom they are
            addressed to (`ADDRESS_ATTRIBUTES`); any other is denied every update that
            names one.
    """

    table_actions: tuple[str, ...]
    expiry_index_actions: tuple[str, ...] = ()
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    lists: tuple[str, ...] = ()
    invokes_model: bool = False
    inbox_index_actions: tuple[str, ...] = ()
    rows: tuple[Rows, ...] = ()
    claims: bool = False
    administers: bool = False
    hand_over: HandOver | None = None
    reroutes: bool = False


# Every DynamoDB action that writes an item (a transaction's entries are authorized as
# these): the actions the Deny statements cover, whether or not a role is allowed them.
WRITE_ACTIONS: Final = (
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:BatchWriteItem",
)
# Whom an open request is addressed to: the user asked, and the role it was rerouted to
# (`RequestRecord.answerable_by`). The pause writes both with the pointer (a put); only
# a reroute changes one in place afterwards (`RequestStore.reroute`, an update). Any
# other update naming one could hand someone else's pending card to a user of its choice.
ADDRESS_ATTRIBUTES: Final = ("user_id", "route_role")


ACCESS: Final[Mapping[FunctionName, Access]] = {
    # Starts turns: reads the chat and its pointer (one batch read) and approvals, admits the turn
    # (a transaction that checks the chat has no open request, updates the chat and puts the user's
    # turn), writes audit events, the pointer and outbox rows fenced by the turn (transactions with
    # a ConditionCheck, or an Update of the chat's meta item when they carry events), holds a
    # concurrency slot for the turn (given back when it ends, `LimitStore.release_slot`), and saves
    # the paused agent's snapshot. Writes no approval rows (so no batch writes) and never reads a
    # snapshot.
    "run": Access(
        table_actions=(
            "dynamodb:BatchGetItem",
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:DeleteItem",
            "dynamodb:Query",
            "dynamodb:ConditionCheckItem",
        ),
        writes=(SNAPSHOT_PREFIX,),
        invokes_model=True,
    ),
    # Claims and finishes a request (read with its chat in one batch read): loads the snapshot,
    # writes the granted approval rows or deletes those a denial withdraws, records each step of
    # the journal as an item (a put in a transaction; a step too large for an item is an object
    # first) and reads them back on a takeover (a query), writes outbox rows, may pause again (a
    # new snapshot), stores the final answer and finishes with the transcript; every write after
    # the claim is fenced by it (transactions with a ConditionCheck on the pointer, so no batch
    # writes). Holds a concurrency slot as run does.
    "resume": Access(
        table_actions=(
            "dynamodb:BatchGetItem",
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:DeleteItem",
            "dynamodb:Query",
            "dynamodb:ConditionCheckItem",
        ),
        reads=(SNAPSHOT_PREFIX, ANSWER_PREFIX, STEP_PREFIX),
        writes=(SNAPSHOT_PREFIX, ANSWER_PREFIX, STEP_PREFIX),
        # A resume of an answered request replays its stored answer, which may have aged out.
        lists=(ANSWER_PREFIX,),
        invokes_model=True,
        claims=True,
        # A tap handed over by the channels function is applied only if its signature
        # verifies (`hand_over_statements`).
        hand_over="verify",
    ),
    # Reads and cancels open requests (rotating the card secret is an update), lists and
    # revokes approvals, replays stored answers; a cancel or a revoke appends an audit
    # event (`ChatStore.record`, a put). Runs no agent and writes no object.
    "requests": Access(
        table_actions=(
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:DeleteItem",
            "dynamodb:Query",
        ),
        reads=(ANSWER_PREFIX,),
        lists=(ANSWER_PREFIX,),
        inbox_index_actions=("dynamodb:Query",),
    ),
    # The expiry finder: queries the expiry, lease and notice indexes (KEYS_ONLY: chat ids
    # and times) and sends one message per overdue request, lapsed claim or chat with a
    # channel notice due to the settle queue (`queue_statements`).
    # Reads no item, writes nothing, runs no agent.
    "sweeper": Access(table_actions=(), expiry_index_actions=("dynamodb:Query",)),
    # Settles the overdue requests the finder queued: reads the pointer and reroutes or
    # claims it (updates), audits (a counter update and a put), then continues
    # the paused run as resume does (`continue_claimed`): a timed-out download card
    # withdraws its approval rows (a query, then conditional deletes), the snapshot is
    # loaded, approvals are read for the tools (a batch read by key:
    # `ApprovalStore.approved_among`), and the run either pauses again
    # (a snapshot, then the chained pointer, a put) or ends (the user's open-request slot
    # freed, an update; the answer object; the finish update; the assistant turn). Its
    # writes after the claim are fenced like resume's (transactions with a ConditionCheck);
    # a request a person answered before its worker died is continued with that answer,
    # which may grant rows (puts in such a transaction). It takes no turn slot or budget
    # and never replays an answer (no answer reads). It reads no index: the message names
    # the chat. It also carries on the chat's channel notices that are due (a query, then
    # conditional updates). Its queue's statements are `queue_statements`.
    "settle": Access(
        table_actions=(
            "dynamodb:BatchGetItem",
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:DeleteItem",
            "dynamodb:Query",
            "dynamodb:ConditionCheckItem",
        ),
        reads=(SNAPSHOT_PREFIX, STEP_PREFIX),
        writes=(SNAPSHOT_PREFIX, ANSWER_PREFIX, STEP_PREFIX),
        invokes_model=True,
        claims=True,
        # A request timed out under the `reroute` policy goes to another role's queue.
        reroutes=True,
    ),
    # The administrators' routes: the pre-approved list (`ADMIN`: puts, and deletes that
    # return what they removed) and the chat accounts' links (`LINK#…`, with the user's
    # list of them under `LINKS#…`: a query, then puts and deletes in one transaction).
    # Nothing else: no chat, no request, no user's slots.
    "admin": Access(
        table_actions=(),
        rows=(
            Rows(
                ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:DeleteItem", "dynamodb:Query"),
                ADMIN_PARTITIONS,
            ),
        ),
        administers=True,
    ),
    # The platforms' webhooks: reads the pointer and the tapper's link (gets), records
    # each delivery once (a conditional put, and only under `DELIVERY#…`). Claims
    # nothing: a tap that passes is signed and handed to the resume function.
    "channels": Access(
        table_actions=(),
        rows=(
            Rows(("dynamodb:GetItem",), ("CHAT#*", "LINK#*")),
            Rows(("dynamodb:PutItem",), DELIVERY_PARTITIONS),
        ),
        hand_over="sign",
    ),
}


def data_statements(access: Access, storage: StorageRefs) -> list[iam.PolicyStatement]:
    """The table and bucket statements for `access`, its denials last."""
    statements = []
    if access.table_actions:
        statements.append(
            iam.PolicyStatement(
                sid="Table", actions=list(access.table_actions), resources=[storage.table_arn]
            )
        )
    statements += _row_statements(access.rows, storage)
    for sid, actions, indexes in (
        # The finder's sparse indexes: overdue requests, claims whose lease lapsed, and
        # channel notices with a delivery due.
        ("ExpiryIndex", access.expiry_index_actions, (EXPIRY_INDEX, LEASE_INDEX, NOTICE_INDEX)),
        ("InboxIndex", access.inbox_index_actions, (INBOX_INDEX,)),
    ):
        if actions:
            statements.append(
                iam.PolicyStatement(
                    sid=sid,
                    actions=list(actions),
                    resources=[storage.index(index) for index in indexes],
                )
            )
    for sid, action, prefixes in (
        ("ReadPayloads", "s3:GetObject", access.reads),
        ("WritePayloads", "s3:PutObject", access.writes),
    ):
        if prefixes:
            resources = [storage.objects(prefix) for prefix in prefixes]
            statements.append(iam.PolicyStatement(sid=sid, actions=[action], resources=resources))
    if access.lists:
        statements.append(_list_statement(access.lists, storage))
    if access.table_actions or access.rows:
        statements += _denials(access, storage)
    return statements


def _row_statements(rows: Sequence[Rows], storage: StorageRefs) -> list[iam.PolicyStatement]:
    return [
        iam.PolicyStatement(
            sid=f"TableRows{number}",
            actions=list(row.actions),
            resources=[storage.table_arn],
            conditions=row.conditions(),
        )
        for number, row in enumerate(rows, start=1)
    ]


def _denials(access: Access, storage: StorageRefs) -> list[iam.PolicyStatement]:
    """What the design promises no other function does, as explicit denials.

    `dynamodb:Attributes` holds every top-level attribute a request names: its item's,
    its key's, and those its update, condition and projection expressions read or
    write. So a write naming a claim's attribute, even only in its condition, is denied,
    and a claim cannot be spelled without naming `lease_token`.
    """
    denials = []
    if not access.claims:
        claims = {"ForAnyValue:StringEquals": {"dynamodb:Attributes": list(CLAIM_ATTRIBUTES)}}
        denials.append(_deny("NoClaims", claims, storage))
    if not access.administers:
        # ForAnyValue: a request touching any such partition, even among others.
        rows = {"ForAnyValue:StringLike": {"dynamodb:LeadingKeys": list(ADMIN_PARTITIONS)}}
        links = {"ForAnyValue:StringEquals": {"dynamodb:Attributes": list(LINK_ATTRIBUTES)}}
        denials += [_deny("NoAdminRows", rows, storage), _deny("NoLinkRows", links, storage)]
    if not access.reroutes:
        # Updates alone: the pause writes a new pointer, its `user_id` included, with a
        # put (as the chain does), which stays allowed. An update naming one even in its
        # condition or projection is denied: no other function's update names either.
        address = {"ForAnyValue:StringEquals": {"dynamodb:Attributes": list(ADDRESS_ATTRIBUTES)}}
        denials.append(_deny("NoReaddressing", address, storage, ("dynamodb:UpdateItem",)))
    return denials


def _deny(
    sid: str,
    conditions: dict[str, Any],
    storage: StorageRefs,
    actions: Sequence[str] = WRITE_ACTIONS,
) -> iam.PolicyStatement:
    """Every write to the table's items that meets `conditions` (or those of `actions`
    alone), denied."""
    return iam.PolicyStatement(
        sid=sid,
        effect=iam.Effect.DENY,
        actions=list(actions),
        resources=[storage.table_arn],
        conditions=conditions,
    )


def _list_statement(prefixes: Sequence[str], storage: StorageRefs) -> iam.PolicyStatement:
    # S3 decides between 404 and 403 for a missing object by evaluating ListBucket with
    # the requested key as `s3:prefix`, so the condition admits exactly those GETs (and
    # listings under the same prefixes), never a listing of the whole bucket.
    return iam.PolicyStatement(
        sid="ListPayloads",
        actions=["s3:ListBucket"],
        resources=[storage.bucket_arn],
        conditions={"StringLike": {"s3:prefix": [f"{prefix}*" for prefix in prefixes]}},
    )


def config_statements(stack: Stack, parameter: str | None) -> list[iam.PolicyStatement]:
    """Reading the per-agent configuration parameter, and nothing when none is named.

    The parameter belongs to the operators, not to this app: they create it, and they may
    edit the document without a deployment (a new execution environment reads it).
    """
    if parameter is None:
        return []
    arn = stack.format_arn(
        service="ssm",
        resource="parameter",
        # A hierarchical name's leading "/" is the separator after `parameter` in the ARN.
        resource_name=parameter.removeprefix("/"),
        arn_format=ArnFormat.SLASH_RESOURCE_NAME,
    )
    return [iam.PolicyStatement(sid="AgentConfig", actions=list(CONFIG_ACTIONS), resources=[arn])]


def model_statements(stack: Stack, model: ModelChoice) -> list[iam.PolicyStatement]:
    """Permission to call exactly the configured model, and nothing for a scripted one.

    A foundation model id is scoped to that model in the stack's region. An inference
    profile needs the profile in the stack's region and the model in every region the
    profile may route to; that list belongs to Bedrock and grows, so the model's region is
    a wildcard, usable only through this one profile (the condition).
    """
    if model.provider != "bedrock":
        return []
    geography, _, base_model = model.model_id.partition(".")
    if geography not in PROFILE_GEOGRAPHIES:
        arn = _foundation_model_arn(stack, model.model_id, region=None)
        return [
            iam.PolicyStatement(sid="InvokeModel", actions=list(MODEL_ACTIONS), resources=[arn])
        ]
    profile = stack.format_arn(
        service="bedrock",
        resource="inference-profile",
        resource_name=model.model_id,
        arn_format=ArnFormat.SLASH_RESOURCE_NAME,
    )
    return [
        iam.PolicyStatement(sid="InvokeProfile", actions=list(MODEL_ACTIONS), resources=[profile]),
        iam.PolicyStatement(
            sid="InvokeModelThroughProfile",
            actions=list(MODEL_ACTIONS),
            resources=[_foundation_model_arn(stack, base_model, region="*")],
            conditions={"StringEquals": {"bedrock:InferenceProfileArn": profile}},
        ),
    ]


def runtime_statements(log_group: logs.ILogGroup) -> list[iam.PolicyStatement]:
    """Writing the function's own logs and its X-Ray segments."""
    return [
        # The group's ARN ends in `:*`, i.e. its log streams: the runtime names a new
        # stream for each execution environment, so no narrower resource exists.
        iam.PolicyStatement(
            sid="Logs", actions=list(LOG_ACTIONS), resources=[log_group.log_group_arn]
        ),
        # X-Ray has no resource-level permissions for segment uploads.
        iam.PolicyStatement(sid="Tracing", actions=list(TRACE_ACTIONS), resources=["*"]),
    ]


def secret_statements(
    secrets: Sequence[secretsmanager.ISecret], *, sid: str = "ChannelSecrets"
) -> list[iam.PolicyStatement]:
    """Reading `secrets`, and nothing else: the channels' (bot tokens, signing secrets)
    by default, or others under their own `sid` (a role's statement ids must differ)."""
    if not secrets:
        return []
    return [
        iam.PolicyStatement(
            sid=sid,
            actions=["secretsmanager:GetSecretValue"],
            resources=[secret.secret_arn for secret in secrets],
        )
    ]


def hand_over_statements(key: kms.IKey, end: HandOver) -> list[iam.PolicyStatement]:
    """One end of the signed hand-over of a screened tap, on the hand-over key alone: the
    channels function may only sign (GenerateMac), the resume function only verify
    (VerifyMac). The key belongs to no other function."""
    sid = {"sign": "SignHandOvers", "verify": "VerifyHandOvers"}[end]
    return [iam.PolicyStatement(sid=sid, actions=[HAND_OVER_ACTIONS[end]], resources=[key.key_arn])]


# What Lambda's SQS poller calls with the consuming function's role (the actions of
# AWS's AWSLambdaSQSQueueExecutionRole, on the one queue).
CONSUME_ACTIONS: Final[tuple[str, ...]] = (
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",
    "sqs:GetQueueAttributes",
)
# The finder reads the queue's depth (`SqsSettleQueue.waiting`), then sends in batches;
# SendMessageBatch is authorized as SendMessage.
ENQUEUE_ACTIONS: Final[tuple[str, ...]] = ("sqs:GetQueueAttributes", "sqs:SendMessage")


def queue_statements(queue: sqs.IQueue, *, consumes: bool) -> list[iam.PolicyStatement]:
    """The settle queue: the finder enqueues on it, the settle function consumes it.

    The queue is encrypted with an SQS-owned key, so neither needs a KMS permission.
    """
    sid, actions = (
        ("ConsumeSettles", CONSUME_ACTIONS) if consumes else ("EnqueueSettles", ENQUEUE_ACTIONS)
    )
    return [iam.PolicyStatement(sid=sid, actions=list(actions), resources=[queue.queue_arn])]


def forward_statements(resume: lambda_.IFunction) -> list[iam.PolicyStatement]:
    """The run function's one way to the resume function: invoking it, and nothing else
    (it hands over a resume posted to the one endpoint; the claim stays the resume's)."""
    return [
        iam.PolicyStatement(
            sid="HandOverResumes",
            actions=["lambda:InvokeFunction"],
            resources=[resume.function_arn],
        )
    ]


def wildcard_findings(
    stack: Stack,
    statements: Sequence[iam.PolicyStatement],
    reasons: Mapping[str | None, str] | None = None,
) -> dict[str, str]:
    """The AWS Solutions IAM5 finding of each wildcard resource, with the reason for it.

    The ids are derived from the statements themselves, so an acknowledgment always
    matches the resource it explains, in any stack or region. `reasons` by statement
    id: `WILDCARD_REASONS` unless given (the agent's tools add their own).

    Raises:
        ValueError: a wildcard in a statement whose need for one nobody has explained.
    """
    reasons = WILDCARD_REASONS if reasons is None else reasons
    findings = {}
    for statement in statements:
        for resource in statement.resources:
            flat = _flatten(stack.resolve(resource))
            if "*" not in flat:
                continue
            if statement.sid not in reasons:
                raise ValueError(f"statement {statement.sid!r} has an unexplained wildcard: {flat}")
            findings[f"AwsSolutions-IAM5[Resource::{flat}]"] = reasons[statement.sid]
    return findings


def star_reason(
    statements: Sequence[iam.PolicyStatement], reasons: Mapping[str | None, str] | None = None
) -> str | None:
    """Why a role grants on every resource, or None when it does not.

    cdk-nag's Serverless-LambdaStarPermissions flags an allowed resource that is exactly
    `*` (and an action `*` or `<service>:*`, which no statement here has). The reason
    names each such statement with its entry in `WILDCARD_REASONS`.

    Raises:
        ValueError: a `*` in a statement whose need for one nobody has explained.
    """
    starred = [
        statement
        for statement in statements
        if "*" in statement.resources
        or any(action == "*" or action.endswith(":*") for action in statement.actions)
    ]
    if not starred:
        return None
    reasons = WILDCARD_REASONS if reasons is None else reasons
    unexplained = [s.sid for s in starred if s.sid not in reasons]
    if unexplained:
        raise ValueError(f"statements {unexplained} grant on every resource, and nobody said why")
    named = " ".join(f"{s.sid}: {reasons[s.sid]}" for s in starred)
    return f"Every statement of this role names its resources but these. {named}"


# Statement id -> why its resources must contain a wildcard.
_OBJECT_KEYS = (
    "Object keys name a chat and an interrupt, known only at run time; the wildcard "
    "covers one key prefix of the one payload bucket."
)
WILDCARD_REASONS: Final[Mapping[str | None, str]] = {
    "ReadPayloads": _OBJECT_KEYS,
    "WritePayloads": _OBJECT_KEYS,
    "InvokeModelThroughProfile": (
        "A cross-region inference profile sends each call to the model in a region Bedrock "
        "picks from a list it maintains. The model is fixed; only its region is a wildcard, "
        "and the condition admits calls made through the configured profile alone."
    ),
    "Tracing": "X-Ray segment and telemetry uploads support no resource-level permissions.",
}


def _flatten(node: Any) -> str:
    """A resolved value as cdk-nag spells it in finding ids (its flattenCfnReference)."""
    if isinstance(node, str):
        return node.replace("${", "<").replace("}", ">")
    if isinstance(node, dict) and len(node) == 1:
        ((function, argument),) = node.items()
        if function == "Fn::Join":
            delimiter, items = argument
            return str(delimiter).join(_flatten(item) for item in items)
        if function in ("Fn::Sub", "Fn::ImportValue"):
            return _flatten(argument)
        if function == "Fn::GetAtt":
            return f"<{_flatten(argument[0])}.{_flatten(argument[1])}>"
        if function == "Ref":
            return f"<{_flatten(argument)}>"
    return json.dumps(node, separators=(",", ":"))


def _foundation_model_arn(stack: Stack, model_id: str, *, region: str | None) -> str:
    # Foundation models are AWS-owned: their ARNs carry no account.
    return stack.format_arn(
        service="bedrock",
        region=region,
        account="",
        resource="foundation-model",
        resource_name=model_id,
        arn_format=ArnFormat.SLASH_RESOURCE_NAME,
    )
