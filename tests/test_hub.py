"""Hub commands against a loopback stub of the Hub HTTP API (no network).

The stub (:class:`HubStub`) implements the endpoints huggingface_hub 2.x calls for
``create_repo``, ``create_commit`` (README metadata check, preupload, NDJSON commit
with inline base64 files), ``create_tag``, ``list_repo_files``, ``hf_hub_download``,
``run_job`` and ``create_scheduled_job``; it records every request and keeps
committed files and submitted job specs in memory.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from pipeline import hub
from pipeline.cli import build_parser, main
from tests.test_release import handmade_release

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "hf_fake_secret_123"
REPO = "someone/reading-lists"


class HubStub:
    """A tiny in-memory Hub: dataset repos, one branch (main), commits, tags."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.repos: dict[str, dict[str, bytes]] = {}
        self.commits: list[dict[str, Any]] = []
        self.tags: list[dict[str, Any]] = []
        self.head: dict[str, str] = {}
        self.jobs: list[dict[str, Any]] = []
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

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> HubStub:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    @staticmethod
    def _json(obj: Any, status: int = 200) -> tuple[int, dict[str, str], bytes]:
        return status, {"Content-Type": "application/json"}, json.dumps(obj).encode()

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
        m = re.fullmatch(r"/api/datasets/([^/]+/[^/]+)", path)
        if m and method == "GET":  # repo_info: the quick check before a download
            repo = m.group(1)
            if repo not in self.repos:
                return 404, {"X-Error-Code": "RepoNotFound", "X-Error-Message": "not found"}, b""
            return self._json({"id": repo, "sha": self.head.get(repo, "0" * 40), "siblings": []})
        m = re.fullmatch(r"/api/(jobs|scheduled-jobs)/([^/]+)", path)
        if m and method == "POST":
            kind, namespace = m.groups()
            data = json.loads(body)
            self.jobs.append({"kind": kind, "namespace": namespace, **data})
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


@pytest.fixture
def handmade(tmp_path: Path) -> Path:
    return handmade_release(tmp_path / "work")


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
    assert (
        main(["push", "--repo-id", REPO, "--release", str(release), "--tag", "v0.1.0", "--dry-run"])
        == 0
    )
    plan = json.loads(capsys.readouterr().out)
    expected = sorted(
        p.relative_to(release).as_posix()
        for p in release.rglob("*")
        if p.is_file() and p.name != "_SUCCESS.json"
    )
    assert [f["path"] for f in plan["files"]] == expected
    assert len(expected) == 12 and "README.md" in expected and "eval_metadata.json" in expected
    for f in plan["files"]:
        data = (release / f["path"]).read_bytes()
        assert f["bytes"] == len(data) and f["sha256"] == hashlib.sha256(data).hexdigest()
    assert (plan["repo_id"], plan["repo_type"], plan["tag"]) == (REPO, "dataset", "v0.1.0")


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
        done = hub.push_release(handmade / "release", REPO, None, False, stub.endpoint)
    assert done["commit"] == stub.commits[0]["oid"] and stub.tags == []
    assert "old.txt" in stub.repos[REPO] and "README.md" in stub.repos[REPO]


# --------------------------------------------------------------------- work tables
def test_push_work_then_pull_work_round_trip(
    handmade: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    src = handmade
    (src / "extract" / "_manifests").mkdir(parents=True, exist_ok=True)
    (src / "extract" / "_manifests" / "hand.json").write_text(json.dumps({"revision": "abc123"}))
    (src / "extract" / "papers").mkdir(parents=True, exist_ok=True)
    (src / "extract" / "papers" / ".dot-named-0123456789.parquet").write_bytes(b"PAR1")
    with HubStub() as stub:
        pushed = hub.push_work(src, "someone/work", "extract", (0, 1), stub.endpoint)
        assert pushed["shard_record"] and len(stub.commits) == 1
        record = json.loads(stub.repos["someone/work"]["shards/1/0.json"])
        assert record["input_revisions"] == ["abc123"] and record["shard"] == [0, 1]
        dest = tmp_path / "pulled"
        with pytest.raises(
            TimeoutError, match=r"shard record\(s\) \[0\] of 1 missing .* revision other"
        ):
            hub.pull_work(
                dest, "someone/work", "extract", shards=1, revision="other", endpoint=stub.endpoint
            )
        hub.pull_work(
            dest, "someone/work", "extract", shards=1, revision="abc123", endpoint=stub.endpoint
        )
        all_files = tmp_path / "all"
        hub.pull_work(all_files, "someone/work", "extract", endpoint=stub.endpoint)
    want = sorted(
        p.relative_to(src).as_posix() for p in (src / "extract").rglob("*") if p.is_file()
    )
    for d in (dest, all_files):
        got = sorted(p.relative_to(d).as_posix() for p in (d / "extract").rglob("*") if p.is_file())
        assert got == want
        assert all((d / f).read_bytes() == (src / f).read_bytes() for f in want)


# --------------------------------------------------------------------- submit
def test_submit_dry_run_prints_five_job_specs_of_the_project_cli(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    argv = [
        "submit",
        "--dry-run",
        "--fan-out",
        "4",
        "--schedule",
        "@monthly",
        "--namespace",
        "someone",
        "--tag",
        "v1.0.0",
    ]
    assert main(argv) == 0
    out = capsys.readouterr()
    assert TOKEN not in out.out + out.err
    jobs = json.loads(out.out)["jobs"]
    assert len(jobs) == 5
    parser = build_parser()
    for job in jobs:
        assert job["command"][:4] == ["python", "-m", "pipeline", "job"]
        args = parser.parse_args(job["command"][3:])  # the project's own CLI accepts it
        assert args.input == hub.DEFAULT_INPUT
        assert job["schedule"] == "@monthly" and job["kind"] == "scheduled job"
        assert job["secrets"] == ["HF_TOKEN"] and all(TOKEN not in v for v in job["env"].values())
        assert job["image"] == "hf.co/spaces/someone/survey-reading-lists-runner"
    shards = [parser.parse_args(j["command"][3:]) for j in jobs[:4]]
    assert [(a.step, a.shard, a.work_repo) for a in shards] == [
        ("shard", (i, 4), "someone/survey-reading-lists-work") for i in range(4)
    ]
    finish = parser.parse_args(jobs[4]["command"][3:])
    assert (finish.step, finish.shards, finish.repo_id, finish.tag) == (
        "finish",
        4,
        "someone/survey-reading-lists",
        "v1.0.0",
    )


def test_submit_dry_run_single_job_and_bad_schedule(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["submit", "--dry-run", "--repo-id", REPO]) == 0
    jobs = json.loads(capsys.readouterr().out)["jobs"]
    assert len(jobs) == 1 and jobs[0]["schedule"] is None and jobs[0]["kind"] == "job"
    assert jobs[0]["command"][3:6] == ["job", "--input", hub.DEFAULT_INPUT]
    assert "--step" in jobs[0]["command"] and "all" in jobs[0]["command"]
    with pytest.raises(SystemExit):
        main(["submit", "--dry-run", "--schedule", "every month"])


def test_submit_sends_scheduled_jobs_with_the_token_only_as_a_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    with HubStub() as stub:
        argv = ["submit", "--fan-out", "2", "--schedule", "0 3 1 * *", "--namespace", "someone"]
        assert main([*argv, "--endpoint", stub.endpoint]) == 0
    out = capsys.readouterr()
    assert TOKEN not in out.out + out.err
    assert [j["kind"] for j in stub.jobs] == ["scheduled-jobs"] * 3
    for job in stub.jobs:
        spec = job["jobSpec"]
        assert job["schedule"] == "0 3 1 * *" and job["namespace"] == "someone"
        assert spec["secrets"] == {"HF_TOKEN": TOKEN}  # sent to the Hub as a secret, nowhere else
        assert spec["command"][:4] == ["python", "-m", "pipeline", "job"]
        assert spec["spaceId"] == "someone/survey-reading-lists-runner"
    assert [j["jobSpec"]["labels"]["name"] for j in stub.jobs] == [
        "survey-reading-lists-extract-0-of-2",
        "survey-reading-lists-extract-1-of-2",
        "survey-reading-lists-finish",
    ]
    assert len(json.loads(out.out)["submitted"]) == 3
