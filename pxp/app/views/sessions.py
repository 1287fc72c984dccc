"""Sessions: filter, then read a transcript in the papers' layout with its LLM calls."""

from __future__ import annotations

import streamlit as st

from pxp.app import auth, resources, ui
from pxp.app.data import (
    STATUSES,
    TAGS,
    message_views,
    session_calls,
    session_filter_options,
    sessions_count,
    sessions_table,
)
from pxp.running.pxp.live.assignment import LiveError
from pxp.running.pxp.live.turns import LiveSession, load_session

S = st.session_state
PAGE = 500


def page_caption(total: int, page: int, shown: int) -> str:
    """'all 12 sessions' or 'the newest 500 of 6,012', then the page's range."""
    if total <= PAGE:
        return f"All {total:,} session(s), newest first"
    first = (page - 1) * PAGE + 1
    head = f"The newest {shown:,} of {total:,} sessions" if page == 1 else \
        f"Sessions {first:,}–{first + shown - 1:,} of {total:,}, newest first"
    return head + " · page through the rest with Page"


def filters() -> dict[str, str | None]:
    opts = session_filter_options(resources.engine())
    mine = auth.own_sessions_only()  # an annotator (login on): no other annotator's name is listed
    c = st.columns(5)
    return {
        "dataset": c[0].selectbox("Dataset", opts.datasets, index=None, key="sessions_dataset",
                                  placeholder="all"),
        "experiment": c[1].selectbox("Experiment", opts.experiments, index=None,
                                     key="sessions_experiment", placeholder="all"),
        "annotator": c[2].selectbox("Annotator", [mine] if mine else opts.annotators, index=0 if mine else None,
                                    key="sessions_annotator", placeholder="all", disabled=mine is not None),
        "status": c[3].selectbox("Status", STATUSES, index=None, key="sessions_status",
                                 placeholder="all"),
        "tag": c[4].selectbox("Has tag", TAGS, index=None, key="sessions_tag", placeholder="any"),
    }


def instance_thumb(s: LiveSession) -> None:
    if s.synthetic:
        ui.synthetic_badge()
    st.caption(ui.escape_md(s.instance_key))
    if s.match_kind == "smiles":
        ui.molecule(s.payload, properties=False, width=240, name=str(s.meta.get("name") or "") or None)
    elif s.asset_sha256:
        from pxp.data.images import ImageRejected

        try:
            png = ui.display_png(resources.engine(), s.instance_id)
        except ImageRejected as err:
            st.warning(ui.escape_md(str(err)))
            return
        if png is not None:  # through the page's session, never a media URL (pxp.app.viewer)
            ui.image_viewer(png, key=f"sessions_img_{s.id}")
    else:
        ui.show_text(s.payload, empty="")


def detail(sid: int) -> None:
    eng = resources.engine()
    try:
        s = load_session(eng, sid)
    except LiveError as err:
        st.error(ui.escape_md(str(err)))
        return
    st.subheader(f"Session {s.id} · {ui.escape_md(str(s.experiment))} · {ui.escape_md(str(s.case_label))}")
    meta = st.container(horizontal=True, vertical_alignment="center")
    with meta:
        st.markdown(f"Status **{s.status}**" + (f" ({s.stop_reason})" if s.stop_reason else ""))
        if s.is_simulated:
            ui.simulated_badge()
        if s.annotator:
            st.markdown(f"Annotator: {ui.escape_md(s.annotator)}")
    if s.abort_reason:
        st.warning(f"Aborted: {ui.escape_md(str(s.abort_reason))}")
    violations = s.violations()
    if violations:
        st.error("Not conformant to the protocol:\n\n" + "\n".join(f"- {ui.escape_md(v)}" for v in violations))
    else:
        st.success("Conformant to the protocol (docs/protocol.md).", icon=":material/verified:")
    ui.transcript_papers(s.messages, machine_label=s.machine_label, task_kind=s.match_kind,
                         instance_render=lambda: instance_thumb(s),
                         target=s.payload if s.match_kind == "smiles" else None,
                         notes=message_views(eng, sid), target_name=s.meta.get("name"))
    st.markdown("**Intelligibility of this session**")
    if s.status == "open":
        st.caption("Not counted (open): a session counts towards Definitions 1 and 2 once it ends.")
    else:
        ui.show_flags(s.flags())
    st.markdown("**LLM calls behind it**")
    calls = session_calls(eng, sid)
    if len(calls):
        c = st.columns(3)
        unknown = int(calls["tokens in"].isna().sum())
        c[0].metric("Tokens in / out", f"{int(calls['tokens in'].sum()):,} / {int(calls['tokens out'].sum()):,}",
                    help=f"{unknown} call(s) without usage: the server sent no token counts" if unknown else None)
        c[1].metric("Latency (total)", f"{calls['latency ms'].sum() / 1000:.2f} s")
        cost = calls["cost $"].dropna()
        c[2].metric("Cost", f"${cost.sum():.4f}" if len(cost) else "—")
        if unknown:
            st.caption(f"{unknown} of {len(calls)} call(s) had no usage (unknown tokens, cost —).")
        thinking = calls.pop("thinking")
        ui.table(calls, counts=["tokens in", "tokens out", "cached"], hide_index=True)
        for j, purpose, attempt, text in zip(calls["message"], calls["purpose"], calls["attempt"], thinking,
                                             strict=True):
            if text:  # the model's reasoning beside its answer: folded, never the answer
                where = "the evaluation" if j != j or j is None else f"message {int(j)}"  # NaN: no message
                with st.expander(f"Thinking behind {where} ({purpose}, attempt {attempt})", expanded=False):
                    st.text(text)
    else:
        st.caption("No calls recorded (imported transcript, or a human-only turn).")


def render() -> None:
    st.title("Sessions")
    wanted = st.query_params.get("session")  # a link to one session (the router checks it is the user's)
    if wanted is not None and wanted.isdigit():
        detail(int(wanted))
        return
    f = filters()
    mine = auth.own_sessions_only()
    if mine is not None:  # an annotator (login on) sees only their own sessions
        f["annotator"] = mine
    with st.spinner("Counting the sessions that match…"):  # a page that waits says what for
        total = sessions_count(resources.engine(), **f)
    if not total:
        st.info("No session matches. Annotate a case or run an experiment first.")
        return
    pages = (total + PAGE - 1) // PAGE
    page = 1
    if pages > 1:
        page = int(st.number_input(f"Page (of {pages})", 1, pages, 1, key="sessions_page"))
    with st.spinner(f"Reading page {page} of the sessions…"):
        table = sessions_table(resources.engine(), **f, limit=PAGE, offset=(page - 1) * PAGE)
    st.caption(page_caption(total, page, len(table)))
    ui.table(table, hide_index=True, height=min(38 * (len(table) + 1), 320),
             column_config={"session": st.column_config.Column(pinned=True)})
    ids = [int(x) for x in table["session"]]
    labels = {int(r.session): f"#{r.session} · {r.experiment} · {r.instance} · {r.status}"
              for r in table.itertuples()}
    sid = st.selectbox("Open session", ids, key="sessions_open", format_func=lambda i: labels[i])
    if sid is not None:
        detail(int(sid))


render()
