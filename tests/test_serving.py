"""What a shared server serves and who may do what on it: the policy a server starts with, the one message for
everything it does not serve, data roots, roles, and the core's own refusals (hibug_core.serving, hibug_core.access)."""
from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from hibug_core.access import AccessDenied, Actor, Role, acting_as
from hibug_core.errors import ConfigError, ManifestError
from hibug_core.serving.policy import NOT_SERVED, OUTSIDE_DATA_ROOTS, NotServed, ServerPolicy
from hibug_core.serving.roles import RoleMap

from serving_support import make_project

VIEWER, EDITOR, ADMIN = (Actor("vic@example.com", Role.VIEWER), Actor("eddie@example.com", Role.EDITOR),
                         Actor("ada@example.com", Role.ADMIN))


@pytest.fixture
def server(tmp_path):
    """A projects root with one project, a data root, and things outside both that a visitor might name."""
    root, data = tmp_path / "projects", tmp_path / "data"
    root.mkdir()
    make_project(root / "birds", data / "birds")
    make_project(tmp_path / "elsewhere" / "secret-project", tmp_path / "elsewhere" / "images")
    (root / "not-a-project").mkdir()
    (root / "linked").symlink_to(tmp_path / "elsewhere" / "secret-project")
    (tmp_path / "elsewhere" / "passwd").write_text("root:x:0:0\n")
    policy = ServerPolicy.build(projects_root=root, data_roots=(data,), address="0.0.0.0", open_to_anyone=True)
    return policy, tmp_path


def test_a_server_serves_the_projects_of_its_root_by_name_and_nothing_else(server):
    policy, tmp_path = server
    assert list(policy.served_projects()) == ["birds"]  # a plain folder and a link out of the root are not served
    assert policy.project_folder("birds") == tmp_path / "projects" / "birds"
    probes = [str(tmp_path / "elsewhere" / "secret-project"), "/etc", "/root", "/etc/passwd",
              str(tmp_path / "nowhere"), "../elsewhere/secret-project", "linked", "not-a-project", "birds/..", ""]
    messages = set()
    for probe in probes:
        with pytest.raises(NotServed) as refused:
            policy.project_folder(probe)
        messages.add(str(refused.value))
    assert messages == {NOT_SERVED}  # one message: nothing about what exists on the server


def test_one_project_is_served_under_its_name_or_its_own_folder(server):
    _, tmp_path = server
    policy = ServerPolicy.build(project=tmp_path / "projects" / "birds")
    assert policy.project_folder("birds") == policy.project_folder(str(policy.project)) == policy.project
    with pytest.raises(NotServed, match="No such project"):
        policy.project_folder(str(tmp_path / "elsewhere" / "secret-project"))
    with pytest.raises(NotServed, match="serves one project"):
        policy.new_project_folder("new")


def test_new_projects_are_made_inside_the_root_only(server):
    policy, tmp_path = server
    assert policy.new_project_folder("cats") == tmp_path / "projects" / "cats"
    for name in ["../evil", "/tmp/evil", "a/b", "", ".hibug-server", "..", "x" * 65, "birds\n"]:
        with pytest.raises(Exception, match="cannot name a project"):
            policy.new_project_folder(name)
    with pytest.raises(Exception, match="already exists"):
        policy.new_project_folder("birds")


def test_manifests_are_read_only_inside_the_data_roots_with_one_message(server):
    policy, tmp_path = server
    data = tmp_path / "data"
    assert policy.data_path(data / "birds" / "manifest.csv") == data / "birds" / "manifest.csv"
    (data / "escape").symlink_to(tmp_path / "elsewhere")
    messages = set()
    for probe in ["/etc/passwd", str(tmp_path / "elsewhere" / "passwd"), str(tmp_path / "elsewhere" / "missing.csv"),
                  str(data / ".." / "elsewhere" / "passwd"), str(data / "escape" / "passwd"), "", "/"]:
        with pytest.raises(NotServed) as refused:
            policy.data_path(probe)
        messages.add(str(refused.value))
    assert messages == {OUTSIDE_DATA_ROOTS.format(what="the manifest", instead="")}
    with pytest.raises(NotServed) as refused:  # an uploaded manifest's image folder is named as what is wrong
        policy.data_path("/usr/share/doc", what="the image folder")
    assert str(refused.value) == ("This server reads manifests and images only inside its data roots; give a path to "
                                  "the image folder inside one of them.")
    with pytest.raises(NotServed):  # no data roots: nothing on the server is read
        ServerPolicy.build(projects_root=tmp_path / "projects").data_path(data / "birds" / "manifest.csv")


def test_images_outside_the_data_roots_are_refused_unread_whether_or_not_they_exist(server):
    import dataclasses

    from hibug_core.config import IngestConfig
    from hibug_core.ingest.images import OUTSIDE_ROOTS
    from hibug_core.tasks import load_uploaded_manifest

    policy, tmp_path = server
    data = tmp_path / "data"
    (data / "birds" / "out.png").symlink_to(tmp_path / "elsewhere" / "images" / "0.png")
    config = dataclasses.replace(IngestConfig(), image_roots=policy.data_roots)
    rows = ["0.png,red,red,val", f"{tmp_path}/elsewhere/images/1.png,red,red,val", "/no/such/image.png,red,red,val",
            "../../elsewhere/images/2.png,red,red,val", "out.png,red,red,val"]
    with pytest.raises(ManifestError) as refused:
        load_uploaded_manifest(("image,label,prediction,split\n" + "\n".join(rows)).encode(), "upload.csv",
                               data / "birds", config=config)
    problems = [issue.message for issue in refused.value.issues]
    assert [issue.row for issue in refused.value.issues] == [2, 3, 4, 5]
    assert all(message.startswith(OUTSIDE_ROOTS) for message in problems)
    assert not any("looked for" in message or "not found" in message for message in problems)


def test_a_server_on_the_network_needs_sign_in_read_only_or_a_plain_word(tmp_path):
    (tmp_path / "p").mkdir()
    for address in ("0.0.0.0", "192.0.2.7", "127.0.0.2", "myhost"):
        with pytest.raises(ConfigError, match=f"refusing to serve on {address} without sign-in"):
            ServerPolicy.build(projects_root=tmp_path / "p", address=address).check_exposure()
    for fields in ({"address": "localhost"}, {"address": "127.0.0.1"}, {"address": "0.0.0.0", "read_only": True},
                   {"address": "0.0.0.0", "open_to_anyone": True}, {"address": "0.0.0.0", "sign_in": True}):
        ServerPolicy.build(projects_root=tmp_path / "p", **fields).check_exposure()


def test_a_bad_policy_is_refused_naming_the_field(tmp_path):
    (tmp_path / "p").mkdir()
    with pytest.raises(ConfigError, match="not both"):
        ServerPolicy.build(project=tmp_path / "p", projects_root=tmp_path / "p")
    with pytest.raises(ConfigError, match="is not a hibug project"):
        ServerPolicy.build(project=tmp_path / "p")
    with pytest.raises(ConfigError, match="file system's root"):
        ServerPolicy.build(projects_root=tmp_path / "p", data_roots=(Path("/"),))
    with pytest.raises(ConfigError, match="max_jobs"):
        ServerPolicy.build(projects_root=tmp_path / "p", max_jobs=0)
    with pytest.raises(ConfigError, match="unknown role 'owner'"):
        ServerPolicy.build(projects_root=tmp_path / "p", roles={"owner": ["a@b.c"]})


def test_roles_come_from_identities_and_patterns_and_read_only_caps_them(tmp_path):
    roles_file = tmp_path / "roles.toml"
    roles_file.write_text('admin = ["Ada@Example.com"]\neditor = ["*@team.example.com"]\nviewer = ["*@example.com"]\n')
    roles = RoleMap.from_file(roles_file)
    assert roles.role_of("ada@example.com") is Role.ADMIN
    assert roles.role_of("bo@team.example.com") is Role.EDITOR
    assert roles.role_of("cy@example.com") is Role.VIEWER
    assert roles.role_of("mallory@evil.example") is None  # no entry: no access
    (tmp_path / "p").mkdir()
    signed = ServerPolicy.build(projects_root=tmp_path / "p", sign_in=True, roles=roles.as_mapping())
    assert signed.role_of(None) is None and signed.role_of("ada@example.com") is Role.ADMIN
    read_only = signed.model_copy(update={"read_only": True})
    assert read_only.role_of("ada@example.com") is Role.VIEWER
    assert ServerPolicy.build(projects_root=tmp_path / "p").role_of(None) is Role.ADMIN  # one's own machine
    assert ServerPolicy.build(projects_root=tmp_path / "p", address="0.0.0.0",
                              open_to_anyone=True).role_of(None) is Role.EDITOR
    bad = tmp_path / "bad.toml"
    bad.write_text('editor = "not a list" \nviewer = [1]\n')
    with pytest.raises(ConfigError, match="'viewer' must be a list of identities"):
        RoleMap.from_file(bad)


def test_the_policy_travels_to_the_dashboard_through_its_environment(server):
    policy, _ = server
    assert ServerPolicy.from_environment(policy.to_environment()) == policy
    with pytest.raises(ConfigError, match="HIBUG_SERVER"):
        ServerPolicy.from_environment({"HIBUG_SERVER": '{"project": 3, "surprise": true}'})
    assert ServerPolicy.from_environment({}).served_projects() == {}


def test_a_viewer_changes_nothing_an_editor_edits_and_only_an_admin_creates_or_deletes(server):
    from hibug_core.jobs.worker import submit
    from hibug_core.review.views import save_view
    from hibug_core.store.project import Project

    from job_helpers import job_op

    policy, tmp_path = server
    folder = policy.project_folder("birds")
    with Project.open(folder) as project:
        with acting_as(VIEWER):
            with pytest.raises(AccessDenied, match="vic@example.com is a viewer here and may not edit"):
                save_view(project, "mine", "Error_slices", {"gap": "0.1"}, author="vic")
            with pytest.raises(AccessDenied, match="may not start a job"):
                submit(project, job_op("embed", {"encoder": "conse"}))
        with acting_as(EDITOR):
            save_view(project, "mine", "Error_slices", {"gap": "0.1"}, author="somebody else")
            with pytest.raises(AccessDenied, match="may not create a project"):
                Project.create(tmp_path / "projects" / "new")
            with pytest.raises(AccessDenied, match="may not delete a project"):
                Project.delete(folder)
        log = project.audit_log()
        assert log[log["action"] == "save view"]["actor"].tolist() == ["eddie@example.com"]  # the sign-in, not a name
        assert not (tmp_path / "projects" / "new").exists()
    with acting_as(ADMIN):
        Project.create(tmp_path / "projects" / "new").close()
        Project.delete(tmp_path / "projects" / "new")
    assert not (tmp_path / "projects" / "new").exists()


def test_only_the_one_who_started_a_job_or_an_admin_may_cancel_it(server):
    from hibug_core.jobs.store import create_job, get_job, request_cancel
    from hibug_core.store.project import Project

    policy, _ = server
    with Project.open(policy.project_folder("birds")) as project:
        with acting_as(EDITOR):
            job = create_job(project, "embed", {}, author="typed name")
        assert get_job(project, job).author == "eddie@example.com"
        with acting_as(Actor("other@example.com", Role.EDITOR)), pytest.raises(AccessDenied, match="someone else"):
            request_cancel(project, job)
        with acting_as(EDITOR):
            request_cancel(project, job)
        with acting_as(ADMIN):
            request_cancel(project, job)
        assert get_job(project, job).cancel_requested


def test_an_older_project_opened_by_a_viewer_is_still_upgraded(server):
    from hibug_core.store.project import DB_FILE, Project

    policy, _ = server
    folder = policy.project_folder("birds")
    with sqlite3.connect(folder / DB_FILE) as db:
        newest = db.execute("SELECT MAX(version) FROM schema_migrations").fetchone()[0]
        db.execute("DELETE FROM schema_migrations WHERE version = ?", (newest,))
    with acting_as(VIEWER):
        Project.open(folder).close()  # hibug's own upkeep, not the viewer's edit
    with sqlite3.connect(folder / DB_FILE) as db:
        assert db.execute("SELECT MAX(version) FROM schema_migrations").fetchone()[0] == newest
    assert os.access(folder, os.W_OK)


def test_hibug_serve_refuses_to_start_open_to_the_network_or_with_sign_in_and_no_roles(server, capsys):
    from hibug_core.cli import main

    _, tmp_path = server
    root = str(tmp_path / "projects")
    assert main(["serve", "--projects-root", root, "--address", "0.0.0.0"]) != 0
    assert "refusing to serve on 0.0.0.0 without sign-in" in capsys.readouterr().err
    secrets_file = tmp_path / "secrets.toml"
    secrets_file.write_text('[auth]\nclient_id = "x"\n')
    assert main(["serve", "--projects-root", root, "--address", "0.0.0.0", "--secrets", str(secrets_file)]) != 0
    assert "nobody has a role" in capsys.readouterr().err
    assert main(["serve", root, "--projects-root", root]) != 0
    assert "serve one project" in capsys.readouterr().err
    assert main(["serve", "--projects-root", root, "--data-root", str(tmp_path / "nowhere")]) != 0
    assert "data_roots: data roots must be folders" in capsys.readouterr().err


def test_names_typed_on_a_shared_server_reach_only_its_data_roots_and_no_code(server, monkeypatch):
    from hibug_core.access import Reach
    from hibug_core.llm.client import LLMConfig, make_client
    from hibug_core.models.registry import load_model

    policy, tmp_path = server
    monkeypatch.setenv("HIBUG_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    reach = policy.reach()
    assert reach.llm_base_url == "http://127.0.0.1:9/v1"
    assert ServerPolicy.build(projects_root=tmp_path / "projects").reach() is None  # one's own machine: no limit
    data = tmp_path / "data"
    (data / "escape").symlink_to(tmp_path / "elsewhere")
    reach.check_spec("model", f"timm:resnet18:{data / 'birds' / 'net.pth'}")  # inside a data root
    reach.check_spec("encoder", "transformers:openai/clip-vit-base-patch32")  # a hub id, not a file
    for spec in ["timm:resnet18:/etc/passwd", f"timm:resnet18:{data / 'escape' / 'passwd'}",
                 f"open_clip:ViT-B-32:{data}/../elsewhere/passwd", "transformers:~/.cache"]:
        with pytest.raises(AccessDenied, match="outside this server's data roots"):
            reach.check_spec("model", spec)
    shared = Actor("eddie@example.com", Role.EDITOR, reach)
    with acting_as(shared):
        with pytest.raises(AccessDenied, match="would run code of its own"):
            load_model("python:os:getcwd")
        with pytest.raises(AccessDenied, match="outside this server's data roots"):
            load_model("timm:resnet18:/etc/passwd")
        with pytest.raises(AccessDenied, match="contacts only the language-model server it was started with"):
            make_client(LLMConfig(base_url="http://169.254.169.254/latest"))
        make_client(LLMConfig(base_url="http://127.0.0.1:9/v1/"), api_key="k")  # the server's own: allowed
    assert Reach(("/data",)).with_roots("/data", "/srv") == Reach(("/data", "/srv"))


@pytest.mark.slow
def test_a_job_started_on_a_shared_server_reaches_what_its_starter_may(server):
    from hibug_core.jobs.worker import submit
    from hibug_core.store.project import Project

    from job_helpers import job_op, wait_for

    policy, _ = server
    with Project.open(policy.project_folder("birds")) as project:
        with acting_as(Actor("eddie@example.com", Role.EDITOR, policy.reach())):
            job = submit(project, job_op("embed", {"encoder": "open_clip:ViT-B-32:/etc/passwd"}))
        failed = wait_for(project, job, {"failed", "done"}, timeout=180)
    assert failed.status == "failed" and "names a file outside this server's data roots" in failed.error
