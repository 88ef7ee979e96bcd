"""hibug for assistants: `hibug mcp` asked with the MCP SDK's own client over stdio and streamable HTTP, on each task's
demo: the numbers equal the CLI's (`hibug info`, `hibug slices`, `hibug compare`), writes follow the caller's role, a
bad argument is a tool error in words, and every answer and the tools' schemas stay within their bounds."""
from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hibug_core.cli import main

from compare_support import planted_pair

pytest.importorskip("mcp")

TOKEN_CHARS = 4  # an answer's size in tokens, counted the way assistants' budgets are usually reckoned
READ_ONLY = {"list_projects", "project_summary", "find_error_slices", "explain_slice", "slice_examples",
             "compare_models", "error_types", "tag_quality", "select_for_repair", "job_status", "review_board"}
WRITES = {"start_job", "review_slice"}


def _stdio(*arguments: str):
    from mcp import StdioServerParameters

    return StdioServerParameters(command=sys.executable, args=["-m", "hibug_core.cli", "mcp", *map(str, arguments)],
                                 env=dict(os.environ))  # this interpreter's settings (PYTHONPATH) reach the server


def _http(url: str, token: str | None):
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    return streamable_http_client(url, http_client=create_mcp_http_client(
        headers={"Authorization": f"Bearer {token}"} if token else None))


def run_async(coroutine):
    """The coroutine run to its end on a thread of its own (a browser test before may leave this thread's loop
    running)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def ask(server, *calls: tuple[str, dict]) -> list:
    """Each call's result (the SDK's CallToolResult), asked in one session."""
    from mcp import Client

    async def session():
        async with Client(server) as client:
            return [await client.call_tool(name, arguments) for name, arguments in calls]

    return run_async(session())


def said(result) -> dict:
    assert not result.is_error, result.content[0].text
    text = result.content[0].text
    assert len(text) / TOKEN_CHARS < 20_000
    return json.loads(text)


def refused(result) -> str:
    assert result.is_error
    text = result.content[0].text
    assert "Traceback" not in text and "File \"" not in text
    return text


def _cli(capsys, *arguments) -> str:
    capsys.readouterr()
    assert main(list(map(str, arguments))) in (0, 1)
    return capsys.readouterr().out


def test_the_tools_are_marked_and_their_schemas_stay_small(demo_project):
    from mcp import Client

    from hibug_core.assistants.served import Served
    from hibug_core.assistants.server import build_server
    from hibug_core.serving.policy import ServerPolicy

    async def listed():
        async with Client(build_server(Served(ServerPolicy.build(project=demo_project)))) as client:
            return (await client.list_tools()).tools

    tools = run_async(listed())
    assert {t.name for t in tools} == READ_ONLY | WRITES
    for t in tools:
        assert t.annotations.read_only_hint is (t.name in READ_ONLY), t.name
        assert t.description and t.title
    schemas = json.dumps([t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools])
    assert len(schemas) < 10_000
    assert '"title": "' not in json.dumps([t.input_schema for t in tools])  # pydantic's titles are left out


@pytest.fixture(params=["classification", "detection", "pose", "segmentation"])
def demo(request) -> Path:
    fixture = {"classification": "demo_project"}.get(request.param, f"{request.param}_demo")
    return request.getfixturevalue(fixture)


@pytest.mark.demos  # the object demos are built once, on the heavy worker (tests/conftest.py)
def test_each_demo_answers_over_stdio_and_http_as_the_cli_does(demo, tmp_path, capsys):
    info = json.loads(_cli(capsys, "info", demo, "--json"))
    _cli(capsys, "slices", demo, "--output", tmp_path / "slices.json")
    cli_slices = json.loads((tmp_path / "slices.json").read_text())
    summary, found, explained, first, second, errors, quality = ask(
        _stdio(demo), ("project_summary", {}), ("find_error_slices", {"page_size": 50}),
        ("explain_slice", {"slice": "1"}), ("slice_examples", {"slice": "1", "page_size": 3}),
        ("slice_examples", {"slice": "1", "page_size": 3, "cursor": "3"}), ("error_types", {}),
        ("tag_quality", {}))
    # the summary: every model's score per split as `hibug info` gives it, named in the task's measure
    summary = said(summary)
    measure = summary["measure"]
    assert {(r["model"], r["split"]): r[measure] for r in summary["scores"]} == {
        (r["model"], r["split"]): (r["mean_score"] if r["n"] else None) for r in info["scores"]}
    for model, figures in info.get("coco", {}).items():  # COCO's AP first, in the task's words ("mask AP")
        assert list(summary["coco"][model].values())[0] == figures["AP"]
    # the error slices of `hibug slices`, in its order, with the same statistics and bug types
    found = said(found)
    assert found["error_slices"] == len(cli_slices) and found["total"] == len(cli_slices)
    keys = ("description", "count", "failures", "bug_type", "reason")
    assert [{k: r[k] for k in keys} for r in found["rows"]] == [{k: r[k] for k in keys} for r in cli_slices[:50]]
    assert [r["score"] for r in found["rows"]] == pytest.approx([r["score"] for r in cli_slices[:50]])
    # the first slice explained: its numbers, type and evidence
    explained = said(explained)
    top = cli_slices[0]
    assert (explained["slice"], explained["count"], explained["failures"]) == (top["description"], top["count"],
                                                                               top["failures"])
    assert explained["reported"]["bug_type"] == top["bug_type"] and explained["what_went_wrong"]
    # its failures a page at a time, each with its picture; the second page goes on where the first ended
    pages = [said(first), said(second)]
    assert pages[0]["total"] == top["failures"] and pages[0]["next_cursor"] == "3"
    ids = [r["sample_id"] for p in pages for r in p["rows"]]
    assert len(ids) == len(set(ids)) == min(6, top["failures"])
    assert len(first.content) == 1 + len(pages[0]["rows"])  # one picture per sample
    assert first.content[1].mime_type in ("image/png", "image/jpeg")
    assert all(r["outcome"] and r["name"] for p in pages for r in p["rows"])
    # what went wrong: COCO's AP as imported, where the task has it
    errors = said(errors)
    assert errors["per_class"] and errors["what_went_wrong"]
    coco = info.get("coco", {})
    if coco:
        model = info["models"][0]
        assert list(errors["coco"].values())[0] == pytest.approx(
            next(v["AP"] for k, v in coco.items() if k == f"{model} (val)"))
    assert said(quality)["total"] >= 1
    # the same answers over streamable HTTP (one's own server on the loopback: no token needed)
    with http_server(demo) as url:
        over_http, examples = ask(_http(url, None), ("find_error_slices", {"page_size": 50}),
                                  ("slice_examples", {"slice": "1", "page_size": 3}))
    assert said(over_http)["rows"] == found["rows"]
    assert said(examples)["rows"] == pages[0]["rows"] and len(examples.content) == len(first.content)


def _two_models(task: str, request, folder: Path) -> Path:
    """A project with two models of the task: a seeded pair of classifiers, or an object demo's val split with its
    model's results and a version that drops a seeded 30% of the first class's detections."""
    import numpy as np

    if task == "classification":
        return planted_pair(folder)
    demo = request.getfixturevalue(f"{task}_demo") / "data"
    results = next(p for p in demo.glob("*_val.json") if not p.name.startswith(("instances", "people", "images")))
    truth = demo / ("people_val.json" if task == "pose" else "instances_val.json")
    rng = np.random.default_rng(0)
    worse = [r for r in json.loads(results.read_text()) if not (r["category_id"] == 1 and rng.random() < 0.3)]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "v2.json").write_text(json.dumps(worse))
    assert main(["new", str(folder / "p"), "--coco", str(truth), "--results", f"base={results}",
                 f"cand={folder / 'v2.json'}"]) == 0
    return folder / "p"


@pytest.mark.demos
@pytest.mark.parametrize("task", ["classification", "detection", "pose", "segmentation"])
def test_two_models_compared_over_stdio_as_hibug_compare_does(task, request, tmp_path, capsys):
    folder = _two_models(task, request, tmp_path)
    printed = _cli(capsys, "compare", folder, "--models", "base,cand")
    (compared,) = ask(_stdio(folder), ("compare_models", {"models": ["base", "cand"], "page_size": 50}))
    compared = said(compared)
    for row in compared["overall"]:
        line = next(line for line in printed.splitlines() if line.strip().startswith(row["model"] + " "))
        assert f"{row['score']:.1%}" in line and f"{row['error_slices']:,} error slices" in line
    counts = compared["slices"][0]
    assert (f"cand against base: {counts['worse']} slices worse, {counts['better']} better, of "
            f"{counts['compared']:,} compared") in printed
    for row in compared["rows"][:20]:
        assert re.search(rf"{row['change']}\s+{re.escape(row['description'])}\s+n={row['count']}\s", printed), row
    assert compared["shared"] == int(printed.split(" shared")[0].replace(",", ""))


def test_the_example_client_gets_the_clis_answers(demo_project, capsys):
    run = subprocess.run([sys.executable, "examples/ask_hibug.py", str(demo_project)], capture_output=True, text=True,
                         timeout=300, cwd=Path(__file__).parents[1])
    assert run.returncode == 0, run.stderr[-2000:]
    answers = json.loads(run.stdout)
    printed = _cli(capsys, "slices", demo_project, "--top", "5")
    top = answers["top_slices"][0]
    assert f"1. {top['description']}" in printed and top["bug_type"] in printed.splitlines()[1]
    assert answers["slice"]["count"] == top["count"] and answers["slice"]["bug_type"] == top["bug_type"]
    assert len(answers["examples"]) == 5


def test_bad_arguments_and_refusals_are_tool_errors_in_words(demo_project):
    results = ask(_stdio(demo_project), ("find_error_slices", {"max_depth": 9}),
                  ("find_error_slices", {"rank_by": "luck"}), ("project_summary", {"project": "../../etc"}),
                  ("find_error_slices", {"cursor": "abc"}), ("explain_slice", {"slice": "color = plaid"}),
                  ("explain_slice", {"slice": "99"}), ("start_job", {"kind": "slices"}),
                  ("start_job", {"kind": "tag", "params": {"encoder": "nothing-such"}}),
                  ("compare_models", {"models": ["shape-cnn"]}), ("review_slice", {}))
    words = [refused(r) for r in results]
    assert "max_depth" in words[0] and "4" in words[0]
    assert "rank_by" in words[1] and "confident_gap" in words[1]
    assert "No such project is served here" in words[2] and "etc" not in words[2].split("here")[1]
    assert "cursor" in words[3] and "next_cursor" in words[3]
    assert "plaid" in words[4]
    assert "99" in words[5] and "ranks" in words[5]
    assert "unknown job kind" in words[6]
    assert "encoder" in words[7]
    assert "models" in words[8]
    assert "name the slice" in words[9]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def http_server(*arguments):
    """`hibug mcp --http` on a free loopback port with these arguments, until the block ends: its URL."""
    port = _free_port()
    process = subprocess.Popen([sys.executable, "-m", "hibug_core.cli", "mcp", "--http", "--port", str(port),
                                *map(str, arguments)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert process.poll() is None, process.stdout.read()
                time.sleep(0.3)
        yield f"http://localhost:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=20)


@pytest.fixture
def team_server(tmp_path):
    """`hibug mcp --http` on a projects root holding one project, with a viewer's and an editor's token."""
    root = tmp_path / "root"
    root.mkdir()
    planted_pair(tmp_path / "made")
    (tmp_path / "made" / "p").rename(root / "shapes")
    tokens = {"viewer": "v" * 30, "editor": "e" * 30}
    secrets = tmp_path / "secrets.toml"
    secrets.write_text(f'[hibug.mcp_tokens]\n"vi@team.example" = "{tokens["viewer"]}"\n'
                       f'"ed@team.example" = "{tokens["editor"]}"\n'
                       '[hibug.roles]\nviewer = ["vi@team.example"]\neditor = ["ed@team.example"]\n')
    with http_server("--projects-root", root, "--secrets", secrets) as url:
        yield url, tokens


def test_a_team_server_over_http_checks_tokens_and_roles(team_server):
    import httpx2

    url, tokens = team_server
    # no token, or a wrong one: nothing is answered
    for headers in ({}, {"Authorization": "Bearer " + "x" * 30}):
        response = httpx2.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers={
            **headers, "Accept": "application/json, text/event-stream"})
        assert response.status_code == 401
    listed, summary, denied, board = ask(
        _http(url, tokens["viewer"]), ("list_projects", {}), ("project_summary", {"project": "shapes"}),
        ("review_slice", {"project": "shapes", "slice": "color = green", "comment": "mine"}),
        ("review_board", {"project": "shapes"}))
    assert [r["project"] for r in said(listed)["rows"]] == ["shapes"]
    assert "folder" not in json.dumps(said(summary)) and str(Path.cwd()) not in json.dumps(said(summary))
    assert "vi@team.example is a viewer here" in refused(denied) and "nothing was changed" in refused(denied)
    assert said(board)["total"] == 0
    (job,) = ask(_http(url, tokens["viewer"]), ("start_job", {"project": "shapes", "kind": "unseen slices"}))
    assert "may not start a job" in refused(job)
    put, commented, board, job = ask(
        _http(url, tokens["editor"]), ("review_slice", {"project": "shapes", "slice": "color = green"}),
        ("review_slice", {"project": "shapes", "review": 1, "comment": "green fails", "status": "confirmed bug"}),
        ("review_board", {"project": "shapes", "review": 1}),
        ("start_job", {"project": "shapes", "kind": "unseen slices", "params": {"method": "substitution"}}))
    assert said(put)["status"] == "open"
    assert said(commented)["status"] == "confirmed bug"
    thread = said(board)
    assert thread["rows"] == [{"author": "ed@team.example", "body": "green fails",
                               "created_at": thread["rows"][0]["created_at"]}]
    started = said(job)["job"]
    deadline = time.time() + 120
    while time.time() < deadline:  # the job runs in its own process, through the server's queue
        (status,) = ask(_http(url, tokens["viewer"]), ("job_status", {"project": "shapes", "job": started}))
        status = said(status)
        if status["status"] not in ("queued", "running"):
            break
        time.sleep(1)
    assert status["status"] == "done" and status["author"] == "ed@team.example" and status["summary"]


def test_a_server_the_network_reaches_needs_tokens(demo_project, tmp_path, capsys):
    assert main(["mcp", str(demo_project), "--http", "--address", "0.0.0.0"]) == 2
    assert "refusing to serve MCP on 0.0.0.0 without sign-in" in capsys.readouterr().err
    secrets = tmp_path / "s.toml"
    secrets.write_text(f'[hibug.mcp_tokens]\n"nobody@x.example" = "{"n" * 30}"\n'
                       '[hibug.roles]\nviewer = ["a@x.example"]\n')
    assert main(["mcp", str(demo_project), "--http", "--address", "0.0.0.0", "--secrets", str(secrets)]) == 2
    err = capsys.readouterr().err
    assert "nobody@x.example has a token but no role" in err and "n" * 30 not in err
    secrets.write_text('[hibug.mcp_tokens]\n"a@x.example" = "short"\n[hibug.roles]\nviewer = ["a@x.example"]\n')
    assert main(["mcp", str(demo_project), "--http", "--secrets", str(secrets)]) == 2
    err = capsys.readouterr().err
    assert "at least 24 characters" in err and "short" not in err.split("'a@x.example'")[1]


def test_over_stdio_the_one_caller_is_whoever_started_it(tmp_path):
    """A secrets file with a team server's tokens changes nothing over stdio: the person who started it may write."""
    folder = planted_pair(tmp_path / "made")
    secrets = tmp_path / "s.toml"
    secrets.write_text(f'[hibug.mcp_tokens]\n"vi@team.example" = "{"v" * 30}"\n'
                       '[hibug.roles]\nviewer = ["vi@team.example"]\n')
    (put,) = ask(_stdio(folder, "--secrets", secrets), ("review_slice", {"slice": "color = green", "comment": "mine"}))
    assert said(put)["status"] == "open"
