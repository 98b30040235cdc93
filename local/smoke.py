"""`./dev smoke`: one real deployment, driven end to end, then torn down.

It deploys a stage of its own (`interlock:stage=smoke`, its data destroyed with it)
that runs the scripted model, which plays the approval its prompt asks for, unless
`--model` names another (`bedrock[:<id>]`, any `interlock:model` value). It creates a
test user with a TOTP second factor, drives one approval through the API (start a run,
read its card, approve it) and one through the stock AG-UI client
(`tests/e2e/stock/drive.mjs`, `@ag-ui/client`'s HttpAgent unmodified), prints the figures
as JSON, and destroys the stage, whatever happened before.

It needs an AWS account (the CLI's profile, bootstrapped; with `--model bedrock`, the
model enabled in Bedrock) and cannot run without one. `--plan` prints every step, with
the command or API call it makes, and touches nothing: that is what runs here.

    ./dev smoke --plan
    ./dev smoke [--stage smoke] [--model scripted] [--keep]
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import secrets
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parents[1]
DRIVER: Final = ROOT / "tests" / "e2e" / "stock" / "drive.mjs"
PROMPT: Final = "download the table"
# The scripted model calls the tool PROMPT asks for (one that needs an approval) every
# time, in any region and with no Bedrock access: the smoke test checks the deployment,
# not a model's judgement.
DEFAULT_MODEL: Final = "scripted"
# What the user pool's sign-in asks of a script: the admin flow, then the factor's
# setup on the first sign-in (the pool requires TOTP).
AUTH_FLOW: Final = "ADMIN_USER_PASSWORD_AUTH"
SETUP_CHALLENGE: Final = "MFA_SETUP"
FACTOR_CHALLENGE: Final = "SOFTWARE_TOKEN_MFA"


@dataclass
class Run:
    """What the steps share: the settings, the stack outputs, the user, the figures."""

    stage: str
    workdir: Path
    model: str = DEFAULT_MODEL
    outputs: dict[str, str] = field(default_factory=dict)
    username: str = ""
    password: str = ""
    token: str = ""
    figures: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Step:
    """One step: what it does, what it calls (shown by `--plan`), and the doing."""

    name: str
    calls: str
    act: Callable[[Run], None]
    always: bool = False  # runs even after an earlier step failed (the teardown)


def cdk_context(run: Run) -> dict[str, str]:
    """The context every `cdk` command of the run passes: its own stage, torn down with
    its data, and its model."""
    return {
        "interlock:stage": run.stage,
        "interlock:removalPolicy": "destroy",
        "interlock:model": run.model,
    }


def _cdk(run: Run, *args: str) -> list[str]:
    context = [part for item in cdk_context(run).items() for part in ("-c", "=".join(item))]
    return ["npx", "cdk", *args, *context]


def deploy(run: Run) -> None:
    outputs = run.workdir / "outputs.json"
    started = time.monotonic()
    subprocess.run(
        [
            *_cdk(run, "deploy", "--all"),
            "--require-approval",
            "never",
            "--outputs-file",
            str(outputs),
        ],
        cwd=ROOT,
        check=True,
    )
    run.figures["deploy_s"] = round(time.monotonic() - started)
    stacks = json.loads(outputs.read_text())
    run.outputs = {key: value for values in stacks.values() for key, value in values.items()}


def create_user(run: Run) -> None:
    cognito = _cognito()
    pool = run.outputs["UserPoolId"]
    # The pool signs users in by email (its username attribute).
    run.username = f"smoke-{secrets.token_hex(4)}@example.invalid"
    # Letters, digits and a symbol of each case: the pool's password rules.
    run.password = f"Sm0ke-{secrets.token_urlsafe(18)}!a"
    cognito.admin_create_user(
        UserPoolId=pool,
        Username=run.username,
        MessageAction="SUPPRESS",
        UserAttributes=[
            {"Name": "email", "Value": run.username},
            {"Name": "email_verified", "Value": "true"},
        ],
    )
    cognito.admin_set_user_password(
        UserPoolId=pool, Username=run.username, Password=run.password, Permanent=True
    )
    cognito.admin_add_user_to_group(UserPoolId=pool, Username=run.username, GroupName="reporter")


def sign_in(run: Run) -> None:
    cognito = _cognito()
    pool, client = run.outputs["UserPoolId"], run.outputs["UserPoolClientId"]
    answer = cognito.admin_initiate_auth(
        UserPoolId=pool,
        ClientId=client,
        AuthFlow=AUTH_FLOW,
        AuthParameters={"USERNAME": run.username, "PASSWORD": run.password},
    )
    if answer.get("ChallengeName") == SETUP_CHALLENGE:
        associated = cognito.associate_software_token(Session=answer["Session"])
        seed = associated["SecretCode"]
        verified = cognito.verify_software_token(
            Session=associated["Session"], UserCode=totp(seed), FriendlyDeviceName="smoke"
        )
        answer = cognito.admin_respond_to_auth_challenge(
            UserPoolId=pool,
            ClientId=client,
            ChallengeName=SETUP_CHALLENGE,
            Session=verified["Session"],
            ChallengeResponses={"USERNAME": run.username},
        )
    run.token = answer["AuthenticationResult"]["IdToken"]


def approve_through_the_api(run: Run) -> None:
    api = run.outputs["ApiUrl"].rstrip("/")
    chat = f"smoke-{secrets.token_hex(4)}"
    started = time.monotonic()
    body = {"threadId": chat, "runId": "r1", "messages": [_message(PROMPT)], "state": {}}
    paused = _post(f"{api}/runs", body, run.token)
    run.figures["api_pause_s"] = round(time.monotonic() - started, 2)
    interrupts = [e for e in paused if e.get("type") == "RUN_FINISHED"][-1]["outcome"]["interrupts"]
    request = _get(f"{api}/chats/{chat}/request", run.token)
    started = time.monotonic()
    resume = [
        {
            "interruptId": i["id"],
            "status": "resolved",
            "payload": {"decision": "approve"},
            "metadata": {"secret": request["secret"]},
        }
        for i in interrupts
    ]
    finished = _post(
        f"{api}/resume",
        {"threadId": chat, "runId": "r2", "messages": [], "resume": resume},
        run.token,
    )
    run.figures["api_resume_s"] = round(time.monotonic() - started, 2)
    outcome = [e for e in finished if e.get("type") == "RUN_FINISHED"][-1].get("outcome")
    if not outcome or outcome.get("type") != "success":
        raise RuntimeError(f"the approved run did not finish: {finished[-1]}")


def approve_through_a_stock_client(run: Run) -> None:
    api = run.outputs["ApiUrl"].rstrip("/")
    chat = f"smoke-{secrets.token_hex(4)}"
    started = time.monotonic()
    # The driver answers each command (a line on stdin) with what the client saw.
    with subprocess.Popen(
        ["node", str(DRIVER), f"{api}/runs", run.token, chat],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    ) as driver:
        assert driver.stdin is not None and driver.stdout is not None
        driver.stdin.write(f"run {PROMPT}\n")
        driver.stdin.flush()
        paused = json.loads(driver.stdout.readline())
        answers = {pending["id"]: {"decision": "approve"} for pending in paused["pending"]}
        driver.stdin.write(f"answer {json.dumps(answers)}\n")
        driver.stdin.close()
        finished = json.loads(driver.stdout.readline())
    run.figures["stock_client_s"] = round(time.monotonic() - started, 2)
    if not answers or finished["pending"] or finished["error"] or finished["runError"]:
        raise RuntimeError(f"the stock client's run did not finish: {finished['events']}")


def report(run: Run) -> None:
    print(json.dumps({"stage": run.stage, **run.figures}, indent=2))


def destroy(run: Run) -> None:
    subprocess.run([*_cdk(run, "destroy", "--all"), "--force"], cwd=ROOT, check=True)


STEPS: Final = (
    Step(
        "deploy a stage of its own",
        "npx cdk deploy --all -c interlock:stage=<stage> -c interlock:removalPolicy=destroy "
        "-c interlock:model=<model> --require-approval never --outputs-file <dir>/outputs.json",
        deploy,
    ),
    Step(
        "create a test user in the reporter group",
        "cognito-idp AdminCreateUser (no invitation sent), AdminSetUserPassword "
        "(permanent), AdminAddUserToGroup reporter",
        create_user,
    ),
    Step(
        "sign in, enrolling the TOTP second factor (MFA)",
        f"cognito-idp AdminInitiateAuth {AUTH_FLOW} -> {SETUP_CHALLENGE}: "
        "AssociateSoftwareToken, VerifySoftwareToken (a code computed from the seed), "
        f"AdminRespondToAuthChallenge {SETUP_CHALLENGE} -> the ID token "
        f"(later sign-ins answer {FACTOR_CHALLENGE} the same way)",
        sign_in,
    ),
    Step(
        "one approval through the API",
        f"POST <ApiUrl>/runs '{PROMPT}' (pauses), GET <ApiUrl>/chats/<chat>/request "
        "(the secret), POST <ApiUrl>/resume approve (finishes)",
        approve_through_the_api,
    ),
    Step(
        "one approval through a stock AG-UI client",
        "node tests/e2e/stock/drive.mjs <ApiUrl>/runs <token> <chat> "
        "(@ag-ui/client HttpAgent, unmodified: run, then resume every interrupt approved)",
        approve_through_a_stock_client,
    ),
    Step("print the figures", "JSON on stdout: deploy time, pause and resume times", report),
    Step(
        "destroy the stage, whatever happened",
        "npx cdk destroy --all -c interlock:stage=<stage> -c interlock:removalPolicy=destroy "
        "-c interlock:model=<model> --force",
        destroy,
        always=True,
    ),
)


def totp(seed: str, at: float | None = None, digits: int = 6, period: int = 30) -> str:
    """The RFC 6238 code of a base32 `seed` at time `at` (now by default)."""
    key = base64.b32decode(seed + "=" * (-len(seed) % 8), casefold=True)
    counter = int((time.time() if at is None else at) // period)
    mac = hmac.new(key, struct.pack(">Q", counter), hashlib.sha1).digest()
    offset = mac[-1] & 0x0F
    number = struct.unpack(">I", mac[offset : offset + 4])[0] & 0x7FFFFFFF
    return str(number % 10**digits).zfill(digits)


def plan(stage: str, model: str = DEFAULT_MODEL) -> str:
    """Every step, with what it calls, as `--plan` prints it."""
    lines = [f"./dev smoke: {len(STEPS)} steps against stage {stage!r} (nothing is run)"]
    for number, step in enumerate(STEPS, start=1):
        lines.append(f"{number}. {step.name}")
        lines.append(f"   {step.calls.replace('<stage>', stage).replace('<model>', model)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the smoke test, or print its plan."""
    parser = argparse.ArgumentParser(prog="./dev smoke", description=__doc__.splitlines()[0])
    parser.add_argument("--plan", action="store_true", help="print the steps and run none")
    parser.add_argument("--stage", default="smoke", help="the stage deployed and destroyed")
    parser.add_argument(
        "--model",
        default=DEFAULT_MODEL,
        help="the agent's model (interlock:model): scripted, or bedrock[:<id>] for a real one",
    )
    parser.add_argument("--keep", action="store_true", help="leave the stage deployed")
    args = parser.parse_args(argv)
    if args.plan:
        print(plan(args.stage, args.model))
        return 0
    with tempfile.TemporaryDirectory() as workdir:
        run = Run(args.stage, Path(workdir), args.model)
        failed: BaseException | None = None
        for step in STEPS:
            if (failed and not step.always) or (args.keep and step.act is destroy):
                continue
            print(f"-> {step.name}", file=sys.stderr)
            try:
                step.act(run)
            except Exception as exc:  # reported, then the teardown still runs
                failed = failed or exc
                print(f"   failed: {type(exc).__name__}: {exc}", file=sys.stderr)
    return 1 if failed else 0


def _cognito() -> Any:
    import boto3

    return boto3.client("cognito-idp")


def _message(text: str) -> dict[str, str]:
    return {"id": f"m-{secrets.token_hex(4)}", "role": "user", "content": text}


def _post(url: str, body: dict[str, Any], token: str) -> list[dict[str, Any]]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={
            "Authorization": token,
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
        },
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=300) as response:
        text = response.read().decode()
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


def _get(url: str, token: str) -> dict[str, Any]:
    request = urllib.request.Request(url, headers={"Authorization": token})
    with urllib.request.urlopen(request, timeout=30) as response:
        found: dict[str, Any] = json.loads(response.read())
    return found


if __name__ == "__main__":
    sys.exit(main())
