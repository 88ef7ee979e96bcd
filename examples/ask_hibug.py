"""Ask hibug about a project through MCP only, with no language model: the questions an assistant asks first, answered
by `hibug mcp` over stdio (or a running HTTP server with --url and --token), printed as JSON.

    python examples/ask_hibug.py PROJECT [--compare BASELINE,CANDIDATE] [--slice 'color = blue']
    python examples/ask_hibug.py NAME --url http://server:8000/mcp --token "$HIBUG_MCP_TOKEN"
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys


async def ask(server, project: str | None, compare: list[str] | None, chosen: str | None) -> dict:
    from mcp import Client

    async with Client(server) as client:
        async def answer(tool: str, **arguments) -> dict:
            result = await client.call_tool(tool, {k: v for k, v in arguments.items() if v is not None})
            if result.is_error:
                return {"error": result.content[0].text}
            return json.loads(result.content[0].text)

        said: dict = {"summary": await answer("project_summary", project=project)}
        slices = await answer("find_error_slices", project=project, page_size=5)
        said["top_slices"] = [{k: row[k] for k in ("rank", "description", "count", "score", "bug_type")}
                              for row in slices.get("rows", [])]
        said["headline"] = slices.get("headline") or slices.get("error")
        target = chosen or (said["top_slices"][0]["description"] if said["top_slices"] else None)
        if target:
            explained = await answer("explain_slice", project=project, slice=target)
            said["slice"] = {k: explained.get(k) for k in ("slice", "count", "failures", "score", "error")}
            said["slice"]["bug_type"] = (explained.get("reported") or {}).get("bug_type")
            examples = await answer("slice_examples", project=project, slice=target, pictures=False, page_size=5)
            said["examples"] = [row["name"] + ": " + row["outcome"] for row in examples.get("rows", [])]
        if compare:
            compared = await answer("compare_models", project=project, models=compare, page_size=5)
            said["compare"] = {"overall": compared.get("overall"), "slices": compared.get("slices"),
                               "error": compared.get("error")}
        return said


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("project", help="the project folder (stdio), or its name on the HTTP server (--url)")
    parser.add_argument("--compare", help="two or more models, the baseline first: BASELINE,CANDIDATE")
    parser.add_argument("--slice", help="the slice to explain (default: the top error slice)")
    parser.add_argument("--url", help="a running `hibug mcp --http` server's address, ending in /mcp")
    parser.add_argument("--token", help="your bearer token on that server")
    args = parser.parse_args(argv)
    if args.url:
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        headers = {"Authorization": f"Bearer {args.token}"} if args.token else None
        server, project = streamable_http_client(args.url, http_client=create_mcp_http_client(headers=headers)), \
            args.project
    else:
        from mcp import StdioServerParameters

        server = StdioServerParameters(command=sys.executable, args=["-m", "hibug_core.cli", "mcp", args.project],
                                       env=dict(os.environ))  # the language-model settings hibug reads, if any
        project = None
    said = asyncio.run(ask(server, project, args.compare.split(",") if args.compare else None, args.slice))
    print(json.dumps(said, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
