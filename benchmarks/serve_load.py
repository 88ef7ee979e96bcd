"""Benchmark: a shared dashboard while 20 visitors start jobs at once, timed in real headless Chromium.

Builds (once, into --dir) a projects root holding the demo project and --job-projects projects of --job-images of
the demo's images each; serves it with `hibug serve --projects-root` on a loopback alias (127.0.0.2, so the server
sees a shared address) with --max-jobs 2 (or --max-jobs N) --max-waiting 6 --max-jobs-per-person 1. Then:
  1. another visitor opens the Error slices, Tagging, Review and Overview pages of the demo in Chromium (each from
     the click in the sidebar to the page's title with the script run over), --repeats rounds after a warm-up: idle
     figures;
  2. 20 visitors (threads, each its own identity, through the same submit and queue the pages use) start an
     embedding job (the offline ConSE encoder: real CPU work) at the same moment, one per project and visitor;
  3. while those jobs run, the other visitor opens the same pages again, round after round: loaded figures.
Printed: how many jobs the queue took and refused, the most seen running at once (the limit is 2), whether every
job taken finished, and each page's median and worst time idle and under load, with their ratio and the 2 s target.
Usage: python benchmarks/serve_load.py [--dir serve-bench] [--repeats 3] [--job-projects 10] [--job-images 300]
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

TARGET_S = 2.0
VISITORS = 20
LIMITS = {"max_running": 2, "max_waiting": 6, "max_per_person": 1}  # --max-jobs sets max_running
PAGES = {"Error slices": "Error slices", "Tagging": "Tagging", "Review": "Review", "Overview": "easy-vqa shapes demo"}


def build(folder: Path, job_projects: int, job_images: int) -> Path:
    """The projects root (built once; later runs reuse it, less the jobs' embeddings)."""
    import pandas as pd

    from hibug_core.demo import ensure_demo
    from hibug_core.store.project import Project
    from hibug_core.tasks import load_manifest

    root = folder / "projects"
    root.mkdir(parents=True, exist_ok=True)
    demo = ensure_demo(root / "demo")
    samples = demo.samples("shape-cnn").head(job_images)
    manifest = folder / "jobs-manifest.csv"
    pd.DataFrame({"image": samples["image_path"], "label": samples["label"], "prediction": samples["prediction"],
                  "split": samples["split"]}).to_csv(manifest, index=False)
    for i in range(job_projects):
        target = root / f"jobs-{i}"
        if not (target / "hibug.sqlite").exists():
            shutil.rmtree(target, ignore_errors=True)
            Project.create_from_manifest(target, load_manifest(manifest)).close()
        shutil.rmtree(target / "arrays", ignore_errors=True)  # embedded afresh on every run
    demo.close()
    return root


def open_page(page, name: str, title: str) -> float:
    """From the click on the page's link in the sidebar (the app stays loaded, as a user moves between pages) to
    its title shown and its script run over."""
    from browser_support import idle

    started = time.perf_counter()
    page.get_by_test_id("stSidebarNav").get_by_text(name, exact=True).click()
    page.get_by_role("heading", name=title).first.wait_for(timeout=120_000)
    idle(page, timeout=120_000)
    return time.perf_counter() - started - 0.3  # idle() waits 0.3 s before it looks


def round_of_pages(page) -> dict[str, float]:
    return {name: open_page(page, name, title) for name, title in PAGES.items()}


def start_jobs(root: Path, job_projects: int) -> tuple[list, list, list[int], threading.Event]:
    """20 visitors start a job each at the same moment; returns (taken, refused, running counts seen, stop)."""
    from hibug_core.access import Actor, Role, acting_as
    from hibug_core.jobs.kinds import job_operation
    from hibug_core.jobs.queue import JobQueue, QueueLimits, ServerBusy
    from hibug_core.jobs.worker import submit
    from hibug_core.serving.policy import SERVER_DIR
    from hibug_core.store.project import Project

    queue = JobQueue(root / SERVER_DIR, QueueLimits(**LIMITS), step_aside=True)  # as the shared server's own
    projects = [Project.open(root / f"jobs-{i}") for i in range(job_projects)]
    taken, refused = [], []
    barrier = threading.Barrier(VISITORS)

    def visitor(i: int) -> None:
        project = projects[i % job_projects]
        kind = "embed" if i < job_projects else "map"  # one live job per kind and project
        barrier.wait()
        with acting_as(Actor(f"visitor{i}@example.com", Role.EDITOR)):
            try:
                taken.append((project, submit(project, job_operation(kind).build({"encoder": "conse"}), queue=queue)))
            except ServerBusy as error:
                refused.append(str(error))

    threads = [threading.Thread(target=visitor, args=(i,)) for i in range(VISITORS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seen: list[int] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            seen.append(queue.counts()["running"])
            time.sleep(0.2)

    threading.Thread(target=watch, daemon=True).start()
    return taken, refused, seen, stop


def live(taken) -> int:
    from hibug_core.jobs.store import get_job

    return sum(get_job(project, job).live for project, job in taken)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="serve-bench")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--job-projects", type=int, default=10)
    parser.add_argument("--job-images", type=int, default=300)
    parser.add_argument("--max-jobs", type=int, default=LIMITS["max_running"], help="jobs run at once (default: 2)")
    args = parser.parse_args()
    LIMITS["max_running"] = args.max_jobs
    if args.job_projects * 2 < VISITORS:
        parser.error(f"--job-projects must be at least {VISITORS // 2}: each visitor needs a project and kind free")
    from playwright.sync_api import sync_playwright

    from hibug_core.jobs.store import get_job

    from browser_support import CHROMIUM, CHROMIUM_ARGS, serving

    root = build(Path(args.dir).resolve(), args.job_projects, args.job_images)
    options = ["--projects-root", str(root), "--open-to-anyone", "--max-jobs", str(LIMITS["max_running"]),
               "--max-waiting", str(LIMITS["max_waiting"]), "--max-jobs-per-person", str(LIMITS["max_per_person"])]
    with sync_playwright() as playwright, serving(None, *options, address="127.0.0.2") as url:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
        page.goto(f"{url}/?project=demo")
        page.get_by_role("heading", name=PAGES["Overview"]).wait_for(timeout=120_000)
        round_of_pages(page)  # warm-up: caches filled, as for any visitor after the first
        idle = [round_of_pages(page) for _ in range(args.repeats)]
        started = time.perf_counter()
        taken, refused, seen, stop = start_jobs(root, args.job_projects)
        loaded = []
        while live(taken) and time.perf_counter() - started < 1800:
            loaded.append(round_of_pages(page))
        while live(taken) and time.perf_counter() - started < 1800:
            time.sleep(1)
        stop.set()
        browser.close()
    finished = [get_job(project, job) for project, job in taken]
    print(f"visitors starting jobs at once: {VISITORS}; taken {len(taken)}, refused {len(refused)} "
          f"(limits: {LIMITS})")
    print(f"most jobs seen running at once: {max(seen, default=0)} (limit {LIMITS['max_running']}); jobs done: "
          f"{sum(j.status == 'done' for j in finished)} of {len(finished)}; "
          f"others: {[(j.id, j.status, j.error) for j in finished if j.status != 'done']}; "
          f"all jobs over in {time.perf_counter() - started:.0f} s")
    print(f"refusal seen by a visitor: {refused[0] if refused else '(none)'}")
    print(f"{'page':<14}{'idle median':>12}{'idle worst':>11}{'load median':>12}{'load worst':>11}{'ratio':>7}"
          f"  (target {TARGET_S:.0f} s; {len(loaded)} rounds under load)")
    for name in PAGES:
        calm, busy = [r[name] for r in idle], [r[name] for r in loaded] or [float("nan")]
        print(f"{name:<14}{statistics.median(calm):>11.2f}s{max(calm):>10.2f}s{statistics.median(busy):>11.2f}s"
              f"{max(busy):>10.2f}s{statistics.median(busy) / statistics.median(calm):>6.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
