"""Repair: select pool images for the worst slices, generate images for them, retrain, compare before and after
slice by slice, and search for new failures with generated images."""
import io
from pathlib import Path

import pandas as pd
import plotly.express as px
import streamlit as st

from hibug_core.csv_export import csv_text
from hibug_core.errors import HibugError
from hibug_core.markdown import plain
from hibug_core.metrics import points
from hibug_core.operations import FailureSearch, Generate, Repair, Select
from hibug_core.repair.failure_search import CAPTIONERS, FailureSearchOutcome
from hibug_core.repair.generated import GENERATED_SPLIT, generated_images
from hibug_core.repair.generators import GENERATORS
from hibug_core.repair.loop import repair_verdict, repair_won
from hibug_core.repair.prompts import PROMPT_METHODS
from hibug_core.repair.runs import repair_runs
from hibug_core.repair.selection import SELECTION_METHODS
from hibug_ui.fields import budget_input, field_input
from hibug_ui.jobs import built, job_status, start_job
from hibug_ui.page import open_page
from hibug_ui.plots import literal_values
from hibug_ui.state import (
    load_samples,
    secret,
    slice_report,
)
from hibug_ui.widgets import as_percent, image_grid, in_words, paged, percent_column

project, task, model, user, editing = open_page("Repair", needs_model=True)
st.title("Repair")
training = task.training_count(load_samples(project, model), project)  # what a budget's share is of
st.caption(f"Repairing {model}: new data for its error slices on 'val', the model {task.capabilities.retrain}, judged "
           f"by the {task.nouns.measure} on a held-out split.")

SELECTION_KEY = "repair_selection"
PROMPTS_KEY = "repair_prompts"
GENERATOR_KINDS = {e.name: e.spelling for e in GENERATORS if not e.hidden}  # a family is typed with its model


def generator_spec(kind: str, name: str) -> str:
    return kind if GENERATORS.find(kind) is not None else f"{kind}:{name.strip()}"


def job_secrets(*entries) -> dict[str, str] | None:
    """The secrets a job needs (each registry entry's own), from the environment or Streamlit secrets."""
    names = [e.secret for e in entries if e is not None and e.secret]
    found = {n: secret(n) for n in dict.fromkeys(names)}
    return {n: v for n, v in found.items() if v} or None


select, generate, retrain, search = st.tabs(["Select data", "Generate images", "Retrain and compare",
                                             "Failure search"])
with select:
    with st.form("repair_select"):
        cells = st.columns(4)
        method = field_input(cells[0], Select, "method", "Method", key="repair_select_method",
                             help=SELECTION_METHODS.help_text())
        budget = budget_input(cells[1], Select, key="repair_select_budget", training=training)
        beta = field_input(cells[2], Select, "beta", "β (hibug)", key="repair_select_beta", step=0.05)
        seed = field_input(cells[3], Select, "seed", "Seed", key="repair_select_seed", step=1)
        if st.form_submit_button("Select pool images", type="primary", key="repair_select_submit"):
            op = built(Select, method=method, budget=budget, beta=beta, seed=seed, model=model)
            try:
                if op is not None:
                    report = slice_report(project, model, op.split, op.slice_config())
                    st.session_state[SELECTION_KEY] = op.choose(project, report)
            except HibugError as error:
                st.error(plain(error))
    chosen = st.session_state.get(SELECTION_KEY)
    if chosen is None:
        st.info("Choose a method and a budget, then select. The pool's images are ranked for labelling.")
    else:
        cells = st.columns(3)
        cells[0].metric("Selected", f"{len(chosen):,}")
        cells[1].metric("Budget", f"{chosen.attrs.get('budget', len(chosen)):,}",
                        help=f"of {training:,} training images (what a share is of)")
        cells[2].metric("Slices used", f"{chosen['slice'].nunique():,}")
        if chosen.attrs.get("unspent"):
            st.warning(f"{chosen.attrs['unspent']} of the budget is unspent: the slices' pool images ran out.")
        shown = [c for c in ("image_key", "detections") if c in chosen] + ["slice", "reason", "confidence"]
        st.dataframe(chosen[shown], width="stretch", height=240)
        table = chosen.reset_index()
        parquet = io.BytesIO()
        table.to_parquet(parquet, index=False)
        left, right = st.columns(2)
        left.download_button("Download CSV", csv_text(table).encode(), "selection.csv", "text/csv")
        right.download_button("Download Parquet", parquet.getvalue(), "selection.parquet",
                              "application/octet-stream")
        samples = load_samples(project, model)
        rows = samples.loc[paged(chosen, "repair_select_page", noun="images").index]
        image_grid(project, rows, caption=lambda r: f"{r['prediction']} · {r['confidence']:.2f}"
                   if pd.notna(r.get("confidence")) else str(r.name))

with generate:
    prompt_method = st.radio("Prompts", Generate.choices("prompts"), horizontal=True,
                             format_func={e.name: f"{e.name}: {e.help}" for e in PROMPT_METHODS}.get)
    if st.button("Write prompts"):
        op = built(Generate, prompts=prompt_method, model=model)
        try:
            if op is not None:
                st.session_state[PROMPTS_KEY] = op.prompt_table(project)
        except HibugError as error:
            st.error(plain(error))
    prompts = st.session_state.get(PROMPTS_KEY)
    if prompts is not None and not task.capabilities.generate:
        st.dataframe(prompts, width="stretch", hide_index=True)
        advice = task.capabilities.advice("generate")
        st.info(plain(advice[:1].upper() + advice[1:]) + ".")
    elif prompts is not None:
        edited = st.data_editor(prompts, key="repair_prompts_editor", num_rows="dynamic", width="stretch",
                                column_config={"weight": st.column_config.NumberColumn(min_value=0.0)},
                                disabled=["slice_id"])
        with st.form("repair_generate"):
            cells = st.columns(4)
            kind = cells[0].selectbox("Generator", list(GENERATOR_KINDS), format_func=GENERATOR_KINDS.get,
                                      key="repair_generate_kind")
            name = cells[1].text_input("Model (hub id, folder or API model)", value="",
                                       placeholder="/models/stable-diffusion-2-1 or gpt-image-1")
            images = field_input(cells[2], Generate, "images", "Images", key="repair_generate_images", step=10)
            seed = field_input(cells[3], Generate, "seed", "Seed", key="repair_generate_seed", step=1)
            st.caption(GENERATORS.help_text())
            if st.form_submit_button("Generate", type="primary", key="repair_generate_submit", disabled=not editing):
                rows = edited.dropna(subset=["prompt", "label"])
                if GENERATORS.find(kind) is None and not name.strip():
                    st.error("Name the model: a hub id already downloaded, a local folder, or an API model.")
                elif GENERATORS.missing(generator_spec(kind, name)):
                    st.error(plain(f"Cannot generate offline: {GENERATORS.missing(generator_spec(kind, name))}."))
                elif rows.empty:
                    st.error("Write at least one prompt with its class.")
                else:
                    op = built(Generate, model=model, generator=generator_spec(kind, name), images=int(images),
                               seed=int(seed),
                               prompt_rows=rows.assign(weight=rows["weight"].fillna(1.0)).to_dict("records"))
                    if start_job(project, op, user, job_secrets(GENERATORS.get(op.generator) if op else None)):
                        st.rerun()
    job_status(project, Generate.kind, user, key="repair_generate")
    stored = generated_images(project)
    if stored.empty:
        st.caption("No generated images yet.")
    else:
        run_id = st.selectbox("Generation run", sorted(stored["run_id"].unique(), reverse=True))
        shown = stored[stored["run_id"] == run_id]
        st.caption(f"{len(shown)} images from {shown['generator'].iat[0]}, stored as the split '{GENERATED_SPLIT}'")
        samples = load_samples(project, model)
        rows = samples.loc[paged(shown, "repair_generated_page", noun="images").index].join(shown[["prompt"]])
        image_grid(project, rows, caption=lambda r: f"{r['label']}: {r['prompt']}")

with retrain:
    with st.form("repair_retrain"):
        cells = st.columns(4)
        data = field_input(cells[0], Repair, "data", "New data", key="repair_retrain_data")
        method = field_input(cells[1], Repair, "method", "Selection", key="repair_retrain_method")
        baseline = field_input(cells[2], Repair, "baseline", "Baseline", key="repair_retrain_baseline")
        budget = budget_input(cells[3], Repair, key="repair_retrain_budget", training=training)
        cells = st.columns(4)
        how = field_input(cells[0], Repair, "retrain", "Retraining", key="repair_retrain_how",
                          options=[m for m in Repair.choices("retrain") if m in task.capabilities.retrain_methods])
        lam = field_input(cells[1], Repair, "lam", "λ (0: as if added to the training set)", key="repair_retrain_lam",
                          step=0.1)
        seeds = cells[2].number_input("Seeds", min_value=1, max_value=10, value=len(Repair.default("seeds")), step=1,
                                      key="repair_retrain_seeds", help="Each seed retrains every method once; with "
                                      "one seed a difference of a point is noise")
        splits = [s for s in ("test", "val") if project.split_counts().get(s)] or ["test"]
        eval_split = field_input(cells[3], Repair, "eval_split", "Held-out split", options=splits,
                                 key="repair_retrain_eval_split")
        control = field_input(st, Repair, "control", "Also retrain with no new data (control)",
                              key="repair_retrain_control")
        if st.form_submit_button("Retrain and compare", type="primary", key="repair_retrain_submit",
                                 disabled=not editing):
            op = built(Repair, model=model, data=data, method=method, baseline=baseline, budget=budget, retrain=how,
                       lam=float(lam) or None, seeds=list(range(int(seeds))), eval_split=eval_split, control=control)
            if start_job(project, op, user) is not None:
                st.rerun()
    job_status(project, Repair.kind, user, key="repair_retrain")
    done = repair_runs(project, "retrain", finished=True, limit=1)
    if done.empty:
        st.info("No repair has been compared yet.")
    else:
        run = done.iloc[0]
        summary = pd.DataFrame(run["result"]["summary"])
        runs = pd.DataFrame(run["result"]["runs"])
        st.markdown(f"**Repair run {run['id']}** by {plain(run['author'])} · {in_words(run['created_at'])} · "
                    f"{len(runs)} retrained models, seeds {sorted(runs['seed'].unique().tolist())}")
        measure = run["result"].get("measure", "accuracy")
        changes = pd.DataFrame(run["result"]["changes"])
        (st.success if repair_won(changes) else st.info)(plain(repair_verdict(changes, measure)),
                                                          icon=":material/balance:")
        checkpoints = runs[runs["checkpoint"].notna()] if "checkpoint" in runs else runs.iloc[0:0]
        if len(checkpoints):
            first = Path(checkpoints["checkpoint"].iat[0])
            st.markdown(f"**Repaired checkpoints**, one per method and seed ({task.capabilities.checkpoint})")
            st.dataframe(checkpoints[["method", "seed", "model", "checkpoint"]], hide_index=True, width="stretch")
            if first.is_file():
                st.download_button(f"Download the {checkpoints['method'].iat[0]} checkpoint (seed "
                                   f"{checkpoints['seed'].iat[0]})", data=first.read_bytes,
                                   file_name=f"repaired-{first.parent.name}.pt", mime="application/octet-stream",
                                   key="repair_checkpoint_download", on_click="ignore")
        overall = summary[summary["slice_id"] == "overall"]
        cells = st.columns(max(len(overall), 1))
        for cell, (_, row) in zip(cells, overall.iterrows()):
            cell.metric(row["method"], f"{row['after']:.1%}", f"{points(row['change'])} overall")
        worse = summary[summary["worse"] > 0]
        if len(worse):
            st.warning("Got significantly worse (exact McNemar test, 5%): " + "; ".join(
                f"{plain(r['slice'])} with {r['method']} ({points(r['change'])}, {r['worse']} of {r['seeds']} seeds)"
                for _, r in worse.iterrows()))
        chart = summary[summary["slice_id"] != "overall"].assign(
            label=lambda f: literal_values(f["slice"] + f["planted"].map({True: " (planted)", False: ""})))
        figure = px.bar(chart, x="after", y="label", color="method", barmode="group", orientation="h",
                        error_x="after_sd",
                        title=f"{measure.capitalize()} after repair on the held-out split (before: grey marks)")
        figure.add_scatter(x=chart["before"], y=chart["label"], mode="markers", name="before",
                           marker={"color": "#868e96", "symbol": "line-ns-open", "size": 18})
        figure.update_layout(xaxis_tickformat=".0%", height=120 + 60 * chart["label"].nunique(),
                             xaxis_title=f"{measure} after repair", yaxis_title="slice")
        st.plotly_chart(figure, width="stretch", key="repair_chart")
        shown = summary.assign(**{"after ± sd": [f"{a:.1%} ± {s:.1%}" if s == s else f"{a:.1%}"
                                                 for a, s in zip(summary["after"], summary["after_sd"])]})
        st.dataframe(as_percent(shown[["slice", "planted", "n", "method", "before", "after ± sd", "change", "worse"]],
                                "before", "change"),
                     hide_index=True, width="stretch",
                     column_config={"before": percent_column("before"),
                                    "change": st.column_config.NumberColumn("change", format="%+.1f pts")})

with search:
    refused = task.refusal(FailureSearch.needs)
    if refused:
        st.info(plain(refused[:1].upper() + refused[1:]) + ".", icon=":material/block:")
    else:
        classes = project.model_classes(model) or sorted(load_samples(project, model)["label"].dropna().unique())
        with st.form("repair_search"):
            cells = st.columns(4)
            label = cells[0].selectbox("Class", classes, key="repair_search_label")
            kind = cells[1].selectbox("Generator", list(GENERATOR_KINDS), format_func=GENERATOR_KINDS.get,
                                      key="repair_search_gen")
            name = cells[2].text_input("Model", value="", key="repair_search_model")
            captioner = field_input(cells[3], FailureSearch, "captioner", "Captions by", key="repair_search_captioner",
                                    format_func={e.name: e.help for e in CAPTIONERS}.get)
            cells = st.columns(3)
            images = field_input(cells[0], FailureSearch, "images", "Images per caption", key="repair_search_images",
                                 step=8)
            captions = field_input(cells[1], FailureSearch, "captions", "Failures captioned",
                                   key="repair_search_captions", step=1)
            llm_url = cells[2].text_input("LLM server URL", value="", placeholder="empty: OpenAI",
                                          key="repair_search_llm_url")
            typed = st.text_area("Captions to test", key="repair_search_typed", height=80,
                                 placeholder="one per line, about the class, e.g. 'A small blue triangle at the top.'",
                                 help="Your own guesses at what makes the model fail: each is drawn, tested against "
                                      "the baseline like a found caption, and refined where it fails significantly "
                                      "more.")
            cells = st.columns(2)
            caption_failures = field_input(cells[0], FailureSearch, "caption_failures",
                                           "Also caption the baseline's failures", key="repair_search_caption_failures")
            cluster = field_input(cells[1], FailureSearch, "cluster", "Cluster the failures first (one caption each)",
                                  key="repair_search_cluster")
            if st.form_submit_button("Search for failures", type="primary", key="repair_search_submit",
                                     disabled=not editing):
                op = built(FailureSearch, label=label, model=model, generator=generator_spec(kind, name),
                           captioner=captioner, images=int(images), captions=int(captions),
                           typed_captions=[line for line in typed.splitlines() if line.strip()],
                           caption_failures=bool(caption_failures), cluster=bool(cluster), llm_base_url=llm_url or None)
                # the generator's secret, and the captioner's (a language model's key)
                if start_job(project, op, user, job_secrets(GENERATORS.get(op.generator) if op else None,
                                                            CAPTIONERS.get(captioner))):
                    st.rerun()
        job_status(project, FailureSearch.kind, user, key="repair_search")
        found = repair_runs(project, "failure search", finished=True, limit=1)
        if not found.empty:
            outcome = FailureSearchOutcome.stored(found.iloc[0]["result"])
            table = outcome.table
            st.markdown(f"**{plain(outcome.label)}**: {plain(outcome.headline())}")
            for significant, said in outcome.verdicts(quote=plain):
                (st.warning if significant else st.info)(said)
            rate = {"format": "percent", "min_value": 0, "max_value": 1}
            st.dataframe(table, hide_index=True, width="stretch",
                         column_config={"failure_rate": st.column_config.ProgressColumn("failure rate", **rate),
                                        "failures_go_to": "failures called",
                                        "target_rate": st.column_config.ProgressColumn("called that", **rate),
                                        "baseline_target_rate": st.column_config.ProgressColumn(
                                            "baseline called that", **rate)})
