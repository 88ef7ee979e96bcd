"""A background job on a page: start it, watch its progress (a fragment polls the store), cancel or resume it."""
from __future__ import annotations

import time

import streamlit as st

from hibug_core.access import Role
from hibug_core.errors import HibugError
from hibug_core.jobs.store import jobs, request_cancel
from hibug_core.jobs.worker import resume, submit
from hibug_core.markdown import plain
from hibug_core.operations import Operation
from hibug_ui.visitor import may_edit, server_queue, visitor

POLL_S = 1.0


def latest_job(project, kind: str):
    found = jobs(project, kind, limit=1)
    return found[0] if found else None


def built(operation: type[Operation], **values) -> Operation | None:
    """The operation from a form's values; a bad field is shown (naming it), not raised, and gives None."""
    try:
        return operation.build(values)
    except HibugError as error:
        st.error(plain(error))
        return None


def start_job(project, op: Operation | None, user: str, secrets: dict | None = None) -> int | None:
    """Submit a built operation as a background job; a refusal (the task cannot, the same kind already running, the
    server busy) is shown, not raised. None (an operation the form could not build) starts nothing."""
    if op is None:
        return None
    try:
        return submit(project, op, author=user, secrets=secrets, queue=server_queue())
    except HibugError as error:
        st.error(plain(error))
        return None


def job_status(project, kind: str, user: str, *, key: str) -> None:
    """The newest job of `kind`: progress while it runs (polled without rerunning the page), then how it ended."""

    @st.fragment(run_every=POLL_S if job_running(project, kind) else None)
    def _panel() -> None:
        job = latest_job(project, kind)
        if job is None:
            return
        watching = f"{key}_watching"
        if job.live:
            st.session_state[watching] = job.id
            stage = job.stage or "starting"
            label = f"{stage}: {job.done:,} / {job.total:,}" if job.total else stage
            phases = st.session_state.setdefault(f"{key}_phases_{job.id}", [])
            if job.stage and (not phases or phases[-1] != job.stage):
                phases.append(job.stage)
            step = f"step {len(phases)}" if phases else "starting"
            st.progress(job.fraction, text=f"Job {job.id} ({job.kind}, by {plain(job.author)}) · {step}: {label}"
                        f"{_eta(key, job)}")
            if len(phases) > 1:
                st.caption("Done: " + " → ".join(plain(p) for p in phases[:-1]))
            actor = visitor()
            mine = actor is not None and (job.author == actor.identity or actor.may(Role.ADMIN))
            if st.button("Cancel", key=f"{key}_cancel_{job.id}", disabled=not (mine and may_edit(project)),
                         help=None if mine else "Only the one who started it, or an admin, may cancel it"):
                try:
                    request_cancel(project, job.id, author=user)
                    st.toast("Asked the job to stop; what it stored is kept.")
                except HibugError as error:
                    st.error(plain(error))
            return
        if st.session_state.get(watching) == job.id:
            del st.session_state[watching]
            st.rerun()  # the whole page: it shows what the job stored, and polling stops
        if job.status == "done" and (job.result or {}).get("warning"):  # it ran, but what it made is doubtful
            warning = plain(job.result["warning"], keep_code=True)  # its advice's code spans stay code
            st.warning(f"Job {job.id} ({job.kind}) finished, with a warning: {warning}", icon=":material/warning:")
            with st.expander("Why, and what it stored"):
                details = job.result.get("warning_details")
                st.markdown(" ".join(([plain(details, keep_code=True)] if details else [])
                                     + [plain(summary(job.result))]))
        elif job.status == "done":
            st.success(f"Job {job.id} ({job.kind}) finished. {plain(summary(job.result))}")
        elif job.status == "cancelled":
            st.warning(f"Job {job.id} ({job.kind}) was cancelled. {plain(job.message or '')}")
        else:
            st.error(f"Job {job.id} ({job.kind}) {job.status}: {plain(job.error or 'its worker stopped')}")
        if job.status in ("cancelled", "failed", "interrupted") and st.button(
                "Resume", key=f"{key}_resume_{job.id}", disabled=not may_edit(project)):
            try:
                resume(project, job.id, author=user, queue=server_queue())
            except HibugError as error:
                st.error(plain(error))
            st.rerun()

    _panel()


def job_running(project, kind: str) -> bool:
    job = latest_job(project, kind)
    return job is not None and job.live


def summary(result: dict | None) -> str:
    """What a finished job did, in words: its own summary when it gives one, else its figures as 'name: value'."""
    if not result:
        return ""
    if result.get("summary"):
        return str(result["summary"])
    return "; ".join(f"{name.replace('_', ' ')}: {value}" for name, value in result.items())


def _eta(key: str, job) -> str:
    """' · about 2 min left' from the rate of the current step since this page first saw it."""
    if not job.total or not job.stage:
        return ""
    seen = st.session_state.setdefault(f"{key}_rate_{job.id}_{job.stage}", (time.monotonic(), job.done))
    elapsed, done = time.monotonic() - seen[0], job.done - seen[1]
    if done <= 0 or elapsed < 2:
        return ""
    left = (job.total - job.done) * elapsed / done
    return f" · about {left:.0f} s left" if left < 90 else f" · about {left / 60:.0f} min left"
