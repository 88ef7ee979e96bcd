"""What a dashboard server serves, decided when it starts: one project or the projects inside a root, the data roots
manifests and images may come from, who may do what without signing in, and its limits on jobs. A visitor's typed
path or crafted link never widens it."""
from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from hibug_core.access import Reach, Role
from hibug_core.errors import ConfigError, HibugError
from hibug_core.safe_files import inside
from hibug_core.serving.roles import RoleMap
from hibug_core.store.location import DB_FILE, project_file

logger = logging.getLogger(__name__)
POLICY_ENV = "HIBUG_SERVER"  # the policy as JSON, handed by `hibug serve` to the dashboard's process
PROJECT_ENV = "HIBUG_PROJECT"  # one project to serve, when no policy is given (streamlit run app.py, tests)
LOCAL_ADDRESSES = ("localhost", "127.0.0.1", "::1")
SERVER_DIR = ".hibug-server"  # the server's own state (its job queue) inside the projects root or the project
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
NOT_SERVED = "No such project is served here; choose one from the list in the sidebar."
OUTSIDE_DATA_ROOTS = ("This server reads manifests and images only inside its data roots; give a path to {what} "
                      "inside one of them{instead}.")


SIGN_IN_HELP = ("Set up sign-in (an [auth] section in .streamlit/secrets.toml and a roles file; see "
                "docs/security.md)")

class NotServed(HibugError, PermissionError):
    """A project or file a visitor named that this server does not serve (one message, whatever is on the disk)."""


class ServerPolicy(BaseModel):
    """What one dashboard server serves. Exactly one of `project` and `projects_root`, or neither (serves nothing);
    paths are resolved when the policy is built."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    project: Path | None = Field(None, description="the one project served (hibug serve PROJECT)")
    projects_root: Path | None = Field(None, description="serve the projects inside this folder, chosen by name")
    data_roots: tuple[Path, ...] = Field((), description="folders manifests and images may be read from")
    address: str = Field("localhost", description="the address the server listens on")
    read_only: bool = Field(False, description="nothing can be written and no job started")
    open_to_anyone: bool = Field(False, description="no sign-in, yet served beyond this machine: anyone who reaches "
                                                    "it may edit")
    sign_in: bool = Field(False, description="Streamlit's OIDC sign-in is configured ([auth] in the secrets)")
    roles: dict[str, list[str]] = Field(default_factory=dict, description="identities per role (a roles file)")
    max_jobs: int = Field(1, ge=1, description="jobs that run at once on this server")
    max_waiting: int = Field(8, ge=0, description="jobs that may wait for a free slot")
    max_jobs_per_person: int = Field(2, ge=1, description="jobs one person may have running or waiting")

    @field_validator("project", "projects_root")
    @classmethod
    def _a_folder(cls, value: Path | None) -> Path | None:
        if value is None:
            return None
        value = Path(value).expanduser().resolve()
        if not value.is_dir():
            raise ValueError(f"{value} is not a folder")
        return value

    @field_validator("data_roots")
    @classmethod
    def _folders(cls, values: tuple[Path, ...]) -> tuple[Path, ...]:
        resolved = tuple(Path(v).expanduser().resolve() for v in values)
        missing = [str(v) for v in resolved if not v.is_dir()]
        if missing:
            raise ValueError(f"data roots must be folders: {', '.join(missing)}")
        if any(v == Path(v.anchor) for v in resolved):
            raise ValueError("a data root cannot be the file system's root: name the folders that hold the data")
        return resolved

    @field_validator("roles")
    @classmethod
    def _roles(cls, value: dict) -> dict:
        return RoleMap.from_mapping(value).as_mapping()

    @model_validator(mode="after")
    def _one_thing_served(self) -> ServerPolicy:
        if self.project is not None and self.projects_root is not None:
            raise ValueError("serve one project or a projects root, not both")
        if self.project is not None and project_file(self.project) is None:  # a damaged one is named on opening
            raise ValueError(f"{self.project} is not a hibug project (no {DB_FILE})")
        return self

    @classmethod
    def build(cls, **fields) -> ServerPolicy:
        """The policy, or ConfigError naming each bad field."""
        try:
            return cls(**fields)
        except ValidationError as error:
            raise ConfigError(f"cannot serve: {_reasons(error)}") from None

    # ----- handing it to the dashboard's process ---------------------------------------------------------------
    def to_environment(self) -> dict[str, str]:
        return {POLICY_ENV: self.model_dump_json()}

    @classmethod
    def from_environment(cls, environ=os.environ) -> ServerPolicy:
        """The policy `hibug serve` started this process with; without one, the project in HIBUG_PROJECT (if any) on
        localhost, as `streamlit run app.py` and the page tests run it."""
        text = environ.get(POLICY_ENV)
        if text:
            try:
                return cls.model_validate(json.loads(text))
            except (ValueError, ValidationError) as error:
                reasons = _reasons(error) if isinstance(error, ValidationError) else str(error)
                raise ConfigError(f"the server's settings ({POLICY_ENV}) are not valid: {reasons}") from None
        project = environ.get(PROJECT_ENV)
        return cls.build(project=project) if project else cls()

    # ----- who may do what -----------------------------------------------------------------------------------
    @property
    def local(self) -> bool:
        """Whether the server listens on a default loopback name only (any other address, a loopback alias included,
        is reachable from elsewhere). Not whether it is shared: a reverse proxy may pass anyone to a loopback port."""
        return self.address in LOCAL_ADDRESSES

    @property
    def shared(self) -> bool:
        """Whether people other than the one who started it may use this server, decided from its exposure: sign-in,
        roles, read-only or open-to-anyone say it is meant for others whatever its address (behind a reverse proxy
        a loopback address says nothing), and an address beyond the loopback names lets others reach it. Only a
        server on a loopback name with none of these is one person's own: it alone gets no limits."""
        return (not self.local or self.sign_in or bool(self.roles) or self.read_only or self.open_to_anyone)

    def check_exposure(self, *, served: str = "", sign_in: str = SIGN_IN_HELP) -> None:
        """Refuse a server reachable from the network that nobody signs in to, unless it is read-only or it was said
        plainly that anyone may edit. served: what is served ("MCP "); sign_in: how its callers sign in, in words."""
        if self.local or self.sign_in or self.read_only or self.open_to_anyone:
            return
        raise ConfigError(
            f"refusing to serve {served}on {self.address} without sign-in: anyone who can reach it could edit projects "
            f"and start jobs. {sign_in}, or start it with --read-only, or say --open-to-anyone if that is what you "
            "mean")

    def job_queue(self):
        """This server's one job queue (hibug_core.jobs.queue.JobQueue; None where it runs no jobs: nothing served, a
        read-only server, or a home it may not write in). A shared server's jobs step aside for its visitors."""
        from hibug_core.jobs.queue import JobQueue, QueueLimits

        folder = self.queue_dir
        if folder is None or not os.access(folder.parent, os.W_OK):
            return None
        return JobQueue(folder, QueueLimits(self.max_jobs, self.max_waiting, self.max_jobs_per_person),
                        step_aside=self.shared)

    def reach(self) -> Reach | None:
        """What names a visitor types may reach on this server: nothing limits one's own server (not `shared`); a
        shared one reaches files only inside the data roots and the projects served, no code of the visitor's, no
        other language-model server."""
        if not self.shared:
            return None
        homes = [home for home in (self.project, self.projects_root) if home is not None]
        return Reach(llm_base_url=os.environ.get("HIBUG_LLM_BASE_URL") or os.environ.get("OPENAI_BASE_URL")
                     ).with_roots(*self.data_roots, *homes)

    def role_map(self) -> RoleMap:
        return RoleMap.from_mapping(self.roles)

    def anonymous_role(self) -> Role | None:
        """The role of a visitor who has not signed in: None where sign-in is required."""
        if self.sign_in:
            return None
        if self.read_only:
            return Role.VIEWER
        return Role.EDITOR if self.shared else Role.ADMIN

    def role_of(self, identity: str | None) -> Role | None:
        """A visitor's role: from the roles for a signed-in identity (none where no entry matches), capped at viewer
        on a read-only server."""
        role = self.anonymous_role() if identity is None else self.role_map().role_of(identity)
        if role is not None and self.read_only:
            role = min(role, Role.VIEWER)
        return role

    # ----- what is served --------------------------------------------------------------------------------------
    def served_projects(self) -> dict[str, Path]:
        """The projects a visitor may open, by name."""
        if self.project is not None:
            return {self.project.name: self.project}
        if self.projects_root is None:
            return {}
        found = {}
        for entry in sorted(self.projects_root.iterdir(), key=lambda p: p.name):
            if NAME_PATTERN.fullmatch(entry.name) and self._confined(entry):
                found[entry.name] = entry
        return found

    def _confined(self, folder: Path) -> bool:
        """Whether `folder` is a project whose folder and every entry in it resolve inside the projects root: its
        database is a file of its own (not a link, nor a hard link to another's), and no link in it leads out. Files
        deeper down are checked where they are read (the array, column and thumbnail stores)."""
        try:
            if folder.is_symlink() or not folder.is_dir() or folder.resolve().parent != self.projects_root:
                return False
            database = project_file(folder)  # its SQLite file, or the link naming its PostgreSQL database
            if database is None or database.is_symlink() or not database.is_file() or database.stat().st_nlink > 1:
                return False
            with os.scandir(folder) as entries:
                return all(not item.is_symlink() or inside(item.path, self.projects_root) for item in entries)
        except OSError:
            return False

    def project_folder(self, name: str) -> Path:
        """The folder of a served project named by a visitor (a name from the list; in single-project mode also the
        project's own folder); NotServed otherwise, with one message whatever the disk holds."""
        served = self.served_projects()
        if name in served:
            return served[name]
        if self.project is not None and name and _same_path(name, self.project):
            return self.project
        logger.warning("refused to open %r: not a project this server serves", str(name)[:200])
        raise NotServed(NOT_SERVED)

    def new_project_folder(self, name: str) -> Path:
        """Where a project named `name` is created: inside the projects root, never elsewhere."""
        if self.projects_root is None:
            raise NotServed("This server serves one project; new projects are made with `hibug new` on the server, "
                            "or on a server started with --projects-root.")
        if not NAME_PATTERN.fullmatch(name or ""):
            logger.warning("refused to create a project named %r", str(name)[:200])
            raise HibugError(f"'{name}' cannot name a project: use 1 to 64 letters, digits, '.', '_' or '-', "
                             "starting with a letter or digit")
        folder = self.projects_root / name
        if folder.exists() or folder.is_symlink():
            raise HibugError(f"a project or folder named '{name}' already exists here; choose another name")
        return folder

    # ----- what may be read ------------------------------------------------------------------------------------
    def data_path(self, path: str | Path, *, what: str = "the manifest", instead: str = "") -> Path:
        """A manifest or image folder a visitor named (`what` it is, and what else they could do, `instead`, for the
        message), resolved (links followed) and inside a data root; NotServed otherwise, with one message whether or
        not it exists."""
        resolved = Path(os.path.realpath(Path(str(path)).expanduser())) if path else None
        if resolved is None or not any(resolved.is_relative_to(root) for root in self.data_roots):
            logger.warning("refused to read %r: outside the data roots", str(path)[:200])
            raise NotServed(OUTSIDE_DATA_ROOTS.format(what=what, instead=f", {instead}" if instead else ""))
        return resolved

    @property
    def queue_dir(self) -> Path | None:
        """Where this server keeps its job queue (None where it serves nothing or writes nothing)."""
        home = self.projects_root or self.project
        return None if home is None or self.read_only else home / SERVER_DIR


def _reasons(error: ValidationError) -> str:
    """Each problem with the field it is about (none for a problem of the whole policy)."""
    return "; ".join((f"{'.'.join(map(str, issue['loc']))}: " if issue["loc"] else "")
                     + issue["msg"].removeprefix("Value error, ") for issue in error.errors())


def _same_path(text: str, folder: Path) -> bool:
    try:
        return Path(text).expanduser().resolve() == folder
    except (OSError, ValueError):
        return False

