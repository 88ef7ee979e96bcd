"""A dashboard shared on the network, probed in real headless Chromium as its visitors would: `hibug serve
--projects-root` on a loopback alias (127.0.0.2, an address other than localhost), with sign-in against a local OpenID
Connect provider the test starts. Every path or link that is not served gets one message, nothing is made outside
the root, nothing is read outside the data roots, the server's log shows the refusals; a viewer can change nothing,
an editor can, and the audit log names who signed in."""
from __future__ import annotations

import re
import time
from urllib.parse import quote

import pytest

from hibug_core.ingest.images import OUTSIDE_ROOTS
from hibug_core.serving.policy import NOT_SERVED, OUTSIDE_DATA_ROOTS

from browser_support import LOGS, free_port, idle, serving, shot
from serving_support import make_project, oidc_provider, write_sign_in

pytestmark = [pytest.mark.browser, pytest.mark.slow]
ADDRESS = "127.0.0.2"  # the whole 127/8 block is this machine's loopback; to hibug it is not "localhost"


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("shared")
    root, data = tmp / "projects", tmp / "data"
    root.mkdir()
    make_project(root / "birds", data / "birds")
    make_project(tmp / "elsewhere" / "secret-project", tmp / "elsewhere" / "images")
    (root / "not-a-project").mkdir()
    (tmp / "elsewhere" / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
    port = free_port()
    with oidc_provider() as provider:
        secrets_file, roles_file = write_sign_in(tmp, provider, f"http://{ADDRESS}:{port}")
        with serving(None, "--projects-root", str(root), "--data-root", str(data), "--secrets", str(secrets_file),
                     "--roles", str(roles_file), address=ADDRESS, port=port) as url:
            yield url, tmp


def start_signing_in(browser, url: str, identity: str, path: str = ""):
    """A new browser context that opens `path` and signs in as `identity` through the provider's form; its page, not
    yet waited on."""
    page = browser.new_context().new_page()
    page.goto(f"{url}/{path}" if path else url)
    page.get_by_role("button", name="Sign in").click()
    page.locator("input[name=sub]").fill(identity)
    page.get_by_role("button", name="Authorize").click()
    return page


def arrived(page, pattern: re.Pattern, timeout: float = 90) -> None:
    """Wait until the page's address matches `pattern`, through the redirects on the way (a navigation that the next
    one replaces is aborted, which page.wait_for_url takes for a failure)."""
    deadline = time.monotonic() + timeout
    while not pattern.match(page.url):
        assert time.monotonic() < deadline, f"still at {page.url}"
        page.wait_for_timeout(250)


def sign_in(browser, url: str, identity: str, path: str = ""):
    """A new browser context signed in as `identity`; its page, on `path` (the link kept through signing in)."""
    page = start_signing_in(browser, url, identity, path)
    if path:  # the provider sends people to the front page, which goes on to the link
        arrived(page, re.compile(f".*/{re.escape(path)}$"))
    page.get_by_text(f"Signed in as {identity}").wait_for(timeout=90_000)
    idle(page)
    return page


def errors(page) -> list[str]:
    idle(page)
    return [text.strip() for text in page.get_by_test_id("stAlertContentError").all_inner_texts()]


def create(page, url: str, name: str, *, path: str = "", upload: tuple[str, bytes] | None = None,
           base: str = "", refused: bool = True) -> list[str]:
    """Fill a fresh creation form on the Overview (nothing left from an earlier try) and submit it; the messages
    shown (once one is, where it is `refused`)."""
    page.goto(url)
    page.get_by_label("New project name").wait_for(timeout=60_000)
    idle(page)
    if upload:  # first: the upload's own round trip does not then undo what is typed below
        page.get_by_test_id("stFileUploaderDropzoneInput").set_input_files(
            {"name": upload[0], "mimeType": "text/csv", "buffer": upload[1]})
        page.get_by_text(upload[0]).wait_for(timeout=30_000)
        idle(page)
    page.get_by_label("New project name").fill(name)
    if not upload:
        page.get_by_text("a path on this server", exact=True).click()
    page.get_by_label("The manifest's path on this server (when giving a path)").fill(path)
    page.get_by_label("Folder its image paths are relative to (when uploading)").fill(base)
    page.get_by_role("button", name="Create project").click()
    if refused:
        page.get_by_test_id("stAlertContentError").first.wait_for(timeout=60_000)
    return errors(page)


def test_a_visitor_reaches_nothing_the_server_does_not_serve(browser, shared):
    url, tmp = shared
    # Not signed in: nothing but the way to sign in, whatever the link says.
    stranger = browser.new_context().new_page()
    stranger.goto(f"{url}/Error_slices?project={quote(str(tmp / 'elsewhere' / 'secret-project'))}")
    stranger.get_by_role("button", name="Sign in").wait_for(timeout=90_000)
    assert "secret-project" not in stranger.content()

    page = sign_in(browser, url, "ada@example.com")  # an admin: the widest rights a visitor can have
    # 1. Links naming a project: one message for a project elsewhere, a system folder, a file, nothing, a plain folder.
    probes = [str(tmp / "elsewhere" / "secret-project"), "/etc", "/root", "/etc/passwd", str(tmp / "nowhere"),
              "../elsewhere/secret-project", "not-a-project"]
    seen = set()
    for probe in probes:
        page.goto(f"{url}/Error_slices?project={quote(probe)}")
        page.get_by_text(NOT_SERVED).wait_for(timeout=60_000)
        seen.update(errors(page))
    assert seen == {NOT_SERVED}
    # The sidebar offers the served projects by name, and no field to type a path into.
    page.goto(url)
    idle(page)
    assert page.get_by_test_id("stSidebar").get_by_role("textbox").count() == 0

    # 2. Creating: only inside the root, only from the data roots.
    assert create(page, url, "../evil", path=str(tmp / "data" / "birds" / "manifest.csv"))[0].startswith(
        "'../evil' cannot name a project")
    assert "cannot name a project" in create(page, url, str(tmp / "evil"),
                                             path=str(tmp / "data" / "birds" / "manifest.csv"))[0]
    for path in ["/etc/passwd", str(tmp / "elsewhere" / "passwd"), str(tmp / "elsewhere" / "missing.csv"),
                 str(tmp / "data" / ".." / "elsewhere" / "passwd")]:
        assert create(page, url, "probe", path=path) == [
            OUTSIDE_DATA_ROOTS.format(what="the manifest", instead=", or upload the manifest")]
    manifest = b"image,label,prediction,split\n0.png,red,red,val\n1.png,green,red,val\n2.png,blue,blue,val\n"
    assert create(page, url, "probe", upload=("m.csv", manifest), base="/usr/share/doc") == [
        OUTSIDE_DATA_ROOTS.format(what="the image folder", instead="")]  # the folder is what to fix, not the upload
    outside = (f"image,label,prediction,split\n0.png,red,red,val\n{tmp}/elsewhere/images/1.png,green,red,val\n"
               "../../elsewhere/images/2.png,blue,blue,val\n").encode()
    message = create(page, url, "probe", upload=("m.csv", outside), base=str(tmp / "data" / "birds"))[0]
    assert message.count(OUTSIDE_ROOTS) == 2 and "nothing was imported" in message
    assert sorted(p.name for p in (tmp / "projects").iterdir() if not p.name.startswith(".")) == [
        "birds", "not-a-project"]
    assert not (tmp / "evil").exists() and not (tmp / "data" / "probe").exists()

    # A good one is made inside the root and opens.
    create(page, url, "cats", refused=False, path=str(tmp / "data" / "birds" / "manifest.csv"))
    page.get_by_role("heading", name="cats").wait_for(timeout=60_000)
    assert (tmp / "projects" / "cats" / "hibug.sqlite").is_file()
    shot(page, "shared-server-created")

    log = LOGS[url].read_text()
    assert log.count("refused to open") >= len(probes) and log.count("refused to read") >= 5
    assert "refused to create a project named '../evil'" in log


def test_a_viewer_changes_nothing_and_an_editors_changes_carry_their_sign_in(browser, shared):
    from hibug_core.store.project import Project

    url, tmp = shared
    viewer = sign_in(browser, url, "vic@example.com", "Attributes?project=birds")
    viewer.get_by_role("heading", name="Attributes").wait_for(timeout=60_000)
    assert viewer.get_by_text("· viewer").count() == 1
    assert viewer.get_by_role("button", name="Propose").is_disabled()
    viewer.goto(f"{url}/Embedding_map?project=birds")
    assert viewer.get_by_role("button", name="Compute the map").is_disabled()  # a job
    viewer.goto(f"{url}/Review?project=birds")
    viewer.get_by_role("tab", name="Saved views").click()
    assert viewer.get_by_role("button", name="Save view").is_disabled()
    assert viewer.get_by_label("New project name").count() == 0
    shot(viewer, "shared-server-viewer")

    editor = sign_in(browser, url, "eddie@example.com", "Embedding_map?project=birds")
    assert editor.get_by_label("Your name").count() == 0  # who acts is the sign-in, not a typed name
    editor.get_by_role("button", name="Compute the map").click()
    editor.get_by_text("by eddie@example.com").wait_for(timeout=60_000)
    editor.get_by_role("button", name="Cancel").click()  # the one who started it may
    editor.get_by_text("was cancelled").wait_for(timeout=120_000)
    editor.goto(f"{url}/Review?project=birds")
    editor.get_by_role("tab", name="Saved views").click()
    editor.get_by_label("Name").fill("blue ones")
    editor.get_by_role("button", name="Save view").click()
    editor.get_by_role("link", name="blue ones").wait_for(timeout=60_000)
    shot(editor, "shared-server-editor")
    editor.goto(url)
    idle(editor)
    assert editor.get_by_label("New project name").count() == 0  # creating projects is an admin's

    with Project.open(tmp / "projects" / "birds", read_only=True) as project:
        log = project.audit_log()
    assert log[log["action"] == "save view"]["actor"].tolist() == ["eddie@example.com"]
    assert log[log["action"].isin(["start job", "cancel job"])]["actor"].tolist() == ["eddie@example.com"] * 2


def test_someone_without_a_role_is_told_so_and_sees_nothing(browser, shared):
    url, _ = shared
    page = start_signing_in(browser, url, "mallory@evil.example", "Tagging?project=birds")
    page.get_by_text("mallory@evil.example has no access to this server").wait_for(timeout=90_000)
    assert page.get_by_role("heading", name="Tagging").count() == 0
    assert "refused 'mallory@evil.example'" in LOGS[url].read_text()


def test_a_link_opened_before_signing_in_is_where_signing_in_leads(browser, shared):
    url, _ = shared
    page = start_signing_in(browser, url, "vic@example.com", "Attributes?project=birds")
    arrived(page, re.compile(r".*/Attributes\?project=birds$"))
    page.get_by_text("Signed in as vic@example.com").wait_for(timeout=90_000)
    page.get_by_role("heading", name="Attributes").wait_for(timeout=60_000)
    assert page.context.cookies() and not [c for c in page.context.cookies() if c["name"] == "hibug_after_sign_in"
                                           and c["value"]]
