"""A team's project on PostgreSQL is a folder that names its database: `hibug new --database` makes it, and the
command line, the dashboard's pages and a served projects root open it as they open a SQLite one; the password is
never on the command line nor in the folder, a used database is refused, and a failed creation or a removal leaves
no table behind."""
from __future__ import annotations

import pytest
from PIL import Image
from sqlalchemy import create_engine, inspect

from page_support import REPO, open_page, serve


def write_manifest(folder) -> str:
    """200 validation images wrong on the blue ones (half of them) and a second model, `v2`, right on them."""
    folder.mkdir()
    Image.new("RGB", (8, 8), (90, 110, 130)).save(folder / "x.png")
    rows = ["id,image,label,prediction,pred:v2,split,attr:color,attr:shape"]
    for i in range(200):
        colour, shape = ("blue", "red")[i % 2], ("circle", "square", "star")[i % 3]
        label = ("cat", "dog")[i % 4 // 2]
        wrong = colour == "blue" and i % 10 < 8
        predicted = ("dog" if label == "cat" else "cat") if wrong else label
        rows.append(f"s{i},x.png,{label},{predicted},{label},val,{colour},{shape}")
    (folder / "manifest.csv").write_text("\n".join(rows) + "\n")
    return str(folder / "manifest.csv")


def tables(url: str) -> list[str]:
    engine = create_engine(url)
    try:
        return inspect(engine).get_table_names()
    finally:
        engine.dispose()


def test_a_project_on_postgresql_opens_from_its_folder_everywhere(postgres_database, tmp_path, monkeypatch, capsys):
    from hibug_core.cli import main
    from hibug_core.serving.policy import ServerPolicy
    from hibug_core.store.project import Project

    manifest = write_manifest(tmp_path / "data")
    folder = tmp_path / "projects" / "team"
    assert main(["new", str(folder), "--manifest", manifest, "--database", postgres_database]) == 0
    assert (folder / "hibug.postgres").read_text().strip() == postgres_database
    assert not (folder / "hibug.sqlite").exists() and "project_meta" in tables(postgres_database)

    capsys.readouterr()
    assert main(["info", str(folder)]) == 0
    assert "200" in capsys.readouterr().out
    assert main(["slices", str(folder)]) == 0
    assert "color = blue" in capsys.readouterr().out
    with Project.open(folder, read_only=True) as project:
        assert project.engine.dialect.name == "postgresql"
        assert project.models() == ["model", "v2"] and len(project.samples()) == 200

    at = open_page(monkeypatch, "app.py", folder)
    assert any("val" in m.label for m in at.metric)
    at = open_page(monkeypatch, "pages/4_Error_slices.py", folder)
    assert "color = blue" in " ".join(h.value for h in at.subheader)
    at = open_page(monkeypatch, "pages/7_Compare.py", folder)
    assert any("v2" in m.label for m in at.metric)
    # Every page, failures shown as messages included: SQL that SQLite takes and PostgreSQL refuses (an ORDER BY
    # beside a COUNT) reached the Overview as an error message, not as an exception.
    at = open_page(monkeypatch, "app.py", folder)
    assert not at.exception and not at.error, [e.value for e in at.error]
    titles = []
    for page in sorted(str(p.relative_to(REPO)) for p in (REPO / "pages").glob("*.py")):
        at.switch_page(page).run()
        assert not at.exception and not at.error, (page, [e.value for e in at.error])
        titles.append(at.title[0].value)
    assert titles == ["Attributes", "Tagging", "Embedding map", "Error slices", "Repair", "Review", "Compare models"]

    # A projects root lists it beside SQLite projects; its link file is held to the root as a database file is.
    policy = ServerPolicy.build(projects_root=folder.parent)
    assert policy.served_projects() == {"team": folder.resolve()}
    serve(monkeypatch, projects_root=folder.parent)
    assert not open_page(monkeypatch, "app.py", None, project="team").exception


def test_the_password_stays_out_and_a_used_or_unreachable_database_is_refused(postgres_database, tmp_path, capsys):
    from hibug_core.cli import main
    from hibug_core.errors import ProjectError
    from hibug_core.store.project import Project

    manifest = write_manifest(tmp_path / "data")
    with_password = postgres_database.replace("://postgres@", "://postgres:s3cret-word@")
    assert main(["new", str(tmp_path / "a"), "--manifest", manifest, "--database", with_password]) != 0
    said = capsys.readouterr()
    assert "PGPASSWORD" in said.err and "s3cret-word" not in said.out + said.err
    assert not (tmp_path / "a").exists() and tables(postgres_database) == []

    # Through the API a URL may carry the password; the folder keeps the URL without it.
    Project.create(tmp_path / "b", db_url=with_password).close()
    assert "s3cret-word" not in (tmp_path / "b" / "hibug.postgres").read_text()
    assert main(["new", str(tmp_path / "c"), "--manifest", manifest, "--database", postgres_database]) != 0
    assert "already holds a hibug project" in capsys.readouterr().err and not (tmp_path / "c").exists()

    (tmp_path / "b" / "hibug.postgres").write_text("mysql://root@127.0.0.1/x\n")
    with pytest.raises(ProjectError, match="hibug.postgres: hibug keeps a project's metadata on PostgreSQL"):
        Project.open(tmp_path / "b")
    (tmp_path / "b" / "hibug.postgres").write_text("postgresql://nobody@127.0.0.1:1/nothing\n")
    with pytest.raises(ProjectError, match="cannot reach the project's database nothing on 127.0.0.1:1: .*Connection "
                                           "refused.*PGPASSWORD"):
        Project.open(tmp_path / "b")


def test_a_failed_creation_and_a_removal_leave_no_table(postgres_database, tmp_path, monkeypatch):
    from hibug_core.store.project import Project
    from hibug_core.tasks import load_manifest

    manifest = load_manifest(write_manifest(tmp_path / "data"))

    def fails(*args, **kwargs):
        raise OSError("No space left on device")

    with monkeypatch.context() as patched:
        patched.setattr(Project, "import_manifest", fails)
        with pytest.raises(OSError):
            Project.create_from_manifest(tmp_path / "p", manifest, db_url=postgres_database)
    assert not (tmp_path / "p").exists() and tables(postgres_database) == []

    Project.create_from_manifest(tmp_path / "p", manifest, db_url=postgres_database).close()
    assert "samples" in tables(postgres_database)
    Project.delete(tmp_path / "p")
    assert not (tmp_path / "p").exists() and tables(postgres_database) == []


def test_a_creation_that_fails_half_way_leaves_the_database_empty_and_the_folder_unlinked(postgres_database, tmp_path,
                                                                                          monkeypatch):
    import hibug_core.store.project as store

    migrate = store.migrate

    def full_disk(engine):  # the tables made, then the disk full
        migrate(engine)
        assert "project_meta" in tables(postgres_database)
        raise OSError("No space left on device")

    monkeypatch.setattr(store, "migrate", full_disk)
    with pytest.raises(OSError):
        store.Project.create(tmp_path / "p", db_url=postgres_database)
    assert not (tmp_path / "p" / "hibug.postgres").exists() and tables(postgres_database) == []
    monkeypatch.undo()
    store.Project.create(tmp_path / "p", db_url=postgres_database).close()  # the same folder and database, again
    with store.Project.open(tmp_path / "p", read_only=True) as project:
        assert project.models() == []
