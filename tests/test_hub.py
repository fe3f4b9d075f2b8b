"""Hub commands against a loopback stub of the Hub HTTP API (no network).

The stub (:class:`HubStub`) implements the endpoints huggingface_hub 2.x calls for
``create_repo``, ``create_commit`` (README metadata check, preupload, NDJSON commit
with inline base64 files), ``create_tag``, ``list_repo_files``, ``hf_hub_download``,
``create_bucket``, ``dataset_info``, ``run_job`` / ``create_scheduled_job`` (as
``run_uv_job`` / ``create_scheduled_uv_job`` call them) and ``inspect_job`` (what
``wait_for_job`` polls); it records every request and keeps committed files, buckets
and submitted job specs in memory.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import subprocess
import sys
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from pipeline import jobs
from pipeline.cli import build_parser, main
from pipeline.core.release_files import BIBLIOGRAPHY_BASELINES_FILE
from pipeline.hub import publish
from tests.loopback import LoopbackStub
from tests.test_release import handmade_release

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "hf_fake_secret_123"
REPO = "someone/reading-lists"


class HubStub(LoopbackStub):
    """A tiny in-memory Hub: dataset repos, one branch (main), commits, tags."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.repos: dict[str, dict[str, bytes]] = {}
        self.commits: list[dict[str, Any]] = []
        self.tags: list[dict[str, Any]] = []
        self.head: dict[str, str] = {}
        self.jobs: list[dict[str, Any]] = []
        self.buckets: list[str] = []
        self.branches: dict[str, set[str]] = {}
        self.created_branches: list[dict[str, str]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                url = urlsplit(self.path)
                stub.requests.append(
                    {
                        "method": self.command,
                        "path": unquote(url.path),
                        "query": parse_qs(url.query),
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                        "body": body,
                    }
                )
                status, headers, payload = stub.route(self.command, unquote(url.path), body)
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)

            do_GET = do_POST = do_HEAD = do_PUT = _handle  # noqa: N815

        self.endpoint = self._serve(Handler)

    def route(self, method: str, path: str, body: bytes) -> tuple[int, dict[str, str], bytes]:
        if method == "POST" and path == "/api/repos/create":
            data = json.loads(body)
            repo = f"{data['organization']}/{data['name']}"
            if repo in self.repos:
                # like the Hub: the 409 body names the existing repo's url (create_repo(exist_ok=True) reads it)
                url = f"{self.endpoint}/datasets/{repo}"
                return self._json(
                    {"error": "You already created this dataset repo", "url": url}, 409
                )
            self.repos[repo] = {}
            return self._json({"url": f"{self.endpoint}/datasets/{repo}", "name": repo})
        if method == "POST" and path == "/api/validate-yaml":
            return self._json({"errors": [], "warnings": []})
        m = re.fullmatch(r"/api/datasets/([^/]+/[^/]+)/(preupload|commit|tag|tree)/([^/]+)", path)
        if m:
            repo, action, rev = m.groups()
            if repo not in self.repos:
                return self._json({"error": "Repository not found"}, 404)
            if action == "preupload":
                files = json.loads(body)["files"]
                return self._json(
                    {
                        "files": [
                            {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                            for f in files
                        ]
                    }
                )
            if action == "commit":
                lines = [json.loads(x) for x in body.splitlines() if x.strip()]
                files = {}
                for item in lines[1:]:
                    if item["key"] != "file":
                        return self._json(
                            {"error": f"stub: unsupported operation {item['key']}"}, 400
                        )
                    files[item["value"]["path"]] = base64.b64decode(item["value"]["content"])
                self.repos[repo].update(files)
                oid = hashlib.sha1(body).hexdigest()
                self.head[repo] = oid
                self.commits.append(
                    {"repo": repo, "revision": rev, "header": lines[0], "files": files, "oid": oid}
                )
                return self._json(
                    {
                        "commitUrl": f"{self.endpoint}/datasets/{repo}/commit/{oid}",
                        "commitOid": oid,
                        "pullRequestUrl": None,
                    }
                )
            if action == "tag":
                self.tags.append({"repo": repo, "revision": rev, **json.loads(body)})
                return self._json({})
            tree = [
                {"type": "file", "path": p, "size": len(b), "oid": hashlib.sha1(b).hexdigest()}
                for p, b in sorted(self.repos[repo].items())
            ]
            return self._json(tree)
        m = re.fullmatch(r"/api/buckets/([^/]+/[^/]+)", path)
        if m and method == "POST":
            url = f"{self.endpoint}/buckets/{m.group(1)}"
            if m.group(1) in self.buckets:
                return self._json({"error": "already exists", "url": url}, 409)
            self.buckets.append(m.group(1))
            return self._json({"url": url})
        m = re.fullmatch(r"/api/datasets/([^/]+/[^/]+)/branch/([^/]+)", path)
        if m and method == "POST":  # create_branch
            repo, branch = m.groups()
            self.branches.setdefault(repo, {"main"}).add(branch)
            self.created_branches.append({"repo": repo, "branch": branch})
            return self._json({})
        m = re.fullmatch(r"/api/datasets/([^/]+/[^/]+)(?:/revision/([^/]+))?", path)
        if m and method == "GET":  # repo_info: the quick check before a download
            repo, rev = m.groups()
            if repo not in self.repos:
                return 404, {"X-Error-Code": "RepoNotFound", "X-Error-Message": "not found"}, b""
            known = self.branches.get(repo, {"main"}) | {self.head.get(repo)}
            if rev is not None and rev not in known:
                error = {"X-Error-Code": "RevisionNotFound", "X-Error-Message": "no such revision"}
                return 404, error, b""
            return self._json({"id": repo, "sha": self.head.get(repo, "0" * 40), "siblings": []})
        m = re.fullmatch(r"/api/jobs/([^/]+)/([^/]+)", path)
        if m and method == "GET":  # inspect_job, what wait_for_job polls
            owner = {"id": "u1", "name": m.group(1), "type": "user"}
            return self._json({"id": m.group(2), "owner": owner, "status": {"stage": "COMPLETED"}})
        m = re.fullmatch(r"/api/(jobs|scheduled-jobs)/([^/]+)", path)
        if m and method == "POST":
            kind, namespace = m.groups()
            data = json.loads(body)
            # run_job posts the spec itself, create_scheduled_job {"jobSpec": ..., "schedule": ...}
            spec = data if kind == "jobs" else data["jobSpec"]
            self.jobs.append({"kind": kind, "namespace": namespace, **data, "jobSpec": spec})
            owner = {"id": "u1", "name": namespace, "type": "user"}
            if kind == "jobs":
                return self._json(
                    {"id": f"job{len(self.jobs)}", "owner": owner, "status": {"stage": "RUNNING"}}
                )
            return self._json({"id": f"sched{len(self.jobs)}", "owner": owner, **data})
        m = re.fullmatch(r"/datasets/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
        if m and method in ("GET", "HEAD"):
            repo, _, file = m.groups()
            content = self.repos.get(repo, {}).get(file)
            if content is None:
                return (
                    404,
                    {"X-Error-Code": "EntryNotFound", "X-Error-Message": "Entry not found"},
                    b"",
                )
            headers = {
                "X-Repo-Commit": self.head.get(repo, "0" * 40),
                "ETag": f'"{hashlib.sha1(content).hexdigest()}"',
            }
            if method == "HEAD":
                headers["X-Linked-Size"] = str(len(content))
            return 200, headers, content
        return self._json({"error": f"stub: no route for {method} {path}"}, 404)


# what the card of a release for REPO names: push refuses a card holding a placeholder
CARD_CONFIG = {"repo_id": REPO, "authors": ["Doe, Jane"], "year": 2026}


@pytest.fixture
def handmade(tmp_path: Path) -> Path:
    """A release built from hand-made tables (no extract manifests: provenance unknown, so
    push needs --allow-synthetic), its card naming REPO, authors and year."""
    return handmade_release(tmp_path / "work", CARD_CONFIG)


def _env(stub: HubStub, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING"))}
    env.update(HF_ENDPOINT=stub.endpoint, HF_TOKEN=TOKEN, HF_HOME=str(tmp_path / "hf_home"))
    env.update(HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_DISABLE_XET="1", PYTHONPATH=str(ROOT))
    return env


def _files_containing(root: Path, needle: bytes) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


# --------------------------------------------------------------------- push
def test_push_dry_run_lists_exactly_the_release_files(
    handmade: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    release = handmade / "release"
    args = ["push", "--repo-id", REPO, "--release", str(release), "--tag", "v0.1.0", "--dry-run"]
    assert main([*args, "--allow-synthetic"]) == 0
    plan = json.loads(capsys.readouterr().out)
    expected = sorted(
        p.relative_to(release).as_posix()
        for p in release.rglob("*")
        if p.is_file() and p.name != "_SUCCESS.json"
    )
    assert [f["path"] for f in plan["files"]] == expected
    assert len(expected) == 18 and "README.md" in expected and "eval_metadata.json" in expected
    assert "METHODS.md" in expected
    assert "works.parquet" in expected  # bibliography resolution reads it from the Hub files
    # the judgment-side baselines are published like the reading lists' judgments
    assert BIBLIOGRAPHY_BASELINES_FILE in expected
    assert "figures/tier_distribution.png" in expected  # the card's figure is published too
    for f in plan["files"]:
        data = (release / f["path"]).read_bytes()
        assert f["bytes"] == len(data) and f["sha256"] == hashlib.sha256(data).hexdigest()
    assert (plan["repo_id"], plan["repo_type"], plan["tag"]) == (REPO, "dataset", "v0.1.0")
    assert (plan["revision"], plan["commit_message"], plan["provenance"]) == (
        "main", "Release 0.1.0", "unknown",
    )  # fmt: skip
    # without --allow-synthetic a release of unknown provenance is refused, in one line
    assert main(args) == 2


def test_push_makes_one_commit_and_one_tag_and_never_leaks_the_token(
    handmade: Path, tmp_path: Path
) -> None:
    release = handmade / "release"
    files = {
        p.relative_to(release).as_posix(): p.read_bytes() for p in release.rglob("*") if p.is_file()
    }
    files.pop("_SUCCESS.json")
    cmd = [
        sys.executable,
        "-m",
        "pipeline",
        "push",
        "--repo-id",
        REPO,
        "--release",
        str(release),
        "--tag",
        "v0.1.0",
        "--allow-synthetic",
    ]
    with HubStub() as stub:
        proc = subprocess.run(
            cmd, cwd=tmp_path, env=_env(stub, tmp_path), capture_output=True, timeout=120
        )
    assert proc.returncode == 0, proc.stderr.decode()
    calls = [(r["method"], r["path"]) for r in stub.requests]
    assert calls == [
        ("POST", "/api/repos/create"),
        ("POST", "/api/validate-yaml"),
        ("POST", f"/api/datasets/{REPO}/preupload/main"),
        ("POST", f"/api/datasets/{REPO}/commit/main"),
        ("POST", f"/api/datasets/{REPO}/tag/{stub.commits[0]['oid']}"),
    ]
    assert len(stub.commits) == 1 and stub.commits[0]["files"] == files
    assert stub.commits[0]["header"]["value"]["summary"] == "Release 0.1.0"
    assert stub.tags == [
        {
            "repo": REPO,
            "revision": stub.commits[0]["oid"],
            "tag": "v0.1.0",
            "message": "Release 0.1.0",
        }
    ]
    assert json.loads(stub.requests[0]["body"]) == {
        "name": "reading-lists",
        "organization": "someone",
        "type": "dataset",
    }
    # the token goes to the Hub in the Authorization header, and nowhere else
    assert {r["headers"].get("authorization") for r in stub.requests} == {f"Bearer {TOKEN}"}
    assert TOKEN.encode() not in proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["commit"] == stub.commits[0]["oid"]
    assert _files_containing(tmp_path, TOKEN.encode()) == []
    assert _files_containing(handmade, TOKEN.encode()) == []


def test_push_to_an_existing_repo_still_commits(
    handmade: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    with HubStub() as stub:
        stub.repos[REPO] = {"old.txt": b"old"}
        done = publish.push_release(
            handmade / "release", REPO, None, False, stub.endpoint, allow_synthetic=True
        )
    assert done["commit"] == stub.commits[0]["oid"] and stub.tags == []
    assert "old.txt" in stub.repos[REPO] and "README.md" in stub.repos[REPO]


def test_push_to_a_branch_with_a_commit_message_as_hf_upload_does(
    handmade: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--revision BRANCH commits to that branch (created from main when missing, as `hf
    upload --revision` does), --commit-message / --commit-description are the commit's text."""
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    argv = ["push", "--repo-id", REPO, "--release", str(handmade / "release"), "--allow-synthetic",
            "--revision", "v1-candidate", "--commit-message", "Release candidate",
            "--commit-description", "built from the hand-made tables", "--endpoint"]  # fmt: skip
    with HubStub() as stub:
        assert main([*argv, stub.endpoint]) == 0
        assert main([*argv, stub.endpoint]) == 0  # the branch exists now: not created again
    assert stub.created_branches == [{"repo": REPO, "branch": "v1-candidate"}]
    assert [c["revision"] for c in stub.commits] == ["v1-candidate", "v1-candidate"]
    header = stub.commits[0]["header"]["value"]
    assert (header["summary"], header["description"]) == (
        "Release candidate", "built from the hand-made tables",
    )  # fmt: skip


@pytest.fixture(scope="module")
def demo_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pipeline import api

    out = tmp_path_factory.mktemp("demo")
    api.demo(out, workers=1, config=None)
    return out / "release"


def test_push_refuses_the_demo_release_naming_allow_synthetic(
    demo_release: Path, tmp_path: Path
) -> None:
    """The demo is built from synthetic papers: push (and its dry run) refuses it in one line
    that names --allow-synthetic; with the flag it is refused for its placeholder card."""
    from tests.test_cli_errors import _env as cli_env
    from tests.test_cli_errors import _one_line_failure, _run

    args = ["push", "--dry-run", "--repo-id", REPO, "--release", str(demo_release)]
    proc = _run(args, cli_env(tmp_path), tmp_path)
    line = _one_line_failure(proc)
    assert proc.returncode == 2 and "--allow-synthetic" in line and "synthetic paper(s)" in line
    line = _one_line_failure(_run([*args, "--allow-synthetic"], cli_env(tmp_path), tmp_path))
    assert "placeholder" in line and "OWNER/" in line and "[release] repo_id" in line


def test_push_dry_run_passes_a_release_of_the_real_sample_records(tmp_path: Path) -> None:
    """A release built only from the real unarXive records of tests/fixtures (its config
    naming the repo, authors and year) goes through push --dry-run without --allow-synthetic."""
    from pipeline import api
    from pipeline.core.config import load_config
    from tests.conftest import PREVIEW_2024, SAMPLE_2022
    from tests.test_cli_errors import _env as cli_env
    from tests.test_cli_errors import _run

    out = tmp_path / "real"
    cfg = load_config(overrides={"release": CARD_CONFIG})
    api.run([SAMPLE_2022.parent, PREVIEW_2024.parent], out, config=cfg, workers=1)
    meta = json.loads((out / "release" / "eval_metadata.json").read_text())
    assert meta["provenance"]["verdict"] == "real" and meta["provenance"]["synthetic_papers"] == 0
    proc = _run(["push", "--dry-run", "--repo-id", REPO, "--release", str(out / "release")],
                cli_env(tmp_path), tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert plan["dry_run"] and plan["provenance"] == "real" and plan["repo_id"] == REPO
    # to another repo than the card names: refused
    proc = _run(["push", "--dry-run", "--repo-id", "someone/else", "--release",
                 str(out / "release")], cli_env(tmp_path), tmp_path)  # fmt: skip
    assert proc.returncode == 2 and "someone/else" in proc.stderr


# --------------------------------------------------------------------- submit
INPUT_REPO = "ines-besrour/unarxive_2024"
INPUT_SHA = "c0ffee" * 6 + "beef"
CONSTRAINTS = ROOT / "constraints.txt"


def _volumes(input_revision: str, code_revision: str) -> list[dict[str, Any]]:
    return [
        {
            "type": "dataset",
            "source": INPUT_REPO,
            "mountPath": "/data",
            "revision": input_revision,
            "readOnly": True,
        },
        {
            "type": "bucket",
            "source": "someone/survey-reading-lists-work",
            "mountPath": "/work",
            "readOnly": False,
        },
        {
            "type": "dataset",
            "source": "someone/survey-reading-lists-code",
            "mountPath": "/code",
            "revision": code_revision,
            "readOnly": True,
        },
    ]


def _uv(script_args: list[str]) -> list[str]:
    deps = jobs.pinned_dependencies(CONSTRAINTS)
    return ["uv", "run", *[a for d in deps for a in ("--with", d)], "--python", "3.11"] + [
        "python",
        *script_args,
    ]


BASE = ["-m", "pipeline", "job", "--input", "/data", "--out", "/work"]
PUBLISH = ["--repo-id", "someone/survey-reading-lists"]


def test_dependencies_are_the_runtime_closure_pinned_from_constraints() -> None:
    deps = jobs.pinned_dependencies(CONSTRAINTS)
    names = {d.split("==")[0].lower() for d in deps}
    assert {"polars", "pyarrow", "msgspec", "huggingface_hub", "regex"} <= names
    assert not names & {"pytest", "ruff", "hypothesis"}  # dev tools stay out
    pins = {ln.strip() for ln in CONSTRAINTS.read_text().splitlines()}
    assert "polars==2.1.0" in deps and "pyarrow==26.0.1" in deps
    from importlib.metadata import version

    assert all(d in pins or d == f"{d.split('==')[0]}=={version(d.split('==')[0])}" for d in deps)


def test_submit_dry_run_prints_the_full_specs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    cfg = _card_config(tmp_path)
    argv = ["submit", "--dry-run", "--namespace", "someone", "--constraints", str(CONSTRAINTS)]
    # a config that leaves the card's authors and year unset is refused before any Job runs
    assert main([*argv]) == 2
    assert "does not set [release] authors, year" in capsys.readouterr().err
    argv += ["--config", str(cfg)]
    assert main([*argv, "--fan-out", "4", "--schedule", "@monthly"]) == 0
    out = capsys.readouterr()
    assert TOKEN not in out.out + out.err
    plan = json.loads(out.out)
    assert f"pipeline_config (from {cfg})" in plan["code_upload"]
    assert "pipeline/jobs/step.py" in plan["code_upload"] and plan["wait_for_shards"] is None
    specs = plan["jobs"]
    assert len(specs) == 5
    for spec in specs:
        assert spec["volumes"] == _volumes("main", "<commit of the code upload>")
        assert spec["secrets"] == ["HF_TOKEN"] and spec["schedule"] == "@monthly"
        assert spec["env"] == {"PYTHONPATH": "/code", "PYTHONUNBUFFERED": "1"}
        assert spec["dependencies"] == jobs.pinned_dependencies(CONSTRAINTS)
        assert spec["kind"] == "scheduled uv job"
        # the project's own parser accepts what the Job runs
        build_parser().parse_args(spec["command"][spec["command"].index("pipeline") + 1 :])
    with_cfg = [*BASE, "--config", "/code/pipeline_config"]
    assert [s["command"] for s in specs] == [
        _uv([*with_cfg, "--step", "shard", "--shard", f"{i}/4"]) for i in range(4)
    ] + [_uv([*with_cfg, "--step", "finish", "--wait", "43200", *PUBLISH])]
    assert [(s["flavor"], s["timeout"], s["attempts"]) for s in specs] == [
        ("cpu-upgrade", "1d", 2)
    ] * 4 + [("cpu-xl", "2d", 1)]
    # a one-off run pins the input commit when submitting; a fan-out waits with wait_for_job
    assert main([*argv, "--fan-out", "4"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["wait_for_shards"] == "wait_for_job"
    assert plan["jobs"][0]["volumes"][0]["revision"] == "<commit main is at when submitting>"
    assert main(["submit", "--dry-run", "--schedule", "every month"]) == 2
    assert main([*argv, "--schedule", "@monthly", "--tag", "v1"]) == 2
    assert "--tag with --schedule" in capsys.readouterr().err


def test_submit_publishes_to_the_repo_the_config_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README has the user set [release] repo_id in my.toml, then run submit without
    --repo-id: the release goes to that repo (it was refused as not NAMESPACE/survey-...)."""
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    cfg = tmp_path / "my.toml"
    cfg.write_text(
        "[release]\nrepo_id = 'someone/my-benchmark'\nauthors = ['Doe, Jane']\nyear = 2026\n"
    )
    argv = ["submit", "--dry-run", "--namespace", "someone", "--constraints", str(CONSTRAINTS)]
    assert main([*argv, "--config", str(cfg), "--schedule", "@monthly"]) == 0
    (spec,) = json.loads(capsys.readouterr().out)["jobs"]
    command = spec["command"]
    assert command[command.index("--repo-id") + 1] == "someone/my-benchmark"
    # an explicit --repo-id that differs from the config's is still refused
    assert main([*argv, "--config", str(cfg), "--repo-id", "someone/other"]) == 2
    assert "make them the same" in capsys.readouterr().err


def _card_config(tmp_path: Path) -> Path:
    """A config naming the release repo, authors and year: what submit asks for."""
    cfg = tmp_path / "my.toml"
    cfg.write_text(
        "[release]\nrepo_id = 'someone/survey-reading-lists'\nauthors = ['Doe, Jane']\n"
        "year = 2026\n"
    )
    return cfg


def _submit(
    stub: HubStub, tmp_path: Path, *extra: str, secrets: dict[str, str] | None = None
) -> dict[str, Any]:
    stub.repos[INPUT_REPO] = {}
    stub.head[INPUT_REPO] = INPUT_SHA
    cmd = [sys.executable, "-m", "pipeline", "submit", "--namespace", "someone"]
    cmd += ["--constraints", str(CONSTRAINTS), *extra]
    env = {**_env(stub, tmp_path), **(secrets or {})}
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    values = [TOKEN, *(secrets or {}).values()]
    for value in values:
        assert value.encode() not in proc.stdout + proc.stderr
        assert _files_containing(tmp_path, value.encode()) == []
    for job in stub.jobs:  # the secrets travel as the Job's secrets, in no other field
        assert job["jobSpec"]["secrets"] == {"HF_TOKEN": TOKEN, **(secrets or {})}
        rest = {k: v for k, v in job["jobSpec"].items() if k != "secrets"}
        for value in values:
            assert value not in json.dumps(rest) and value not in json.dumps(job.get("schedule"))
    assert {r["headers"].get("authorization") for r in stub.requests} == {f"Bearer {TOKEN}"}
    return json.loads(proc.stdout)["submitted"]


def _sent(stub: HubStub) -> list[tuple[str, list[str], list[dict[str, Any]]]]:
    return [(j["kind"], j["jobSpec"]["command"], j["jobSpec"]["volumes"]) for j in stub.jobs]


def test_submit_one_run_uploads_code_creates_the_bucket_and_pins_the_input(
    tmp_path: Path,
) -> None:
    cfg = _card_config(tmp_path)
    with HubStub() as stub:
        done = _submit(stub, tmp_path, "--config", str(cfg), "--tag", "v1")
    code = stub.commits[0]
    assert code["repo"] == "someone/survey-reading-lists-code"
    assert code["files"]["pipeline_config"] == cfg.read_bytes()
    assert (
        code["files"]["pipeline/jobs/step.py"]
        == (ROOT / "pipeline" / "jobs" / "step.py").read_bytes()
    )
    assert stub.buckets == ["someone/survey-reading-lists-work"]
    script = [*BASE, "--config", "/code/pipeline_config", "--step", "all", *PUBLISH, "--tag", "v1"]
    assert _sent(stub) == [("jobs", _uv(script), _volumes(INPUT_SHA, code["oid"]))]
    spec = stub.jobs[0]["jobSpec"]
    assert spec["environment"] == {"PYTHONPATH": "/code", "PYTHONUNBUFFERED": "1"}
    assert (spec["flavor"], spec["timeoutSeconds"], spec["labels"]) == (
        "cpu-upgrade",
        86400,
        {"name": "survey-reading-lists"},
    )
    assert done["input"] == {"repo": INPUT_REPO, "revision": INPUT_SHA}


def test_submit_passes_the_openalex_key_as_a_secret_of_every_job(tmp_path: Path) -> None:
    # the submitter's OPENALEX_API_KEY reaches the Jobs' openalex stage as a secret, and
    # the dry run names it without its value
    key = {"OPENALEX_API_KEY": "oa-fake-key-456"}
    with HubStub() as stub:
        _submit(stub, tmp_path, "--fan-out", "2", "--poll", "0.01", "--config",
                str(_card_config(tmp_path)), secrets=key)  # fmt: skip
        assert len(stub.jobs) == 3
        proc = subprocess.run(
            [sys.executable, "-m", "pipeline", "submit", "--namespace", "someone", "--dry-run",
             "--constraints", str(CONSTRAINTS), "--config", str(_card_config(tmp_path))],
            cwd=tmp_path, env={**_env(stub, tmp_path), **key}, capture_output=True, timeout=120,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    assert b"oa-fake-key-456" not in proc.stdout + proc.stderr
    specs = json.loads(proc.stdout)["jobs"]
    assert all(s["secrets"] == ["HF_TOKEN", "OPENALEX_API_KEY"] for s in specs)


def test_submit_fan_out_of_4_waits_for_the_shards_then_finishes(tmp_path: Path) -> None:
    with HubStub() as stub:
        _submit(stub, tmp_path, "--fan-out", "4", "--poll", "0.01", "--config",
                str(_card_config(tmp_path)))  # fmt: skip
    code = stub.commits[0]["oid"]
    base = [*BASE, "--config", "/code/pipeline_config"]
    assert _sent(stub) == [
        ("jobs", _uv([*base, "--step", "shard", "--shard", f"{i}/4"]), _volumes(INPUT_SHA, code))
        for i in range(4)
    ] + [
        (
            "jobs",
            _uv([*base, "--step", "finish", "--wait", "43200", *PUBLISH]),
            _volumes(INPUT_SHA, code),
        )
    ]
    calls = [(r["method"], r["path"]) for r in stub.requests]
    finish = calls.index(("POST", "/api/jobs/someone"), len(calls) - 1)
    polled = {p for m, p in calls[:finish] if m == "GET" and p.startswith("/api/jobs/someone/")}
    assert polled == {f"/api/jobs/someone/job{i}" for i in range(1, 5)}  # wait_for_job


def test_submit_schedule_creates_scheduled_uv_jobs_on_the_input_branch(tmp_path: Path) -> None:
    with HubStub() as stub:
        done = _submit(stub, tmp_path, "--fan-out", "4", "--schedule", "@monthly", "--config",
                       str(_card_config(tmp_path)))  # fmt: skip
    code = stub.commits[0]["oid"]
    assert [k for k, _, _ in _sent(stub)] == ["scheduled-jobs"] * 5
    assert all(v == _volumes("main", code) for _, _, v in _sent(stub))
    assert [j["schedule"] for j in stub.jobs] == ["@monthly"] * 5
    finish = [*BASE, "--config", "/code/pipeline_config", "--step", "finish", "--wait", "43200"]
    assert _sent(stub)[4][1] == _uv([*finish, *PUBLISH])
    assert not any(r["path"].startswith("/api/jobs/someone/") for r in stub.requests)
    assert len(done["jobs"]) == 5
