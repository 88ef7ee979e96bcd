"""Who calls an assistant's tool and what it may open: the server's policy (the dashboard's ServerPolicy: the projects
served, read-only, the reach of typed names), the bearer tokens of a team server, and the caller's role."""
from __future__ import annotations

import contextlib
import hmac
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from hibug_core.access import AccessDenied, Actor, acting_as
from hibug_core.errors import ConfigError
from hibug_core.serving.policy import ServerPolicy

TOKENS_TABLE = "mcp_tokens"  # [hibug.mcp_tokens] in the server's secrets: identity = "token"
MIN_TOKEN_LENGTH = 24


@dataclass(frozen=True)
class TokenBook:
    """Bearer tokens, each mapped to the identity it signs in as (its role comes from the server's roles, as a
    dashboard visitor's does). Tokens are compared in constant time and never logged, shown or stored."""

    identities: Mapping[str, str] = field(default_factory=dict, repr=False)  # token -> identity

    @classmethod
    def from_secrets(cls, secrets: Mapping) -> TokenBook:
        """From [hibug.mcp_tokens] (identity = "token"); a short or shared token is refused, naming the identity."""
        table = secrets.get("hibug", {}).get(TOKENS_TABLE, {})
        if not isinstance(table, Mapping):
            raise ConfigError(f"[hibug.{TOKENS_TABLE}] in the secrets must be a table: identity = \"token\"")
        identities: dict[str, str] = {}
        for identity, token in table.items():
            if not isinstance(token, str) or len(token.strip()) < MIN_TOKEN_LENGTH:
                raise ConfigError(f"[hibug.{TOKENS_TABLE}]: the token of '{identity}' must be a string of at least "
                                  f"{MIN_TOKEN_LENGTH} characters (e.g. `python -c \"import secrets; "
                                  "print(secrets.token_urlsafe(32))\"`)")
            if token.strip() in identities:
                raise ConfigError(f"[hibug.{TOKENS_TABLE}]: '{identity}' and '{identities[token.strip()]}' have the "
                                  "same token; give each person their own")
            identities[token.strip()] = str(identity).strip().casefold()
        return cls(identities)

    def __bool__(self) -> bool:
        return bool(self.identities)

    def identity(self, token: str) -> str | None:
        """The identity a presented token signs in as; None for an unknown one (every token compared, in constant
        time, so the time taken says nothing about which came close)."""
        found = None
        for known, identity in self.identities.items():
            if hmac.compare_digest(known.encode(), token.strip().encode()):
                found = identity
        return found


@dataclass(frozen=True)
class Served:
    """What one MCP server serves (the policy) and to whom (its tokens; none: whoever runs it, or reaches a
    loopback port)."""

    policy: ServerPolicy
    tokens: TokenBook = field(default_factory=TokenBook)

    def check_roles(self) -> None:
        """Refuse tokens whose identity holds no role: they could sign in and do nothing."""
        roles = self.policy.role_map()
        idle = sorted({i for i in self.tokens.identities.values() if roles.role_of(i) is None})
        if idle:
            raise ConfigError(f"{', '.join(idle)} ha{'ve' if len(idle) > 1 else 's'} a token but no role: give them "
                              "one in the roles file or [hibug.roles] (admin/editor/viewer = [...])")

    def actor(self, identity: str | None) -> Actor | None:
        """The caller: a token's identity with its role, else the anonymous visitor's role (None on one's own
        server: no limit, as on the command line)."""
        if identity is None and not self.policy.shared:
            return None
        role = self.policy.role_of(identity)
        if role is None:  # a token with no role is refused when the server starts; kept here as the last word
            raise AccessDenied(f"{identity or 'a caller without a token'} has no role on this server; ask its admin "
                               "for one")
        return Actor(identity or "anonymous", role, self.policy.reach())

    @contextlib.contextmanager
    def acting(self, identity: str | None) -> Iterator[Actor | None]:
        actor = self.actor(identity)
        with acting_as(actor):
            yield actor

    def project_names(self) -> list[str]:
        return list(self.policy.served_projects())

    def open(self, name: str | None, *, write: bool = False):
        """A served project by name (the only one when one is served and none is named); NotServed otherwise."""
        from hibug_core.serving.policy import NOT_SERVED, NotServed
        from hibug_core.store.project import Project

        served = self.policy.served_projects()
        if not name:
            if len(served) != 1:
                raise NotServed(f"name the project: one of {', '.join(served) or '(none served)'}")
            name = next(iter(served))
        if name not in served:
            raise NotServed(NOT_SERVED.replace("in the sidebar", "that list_projects gives"))
        return Project.open(served[name], read_only=not write or self.policy.read_only)

    def queue(self):
        """The server's one job queue (ServerPolicy.job_queue: the dashboard's)."""
        return self.policy.job_queue()
