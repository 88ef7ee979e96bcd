"""Who is visiting the dashboard and what the server lets them do: the server's policy, sign-in, the visitor's role,
and the hook that makes the core check every write against that role (in pages, fragments and callbacks alike)."""
from __future__ import annotations

import json
import logging
import os
import re
from urllib.parse import unquote

import streamlit as st
from streamlit.errors import StreamlitSecretNotFoundError
from streamlit.runtime.scriptrunner import get_script_run_ctx

from hibug_core.access import Actor, Role, set_actor_resolver
from hibug_core.jobs.queue import JobQueue
from hibug_core.markdown import plain
from hibug_core.serving.policy import POLICY_ENV, PROJECT_ENV, ServerPolicy
from hibug_core.serving.roles import RoleMap
from hibug_core.store.audit import default_actor

logger = logging.getLogger("hibug.server")
NAME_KEY = "kept_hibug_user"  # where the sidebar's "Your name" is kept (state.sidebar_value's KEPT + USER_KEY)
NOT_SIGNED_IN = " (not signed in)"
NEXT_COOKIE = "hibug_after_sign_in"  # the link a visitor opened before signing in
SAME_SITE_LINK = re.compile(r"/[A-Za-z0-9_./-]*(\?[A-Za-z0-9_.~%+=&-]*)?")  # a path on this site and its query


def server_policy() -> ServerPolicy:
    """What this server serves (`hibug serve` decided it; see hibug_core.serving.policy), with sign-in and roles from
    the secrets where it was started without them (`streamlit run app.py` beside a secrets file with [auth]): a
    server that signs people in is shared, however it was started."""
    policy = _policy(os.environ.get(POLICY_ENV), os.environ.get(PROJECT_ENV))
    secrets = _secrets()
    if "auth" in secrets and not policy.sign_in:
        policy = policy.model_copy(update={"sign_in": True})
    if not policy.roles and secrets.get("hibug", {}).get("roles"):
        roles = RoleMap.from_mapping(secrets["hibug"]["roles"], source="[hibug.roles]")
        policy = policy.model_copy(update={"roles": roles.as_mapping()})
    return policy


@st.cache_resource(show_spinner=False, max_entries=4)
def _policy(text: str | None, project: str | None) -> ServerPolicy:
    del text, project  # the cache key: the policy is read from the environment they come from
    return ServerPolicy.from_environment()


def signed_in_identity() -> str | None:
    user = getattr(st, "user", None)
    if user is None or not getattr(user, "is_logged_in", False):
        return None
    return str(user.get("email") or user.get("sub") or "") or None


def sign_in_required() -> bool:
    """Whether visitors sign in: the server was started with sign-in, or its secrets have an [auth] section (however
    the dashboard was started)."""
    return server_policy().sign_in


def _secrets() -> dict:
    try:
        return st.secrets.to_dict()
    except (FileNotFoundError, StreamlitSecretNotFoundError):
        return {}


def visitor() -> Actor | None:
    """The person this session acts for, with their role; None where they must sign in first or have no role."""
    policy = server_policy()
    if sign_in_required():
        identity = signed_in_identity()
        role = policy.role_of(identity) if identity else None
        return Actor(identity, role, policy.reach()) if identity and role else None
    # the server's own account names only its owner's visits: on a shared server a visitor is who they say they are
    name = str(st.session_state.get(NAME_KEY) or ("anonymous" if policy.shared else default_actor())).strip() \
        or "anonymous"
    return Actor(name + NOT_SIGNED_IN if policy.shared else name, policy.anonymous_role(), policy.reach())


def _session_visitor() -> Actor | None:
    if get_script_run_ctx(suppress_warning=True) is None:
        return None  # not a visitor's run: the server's own threads act for the server
    return visitor() or Actor("not signed in", Role.VIEWER)


set_actor_resolver(_session_visitor)


def require_visitor() -> Actor:
    """The visitor, or the page stops with a sign-in button (or the news that their account has no role here)."""
    actor = visitor()
    if actor is not None:
        _back_to_kept_link()
        return actor
    identity = signed_in_identity()
    st.title("hibug")
    if identity is None:
        st.info("Sign in to open this dashboard.")
        # The provider sends people back to the front page: the link they came by is kept in a cookie until then.
        st.html(f"<script>document.cookie = {json.dumps(NEXT_COOKIE + '=')} + encodeURIComponent("
                "location.pathname + location.search) + '; path=/; max-age=900; SameSite=Lax';</script>",
                unsafe_allow_javascript=True)
        st.button("Sign in", on_click=st.login, key="hibug_sign_in", type="primary")
    else:
        logger.warning("refused %r: signed in, but has no role on this server", identity)
        st.error(f"{plain(identity)} has no access to this server; ask one of its admins for a role.")
        st.button("Sign out", on_click=st.logout, key="hibug_sign_out")
    st.stop()


def _back_to_kept_link() -> None:
    """Once signed in, go on to the link that was opened before signing in (a same-site path and query only, never
    another site), and forget it."""
    kept = unquote(st.context.cookies.get(NEXT_COOKIE, "")) if st.context.cookies else ""
    if not kept:
        return
    where = kept if SAME_SITE_LINK.fullmatch(kept) and not kept.startswith("//") else ""
    forget = f"document.cookie = {json.dumps(NEXT_COOKIE + '=')} + '; path=/; max-age=0; SameSite=Lax';"
    go = f"window.location.replace({json.dumps(where)});" if where and where != "/" else ""
    st.html(f"<script>{forget}{go}</script>", unsafe_allow_javascript=True)


def may(role: Role) -> bool:
    actor = visitor()
    return actor is not None and actor.may(role)


def may_edit(project=None) -> bool:
    """Whether this visitor may change the project (edit, run jobs): widgets that change things are disabled else."""
    return may(Role.EDITOR) and not (project is not None and project.read_only)


def viewer_note() -> None:
    """In the sidebar: who the visitor is and what their role lets them do."""
    actor = visitor()
    if actor is None:
        return
    with st.sidebar:
        if sign_in_required():
            st.caption(f"Signed in as {plain(actor.identity)} · {actor.role.label}")
            st.button("Sign out", on_click=st.logout, key="hibug_sign_out")
        if not actor.may(Role.EDITOR):
            st.caption("You can look and export; editing and jobs need the editor role." if sign_in_required()
                       else "This server is read-only: you can look and export, nothing can be changed.")


def server_queue() -> JobQueue | None:
    """The one job queue of this server (None where it runs no jobs), kept for the server's life."""
    return _queue(server_policy())


@st.cache_resource(show_spinner=False, max_entries=4, hash_funcs={ServerPolicy: lambda p: p.model_dump_json()})
def _queue(policy: ServerPolicy) -> JobQueue | None:
    return policy.job_queue()

