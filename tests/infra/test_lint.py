"""cfn-lint over every synthesized template: no error, and no warning left unexplained."""

from __future__ import annotations

from pathlib import Path

import pytest
from cfnlint.api import lint_file

from infra.wiring import Stacks

# Rule id -> why its findings are accepted. Anything else fails the test.
IGNORED_RULES = {
    "W3005": (
        "CDK gives each function (its own and the page copy's handler) an explicit "
        "DependsOn on its role in addition to the Fn::GetAtt of the role's ARN; the "
        "duplicate ordering is harmless."
    ),
}


@pytest.fixture(scope="module")
def templates(stacks: Stacks, outdir: Path) -> list[Path]:
    found = sorted(outdir.glob("*.template.json"))
    stack_list = (stacks.storage, stacks.web, stacks.api, stacks.web_content)
    assert {path.name for path in found} == {f"{s.artifact_id}.template.json" for s in stack_list}
    return found


def test_templates_pass_cfn_lint(templates: list[Path]) -> None:
    findings = [
        f"{path.name}: {match.rule.id} {match.message}"
        for path in templates
        for match in lint_file(path)
        if match.rule.id not in IGNORED_RULES
    ]
    assert findings == []


def test_every_ignored_rule_has_a_reason() -> None:
    assert all(reason.strip() for reason in IGNORED_RULES.values())
