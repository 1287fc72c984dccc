"""Experiments: configure a controlled run, launch it in a background worker, watch it."""

from __future__ import annotations

import shlex
from typing import Any

import pandas as pd
import streamlit as st

from pxp.app import auth, resources, ui
from pxp.app.data import QueueView, dataset_choices, dataset_info, experiments_table, queue_view
from pxp.app.prefs import load_prefs
from pxp.llm.models import run_warnings
from pxp.running.pxp.checks import config_errors
from pxp.running.pxp.config import DEFAULT_SPLIT, LEARN_DEFAULT, RunConfig, RunError
from pxp.running.pxp.controlled.estimate import Estimate, dataset_facts, estimate, store_estimate
from pxp.running.pxp.controlled.estimate_text import unknown_cost_reason
from pxp.running.pxp.experiments import create_experiment
from pxp.running.pxp.live.overlap import annotator_progress, overlap_summary
from pxp.running.workers import pool as workers

S = st.session_state
#: a real-LLM run estimated above this many US dollars needs the box ticked (`pxp run --max-usd`)
MAX_USD = 20.0
NO_QUEUE = "No distributed workers (PostgreSQL only)"


def launch_form() -> str | None:
    """The launch form; returns the outcome line to show outside the expander (or None)."""
    eng = resources.engine()
    prefs = load_prefs(eng)
    datasets = dataset_choices(eng)
    if not datasets:
        st.warning("There is no dataset yet. Import one on the Datasets page.")
        return None
    tasks = sorted(set(datasets.values()))
    # Task → dataset → split depend on each other, so they sit outside the form and rerun on change.
    c1, c2, c3 = st.columns(3)
    task = c1.selectbox("Task", tasks, key="experiments_task")
    names = [n for n, t in datasets.items() if t == task] or list(datasets)
    if S.get("experiments_dataset") not in names:
        S["experiments_dataset"] = names[0]
    ds = c2.selectbox("Dataset", names, key="experiments_dataset")
    info = dataset_info(eng, ds) if ds else None
    splits = ["all", *sorted((info.splits if info else {}).keys())]
    if S.get("experiments_split") not in splits:  # as `pxp run`: train when the dataset has one
        S["experiments_split"] = DEFAULT_SPLIT if DEFAULT_SPLIT in splits else "all"
    split = c3.selectbox("Split", splits, key="experiments_split",
                         format_func=lambda s: s if s == "all" else f"{s} ({(info.splits if info else {})[s]})")
    with st.form("experiments_new", enter_to_submit=False):  # Enter never starts a run: a click does
        c1, c2 = st.columns(2)
        machine = c1.text_input("Machine (generator)", prefs.generator, key="experiments_machine",
                                help="simulated, or provider:model")
        checker = c2.text_input("Checker (AGREE)", prefs.checker, key="experiments_checker",
                                help="lexical, or provider:model")
        c = st.columns(5)
        n = c[0].number_input("n (messages)", 2, 50, prefs.n, key="experiments_n",
                              help="At most n messages per session")
        k = c[1].number_input("k (REJECT after)", 1, 50, prefs.k, key="experiments_k",
                              help="REJECT is allowed only after message k")
        reps = c[2].number_input("R (repetitions)", 1, 100, 1, key="experiments_reps",
                                 help="How many times every case is run, each with its own seed")
        seed = c[3].number_input("Seed", 0, 2**31 - 1, 0, key="experiments_seed")
        learn = c[4].toggle("LEARN", value=LEARN_DEFAULT, key="experiments_learn",
                            help="Keep a session's context only if validation accuracy does not drop")
        name = st.text_input("Name (optional)", key="experiments_name")
        probe = st.toggle("Common-ground probe", value=False, key="experiments_probe",
                          help="After each human message, ask the machine three private yes/no questions "
                               "(`pxp run --probe`); the estimate counts these calls")
        st.caption(f"Starts on dataset **{ui.escape_md(ds or '')}**, split **{ui.escape_md(split)}** "
                   "(Task, Dataset and Split above apply at once).")
        over = st.checkbox(f"Allow an estimated cost over ${MAX_USD:g}", key="experiments_over")
        b = st.container(horizontal=True)
        with b:
            go = st.form_submit_button("Create and start", type="primary", icon=":material/play_arrow:")
            est_only = st.form_submit_button("Estimate cost", icon=":material/calculate:")
    if not ((go or est_only) and ds):
        return None
    S.pop("experiments_pending", None)  # a new submission replaces a run waiting for confirmation
    m = machine.strip() or "simulated"
    cfg = RunConfig(
        dataset=ds, split=None if split == "all" else split, machine=m,
        checker=checker.strip() or "lexical", base_url=prefs.base_url or None, n=int(n), k=int(k),
        reps=int(reps), seed=int(seed), learn=bool(learn), probe=bool(probe),
        temperature=prefs.generator_temperature if m != "simulated" else None,
        max_tokens=prefs.generator_max_tokens or None,
    )
    S["experiments_warnings"] = run_warnings([cfg.machine, cfg.checker])  # shown with the outcome
    problems = config_errors(cfg.as_dict())
    if problems:
        return "error:Not started, nothing stored: " + "; ".join(problems)
    try:
        est = estimate(cfg, dataset_facts(eng, cfg))
    except (RunError, ValueError) as err:
        return f"error:Not started, nothing stored: {err}"
    S["experiments_estimate"] = est.as_json()
    if est_only:
        return None
    if est.usd is not None and est.usd > MAX_USD and not over:
        return (f"error:Not started, nothing stored: the estimated cost is ${est.usd:,.2f}, over ${MAX_USD:g}; "
                "tick the box to allow it")
    if est.usd is None or est.usd > 0:  # money, or an unknown cost, is spent only on a second, explicit click
        S["experiments_pending"] = (cfg, name.strip() or None, est)
        return None
    return start(cfg, name.strip() or None, est)


def start(cfg: RunConfig, name: str | None, est: Estimate) -> str:
    """Create and start the experiment; the outcome line ("ok:…" or "error:…")."""
    eng = resources.engine()
    line = auth.refusal("create experiments", f"controlled experiment on {cfg.dataset}")
    if line is not None:
        return f"error:Not started, nothing stored: {line}"
    try:
        exp = create_experiment(eng, cfg, name=name)
    except (RunError, ValueError) as err:
        return f"error:Not started, nothing stored: {err}"
    store_estimate(eng, exp.id or 0, est)
    auth.audited("created", f"experiment {exp.name}")
    try:
        workers.start(eng, exp.id or 0, secrets=resources.secret_keys())
    except workers.WorkerError as err:
        return f"error:Experiment {exp.name!r} was created but did not start: {err}"
    auth.audited("started", f"experiment {exp.name}")
    return "ok:" + ui.launch_summary(exp.name, exp.config)


def confirm_spend() -> str | None:
    """A run estimated above $0 waits here: its estimate beside the start button, and Cancel."""
    pending = S.get("experiments_pending")
    if not pending:
        return None
    cfg, name, est = pending
    if est.usd is None:  # an unknown cost is never taken for zero
        st.warning(f"Cost unknown: {ui.escape_md(unknown_cost_reason(est.unpriced))}. The run starts only when you "
                   "confirm.", icon=":material/payments:")
        label = "Cost unknown: Start anyway"
    else:
        st.warning(f"This run is estimated to cost **${est.usd:,.2f}** ({ui.escape_md(cfg.machine)}). It starts "
                   "only when you confirm.", icon=":material/payments:")
        label = f"Start and spend about ${est.usd:,.2f}"
    row = st.container(horizontal=True)
    go = row.button(label, type="primary", key="experiments_confirm", icon=":material/play_arrow:")
    if row.button("Cancel", key="experiments_cancel"):
        S.pop("experiments_pending", None)
        st.rerun()
    if not go:
        return None
    S.pop("experiments_pending", None)
    return start(cfg, name, est)


def show_estimate(est: dict[str, Any]) -> None:
    """The estimate of the configured run: calls, tokens and US dollars, and what is assumed."""
    def usd(v: float | None) -> str:
        return "unknown" if v is None else f"${v:,.2f}"

    st.markdown(f"**Estimate before launch:** {est['calls']:,} calls, {est['tokens_in']:,} input and "
                f"{est['tokens_out']:,} output tokens, {usd(est['usd'])} over {est['repetitions']} repetition(s)")
    rows = pd.DataFrame([{"per repetition": r["what"], "calls": r["calls"], "tokens in": r["tokens_in"],
                          "tokens out": r["tokens_out"], "US$": usd(r["usd"])} for r in est["rows"]])
    ui.table(rows, counts=["calls", "tokens in", "tokens out"], hide_index=True, key="experiments_estimate_table")
    st.caption("Assumptions: " + ui.escape_md("; ".join(est["assumptions"])))


@st.fragment(run_every=2.0)
def progress_panel() -> None:
    eng = resources.engine()
    table = experiments_table(eng, mode="controlled")
    if not len(table):
        st.caption("No controlled experiment yet.")
        return
    queued = queue_view(eng)
    for row in table.itertuples():
        eid = int(row.id)
        p = workers.progress(eng, eid)
        with st.container(border=True):
            head = st.container(horizontal=True, vertical_alignment="center")
            with head:
                name, dataset, machine = (ui.escape_md(str(v)) for v in (row.name, row.dataset, row.machine))
                st.markdown(f"**{name}** · {dataset} · {machine} · n={row.n}, k={row.k}, "
                            f"R={row.reps}")
                # stored as running, with no live process: killed, a signal, a power cut (no silent death)
                interrupted = p.status == "interrupted"
                st.badge("running" if p.running else "interrupted" if interrupted else p.status,
                         color="blue" if p.running else "orange" if interrupted else
                         "green" if p.status == "finished" else "gray")
            if interrupted:
                command = ui.escape_md("pxp run --resume " + shlex.quote(str(row.name)))
                st.warning("Its process ended without finishing or pausing (killed, a signal, a power cut). Resume "
                           f"it here, or with the command {command}; every stored step stays.",
                           icon=":material/warning:")
            st.progress(p.fraction, text=f"{p.done}/{p.sessions} sessions · {p.messages} messages"
                        + (f" · {p.aborted} aborted" if p.aborted else ""))
            if p.error:
                st.error(ui.escape_md(str(p.error)))
            where = (queued.repetitions if queued else {}).get(eid)
            if where:
                st.caption("Repetitions: " + " · ".join(f"{rep}: {ui.escape_md(str(w))}" for rep, w in where.items()))
            b = st.container(horizontal=True)
            with b:
                if p.running:
                    if st.button("Cancel", key=f"experiments_cancel_{eid}", icon=":material/stop:"):
                        line = auth.refusal("cancel experiments", f"experiment {eid}")
                        S[f"experiments_error_{eid}"] = line  # a refusal is shown after the rerun
                        if line is None:
                            workers.cancel(eng, eid)
                            auth.audited("cancelled", f"experiment {eid}")
                        st.rerun(scope="fragment")
                elif row.problem:
                    st.caption(f"Cannot be resumed: {ui.escape_md(row.problem)}")
                elif p.done < p.sessions and st.button(
                    "Resume", key=f"experiments_resume_{eid}", icon=":material/play_arrow:"
                ):
                    line = auth.refusal("start experiments", f"experiment {eid}")
                    S[f"experiments_error_{eid}"] = line  # shown after the rerun
                    if line is None:
                        try:
                            workers.start(eng, eid, secrets=resources.secret_keys())
                            auth.audited("started", f"experiment {eid} (resumed)")
                        except workers.WorkerError as err:
                            S[f"experiments_error_{eid}"] = str(err)
                    st.rerun(scope="fragment")
            note = S.get(f"experiments_error_{eid}")
            if note:
                st.error(ui.escape_md(str(note)))


@st.fragment(run_every=2.0)
def queue_panel() -> None:
    """The `pxp worker`s alive and the queue of `pxp run --distributed` (docs/operations.md, Workers); one quiet line
    without."""
    view: QueueView | None = queue_view(resources.engine())
    if view is None:
        st.caption(NO_QUEUE)
        return
    st.subheader("Distributed workers")
    if len(view.workers):
        ui.table(view.workers, hide_index=True)
    else:
        st.caption("No worker alive: start one with `pxp worker` on any machine that reaches the database.")
    st.markdown("**Queue** (the newest job of each repetition)")
    ui.table(view.queue, hide_index=True)


# --- per-annotator progress of live experiments (docs/research.md, Live experiments and overlap) ----------------------


def annotator_progress_block(live: pd.DataFrame) -> None:
    """Per live experiment: its overlap, the cases done by all its annotators, and each annotator's work."""
    eng = resources.engine()
    for row in live.itertuples():
        progress = annotator_progress(eng, int(row.id))
        k, complete = overlap_summary(eng, int(row.id))
        worked = sum(1 for p in progress if p.done or p.aborted)  # the annotators, not the overlap
        with st.expander(f"{ui.escape_md(str(row.name))}: {complete} case{'' if complete == 1 else 's'} done by "
                         f"{worked} annotator{'' if worked == 1 else 's'} · overlap {k} (annotators per case)"):
            if not progress:
                st.caption("Nobody has annotated a case yet.")
                continue
            ui.table(pd.DataFrame(
                [{"annotator": p.annotator, "done": p.done, "aborted": p.aborted, "open": p.open,
                  "cases": p.cases, "progress": p.done / p.cases if p.cases else 0.0} for p in progress]),
                hide_index=True, key=f"experiments_annotators_{int(row.id)}",
                column_config={"progress": st.column_config.ProgressColumn("progress", min_value=0.0,
                                                                           max_value=1.0)})


def render() -> None:
    st.title("Experiments")
    st.caption("A controlled run: the machine talks with the database proxy of the expert "
               "(the reference answers) over every case, R times.")
    # open on the first visit, and while its choices are in use (a Task change reruns the page)
    opened = not S.get("experiments_seen", False) or "experiments_task" in S
    with st.expander("New controlled experiment", expanded=opened):
        outcome = launch_form()
        outcome = confirm_spend() or outcome
    S["experiments_seen"] = True
    if outcome is not None:
        S["experiments_outcome"] = outcome
    kind, _, line = str(S.get("experiments_outcome", "")).partition(":")
    if outcome is not None or S.get("experiments_pending"):  # with the outcome, or beside the confirmation
        for warning in S.get("experiments_warnings", []):
            st.warning(ui.escape_md(warning))  # names the model as typed: text, never markup
    if line:
        (st.success if kind == "ok" else st.error)(ui.escape_md(line))
    if S.get("experiments_estimate"):
        show_estimate(S["experiments_estimate"])
    st.subheader("Progress")
    progress_panel()
    queue_panel()
    live = experiments_table(resources.engine(), mode="live")
    if len(live):
        st.subheader("Live experiments (annotated in the browser)")
        ui.table(live[["name", "dataset", "machine", "n", "k", "sessions", "finished"]], hide_index=True)
        annotator_progress_block(live)


render()
