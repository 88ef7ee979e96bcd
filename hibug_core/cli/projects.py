"""Commands on whole projects: new, import, record, info, serve, mcp and demo."""
from __future__ import annotations

import json
from pathlib import Path

from hibug_core.cli.command import Command, progress_bar
from hibug_core.errors import HibugError


def _new_arguments(parser) -> None:
    parser.add_argument("project", help="project folder")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--manifest", help="CSV or Parquet manifest (see README: manifest format)")
    source.add_argument("--image-folder", help="root of a <split>/<label>/*.jpg tree")
    source.add_argument("--hf-dataset", help="a Hugging Face `datasets` dataset: a folder saved with save_to_disk, a "
                        "folder load_dataset reads, or a hub id in the cache")
    source.add_argument("--coco", metavar="INSTANCES_JSON", help="COCO ground truth (boxes, optional keypoints and "
                        "iscrowd): one sample per object (see README: Objects)")
    parser.add_argument("--task", help="with --coco: the task to read the files as, where they carry more than it "
                        "needs (e.g. detection from files with masks; default: the task their shapes say: boxes, "
                        "keypoints, or masks in the truth and every results file; for an import, the project's)")
    parser.add_argument("--results", nargs="+", default=[], metavar="[MODEL=]RESULTS_JSON",
                        help="with --coco: one COCO results file per model (named by its file, or MODEL=)")
    parser.add_argument("--split", default="val", help="with --coco: the split of its images (default: val)")
    parser.add_argument("--unlabelled", action="store_true", help="with --coco: the images are not annotated yet (a "
                        "pool to select from): the instances file lists them only, every detection is a sample")
    parser.add_argument("--iou-threshold", type=float, help="with --coco: IoU (OKS for keypoints) at which a "
                        "detection finds its object (default: 0.5; for an import, the project's)")
    parser.add_argument("--keypoint-sigmas", help="with --coco: OKS sigmas, comma-separated, one per keypoint "
                        "(default: for an import, the project's; else the category's own 'sigmas', else COCO's for "
                        "its 17 person keypoints)")
    parser.add_argument("--predictions", help="with --image-folder: CSV of model outputs, 'image' relative to root")
    parser.add_argument("--image-column", default="image", help="with --hf-dataset: the image column")
    parser.add_argument("--label-column", default="label", help="with --hf-dataset: the label column")
    parser.add_argument("--split-column", help="with --hf-dataset: a column of splits (default: the dataset's splits)")
    parser.add_argument("--images-dir", help="with --hf-dataset: where its images are written as files (default: "
                        "PROJECT-images beside the project); with --coco: where its file_names are (default: the "
                        "ground truth's folder)")
    parser.add_argument("--model-name", default="model", help="name of the model in the 'prediction' column")


def _import_arguments(parser) -> None:
    _new_arguments(parser)
    parser.add_argument("--models-only", action="store_true", help="add only the model outputs of rows already in "
                        "the project (matched by id, or by image; same labels and splits), e.g. a new version of the "
                        "model run on the same images, to compare (`hibug compare`, `hibug check`); with --coco, the "
                        "project's ground-truth file and the new model's --results NAME=results.json (matched as at "
                        "creation; its false positives are added as samples of its own)")


def _new_with_name(parser) -> None:
    _new_arguments(parser)
    parser.add_argument("--name", help="display name of the project (default: the folder name)")
    parser.add_argument("--database", metavar="URL", help="keep the project's tables on this PostgreSQL database "
                        "(postgresql://user@host:5432/database, an empty one; the password comes from PGPASSWORD or "
                        "~/.pgpass, never the command line) instead of the folder's SQLite file; the folder names it "
                        "and keeps the arrays and column files")


def _database(url: str | None) -> str | None:
    """The PostgreSQL URL `hibug new --database` was given, refused when it carries a password (a command line is
    seen by every user of the machine, and kept in shell histories)."""
    if url is None:
        return None
    from sqlalchemy.engine import make_url

    from hibug_core.store.location import postgres_url

    url = postgres_url(url)
    if make_url(url).password is not None:
        raise HibugError("give the database's password in PGPASSWORD or ~/.pgpass, not in the URL (a command line is "
                         "seen by every user of the machine)")
    return url


def cmd_new(args) -> int:
    from hibug_core.ingest.image_folder import load_image_folder
    from hibug_core.store.project import Project
    from hibug_core.tasks import load_manifest

    if args.command == "import":  # refused before the manifest is read, not after
        with Project.open(args.project) as project:
            project.require_writable("an import")
    report, close = progress_bar()
    try:
        if args.image_folder:
            if not args.predictions:
                raise HibugError("--image-folder needs --predictions (a CSV with an 'image' column relative to it)")
            manifest = load_image_folder(args.image_folder, args.predictions, default_model=args.model_name,
                                         progress=report)
        elif args.hf_dataset:
            from hibug_core.ingest.hf_dataset import load_hf_dataset

            project = Path(args.project).expanduser().resolve()
            manifest = load_hf_dataset(args.hf_dataset, args.images_dir or project.with_name(project.name + "-images"),
                                       image_column=args.image_column, label_column=args.label_column,
                                       split_column=args.split_column, default_model=args.model_name, progress=report)
        elif args.coco:
            manifest = _load_coco(args, report)
        else:
            manifest = load_manifest(args.manifest, default_model=args.model_name, progress=report)
        summary = None
        if getattr(args, "models_only", False):
            with Project.open(args.project) as project:
                summary = project.add_model_outputs(manifest)
        elif args.command == "import":
            with Project.open(args.project) as project:
                summary = project.import_manifest(manifest)
        else:
            Project.create_from_manifest(args.project, manifest, name=args.name,
                                         db_url=_database(args.database)).close()
    finally:
        close()
    if getattr(args, "models_only", False) and manifest.objects is not None:
        from hibug_core.objects.coco import DETECTION_KIND
        from hibug_core.tasks import task_named

        own = int((manifest.objects["object_kind"] == DETECTION_KIND).sum())
        print(f"added to {args.project}: {', '.join(manifest.models)} on "
              f"{task_named(manifest.task).nouns.count(manifest.n_rows - own)} already there, and its {own:,} false "
              "positives as samples of their own")
    elif getattr(args, "models_only", False):
        unread = f" (its attr: columns were not read: {', '.join(manifest.known_tags)})" if manifest.known_tags else ""
        print(f"added to {args.project}: {', '.join(manifest.models)} on {manifest.n_rows} samples already there"
              + unread)
    else:
        rows = f"{manifest.n_rows:,} sample{'s' if manifest.n_rows != 1 else ''}"
        print(f"{'imported' if args.command == 'import' else 'created'} {args.project}: {rows}, "
              f"models: {', '.join(manifest.models) or 'none yet (run yours: hibug predict PROJECT --model SPEC)'}")
    if manifest.known_tags and not getattr(args, "models_only", False):
        print(f"known attributes: {', '.join(manifest.known_tags)}")
    if manifest.ignored_columns:
        from hibug_core.ingest.manifest import ignored_note
        print(ignored_note(manifest.ignored_columns))
    for note in manifest.notes:
        print(f"changed to the stored form: {note}")
    for warning in manifest.warnings + (summary.warnings if summary is not None else []):
        print(f"warning: {warning}")
    return 0


def _load_coco(args, report):
    from hibug_core.objects.matching import stored_match_config
    from hibug_core.tasks import load_coco

    if not args.results:
        raise HibugError("--coco needs --results: one COCO results file per model ([MODEL=]results.json)")
    results = {}
    for item in args.results:
        name, _, path = item.rpartition("=")
        name = name or Path(path).stem
        if name in results:
            raise HibugError(f"two results files are named '{name}'; name them: MODEL=results.json")
        results[name] = path
    try:
        sigmas = tuple(float(v) for v in args.keypoint_sigmas.split(",")) if args.keypoint_sigmas else None
    except ValueError:
        raise HibugError(f"--keypoint-sigmas: '{args.keypoint_sigmas}' is not comma-separated numbers") from None
    geometry, stored, task = _project_settings(args)
    if args.task and task and args.task != task:
        raise HibugError(f"--task: this project holds {task} samples; import {args.task} samples into a project of "
                         "their own")
    given = {"iou_threshold": args.iou_threshold, "keypoint_sigmas": sigmas}
    if stored:  # the project's objects were matched so: a model added otherwise would not be compared alike
        kept = stored_match_config(stored)
        for name, value in given.items():
            if value is not None and value != getattr(kept, name):
                flag = "--" + name.replace("_", "-")
                raise HibugError(f"{flag}: this project's objects were matched with {getattr(kept, name)}, and every "
                                 "model added to it is matched alike (its figures are compared with the others'); "
                                 f"leave {flag} out, or make a project of its own for other settings")
    config = stored_match_config(stored, **given)
    return load_coco(args.coco, results, images_dir=args.images_dir, split=args.split, match_config=config,
                     geometry=geometry, labelled=not args.unlabelled, task=task or args.task, progress=report)


def _project_settings(args):
    """(the bins the project's measured tags mean, how its objects were matched, its task); COCO's bins and nothing
    stored for a new project: an import adds to a project alike, and a model added to it is matched as the first
    was."""
    from hibug_core.objects.geometry import GeometryConfig
    from hibug_core.store.project import MEASURES_META, Project

    if args.command != "import":
        return GeometryConfig(), {}, None
    with Project.open(args.project) as project:
        return GeometryConfig.from_json(project.meta().get(MEASURES_META)), project.match_settings(), project.task


def _record_arguments(parser) -> None:
    from hibug_core.models.registry import MODELS

    parser.add_argument("project", help="project folder")
    parser.add_argument("model", help="the model, as the project names it (its outputs imported already)")
    parser.add_argument("--spec", required=True, help="the network that gave those outputs, as the model registry "
                        "loads it: " + MODELS.help_text())
    parser.add_argument("--training", metavar="TRAIN_JSON", help="COCO file of what it was trained on, its images "
                        "beside it (required for a detector or pose model: a repair fine-tunes from it, and the "
                        "annotation audit reads it)")


def cmd_record(args) -> int:
    from hibug_core.store.project import Project
    from hibug_core.tasks.model_record import record_model_files

    with Project.open(args.project) as project:
        project.require_writable("recording a model")
        done = record_model_files(project, args.model, args.spec, args.training)
    print(f"recorded '{args.model}': {done.model.spec}")
    if done.model.training:
        print(f"trained on {done.model.training}: {done.training_images} images, {done.in_project} of them in the "
              "project's training split (the annotation audit reads those)")
    print(f"repair it: hibug repair {args.project} --model '{args.model}'")
    return 0


def _remove_arguments(parser) -> None:
    parser.add_argument("project", help="project folder")
    parser.add_argument("--sample", action="append", default=[], metavar="KEY",
                        help="a sample to remove, by its key (as the dashboard's Details show it) or its image's "
                             "path (every sample of that image); repeatable")
    parser.add_argument("--unreadable", action="store_true",
                        help="remove every sample whose image cannot be decoded (each image is read once)")


def cmd_remove(args) -> int:
    from hibug_core.store.project import Project
    from hibug_core.store.removal import remove_samples, samples_of_images, unreadable_samples

    if not args.sample and not args.unreadable:
        raise HibugError("say what to remove: --sample KEY (repeatable) or --unreadable")
    report, close = progress_bar()
    try:
        with Project.open(args.project) as project:
            project.require_writable("removing samples")
            ids, reasons = [], []
            if args.sample:
                samples = project.samples()
                by_key = dict(zip(samples["sample_key"].to_numpy(object).tolist(), samples.index.tolist()))
                by_image = dict(zip(samples["image_path"].map(lambda p: str(Path(p).resolve())), samples.index))
                chosen = [by_key.get(k, by_image.get(str(Path(k).expanduser().resolve()))) for k in args.sample]
                if None in chosen:
                    raise HibugError(f"--sample: no sample {args.sample[chosen.index(None)]!r} in this project (give "
                                     "its key, as the dashboard's Details show it, or its image's path)")
                ids += samples_of_images(project, chosen).tolist()
                reasons.append("named: " + ", ".join(args.sample[:5]) + (" ..." if len(args.sample) > 5 else ""))
            if args.unreadable:
                found, why = unreadable_samples(project, progress=report)
                for line in why:
                    print(f"unreadable: {line}")
                ids += found.tolist()
                reasons.append(f"unreadable images: {len(why)}")
            removed = remove_samples(project, ids, reason="; ".join(reasons))
    finally:
        close()
    print(f"removed {removed} sample{'s' if removed != 1 else ''} from {args.project}" if removed else
          "nothing to remove")
    return 0


def _info_arguments(parser) -> None:
    parser.add_argument("project")
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")
    parser.add_argument("--check", action="store_true", help="check the whole store (SQLite's integrity check and "
                        "every array file read through); exit 1 naming each problem")


def cmd_info(args) -> int:
    from hibug_core.store.health import project_problems
    from hibug_core.store.project import Project

    with Project.open(args.project, read_only=True) as project:
        if args.check:
            problems = project_problems(project)
            for line in problems:
                print(f"damaged: {line}")
            print(f"{len(problems)} problem{'s' if len(problems) != 1 else ''} found" if problems else
                  "the store is whole: the database passes SQLite's integrity check and every array file reads")
            return 1 if problems else 0
        info = project.describe()
    if args.json:
        print(json.dumps(info, indent=2, default=str))
        return 0
    print(f"project   {info['name']}  ({info['folder']})")
    print(f"schema    v{info['schema_version']}")
    print("samples   " + ", ".join(f"{k}: {v}" for k, v in sorted(info["splits"].items())) +
          f"  (total {sum(info['splits'].values())})")
    for row in info["scores"]:  # the neutral name: info loads no task code (`hibug slices` names the measure)
        score = "n/a (unlabelled)" if row["n"] == 0 else f"{row['mean_score']:.4f} over {row['n']}"
        print(f"model     {row['model']:<20} {row['split']:<6} mean score {score}")
    for model, summary in info.get("coco", {}).items():
        print(f"COCO      {model:<20} " + "  ".join(f"{name} {value:.3f}" for name, value in summary.items()
                                                   if name in ("AP", "AP50", "AP75", "AR100", "AR")))
    return 0


def _address_arguments(parser) -> None:
    parser.add_argument("--port", type=int, default=8501, help="port of the dashboard (default: 8501)")
    parser.add_argument("--address", default="localhost",
                        help="address to listen on (default: localhost; 0.0.0.0 to share it on the network, which "
                        "needs sign-in, --read-only or --open-to-anyone: see docs/security.md)")
    parser.add_argument("--data-root", action="append", default=[], metavar="DIR",
                        help="a folder visitors may read manifests and images from when they create a project "
                        "(repeatable; default: none, uploads only name images inside a data root)")
    parser.add_argument("--read-only", action="store_true",
                        help="nothing can be written and no job started: everyone is a viewer")
    parser.add_argument("--open-to-anyone", action="store_true",
                        help="serve beyond this machine without sign-in: ANYONE who reaches it may edit and run jobs")
    parser.add_argument("--roles", metavar="FILE", help="roles file (TOML: admin/editor/viewer = [identities]) for "
                        "people who sign in (default: [hibug.roles] in the secrets)")
    parser.add_argument("--secrets", metavar="FILE", help="Streamlit secrets file with the [auth] section for sign-in "
                        "(default: ~/.streamlit/secrets.toml, then .streamlit/secrets.toml in hibug's folder)")
    parser.add_argument("--max-jobs", type=int, default=1, help="jobs that run at once on this server (default: 1)")
    parser.add_argument("--max-waiting", type=int, default=8, help="jobs that may wait for a free slot (default: 8)")
    parser.add_argument("--max-jobs-per-person", type=int, default=2,
                        help="jobs one person may have running or waiting (default: 2)")


def _serve_arguments(parser) -> None:
    parser.add_argument("project", nargs="?", help="the one project to serve (or --projects-root)")
    parser.add_argument("--projects-root", metavar="DIR", help="serve the projects inside DIR, chosen by name; "
                        "projects created in the dashboard are made there")
    _address_arguments(parser)


def cmd_serve(args) -> int:
    from hibug_core.store.project import Project
    from hibug_ui.launch import serve, server_policy

    if bool(args.project) == bool(args.projects_root):
        raise HibugError("serve one project (hibug serve PROJECT) or the projects of a folder (--projects-root DIR)")
    if args.project:
        Project.open(args.project, read_only=True).close()  # a clear error now beats one in the browser
    policy = server_policy(args, project=args.project, projects_root=args.projects_root)
    return serve(policy, args.port, secrets=args.secrets)


def _mcp_arguments(parser) -> None:
    _serve_arguments(parser)
    parser.add_argument("--http", action="store_true", help="serve over streamable HTTP at http://ADDRESS:PORT/mcp "
                        "(default: over stdio, for one assistant started by its client)")
    parser.set_defaults(port=8000)
    for action in parser._actions:  # the dashboard's words, said for this server
        if action.dest == "port":
            action.help = "port of the HTTP server (default: 8000)"
        elif action.dest == "secrets":
            action.help = ("secrets file with [hibug.mcp_tokens] (identity = \"token\") and [hibug.roles] "
                           "(default: ~/.streamlit/secrets.toml, then .streamlit/secrets.toml in hibug's folder)")


def cmd_mcp(args) -> int:
    from hibug_core.assistants.server import build_server, served_from_options

    if bool(args.project) == bool(args.projects_root):
        raise HibugError("serve one project (hibug mcp PROJECT) or the projects of a folder (--projects-root DIR)")
    if args.project:
        from hibug_core.store.project import Project

        Project.open(args.project, read_only=True).close()  # a clear error now beats one in the assistant
    if not args.http and args.address not in ("localhost", "127.0.0.1", "::1"):
        raise HibugError("--address is for --http; over stdio the server talks to the client that started it")
    served = served_from_options(args)
    if not args.http:
        build_server(served).run("stdio")
        return 0
    host = "[::1]" if args.address == "::1" else args.address
    server = build_server(served, http_url=f"http://{host}:{args.port}")
    print(f"serving MCP at http://{host}:{args.port}/mcp: "
          + ("bearer tokens required" if served.tokens else "read-only for everyone" if served.policy.read_only
             else "OPEN TO ANYONE who reaches it" if served.policy.shared else "this machine only"), flush=True)
    server.run("streamable-http", host=args.address, port=args.port)
    return 0


def _demo_arguments(parser) -> None:
    from hibug_core.demo import DEMOS, demo_folder

    parser.add_argument("--task", choices=DEMOS.names(), default=DEMOS.names()[0], help=DEMOS.help_text())
    parser.add_argument("--dir", help="folder of the demo project (default: " + ", ".join(
        f"./{demo_folder(task)} for {task}" for task in DEMOS.names()) + ")")
    parser.add_argument("--build-only", action="store_true", help="build the demo project, do not serve it")
    _address_arguments(parser)


def cmd_demo(args) -> int:
    from hibug_core.demo import DEMOS, demo_folder

    args.dir = args.dir or demo_folder(args.task)
    report, close = progress_bar()
    try:
        project = DEMOS.build(args.task, folder=args.dir, progress=report)
    finally:
        close()
    print(f"demo project ready in {project.folder}")
    project.close()
    if args.build_only:
        return 0
    from hibug_ui.launch import serve, server_policy

    policy = server_policy(args, project=args.dir)
    print(f"opening the dashboard on http://{args.address}:{args.port}")
    return serve(policy, args.port, secrets=args.secrets)


COMMANDS = {
    "new": Command("create a project from a manifest or an image folder", _new_with_name, cmd_new),
    "import": Command("add the rows of a manifest to an existing project (or, with --models-only, its models' outputs "
                      "on rows already there)", _import_arguments, cmd_new),
    "record": Command("record the network behind a model whose outputs were imported (its checkpoint, and for a "
                      "detector or pose model the annotations it was trained on), so hibug can retrain it",
                      _record_arguments, cmd_record),
    "info": Command("summarise a project", _info_arguments, cmd_info),
    "remove": Command("remove samples from a project with everything stored of them (an image that cannot be read, "
                      "a row imported by mistake); an image's objects go with it", _remove_arguments, cmd_remove),
    "serve": Command("open the dashboard on a project", _serve_arguments, cmd_serve),
    "mcp": Command("serve a project (or a projects root) to assistants over the Model Context Protocol: stdio, or "
                   "streamable HTTP with bearer tokens for a team (docs/assistants.md)", _mcp_arguments, cmd_mcp),
    "demo": Command("build the demo project if needed and open the dashboard on it", _demo_arguments, cmd_demo),
}
