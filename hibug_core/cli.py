"""The `hibug` command line: create, inspect and serve projects, and run the demo."""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

from hibug_core.errors import HibugError

REPO_ROOT = Path(__file__).resolve().parents[1]
APP = REPO_ROOT / "app.py"


def _progress():
    from hibug_core.progress import tqdm_progress

    return tqdm_progress()


def cmd_new(args) -> int:
    from hibug_core.ingest import load_manifest
    from hibug_core.ingest.image_folder import load_image_folder
    from hibug_core.store.project import Project

    report, close = _progress()
    try:
        if args.image_folder:
            if not args.predictions:
                raise HibugError("--image-folder needs --predictions (a CSV with an 'image' column relative to it)")
            manifest = load_image_folder(args.image_folder, args.predictions, default_model=args.model_name,
                                         progress=report)
        else:
            manifest = load_manifest(args.manifest, default_model=args.model_name, progress=report)
        if args.command == "import":
            with Project.open(args.project) as project:
                project.import_manifest(manifest)
        else:
            Project.create_from_manifest(args.project, manifest, name=args.name).close()
    finally:
        close()
    print(f"{'imported' if args.command == 'import' else 'created'} {args.project}: {manifest.n_rows} samples, "
          f"models: {', '.join(manifest.models)}")
    if manifest.known_tags:
        print(f"known attributes: {', '.join(manifest.known_tags)}")
    if manifest.ignored_columns:
        print(f"ignored columns (not in the data contract): {', '.join(manifest.ignored_columns)}")
    return 0


def cmd_info(args) -> int:
    from hibug_core.store.project import Project

    with Project.open(args.project) as project:
        info = project.describe()
    if args.json:
        print(json.dumps(info, indent=2, default=str))
        return 0
    print(f"project   {info['name']}  ({info['folder']})")
    print(f"schema    v{info['schema_version']}")
    print("samples   " + ", ".join(f"{k}: {v}" for k, v in sorted(info["splits"].items())) +
          f"  (total {sum(info['splits'].values())})")
    for row in info["scores"]:
        score = "n/a (unlabelled)" if row["n"] == 0 else f"{row['mean_score']:.4f} over {row['n']}"
        print(f"model     {row['model']:<20} {row['split']:<6} mean score {score}")
    return 0


def serve(project: Path, port: int, address: str, headless: bool = True) -> int:
    """Run the dashboard on a project (replaces this process with streamlit)."""
    if not APP.exists():
        raise HibugError(f"the dashboard files are not next to hibug_core ({APP} is missing); "
                         "install hibug from its source folder with `pip install -e .`")
    env = dict(os.environ, HIBUG_PROJECT=str(Path(project).resolve()))
    command = [sys.executable, "-m", "streamlit", "run", str(APP), "--server.port", str(port),
               "--server.address", address, "--server.headless", "true" if headless else "false"]
    os.chdir(REPO_ROOT)  # .streamlit/config.toml is read from the working folder
    os.execve(sys.executable, command, env)
    return 0


def cmd_serve(args) -> int:
    from hibug_core.store.project import Project

    Project.open(args.project).close()  # a clear error now beats one in the browser
    return serve(Path(args.project), args.port, args.address)


def cmd_demo(args) -> int:
    from hibug_core.demo import DemoConfig, ensure_demo

    report, close = _progress()
    try:
        project = ensure_demo(args.dir, DemoConfig(), progress=report)
    finally:
        close()
    print(f"demo project ready in {project.folder}")
    project.close()
    if args.build_only:
        return 0
    print(f"opening the dashboard on http://localhost:{args.port}")
    return serve(Path(args.dir), args.port, args.address)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hibug", description="Find, explain and repair the error slices of "
                                     "computer-vision models.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what the library does")
    sub = parser.add_subparsers(dest="command", required=True)

    for name, help_text in (("new", "create a project from a manifest or an image folder"),
                            ("import", "add the rows of a manifest to an existing project")):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("project", help="project folder")
        source = p.add_mutually_exclusive_group(required=True)
        source.add_argument("--manifest", help="CSV or Parquet manifest (see README: manifest format)")
        source.add_argument("--image-folder", help="root of a <split>/<label>/*.jpg tree")
        p.add_argument("--predictions", help="with --image-folder: CSV of model outputs, 'image' relative to root")
        p.add_argument("--model-name", default="model", help="name of the model in the 'prediction' column")
        if name == "new":
            p.add_argument("--name", help="display name of the project (default: the folder name)")
        p.set_defaults(handler=cmd_new)

    p = sub.add_parser("info", help="summarise a project")
    p.add_argument("project")
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.set_defaults(handler=cmd_info)

    for name, help_text in (("serve", "open the dashboard on a project"),
                            ("demo", "build the demo project if needed and open the dashboard on it")):
        p = sub.add_parser(name, help=help_text)
        if name == "serve":
            p.add_argument("project")
            p.set_defaults(handler=cmd_serve)
        else:
            p.add_argument("--dir", default="hibug-demo", help="folder of the demo project (default: ./hibug-demo)")
            p.add_argument("--build-only", action="store_true", help="build the demo project, do not serve it")
            p.set_defaults(handler=cmd_demo)
        p.add_argument("--port", type=int, default=8501)
        p.add_argument("--address", default="localhost")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")
    try:
        return args.handler(args)
    except HibugError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; nothing half-written was kept", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
