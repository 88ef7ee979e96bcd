"""The MCP server (the official SDK's MCPServer): each declared tool becomes one of its tools, run as the caller under
the server's policy; a refusal or a bad argument is a tool error in words, never a traceback."""
from __future__ import annotations

import base64
import inspect
import logging

from hibug_core.assistants.served import Served, TokenBook
from hibug_core.assistants.tools import TOOLS, AssistantTool, Call
from hibug_core.errors import HibugError

logger = logging.getLogger(__name__)
INSTRUCTIONS = ("hibug finds where and why a computer-vision model fails: slices of the data (tag combinations such "
                "as 'color = blue & size = small') on which it is significantly worse. Start with list_projects and "
                "project_summary, then find_error_slices; explain_slice and slice_examples say why; compare_models "
                "compares versions; select_for_repair and start_job repair.")


def _compact(schema):
    """A JSON schema without pydantic's titles, an optional value said once ({"type": "string"}, left out of
    "required", rather than anyOf string or null with a null default): assistants drop servers whose tool schemas are
    too large."""
    if isinstance(schema, list):
        return [_compact(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    options = schema.get("anyOf", ())
    if len(options) == 2 and {"type": "null"} in options and schema.get("default", 0) is None:
        kept = {k: v for k, v in schema.items() if k not in ("anyOf", "default")}
        return _compact({**next(o for o in options if o != {"type": "null"}), **kept})
    return {k: _compact(v) for k, v in schema.items() if k != "title" or not isinstance(v, str)}


def _caller() -> str | None:
    from mcp.server.auth.middleware.auth_context import get_access_token

    token = get_access_token()
    return token.client_id if token is not None else None


def _function(spec: AssistantTool, served: Served):
    """The tool's function as the SDK calls it: keyword arguments in, a CallToolResult out."""
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp_types import CallToolResult, ImageContent, TextContent

    def call(**arguments):
        identity = _caller()
        try:
            with served.acting(identity):
                if spec.needs_project:
                    with served.open(arguments.get("project"), write=not spec.read_only) as project:
                        answer = spec.answer(Call(project, served, identity), **arguments)
                else:
                    answer = spec.answer(Call(None, served, identity), **arguments)
                text = answer.text()
        except HibugError as error:
            raise ToolError(str(error)) from None
        content = [TextContent(type="text", text=text)] + [
            ImageContent(type="image", data=base64.b64encode(data).decode("ascii"), mime_type=mime)
            for data, mime in answer.pictures]
        return CallToolResult(content=content, structured_content=answer.values)

    call.__name__ = spec.name
    call.__signature__ = inspect.Signature([
        inspect.Parameter(a.name, inspect.Parameter.KEYWORD_ONLY, annotation=a.annotated(),
                          **({} if a.required else {"default": a.default})) for a in spec.arguments])
    return call


def build_server(served: Served, *, http_url: str | None = None):
    """The MCPServer with every tool; `http_url` (the server's own address) turns on bearer tokens when the served
    tokens are not empty."""
    from mcp.server.auth.provider import AccessToken
    from mcp.server.auth.settings import AuthSettings
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.tools import Tool
    from mcp_types import ToolAnnotations

    from hibug_core import __version__

    class Verifier:
        async def verify_token(self, token: str) -> AccessToken | None:
            identity = served.tokens.identity(token)
            if identity is None:
                logger.warning("refused an MCP request: unknown bearer token")
                return None
            return AccessToken(token="(not kept)", client_id=identity, scopes=[])

    auth = {}
    if served.tokens and http_url:
        auth = {"auth": AuthSettings(issuer_url=http_url, resource_server_url=f"{http_url}/mcp",
                                     validate_token_resource=False), "token_verifier": Verifier()}
    tools = []
    for spec in TOOLS:
        built = Tool.from_function(_function(spec, served), name=spec.name, title=spec.title,
                                   description=spec.description, structured_output=False,
                                   annotations=ToolAnnotations(read_only_hint=spec.read_only,
                                                               destructive_hint=False if not spec.read_only else None,
                                                               open_world_hint=False))
        tools.append(built.model_copy(update={"parameters": _compact(built.parameters)}))
    return MCPServer("hibug", instructions=INSTRUCTIONS, version=__version__, tools=tools, log_level="WARNING",
                     **auth)


TOKENS_HELP = ("Give each person a token in [hibug.mcp_tokens] of the secrets file (identity = \"token\") and a "
               "role in the roles file (see docs/assistants.md)")

def served_from_options(args) -> Served:
    """What `hibug mcp` serves, from its options: the policy (as `hibug serve` builds it, a token standing for a
    sign-in) and, over HTTP, the tokens (over stdio the one caller is whoever started it); refuses a server the network
    can reach without them, and tokens without roles."""
    from hibug_core.serving.options import policy_from_options, server_secrets

    secrets = server_secrets(args)
    tokens = TokenBook.from_secrets(secrets) if args.http else TokenBook()
    policy = policy_from_options(args, secrets, project=args.project, projects_root=args.projects_root,
                                 sign_in=bool(tokens), how="tokens are given ([hibug.mcp_tokens] in the secrets)")
    served = Served(policy, tokens)
    policy.check_exposure(served="MCP ", sign_in=TOKENS_HELP)
    served.check_roles()
    return served
