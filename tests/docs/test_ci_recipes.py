"""The CI recipes of examples/ci/ run as written: each file is read as YAML, its job's shell
steps (GitHub's `run:`, GitLab's `before_script` and `script`) are executed in bash, in a copy
of the example project, against the embedded server, so a recipe cannot rot.

What stands in for the CI machine, and nothing else: the job's database URLs point at a
scratch database and the server of this test; GitHub's `${{ }}` expressions and GitLab's
predefined variables get test values; the posting is stubbed at the network boundary (a fake
`gh` and `curl` on PATH that record their arguments and the body they would send, and answer
the listing of comments); package installs are the environment this test already runs in
(pip runs with PIP_NO_INDEX, so the requirement must be met by the installed queueguard; the
GitLab job's apt-get is a recording stub: psql is on this machine).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CI = ROOT / "examples" / "ci"
MARKER = "<!-- queueguard:plan -->"
GITHUB_EXPRESSIONS = {"github.token": "test-token", "github.event.pull_request.number": "7"}
_EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")

#: the stubs at the network boundary: each call's argv goes to $STUB_LOG as one JSON line, a
#: body file it would send (`body=@FILE`, `body@FILE`) to $STUB_BODIES/<n>.md; a listing of
#: comments answers $STUB_EXISTING (an id to edit), else nothing
STUB = r"""#!/usr/bin/env python3
import json, os, sys
argv = sys.argv[1:]
with open(os.environ["STUB_LOG"], "a") as log:
    log.write(json.dumps([os.path.basename(sys.argv[0]), *argv]) + "\n")
for arg in argv:
    for prefix in ("body=@", "body@"):
        if arg.startswith(prefix):
            n = len(os.listdir(os.environ["STUB_BODIES"]))
            with open(arg[len(prefix):]) as src:
                body = src.read()
            with open(os.path.join(os.environ["STUB_BODIES"], f"{n}.md"), "w") as out:
                out.write(body)
existing = os.environ.get("STUB_EXISTING", "")
if os.path.basename(sys.argv[0]) == "gh" and "--jq" in argv:
    print(existing)
elif os.path.basename(sys.argv[0]) == "curl" and not {"-X", "--request"} & set(argv):
    marker = "<!-- queueguard:plan -->"
    print(json.dumps([{"id": int(existing), "body": marker}] if existing else []))
"""


@pytest.fixture
def project(tmp_path: Path, make_db: Callable[..., str], pg_admin_dsn: str) -> dict[str, Any]:
    """A copy of the example project, the stubs on PATH, a target database to restore into."""
    if shutil.which("psql") is None:
        pytest.skip("psql is not installed (Debian: apt-get install postgresql-client)")
    work = tmp_path / "project"
    shutil.copytree(CI / "db", work / "db")
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    for name in ("gh", "curl", "apt-get"):
        (stubs / name).write_text(STUB)
        (stubs / name).chmod(0o755)
    (tmp_path / "bodies").mkdir()
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(stubs), str(Path(sys.executable).parent), os.environ["PATH"]]),
        "STUB_LOG": str(tmp_path / "calls.jsonl"),
        "STUB_BODIES": str(tmp_path / "bodies"),
        "PIP_NO_INDEX": "1",
    }
    return {"dir": work, "env": env, "target": make_db(), "admin": pg_admin_dsn, "tmp": tmp_path}


def _on_this_machine(project: dict[str, Any], env: dict[str, str]) -> dict[str, str]:
    return {**env, "ADMIN_DSN": project["admin"], "TARGET_DSN": project["target"]}


def _bash(script: str, project: dict[str, Any], env: dict[str, str]) -> None:
    done = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        cwd=project["dir"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"{script}\nexit {done.returncode}\n{done.stdout}\n{done.stderr}"


def _calls(project: dict[str, Any]) -> list[list[str]]:
    log = project["tmp"] / "calls.jsonl"
    lines = log.read_text().splitlines() if log.exists() else []
    return [json.loads(line) for line in lines]


def _posted(project: dict[str, Any]) -> list[str]:
    bodies = sorted((project["tmp"] / "bodies").iterdir())
    return [b.read_text() for b in bodies]


def _expressions(value: str) -> str:
    def one(match: re.Match[str]) -> str:
        assert match[1] in GITHUB_EXPRESSIONS, f"an expression the test does not know: {match[0]}"
        return GITHUB_EXPRESSIONS[match[1]]

    return _EXPRESSION.sub(one, value)


def _check_the_comment(comment: str) -> None:
    assert comment.startswith("### ") and "queueguard plan" in comment.splitlines()[0]
    assert comment.rstrip().endswith(MARKER)
    assert "Revision `002`" in comment  # the one revision the fixture's target lacks


@pytest.mark.slow
def test_the_github_actions_recipe_runs_green(project: dict[str, Any]) -> None:
    workflow = yaml.safe_load((CI / "github-actions.yml").read_text(encoding="utf-8"))
    (job,) = workflow["jobs"].values()
    env = {**project["env"], **{k: _expressions(str(v)) for k, v in job["env"].items()}}
    env = {**_on_this_machine(project, env), "GITHUB_REPOSITORY": "acme/app"}
    steps = [s for s in job["steps"] if "run" in s]
    post = steps[-1]
    assert post.get("if") == "always()"  # the comment goes up even when plan failed
    post_env = {**env, **{k: _expressions(str(v)) for k, v in post["env"].items()}}
    for step in steps[:-1]:
        _bash(step["run"], project, env)
    _bash(post["run"], project, post_env)
    # the next push finds its comment by the marker and edits it
    _bash(post["run"], project, {**post_env, "STUB_EXISTING": "4242"})
    first, second = _posted(project)
    _check_the_comment(first)
    assert first == second == (project["dir"] / "plan.md").read_text()
    body = ["-F", "body=@plan.md"]
    assert [c for c in _calls(project) if c[0] == "gh" and "--jq" not in c] == [
        ["gh", "api", "--method", "POST", "repos/acme/app/issues/7/comments", *body],
        ["gh", "api", "--method", "PATCH", "repos/acme/app/issues/comments/4242", *body],
    ]


@pytest.mark.slow
def test_the_gitlab_ci_recipe_runs_green(project: dict[str, Any]) -> None:
    recipe = yaml.safe_load((CI / "gitlab-ci.yml").read_text(encoding="utf-8"))
    job = recipe["migrations"]
    env = {**project["env"], **{k: str(v) for k, v in job["variables"].items()}}
    env = _on_this_machine(project, env)
    env |= {
        "CI_API_V4_URL": "https://gitlab.example/api/v4",
        "CI_PROJECT_ID": "12",
        "CI_MERGE_REQUEST_IID": "7",
        "GITLAB_TOKEN": "test-token",
    }
    # GitLab runs before_script and script as one shell session, stopping at the first failure
    _bash("\n".join([*job["before_script"], *job["script"]]), project, env)
    (comment,) = _posted(project)
    _check_the_comment(comment)
    calls = _calls(project)
    assert ["apt-get", "install", "-y", "-qq", "postgresql-client"] in calls
    notes = "https://gitlab.example/api/v4/projects/12/merge_requests/7/notes"
    (post,) = [c for c in calls if c[0] == "curl" and "POST" in c]
    assert post[-1] == notes and "body@plan.md" in post and "PRIVATE-TOKEN: test-token" in post


def test_every_queueguard_command_of_every_recipe_parses() -> None:
    """The upgrade-CI workflow (two full `verify` runs and a staging rehearsal: not run here)
    included: each `queueguard …` line its steps hold is a command line queueguard accepts."""
    import shlex

    from queueguard.cli.parser import build_parser

    found = 0
    for path in sorted(CI.glob("*.yml")):
        text = path.read_text(encoding="utf-8").replace("\\\n", " ")
        for line in re.findall(r"^\s*(?:run:\s*|-\s*)?(queueguard\s.+)$", text, re.MULTILINE):
            argv = shlex.split(line.split(">")[0].split("||")[0])
            build_parser().parse_args(argv[1:])
            found += 1
    assert found >= 6
