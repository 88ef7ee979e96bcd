"""The `hibug` command line: create, inspect and serve projects, embed and tag images, and run the demo."""
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


def cmd_embed(args) -> int:
    from hibug_core.embeddings.compute import EmbedConfig, embed_project
    from hibug_core.store.project import Project

    report, close = _progress()
    try:
        with Project.open(args.project) as project:
            ids = project.split_ids(args.split)
            if args.ray:
                from hibug_core.embeddings.ray_backend import embed_with_ray

                embeddings = embed_with_ray(project, args.encoder, sample_ids=ids, batch_size=args.batch_size,
                                            actors=args.ray_actors, address=args.ray_address, progress=report)
            else:
                embeddings = embed_project(project, args.encoder, sample_ids=ids, progress=report,
                                           config=EmbedConfig(batch_size=args.batch_size, workers=args.workers))
    finally:
        close()
    print(f"{len(embeddings.sample_ids)} samples embedded with {args.encoder} "
          f"(dimension {embeddings.embedding.shape[1]}); stored in the project")
    return 0


def _print_sources(project) -> None:
    """Every tag source per attribute with its measured accuracy; the one in force marked."""
    from hibug_core.store.attribute_versions import load_schema
    from hibug_core.tagging.sources import rank_sources, trust_message

    names = [a.name for a in load_schema(project).attributes]
    ranking = rank_sources(project, names)
    for attribute, rows in ranking.table.groupby("attribute", sort=False):
        print(f"{attribute}:")
        for row in rows.itertuples():
            accuracy = f"{row.accuracy:6.1%} [{row.low:.0%}, {row.high:.0%}] on {row.checked:,}" if row.checked else \
                f"{'':6} ({row.against})"
            mark = "in force" + (" (chosen)" if row.chosen else "") if row.in_force else ""
            print(f"  {row.source:<10} {row.label:<40} {accuracy:<36} {mark}")
    message = trust_message(ranking)
    if message:
        print(message)


def cmd_tags(args) -> int:
    from hibug_core.store import tag_store
    from hibug_core.store.project import Project

    with Project.open(args.project) as project:
        for choice in args.choose or []:
            attribute, _, source = choice.rpartition("=")
            if not attribute:
                raise HibugError(f"--choose takes ATTRIBUTE=SOURCE (SOURCE: auto, imported or run:<id>), not {choice!r}")
            tag_store.choose_source(project, attribute.strip(), source.strip())
        _print_sources(project)
    return 0


def cmd_tag(args) -> int:
    from hibug_core.store.project import Project

    attributes = [a.strip() for a in args.attributes.split(",")] if args.attributes else None
    report, close = _progress()
    try:
        with Project.open(args.project) as project:
            ids = project.split_ids(args.split)
            if args.llm:
                from hibug_core.llm.client import LLMConfig
                from hibug_core.tagging.mllm import tag_with_llm

                config = LLMConfig.from_env(model=args.llm_model, base_url=args.llm_base_url)
                runs = [tag_with_llm(project, config, attributes=attributes, sample_ids=ids, progress=report)]
            else:
                from hibug_core.tagging.run import tag_project

                runs = tag_project(project, encoder=args.encoder, attributes=attributes, model=args.model,
                                   sample_ids=ids, progress=report)
            close()
            from hibug_core.tagging.sources import run_summary

            print(f"tagging runs stored: {', '.join(f'#{r}' for r in runs)}")
            print("\n".join(run_summary(project, runs)))
    finally:
        close()
    return 0


def _find_sample(samples, value: str) -> int | None:
    """A sample by its manifest id, its image path, or the end of its image path (e.g. images/cat.jpg)."""
    for column in ("sample_key", "image_path"):
        hits = samples.index[samples[column] == value]
        if len(hits):
            return int(hits[0])
    hits = samples.index[samples["image_path"].str.endswith("/" + value.lstrip("./"))]
    return int(hits[0]) if len(hits) == 1 else None


def cmd_teach(args) -> int:
    import pandas as pd

    from hibug_core.store.project import Project
    from hibug_core.tagging.run import teach

    examples = pd.read_csv(args.examples, dtype=str)
    if not {"sample", "tag"} <= set(examples.columns):
        raise HibugError(f"{args.examples} needs the columns 'sample' (the manifest id or image path) and 'tag'")
    with Project.open(args.project) as project:
        samples = project.samples()
        ids = [_find_sample(samples, value) for value in examples["sample"]]
        unknown = [v for v, i in zip(examples["sample"], ids) if i is None]
        if unknown:
            raise HibugError(f"{len(unknown)} example(s) name samples that are not in the project, e.g. {unknown[0]!r}")
        run_id, report = teach(project, args.attribute, dict(zip(ids, examples["tag"])), encoder=args.encoder)
    print(f"taught '{args.attribute}' from {sum(report.examples.values())} examples: cross-validated accuracy "
          f"{report.cv_accuracy:.1%} ± {report.cv_std:.1%} over {report.folds} folds; run #{run_id}")
    return 0


def cmd_slices(args) -> int:
    from hibug_core.slices.report import error_slices
    from hibug_core.slices.search import SliceConfig
    from hibug_core.store.project import Project

    from hibug_core.tagging.sources import rank_sources, trust_message

    config = SliceConfig(max_depth=args.depth, min_support=args.support, gap=args.gap, threshold=args.threshold,
                         rank_by=args.rank_by, by_class=args.by_class)
    attributes = [a.strip() for a in args.attributes.split(",")] if args.attributes else None
    with Project.open(args.project) as project:
        report = error_slices(project, args.model, split=args.split, config=config, attributes=attributes,
                              tags=args.tags)
        sliced = [c for c in report.all_tags.columns if c in {a.name for a in _schema_attributes(project)}]
        message = trust_message(rank_sources(project, sliced)) if args.tags == "in force" and sliced else None
    slices = report.slices
    if args.output:
        table = slices.drop(columns=["definition"])
        table.index = table.index + 1
        table.to_json(args.output, orient="records", indent=2) if args.output.endswith(".json") else \
            table.to_csv(args.output)
    if message:
        print(f"warning: {message}")
    print(f"{report.model} on {report.split}: score {report.overall_score:.1%} over {len(report.evaluation)} samples; "
          f"{report.enumerated} slices enumerated, {len(slices)} error slices (score below {slices.attrs['cut']:.1%})")
    for rank, row in slices.head(args.top).iterrows():
        print(f"{rank + 1:>3}. {row['description']:<50} n={row['count']:<5} score {row['score']:6.1%} "
              f"[{row['score_low']:.0%}, {row['score_high']:.0%}] q={row['q_value']:.1e}  {row['bug_type']}: "
              f"{row['reason']}{_precision_note(row)}")
    rare = report.rare_classes[report.rare_classes["rare"]]
    if len(rare):
        print("rare classes in training: " + ", ".join(f"{c} ({n})" for c, n in zip(rare["class"], rare["train_count"])))
    return 0


def _schema_attributes(project):
    from hibug_core.store.attribute_versions import latest_version, load_schema

    return load_schema(project).attributes if latest_version(project) is not None else []


def _precision_note(row) -> str:
    if not row["tag_checked"]:
        return ""
    note = f" (tags right on {row['tag_precision']:.0%} of {row['tag_checked']:,} checked images)"
    return note if row["trusted"] else f" UNTRUSTED TAGS{note}"


def cmd_bench(args) -> int:
    from dataclasses import replace

    from hibug_core.bench.run import TAGGERS, BenchConfig, run_benchmark
    from hibug_core.bench.summary import markdown_table, summary_tables, write_results

    defaults = BenchConfig()
    taggers = tuple(args.taggers.split(",")) if args.taggers else defaults.taggers + (("llm",) if args.llm else ())
    spurious, rare = (3, 3) if args.quick else (args.spurious, args.rare)
    llm = None
    if args.llm:
        from hibug_core.llm.client import LLMConfig

        llm = LLMConfig.from_env(model=args.llm_model, base_url=args.llm_base_url)
    config = BenchConfig(n_spurious=spurious, n_rare=rare, seed=args.seed, taggers=taggers, top_n=args.top,
                         slices=replace(defaults.slices, gap=args.gap), encoder=args.encoder, llm=llm,
                         gaps=tuple(sorted({*defaults.gaps, args.gap})),
                         parent_alphas=tuple(sorted({*defaults.parent_alphas, defaults.slices.parent_alpha})))
    report, close = _progress()
    try:
        result = run_benchmark(args.out, config, progress=report)
    finally:
        close()
    tables = summary_tables(result.rows, result.problems, args.gap, config.slices.parent_alpha)
    markdown, data = write_results(Path(args.out), result, tables, TAGGERS)
    print(markdown_table(tables["scores"]))
    print(f"{int(result.problems['kept'].sum())} problems from {len(result.problems)} candidates in "
          f"{result.timings['total']:.0f} s; tables in {markdown}, every row in {data}")
    return 0


def _llm_config(args):
    from hibug_core.llm.client import LLMConfig

    return LLMConfig.from_env(model=args.llm_model, base_url=args.llm_base_url)


def cmd_repair(args) -> int:
    from hibug_core.bench.summary import markdown_table
    from hibug_core.repair.loop import repair_config, run_repair
    from hibug_core.repair.selection import SelectionConfig, export_selection, select_pool
    from hibug_core.slices.report import error_slices
    from hibug_core.slices.search import SliceConfig
    from hibug_core.store.project import Project

    selection = SelectionConfig(method=args.method, budget=args.budget, beta=args.beta, seed=args.seeds[0])
    slices = SliceConfig(by_class=args.by_class)
    with Project.open(args.project) as project:
        if args.select_only:
            chosen = select_pool(error_slices(project, args.model, split=args.split, config=slices), selection)
            print(f"{len(chosen)} pool images selected by {args.method} (budget {chosen.attrs['budget']}, "
                  f"unspent {chosen.attrs['unspent']})")
            print(chosen["slice"].fillna("(no slice)").value_counts().head(args.top).to_string())
            if args.export:
                print(f"written to {export_selection(chosen, args.export)}")
            return 0
        config = repair_config({
            "model": args.model, "method": args.method, "budget": args.budget, "beta": args.beta,
            "baseline": args.baseline, "control": not args.no_control, "data": args.data, "retrain": args.retrain,
            "lam": args.lam, "features": args.features, "seeds": args.seeds, "split": args.split,
            "eval_split": args.eval_split, "by_class": args.by_class, "top": args.top, "record": not args.no_record})
        report, close = _progress()
        try:
            result = run_repair(project, config, progress=report)
        finally:
            close()
        if args.export:
            for (method, seed), chosen in result.selections.items():
                if method == args.method and seed == args.seeds[0]:
                    print(f"selection written to {export_selection(chosen, args.export)}")
    summary = result.summary.copy()
    summary["after"] = [f"{a:.1%} ± {s:.1%}" if s == s else f"{a:.1%}" for a, s in
                        zip(summary["after"], summary["after_sd"])]
    summary["change"] = [f"{c:+.1%}" for c in summary["change"]]
    summary["before"] = [f"{b:.1%}" for b in summary["before"]]
    summary["planted"] = summary["planted"].map({True: "yes", False: ""})
    print(markdown_table(summary[["slice", "planted", "n", "method", "before", "after", "change", "worse"]]))
    print(f"repair run {result.run_id}: {len(result.runs)} retrained models over seeds {list(config.seeds)} "
          f"on '{config.eval_split}' ('worse' counts seeds where the slice got significantly worse)")
    print(result.verdict())
    return 0


def cmd_generate(args) -> int:
    from hibug_core.jobs.kinds import generate
    from hibug_core.repair.prompts import build_prompts
    from hibug_core.store.project import Project

    with Project.open(args.project) as project:
        prompts = build_prompts(project, args.prompts, model=args.model, top=args.top,
                                llm=_llm_config(args) if args.llm else None, encoder=args.encoder)
        print(prompts[["prompt", "label", "slice", "weight"]].to_string(index=False))
        if args.dry_run:
            return 0
        report, close = _progress()
        try:  # the same work the Repair page runs as a job, on the prompts just printed
            done = generate(project, {"prompts": prompts.to_dict("records"), "generator": args.generator,
                                      "images": args.images, "seed": args.seed, "steps": args.steps}, report)
        finally:
            close()
    print(f"{done['images']} images from {done['generator']} stored as split 'generated' (run {done['run']}); "
          f"retrain with `hibug repair {args.project} --data generated`")
    return 0


def cmd_failure_search(args) -> int:
    from hibug_core.jobs.kinds import search_failures
    from hibug_core.repair.runs import repair_runs
    from hibug_core.store.project import Project

    params = {"label": args.label, "model": args.model, "baseline": args.baseline, "generator": args.generator,
              "captioner": args.captioner, "images": args.images, "captions": args.captions, "seed": args.seed,
              "steps": args.steps, "llm": {"model": args.llm_model, "base_url": args.llm_base_url}}
    with Project.open(args.project) as project:
        run_id = search_failures(project, params, lambda *_: None)["run"]
        runs = repair_runs(project, "failure search")
    for row in runs.loc[runs["id"] == run_id, "result"].iat[0]["table"]:
        mark = "*" if row["significant"] else " "
        print(f"{mark} {row['failure_rate']:6.1%} ({row['failures']}/{row['images']})  {row['caption']}")
    print(f"* failure rate significantly above the baseline (first row), FDR 5% over every caption tested; "
          f"stored as repair run {run_id}")
    return 0


def cmd_report(args) -> int:
    from hibug_core.review.findings import findings, report_csv, report_html, report_markdown
    from hibug_core.slices.report import error_slices
    from hibug_core.store.project import Project

    with Project.open(args.project) as project:
        report = error_slices(project, args.model, split=args.split)
        table = findings(project, report, top=args.top)
        kind = Path(args.output).suffix.lower().lstrip(".")
        if kind == "html":
            Path(args.output).write_text(report_html(project, report, table), encoding="utf-8")
        elif kind == "md":
            Path(args.output).write_text(report_markdown(project, report, table), encoding="utf-8")
        elif kind == "csv":
            Path(args.output).write_bytes(report_csv(table))
        else:
            raise HibugError(f"write the report to a .html, .md or .csv file, not '{args.output}'")
    print(f"{len(table)} error slices of {report.model} on {report.split} written to {args.output}")
    return 0


def cmd_attributes(args) -> int:
    from hibug_core.store.attribute_versions import latest_version, load_schema, save_schema, schema_history
    from hibug_core.store.project import Project

    with Project.open(args.project) as project:
        if args.action == "propose":
            from hibug_core.attributes.library import choose_task_type, library_schema

            classes = project.model_classes(project.models()[0]) if project.models() else None
            task = args.task or project.name
            base = latest_version(project)
            if args.llm:
                from hibug_core.attributes.propose import propose_with_llm
                from hibug_core.llm.client import LLMConfig

                config = LLMConfig.from_env(model=args.llm_model, base_url=args.llm_base_url)
                result = propose_with_llm(task, classes or [], config, method=args.method)
                schema, source = result.schema, f"{config.model} ({args.method} flow)"
                for note in result.notes:
                    print(f"  note: {note}")
            else:
                kind = args.library or choose_task_type(task, classes)
                schema, source = library_schema(task, classes, kind), f"the built-in '{kind}' library (no language model)"
            version = save_schema(project, schema, note=f"proposed by {source}", base_version=base)
            print(f"saved version {version}: {len(schema.attributes)} attributes proposed by {source}")
        elif args.action == "suggest-tags":
            from hibug_core.attributes.from_data import propose_tags_from_data, refine_tags
            from hibug_core.llm.client import LLMConfig

            base = latest_version(project)
            config = LLMConfig.from_env(model=args.llm_model, base_url=args.llm_base_url) if args.llm else None
            schema = load_schema(project)
            found = (refine_tags(project, schema, encoder=args.encoder, llm_config=config) if args.refine else
                     propose_tags_from_data(project, schema, encoder=args.encoder, llm_config=config))
            for note in found.notes:
                print(f"  note: {note}")
            if not found.added:
                print("no new tags needed; nothing saved")
                return 0
            added = "; ".join(f"{a}: {', '.join(t)}" for a, t in found.added.items())
            version = save_schema(project, found.schema, note=f"tags from the data: {added}", base_version=base)
            print(f"saved version {version}: added {added}")
        elif args.action == "edit":
            base = latest_version(project)
            schema = load_schema(project)
            edited, change = _edit_attribute(schema, args)
            version = save_schema(project, edited, note=change, base_version=base)
            print(f"saved version {version}: {change}")
        elif args.history:
            for row in schema_history(project).itertuples():
                print(f"v{row.version:<4} {row.created_at}  {row.author:<12} {row.attributes:>3} attributes  {row.note}")
            return 0
        schema = load_schema(project, args.version if args.action == "show" else None)
    if args.action == "show" and args.json:
        print(schema.model_dump_json(indent=2))
        return 0
    for group in ("main object", "background", "global"):
        members = [a for a in schema.attributes if a.group == group]
        if members:
            print(f"{group}:")
        for a in members:
            state = "" if a.enabled else "  (disabled)"
            print(f"  {a.name:<32} {', '.join(a.tags)}  [{a.source}]{state}")
    return 0


def _edit_attribute(schema, args):
    from hibug_core.attributes.schema import Attribute

    if args.attribute not in schema.names():
        if not args.add_tag or len(args.add_tag) < 2:
            raise HibugError(f"no attribute '{args.attribute}'; to add one, give at least two --add-tag")
        attribute = Attribute(name=args.attribute, tags=tuple(args.add_tag), group=args.group or "main object",
                              kind="binary" if args.attribute.startswith("is ") else "descriptive")
        return schema.replace(attribute), f"added '{args.attribute}'"
    attribute = schema[args.attribute]
    if args.delete:
        kept = tuple(a for a in schema.attributes if a.name != args.attribute)
        return schema.model_copy(update={"attributes": kept}), f"deleted '{args.attribute}'"
    tags = [t for t in attribute.tags if t not in (args.remove_tag or [])] + \
        [t for t in (args.add_tag or []) if t not in attribute.tags]
    update = {"tags": tuple(tags)}
    if args.template:
        update["templates"] = tuple(args.template)
    if args.enable or args.disable:
        update["enabled"] = bool(args.enable)
    if args.group:
        update["group"] = args.group
    try:
        edited = Attribute.model_validate({**attribute.model_dump(), **update,
                                           "name": args.rename or attribute.name})
    except ValueError as error:
        raise HibugError(f"edit of '{args.attribute}' refused: {error}") from None
    kept = tuple(edited if a.name == attribute.name else a for a in schema.attributes)
    changes = [f"{k} -> {v}" for k, v in update.items() if getattr(attribute, k) != v]
    if args.rename:
        changes.insert(0, f"renamed to '{args.rename}'")
    return schema.model_copy(update={"attributes": kept}), f"edited '{args.attribute}': " + "; ".join(changes)


def serve(project: Path, port: int, address: str, headless: bool = True) -> int:
    """Run the dashboard on a project (replaces this process with streamlit)."""
    if not APP.exists():
        raise HibugError(f"the dashboard files are not next to hibug_core ({APP} is missing); "
                         "install hibug from its source folder with `pip install -e .`")
    env = dict(os.environ, HIBUG_PROJECT=str(Path(project).resolve()))
    command = [sys.executable, "-m", "hibug_ui.server", "run", str(APP), "--server.port", str(port),
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


def _add_llm_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--llm-model", help="LLM model name (default: HIBUG_LLM_MODEL or gpt-4o-mini)")
    parser.add_argument("--llm-base-url", help="OpenAI-compatible server URL (default: HIBUG_LLM_BASE_URL); "
                        "the key is read from OPENAI_API_KEY")


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

    from hibug_core.embeddings.registry import DEFAULT_ENCODER, ENCODER_HELP
    from hibug_core.slices.search import SliceConfig

    encoders = "; ".join(f"{k}: {v}" for k, v in ENCODER_HELP.items())
    p = sub.add_parser("embed", help="compute and store image embeddings (only images not embedded before)")
    p.add_argument("project")
    p.add_argument("--encoder", default=DEFAULT_ENCODER, help=f"encoder name ({encoders})")
    p.add_argument("--split", action="append", help="only this split (repeatable; default: all)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--workers", type=int, help="image decoding processes (default: chosen for this machine)")
    p.add_argument("--ray", action="store_true", help="run as Ray Data batch inference (needs hibug[cluster])")
    p.add_argument("--ray-address", help="Ray cluster address (default: start a local instance)")
    p.add_argument("--ray-actors", type=int, default=2, help="encoder actors (one GPU each when there are GPUs)")
    p.set_defaults(handler=cmd_embed)

    p = sub.add_parser("tag", help="tag every image with every enabled attribute, then report tag quality")
    p.add_argument("project")
    p.add_argument("--encoder", default=DEFAULT_ENCODER, help="zero-shot encoder (see `hibug embed --help`)")
    p.add_argument("--attributes", help="comma-separated attribute names (default: every enabled one)")
    p.add_argument("--split", action="append", help="only this split (repeatable; default: all)")
    p.add_argument("--model", help="model whose predictions name the class of unlabelled images in prompts")
    p.add_argument("--llm", action="store_true", help="ask a multimodal LLM (OpenAI-compatible) instead")
    _add_llm_arguments(p)
    p.set_defaults(handler=cmd_tag)

    p = sub.add_parser("teach", help="teach an attribute by example: a linear probe on stored embeddings")
    p.add_argument("project")
    p.add_argument("attribute")
    p.add_argument("--examples", required=True, help="CSV with columns sample (manifest id or image) and tag")
    p.add_argument("--encoder", default=DEFAULT_ENCODER)
    p.set_defaults(handler=cmd_teach)

    p = sub.add_parser("slices", help="find, rank and explain the error slices of a model")
    p.add_argument("project")
    p.add_argument("--model", help="model name (default: the first)")
    p.add_argument("--split", default="val", help="labelled split to evaluate on (default: val)")
    p.add_argument("--depth", type=int, default=3, help="most (attribute = tag) pairs per slice (1-4)")
    p.add_argument("--support", type=int, default=10, help="minimum samples in a slice (M)")
    p.add_argument("--gap", type=float, default=SliceConfig.gap, help="error slices score below overall minus this (C)")
    p.add_argument("--threshold", type=float, help="or below this absolute score")
    p.add_argument("--rank-by", default="confident_gap", choices=["confident_gap", "gap", "size", "sliceline"])
    p.add_argument("--attributes", help="comma-separated attributes to slice by (default: every tagged one)")
    p.add_argument("--top", type=int, default=20, help="slices to print")
    p.add_argument("--output", help="write every error slice to this .csv or .json file")
    p.add_argument("--by-class", action=argparse.BooleanOptionalAction, default=SliceConfig.by_class,
                   help="slice by the class too (default: on)")
    p.add_argument("--tags", default="in force", choices=["in force", "imported", "model"],
                   help="tag source: per attribute the best measured or chosen one (see `hibug tags`), the imported "
                   "attr: columns only, or tagging runs only; any imported column is also 'known: <name>' in "
                   "--attributes")
    p.set_defaults(handler=cmd_slices)

    p = sub.add_parser("tags", help="show every tag source per attribute with its measured accuracy, and choose "
                       "the one in force")
    p.add_argument("project")
    p.add_argument("--choose", action="append", metavar="ATTRIBUTE=SOURCE",
                   help="put SOURCE in force for ATTRIBUTE: imported, run:<id>, or auto (the best measured one); "
                   "repeatable")
    p.set_defaults(handler=cmd_tags)

    p = sub.add_parser("attributes", help="show, propose or edit the attribute schema, or suggest tags from the data "
                       "(every change is a version)")
    p.add_argument("action", choices=["show", "propose", "edit", "suggest-tags"])
    p.add_argument("project")
    p.add_argument("attribute", nargs="?", help="edit: the attribute to change (or to add)")
    p.add_argument("--version", type=int, help="show: an older version")
    p.add_argument("--history", action="store_true", help="show: list every version")
    p.add_argument("--json", action="store_true", help="show: print the schema as JSON")
    p.add_argument("--task", help="propose: what the model does, e.g. 'classify bird species in photos'")
    p.add_argument("--library", choices=["objects", "animals", "people", "vehicles", "detection", "pose"],
                   help="propose: built-in library entry (default: chosen from the task)")
    p.add_argument("--llm", action="store_true", help="propose: ask a language model (OpenAI-compatible)")
    p.add_argument("--method", choices=["hibug2", "hibug"], default="hibug2", help="propose --llm: the flow")
    p.add_argument("--encoder", default="conse", help="suggest-tags: encoder for representative images")
    p.add_argument("--refine", action="store_true", help="suggest-tags: a pass over validation images instead")
    _add_llm_arguments(p)
    p.add_argument("--add-tag", action="append", help="edit: add a tag (repeatable)")
    p.add_argument("--remove-tag", action="append", help="edit: remove a tag (repeatable)")
    p.add_argument("--rename", help="edit: new name")
    p.add_argument("--template", action="append", help="edit: prompt template with {tag} and {label} (repeatable)")
    p.add_argument("--group", choices=["main object", "background", "global"])
    p.add_argument("--enable", action="store_true")
    p.add_argument("--disable", action="store_true")
    p.add_argument("--delete", action="store_true")
    p.set_defaults(handler=cmd_attributes)

    p = sub.add_parser("bench", help="planted-bug benchmark: does hibug find and explain bugs planted in models?")
    p.add_argument("--out", default="bench-results", help="folder for results, problem projects and caches")
    p.add_argument("--spurious", type=int, default=30, help="spurious-correlation problems")
    p.add_argument("--rare", type=int, default=30, help="rare-case problems")
    p.add_argument("--quick", action="store_true", help="3 + 3 problems (what CI runs)")
    p.add_argument("--taggers", help="comma-separated tag sources: truth, conse, library, taught, llm "
                   "(default: all but llm; see --llm)")
    p.add_argument("--llm", action="store_true", help="add the 'llm' tag source: attributes proposed by a language "
                   "model (OpenAI-compatible), tagged zero-shot")
    _add_llm_arguments(p)
    p.add_argument("--encoder", default="conse", help="encoder of the automatic tag sources")
    p.add_argument("--top", type=int, default=10, help="Find Attr / Find Tag look at this many top slices")
    p.add_argument("--gap", type=float, default=SliceConfig.gap, help="C of the main table (others are reported too)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(handler=cmd_bench)

    p = sub.add_parser("repair", help="select pool images (or use generated ones) for the error slices, retrain, and "
                       "compare before and after slice by slice against a baseline")
    p.add_argument("project")
    p.add_argument("--model", help="model to repair (default: the first)")
    p.add_argument("--method", default="hibug", choices=["hibug", "hibug2", "uncertainty", "random"],
                   help="how pool images are selected")
    p.add_argument("--baseline", default="random", choices=["random", "uncertainty", "hibug", "hibug2", "none"],
                   help="selection run the same way for comparison")
    p.add_argument("--no-control", action="store_true", help="skip the retraining without new data")
    p.add_argument("--budget", type=float, default=0.1, help="images to select: a count, or a share of the training "
                   "split when below 1 (default 0.1)")
    p.add_argument("--beta", type=float, default=0.9, help="hibug: share of validation failures the slices cover")
    p.add_argument("--data", default="selection", choices=["selection", "generated"],
                   help="new training data: selected pool images (labelled) or the generated split")
    p.add_argument("--retrain", default="fine-tune", choices=["fine-tune", "from scratch", "linear head"])
    p.add_argument("--features", default="model", help="linear head: 'model' (the network's features) or an encoder")
    p.add_argument("--lam", type=float, help="weight of the new data's mean loss (default: as if simply added)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2],
                   help="seeds to repeat over (default: 0 1 2; one seed is noise)")
    p.add_argument("--split", default="val", help="where error slices are found")
    p.add_argument("--eval-split", default="test", help="held-out split for before and after")
    p.add_argument("--by-class", action=argparse.BooleanOptionalAction, default=SliceConfig.by_class,
                   help="slice by the class too (default: on)")
    p.add_argument("--top", type=int, default=10, help="error slices compared (planted ones are added)")
    p.add_argument("--select-only", action="store_true", help="only select (and --export); no retraining")
    p.add_argument("--export", help="write the selection to this .csv or .parquet file")
    p.add_argument("--no-record", action="store_true", help="do not store the retrained models' predictions")
    p.set_defaults(handler=cmd_repair)

    p = sub.add_parser("generate", help="generate images for the error slices and store them as the split "
                       "'generated'")
    p.add_argument("project")
    p.add_argument("--model", help="model whose error slices are used (default: the first)")
    p.add_argument("--generator", default="shape-world renderer",
                   help="'shape-world renderer' (demo), 'diffusers:<hub id or folder>' or 'openai:<model>'")
    p.add_argument("--prompts", default="hibug", choices=["hibug", "backgrounds"],
                   help="HiBug's slice template, or uncommon backgrounds (Chegini and Feizi)")
    p.add_argument("--images", type=int, default=100, help="images in all, split over prompts by failures")
    p.add_argument("--top", type=int, default=5, help="hibug prompts: error slices used")
    p.add_argument("--llm", action="store_true", help="backgrounds: list them with a language model")
    _add_llm_arguments(p)
    p.add_argument("--encoder", default="conse", help="backgrounds: zero-shot encoder")
    p.add_argument("--steps", type=int, default=25, help="diffusers: denoising steps")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dry-run", action="store_true", help="print the prompts only")
    p.set_defaults(handler=cmd_generate)

    p = sub.add_parser("failure-search", help="generative failure search: captions of failures that make the model "
                       "fail significantly more often (Wiles et al.)")
    p.add_argument("project")
    p.add_argument("--label", required=True, help="class to search")
    p.add_argument("--model", help="model (the project must hold its network; default: the first)")
    p.add_argument("--baseline", help="baseline prompt (default: 'A photo of a <label>')")
    p.add_argument("--generator", default="shape-world renderer")
    p.add_argument("--captioner", default="renderer", choices=["renderer", "llm"],
                   help="'renderer': the shape-world renderer's scene description; 'llm': a multimodal LLM")
    _add_llm_arguments(p)
    p.add_argument("--images", type=int, default=32, help="images per caption tested")
    p.add_argument("--captions", type=int, default=8, help="failures captioned")
    p.add_argument("--steps", type=int, default=25)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(handler=cmd_failure_search)

    p = sub.add_parser("report", help="export the findings (error slices, evidence, thumbnails, reviews) as a "
                       "self-contained HTML page, Markdown or CSV")
    p.add_argument("project")
    p.add_argument("--output", required=True, help="findings.html, findings.md or findings.csv")
    p.add_argument("--model", help="model (default: the first)")
    p.add_argument("--split", default="val")
    p.add_argument("--top", type=int, default=20, help="error slices in the report")
    p.set_defaults(handler=cmd_report)

    for name, help_text in (("serve", "open the dashboard on a project"),
                            ("demo", "build the demo project if needed and open the dashboard on it")):
        p = sub.add_parser(name, help=help_text)
        if name == "serve":
            p.add_argument("project", help="project folder (see `hibug new`)")
            p.set_defaults(handler=cmd_serve)
        else:
            p.add_argument("--dir", default="hibug-demo", help="folder of the demo project (default: ./hibug-demo)")
            p.add_argument("--build-only", action="store_true", help="build the demo project, do not serve it")
            p.set_defaults(handler=cmd_demo)
        p.add_argument("--port", type=int, default=8501, help="port of the dashboard (default: 8501)")
        p.add_argument("--address", default="localhost",
                       help="address to listen on (default: localhost; 0.0.0.0 to share it on the network)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")
    try:
        code = args.handler(args)
        sys.stdout.flush()  # here, so a reader that went away is caught below rather than at exit
        return code
    except HibugError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; nothing half-written was kept", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`hibug info --json | head`): not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
