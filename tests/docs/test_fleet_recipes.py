"""The fleet recipes of examples/fleet/ run as written: each file is read as YAML and its
steps (GitHub's `run:`, Argo's script and containers, the Indexed Job's container) are run in
bash against the test server, the runners of one run side by side as the engine starts
them, so a recipe cannot rot.

What stands in for the engine, and nothing else: the secrets are the test's DSNs (the
server the tenants are on, a control database of the test's own); the tenants' names get a
prefix of the test's own (the targets file's `tenant` becomes `<prefix>tenant`, so
discovery finds this test's databases only); the image's /fleet is the copy of the example;
package installs are the environment this test runs in (pip with PIP_NO_INDEX)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml

from queueguard.pg import scratch
from queueguard.pg.dsn import with_params

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
FLEET = ROOT / "examples" / "fleet"
TENANTS = ["canary", "0", "1", "2", "3", "4"]
_EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


@pytest.fixture
def recipe(tmp_path: Path, pg_admin_dsn: str) -> Iterator[dict[str, Any]]:
    prefix = f"qgfr{uuid.uuid4().hex[:6]}"
    work = tmp_path / "fleet"
    shutil.copytree(FLEET, work)
    targets = work / "fleet.toml"
    targets.write_text(targets.read_text().replace("tenant", f"{prefix}tenant"))
    names = [f"{prefix}tenant_{t}" for t in TENANTS]
    with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
        for name in names:
            conn.execute(f'CREATE DATABASE "{name}"')
    with scratch.ScratchDatabases(pg_admin_dsn, prefix="qgfrctl") as dbs:
        env = {
            **os.environ,
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
            "PIP_NO_INDEX": "1",
            "FLEET_SERVER_DSN": pg_admin_dsn,
            "QUEUEGUARD_CONTROL_DSN": dbs.create(),
        }
        try:
            yield {"dir": work, "env": env, "names": names, "admin": pg_admin_dsn}
        finally:
            for name in names:
                scratch.drop_database(pg_admin_dsn, name)


def _start(script: str, recipe: dict[str, Any], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        cwd=recipe["dir"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _bash(script: str, recipe: dict[str, Any], env: dict[str, str] | None = None) -> str:
    return _all([_start(script, recipe, env or recipe["env"])])[0]


def _all(runs: list[subprocess.Popen[str]]) -> list[str]:
    outs = []
    for run in runs:
        out, err = run.communicate(timeout=300)
        assert run.returncode == 0, f"exit {run.returncode}\n{out}\n{err}"
        outs.append(out)
    return outs


def _at_head(recipe: dict[str, Any]) -> None:
    for name in recipe["names"]:
        with psycopg.connect(with_params(recipe["admin"], dbname=name)) as conn:
            rows = conn.execute(
                "SELECT revision FROM queueguard_sqldir_ledger ORDER BY revision"
            ).fetchall()
        assert [r[0] for r in rows] == ["0001", "0002"], name


def _github(value: str, known: dict[str, str]) -> str:
    def one(match: re.Match[str]) -> str:
        assert match[1] in known, f"an expression the test does not know: {match[0]}"
        return known[match[1]]

    return _EXPRESSION.sub(one, value)


def test_the_github_actions_recipe_runs_green(recipe: dict[str, Any]) -> None:
    workflow = yaml.safe_load((FLEET / "github-actions.yml").read_text(encoding="utf-8"))
    jobs = workflow["jobs"]
    secrets = {
        "secrets.FLEET_SERVER_DSN": recipe["env"]["FLEET_SERVER_DSN"],
        "secrets.QUEUEGUARD_CONTROL_DSN": recipe["env"]["QUEUEGUARD_CONTROL_DSN"],
    }
    # the shards job writes the matrix to $GITHUB_OUTPUT
    output = recipe["dir"] / "github-output"
    env = {**recipe["env"], "GITHUB_OUTPUT": str(output)}
    for step in (s for s in jobs["shards"]["steps"] if "run" in s):
        _bash(step["run"], recipe, env)
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    matrix = json.loads(outputs["matrix"])
    assert "schemaVersion" not in matrix  # GitHub would take it for an axis
    upgrade = jobs["upgrade"]
    assert upgrade["strategy"]["fail-fast"] is False
    assert upgrade["strategy"]["matrix"] == "${{ fromJSON(needs.shards.outputs.matrix) }}"
    runners = []
    for entry in matrix["include"]:
        known = {**secrets, "matrix.shard": str(entry["shard"])}
        job_env = {
            **recipe["env"],
            **{k: _github(str(v), known) for k, v in upgrade["env"].items()},
        }
        script = "\n".join(_github(s["run"], known) for s in upgrade["steps"] if "run" in s)
        runners.append(_start(script, recipe, job_env))
    _all(runners)  # every shard ends with the run's exit code: 0
    claims = [
        json.loads(line)
        for f in recipe["dir"].glob("events-*.jsonl")
        for line in f.read_text().splitlines()
    ]
    claimed = sorted(e["target"] for e in claims if e["state"] == "running")
    assert claimed == sorted(recipe["names"])  # each tenant once, whichever shard took it
    verify = jobs["verify"]
    verify_env = {
        **recipe["env"],
        **{k: _github(str(v), secrets) for k, v in verify["env"].items()},
    }
    for step in (s for s in verify["steps"] if "run" in s):
        _bash(step["run"], recipe, verify_env)
    _at_head(recipe)


def _image(script: str, recipe: dict[str, Any]) -> str:
    """The image's /fleet is the example's copy here."""
    return script.replace("/fleet/", f"{recipe['dir']}/")


def test_the_argo_recipe_runs_green(recipe: dict[str, Any]) -> None:
    workflow = yaml.safe_load((FLEET / "argo-workflow.yml").read_text(encoding="utf-8"))
    templates = {t["name"]: t for t in workflow["spec"]["templates"]}
    steps = [group[0] for group in templates["fleet"]["steps"]]
    assert [s["name"] for s in steps] == ["shards", "upgrade", "verify"]
    assert steps[1]["withParam"] == "{{steps.shards.outputs.result}}"
    items = json.loads(_bash(templates["shards"]["script"]["source"], recipe))
    assert isinstance(items, list) and len(items) == 4
    container = templates["upgrade"]["container"]
    script = _image(container["args"][0], recipe)
    _all([_start(script, recipe, recipe["env"]) for _ in items])
    _bash(_image(templates["verify"]["container"]["args"][0], recipe), recipe)
    _at_head(recipe)


def test_the_kubernetes_indexed_job_runs_green(recipe: dict[str, Any]) -> None:
    job = yaml.safe_load((FLEET / "kubernetes-job.yml").read_text(encoding="utf-8"))
    spec = job["spec"]
    hint = json.loads(_bash("queueguard fleet matrix --shards 4 --for kubernetes", recipe))
    assert (spec["completions"], spec["parallelism"]) == (hint["completions"], hint["parallelism"])
    assert spec["completionMode"] == hint["completionMode"] == "Indexed"
    (container,) = spec["template"]["spec"]["containers"]
    script = _image(container["args"][0], recipe)
    pods = [
        _start(script, recipe, {**recipe["env"], "JOB_COMPLETION_INDEX": str(i)})
        for i in range(spec["completions"])
    ]
    _all(pods)
    _at_head(recipe)
