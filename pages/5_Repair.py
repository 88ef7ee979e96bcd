"""Repair: select pool images for the worst slices, generate images for them, retrain, compare before and after
slice by slice, and search for new failures with generated images."""
import io

import pandas as pd
import plotly.express as px
import streamlit as st

from hibug_core.errors import HibugError
from hibug_core.markdown import plain
from hibug_core.repair.generated import GENERATED_SPLIT, generated_images
from hibug_core.repair.generators import GENERATOR_HELP, SHAPE_RENDERER, missing_weights
from hibug_core.repair.loop import RepairConfig, repair_verdict
from hibug_core.repair.prompts import PROMPT_METHODS
from hibug_core.repair.runs import repair_runs
from hibug_core.repair.selection import METHODS, SelectionConfig, select_pool
from hibug_core.slices.search import SliceConfig
from hibug_core.store.tag_store import tags_version
from hibug_ui.jobs import job_status, start_job
from hibug_ui.state import current_project, current_user, load_samples, required_model, secret, slice_report
from hibug_ui.widgets import as_percent, image_grid, paged, percent_column

st.set_page_config(page_title="hibug · Repair", page_icon="🐞", layout="wide")
project = current_project()
model = required_model(project)
user = current_user()
st.title("Repair")
st.caption(f"Repairing {model}: new data for its error slices on 'val', judged on a held-out split.")

SELECTION_KEY = "repair_selection"
PROMPTS_KEY = "repair_prompts"
METHOD_HELP = {"hibug": "HiBug: slices by error rate until they cover β of the failures; budget split by failures",
               "hibug2": "HiBug2: reported slices by score, filled from the worst down",
               "uncertainty": "baseline: the least confident pool images", "random": "baseline: a random draw"}
GENERATORS = {SHAPE_RENDERER: "shape-world renderer (demo stand-in, not a diffusion model)",
              "diffusers": "diffusers (Stable Diffusion family)", "openai": "OpenAI images API"}


def generator_spec(kind: str, name: str) -> str:
    return SHAPE_RENDERER if kind == SHAPE_RENDERER else f"{kind}:{name.strip()}"


select, generate, retrain, search = st.tabs(["Select data", "Generate images", "Retrain and compare",
                                             "Failure search"])
with select:
    with st.form("repair_select"):
        cells = st.columns(4)
        method = cells[0].selectbox("Method", METHODS, help="; ".join(
            f"{k}: {v}" for k, v in METHOD_HELP.items()))
        budget = cells[1].number_input("Budget", min_value=0.01, value=0.1, step=0.05,
                                       help="A share of the training split (below 1) or a number of images")
        beta = cells[2].number_input("β (hibug)", min_value=0.1, max_value=1.0, value=0.9, step=0.05)
        seed = cells[3].number_input("Seed", min_value=0, value=0, step=1)
        if st.form_submit_button("Select pool images", type="primary"):
            try:
                report = slice_report(str(project.folder), model, "val", SliceConfig(), tags_version(project))
                st.session_state[SELECTION_KEY] = select_pool(
                    report, SelectionConfig(method=method, budget=float(budget), beta=float(beta), seed=int(seed)))
            except HibugError as error:
                st.error(str(error))
    chosen = st.session_state.get(SELECTION_KEY)
    if chosen is None:
        st.info("Choose a method and a budget, then select. The pool's images are ranked for labelling.")
    else:
        cells = st.columns(3)
        cells[0].metric("Selected", f"{len(chosen):,}")
        cells[1].metric("Budget", f"{chosen.attrs.get('budget', len(chosen)):,}")
        cells[2].metric("Slices used", f"{chosen['slice'].nunique():,}")
        if chosen.attrs.get("unspent"):
            st.warning(f"{chosen.attrs['unspent']} of the budget is unspent: the slices' pool images ran out.")
        st.dataframe(chosen[["slice", "reason", "confidence"]], width="stretch", height=240)
        table = chosen.reset_index()
        parquet = io.BytesIO()
        table.to_parquet(parquet, index=False)
        left, right = st.columns(2)
        left.download_button("Download CSV", table.to_csv(index=False).encode(), "selection.csv", "text/csv")
        right.download_button("Download Parquet", parquet.getvalue(), "selection.parquet",
                              "application/octet-stream")
        samples = load_samples(str(project.folder), model, project.data_version())
        rows = samples.loc[paged(chosen, "repair_select_page").index]
        image_grid(project, rows, caption=lambda r: f"{r['prediction']} · {r['confidence']:.2f}"
                   if pd.notna(r.get("confidence")) else str(r.name))

with generate:
    prompt_method = st.radio("Prompts", PROMPT_METHODS, horizontal=True, format_func={
        "hibug": "HiBug template from the top error slices",
        "backgrounds": "uncommon backgrounds per class (Chegini and Feizi)"}.get)
    if st.button("Write prompts"):
        try:
            from hibug_core.repair.prompts import build_prompts

            st.session_state[PROMPTS_KEY] = build_prompts(project, prompt_method, model=model)
        except HibugError as error:
            st.error(str(error))
    prompts = st.session_state.get(PROMPTS_KEY)
    if prompts is not None:
        edited = st.data_editor(prompts, key="repair_prompts_editor", num_rows="dynamic", width="stretch",
                                column_config={"weight": st.column_config.NumberColumn(min_value=0.0)},
                                disabled=["slice_id"])
        with st.form("repair_generate"):
            cells = st.columns(4)
            kind = cells[0].selectbox("Generator", list(GENERATORS), format_func=GENERATORS.get)
            name = cells[1].text_input("Model (hub id, folder or API model)", value="",
                                       placeholder="/models/stable-diffusion-2-1 or gpt-image-1")
            images = cells[2].number_input("Images", min_value=1, value=100, step=10)
            seed = cells[3].number_input("Seed", min_value=0, value=0, step=1, key="repair_generate_seed")
            st.caption(" · ".join(f"{k}: {v}" for k, v in GENERATOR_HELP.items()))
            if st.form_submit_button("Generate", type="primary"):
                rows = edited.dropna(subset=["prompt", "label"])
                if kind != SHAPE_RENDERER and not name.strip():
                    st.error("Name the model: a hub id already downloaded, a local folder, or an API model.")
                elif kind == "diffusers" and missing_weights(name.strip()):
                    st.error(f"Cannot generate offline: {missing_weights(name.strip())}.")
                elif rows.empty:
                    st.error("Write at least one prompt with its class.")
                else:
                    key = secret("OPENAI_API_KEY") if kind == "openai" else None
                    params = {"generator": generator_spec(kind, name), "images": int(images), "seed": int(seed),
                              "prompts": rows.assign(weight=rows["weight"].fillna(1.0)).to_dict("records")}
                    if start_job(project, "generate", params, user, {"OPENAI_API_KEY": key} if key else None):
                        st.rerun()
    job_status(project, "generate", user, key="repair_generate")
    stored = generated_images(project)
    if stored.empty:
        st.caption("No generated images yet.")
    else:
        run_id = st.selectbox("Generation run", sorted(stored["run_id"].unique(), reverse=True))
        shown = stored[stored["run_id"] == run_id]
        st.caption(f"{len(shown)} images from {shown['generator'].iat[0]}, stored as the split '{GENERATED_SPLIT}'")
        samples = load_samples(str(project.folder), model, project.data_version())
        rows = samples.loc[paged(shown, "repair_generated_page").index].join(shown[["prompt"]])
        image_grid(project, rows, caption=lambda r: f"{r['label']}: {r['prompt']}")

with retrain:
    with st.form("repair_retrain"):
        cells = st.columns(4)
        data = cells[0].selectbox("New data", ["selection", "generated"],
                                  help="Selected pool images (their labels are used) or the generated split")
        method = cells[1].selectbox("Selection", METHODS, key="repair_retrain_method")
        baseline = cells[2].selectbox("Baseline", ["random", "uncertainty", "none"])
        budget = cells[3].number_input("Budget", min_value=0.01, value=0.1, step=0.05, key="repair_retrain_budget")
        cells = st.columns(4)
        how = cells[0].selectbox("Retraining", ["fine-tune", "from scratch", "linear head"],
                                 help="fine-tune and from scratch need the model's network in the project (the "
                                      "demo has it); a linear head works on frozen features for any model")
        lam = cells[1].number_input("λ (0: as if added to the training set)", min_value=0.0, value=0.0, step=0.1)
        seeds = cells[2].number_input("Seeds", min_value=1, max_value=10, value=len(RepairConfig.seeds), step=1,
                                      help="Each seed retrains every method once; with one seed a difference of a "
                                           "point is noise")
        splits = [s for s in ("test", "val") if project.split_counts().get(s)] or ["test"]
        eval_split = cells[3].selectbox("Held-out split", splits)
        control = st.checkbox("Also retrain with no new data (control)", value=True)
        if st.form_submit_button("Retrain and compare", type="primary"):
            params = {"model": model, "data": data, "method": method, "baseline": baseline, "budget": float(budget),
                      "retrain": how, "lam": float(lam) or None, "seeds": list(range(int(seeds))),
                      "eval_split": eval_split, "control": control}
            if start_job(project, "repair", params, user) is not None:
                st.rerun()
    job_status(project, "repair", user, key="repair_retrain")
    done = repair_runs(project, "retrain", finished=True, limit=1)
    if done.empty:
        st.info("No repair has been compared yet.")
    else:
        run = done.iloc[0]
        summary = pd.DataFrame(run["result"]["summary"])
        runs = pd.DataFrame(run["result"]["runs"])
        st.markdown(f"**Repair run {run['id']}** by {plain(run['author'])} · {run['created_at']} · "
                    f"{len(runs)} retrained models, seeds {sorted(runs['seed'].unique().tolist())}")
        verdict = repair_verdict(pd.DataFrame(run["result"]["changes"]))
        won = f"{runs['method'].iat[0]} beat" in verdict
        (st.success if won else st.info)(plain(verdict), icon=":material/balance:")
        overall = summary[summary["slice_id"] == "overall"]
        cells = st.columns(max(len(overall), 1))
        for cell, (_, row) in zip(cells, overall.iterrows()):
            cell.metric(row["method"], f"{row['after']:.1%}", f"{row['change']:+.1%} overall")
        worse = summary[summary["worse"] > 0]
        if len(worse):
            st.warning("Got significantly worse (exact McNemar test, 5%): " + "; ".join(
                f"{r['slice']} with {r['method']} ({r['change']:+.1%}, {r['worse']} of {r['seeds']} seeds)"
                for _, r in worse.iterrows()))
        chart = summary[summary["slice_id"] != "overall"].assign(
            label=lambda f: f["slice"] + f["planted"].map({True: " (planted)", False: ""}))
        figure = px.bar(chart, x="after", y="label", color="method", barmode="group", orientation="h",
                        error_x="after_sd", title="Accuracy after repair on the held-out split (before: grey marks)")
        figure.add_scatter(x=chart["before"], y=chart["label"], mode="markers", name="before",
                           marker={"color": "#868e96", "symbol": "line-ns-open", "size": 18})
        figure.update_layout(xaxis_tickformat=".0%", height=120 + 60 * chart["label"].nunique())
        st.plotly_chart(figure, width="stretch", key="repair_chart")
        shown = summary.assign(**{"after ± sd": [f"{a:.1%} ± {s:.1%}" if s == s else f"{a:.1%}"
                                                 for a, s in zip(summary["after"], summary["after_sd"])]})
        st.dataframe(as_percent(shown[["slice", "planted", "n", "method", "before", "after ± sd", "change", "worse"]],
                                "before", "change"),
                     hide_index=True, width="stretch",
                     column_config={"before": percent_column("before"), "change": percent_column("change")})

with search:
    classes = project.model_classes(model) or sorted(load_samples(str(project.folder), model,
                                                                  project.data_version())["label"].dropna().unique())
    with st.form("repair_search"):
        cells = st.columns(4)
        label = cells[0].selectbox("Class", classes)
        kind = cells[1].selectbox("Generator", list(GENERATORS), format_func=GENERATORS.get, key="repair_search_gen")
        name = cells[2].text_input("Model", value="", key="repair_search_model")
        captioner = cells[3].selectbox("Captions by", ["renderer", "llm"], format_func={
            "renderer": "the renderer's scene description (demo)", "llm": "a multimodal LLM"}.get)
        cells = st.columns(3)
        images = cells[0].number_input("Images per caption", min_value=8, value=32, step=8)
        captions = cells[1].number_input("Failures captioned", min_value=1, value=8, step=1)
        llm_url = cells[2].text_input("LLM server URL", value="", placeholder="empty: OpenAI")
        if st.form_submit_button("Search for failures", type="primary"):
            params = {"label": label, "model": model, "generator": generator_spec(kind, name),
                      "captioner": captioner, "images": int(images), "captions": int(captions),
                      "llm": {"base_url": llm_url or None}}
            key = secret("OPENAI_API_KEY")
            if start_job(project, "failure search", params, user, {"OPENAI_API_KEY": key} if key else None):
                st.rerun()
    job_status(project, "failure search", user, key="repair_search")
    found = repair_runs(project, "failure search", finished=True, limit=1)
    if not found.empty:
        result = found.iloc[0]["result"]
        table = pd.DataFrame(result["table"])
        st.markdown(f"**{plain(result['label'])}**: {result['significant']} captions make the model fail significantly more "
                    "often than the baseline (first row; FDR 5% over every caption tested).")
        st.dataframe(table, hide_index=True, width="stretch",
                     column_config={"failure_rate": st.column_config.ProgressColumn(
                         "failure rate", format="percent", min_value=0, max_value=1)})
