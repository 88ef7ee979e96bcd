"""Who is acting and what they may do: roles (viewer, editor, admin), the acting person of a dashboard run, and the
one check every write, job and project change passes."""
from __future__ import annotations

import contextlib
import contextvars
import enum
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from hibug_core.errors import HibugError


class Role(enum.IntEnum):
    """Each role may do everything the ones below it may."""

    VIEWER = 1  # browse and export
    EDITOR = 2  # edit attributes, tags and reviews; run jobs
    ADMIN = 3  # create and delete projects; cancel anyone's job

    @classmethod
    def named(cls, name: str) -> Role:
        try:
            return cls[str(name).strip().upper()]
        except KeyError:
            raise ValueError(f"unknown role {name!r}; use one of viewer, editor, admin") from None

    @property
    def label(self) -> str:
        return self.name.lower()


REACH_ENV = "HIBUG_REACH"  # a job's Reach, handed to its process by the dashboard that started it
WHAT_NEEDS = {Role.EDITOR: "edit this project or run jobs", Role.ADMIN: "create or delete projects"}


class AccessDenied(HibugError, PermissionError):
    """The acting person's role does not allow what was asked; nothing was changed."""


@dataclass(frozen=True)
class Reach:
    """What names typed on a shared dashboard may reach on its server: files (checkpoints, model folders) only inside
    `roots` once links are followed, no code of the visitor's choosing, and no language-model server but the one the
    server was configured with."""

    roots: tuple[str, ...] = ()
    llm_base_url: str | None = None

    def check_spec(self, kind: str, spec: str, runs_code: bool = False) -> None:
        """Raise AccessDenied when a model spec (family:argument:...) runs code or names a file outside the roots."""
        if runs_code:
            raise AccessDenied(f"{kind} '{spec}' would run code of its own on the server, which a shared dashboard "
                               "does not allow; run it with the command line on the server")
        for part in spec.split(":")[1:]:
            path = Path(part.strip()).expanduser()
            if part.strip() and (path.is_absolute() or part.strip().startswith(".") or path.exists()):
                real = os.path.realpath(path)
                if not any(real == root or real.startswith(root.rstrip(os.sep) + os.sep) for root in self.roots):
                    raise AccessDenied(f"{kind} '{spec}' names a file outside this server's data roots; put it "
                                       "inside one of them (or the project's folder)")

    def check_url(self, what: str, url: str | None) -> None:
        if url is not None and url.rstrip("/") != (self.llm_base_url or "").rstrip("/"):
            raise AccessDenied(f"{what}: a shared dashboard contacts only the language-model server it was started "
                               "with (HIBUG_LLM_BASE_URL); leave the URL empty")

    def with_roots(self, *roots) -> Reach:
        return Reach(tuple(dict.fromkeys([*self.roots, *(os.path.realpath(r) for r in roots)])), self.llm_base_url)

    def to_environment(self) -> dict[str, str]:
        return {REACH_ENV: json.dumps({"roots": list(self.roots), "llm_base_url": self.llm_base_url})}


@dataclass(frozen=True)
class Actor:
    """A person acting through a served dashboard: the identity recorded in the audit log, their role, and what the
    names they type may reach on the server (None: anything, as on one's own machine)."""

    identity: str
    role: Role
    reach: Reach | None = None

    def may(self, role: Role) -> bool:
        return self.role >= role


SYSTEM = Actor("hibug", Role.ADMIN)  # hibug's own upkeep (upgrading an older project), whoever opened it
_ACTING: contextvars.ContextVar[Actor | None] = contextvars.ContextVar("hibug_actor", default=None)
_resolver: Callable[[], Actor | None] | None = None


def set_actor_resolver(resolver: Callable[[], Actor | None] | None) -> None:
    """Install how a process finds who is acting where no acting_as block says (the dashboard: the visitor of the
    session this thread runs, in a page, a fragment or a widget's callback alike)."""
    global _resolver
    _resolver = resolver


def current_actor() -> Actor | None:
    """The person acting here; None for the command line, scripts and job workers, which act for whoever runs
    them."""
    actor = _ACTING.get()
    if actor is None and _resolver is not None:
        actor = _resolver()
    return actor


@contextlib.contextmanager
def acting_as(actor: Actor | None) -> Iterator[None]:
    """Everything inside runs as `actor`: writes, jobs and project changes are checked against its role, and the
    audit log records its identity."""
    token = _ACTING.set(actor)
    try:
        yield
    finally:
        _ACTING.reset(token)


def require(role: Role, action: str | None = None) -> None:
    """Raise AccessDenied unless the acting person (if any) holds `role`."""
    actor = current_actor()
    if actor is None or actor.may(role):
        return
    raise AccessDenied(f"{actor.identity} is a {actor.role.label} here and may not {action or WHAT_NEEDS[role]}; "
                       f"nothing was changed (ask an admin of this server for the {role.label} role)")


def current_reach() -> Reach | None:
    """What typed names may reach here: the acting person's, else this process's (a job started from a shared
    dashboard runs with its starter's), else None (no limit: the command line, one's own machine)."""
    actor = current_actor()
    if actor is not None:
        return actor.reach
    text = os.environ.get(REACH_ENV)
    if not text:
        return None
    settings = json.loads(text)
    return Reach(tuple(settings.get("roots", ())), settings.get("llm_base_url"))


def check_spec(kind: str, spec: str, runs_code: bool = False) -> None:
    """Refuse a model spec the acting person may not have loaded here (see Reach)."""
    reach = current_reach()
    if reach is not None:
        reach.check_spec(kind, spec, runs_code)


def check_url(what: str, url: str | None) -> None:
    """Refuse a server address the acting person may not have contacted from here (see Reach)."""
    reach = current_reach()
    if reach is not None:
        reach.check_url(what, url)


def acting_identity(default: str) -> str:
    """The identity to record for a change: the acting person's when one is set (a name passed along never wins
    over a sign-in), else `default`."""
    actor = current_actor()
    return actor.identity if actor is not None else default
