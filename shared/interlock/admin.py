"""The administrator's command: manage the pre-approved sites and packages.

    python -m interlock.admin list
    python -m interlock.admin grant site data.example.org --by ops@example.org
    python -m interlock.admin revoke package numpy

It writes the store directly, with the operator's own AWS credentials, so it needs no
token: whoever may write the table may change the list (deployed, through the admin
route instead). `INTERLOCK_TABLE` and `INTERLOCK_BUCKET` name the storage, as for the
functions; `AWS_ENDPOINT_URL` points it at a local emulator.
"""

from __future__ import annotations

import argparse
import json
import sys

from interlock import errors
from interlock.adapters.factory import stores_from_env
from interlock.manage import subject_of
from interlock.timing import SystemClock


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    approvals = stores_from_env().approvals
    try:
        if args.action == "list":
            rows = [
                {"kind": a.subject.kind, "name": a.subject.name, "grantedBy": a.granted_by}
                for a in approvals.admin_list()
            ]
            print(json.dumps({"preapproved": rows}, indent=1))
            return 0
        subject = subject_of(args.kind, args.name)
        if args.action == "grant":
            approvals.admin_grant([subject], args.by, SystemClock().now_ms())
        elif not approvals.admin_revoke(subject):
            print(f"{subject.kind} {subject.name} is not pre-approved", file=sys.stderr)
            return 1
    except errors.InterlockError as refused:
        print(f"refused: {refused}", file=sys.stderr)
        return 2
    print(f"{args.action}: {subject.kind} {subject.name}")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="interlock.admin", description=__doc__)
    actions = parser.add_subparsers(dest="action", required=True)
    actions.add_parser("list", help="show the pre-approved list")
    for action in ("grant", "revoke"):
        sub = actions.add_parser(action, help=f"{action} one site or package")
        sub.add_argument("kind", choices=("site", "package"))
        sub.add_argument("name")
        if action == "grant":
            sub.add_argument("--by", default="operator", help="who granted it (recorded)")
    return parser


if __name__ == "__main__":
    sys.exit(main())
