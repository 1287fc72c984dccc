"""Datasets: import through pxp's importers, and browse instances with images or drawings."""

from __future__ import annotations

import streamlit as st
from sqlalchemy import Engine

from pxp.app import auth, imports, resources, ui
from pxp.app.data import InstanceRow, dataset_choices, dataset_info, datasets_table, instances_page

PAGE = 12
S = st.session_state


def import_panel() -> None:
    eng = resources.engine()
    kinds = [k for k in imports.KINDS if k.available()]
    key = st.selectbox("What to import", [k.key for k in kinds], key="datasets_kind",
                       format_func=lambda x: imports.kind(x).title)
    k = imports.kind(key)
    st.caption(k.help)
    options: dict[str, object] = {}
    attempt = int(S.get("datasets_attempt", 0))  # a new key clears the uploaders after a failed attempt
    with st.form("datasets_import", clear_on_submit=False, enter_to_submit=False):
        main = st.file_uploader("File", type=list(k.main_types), key=f"datasets_main_{attempt}")
        extras = []
        if k.needs_images:
            c1, c2 = st.columns([3, 2]) if key == "study_rad" else (st.container(), None)
            extras = c1.file_uploader("Images (files or a .zip)", accept_multiple_files=True,
                                      type=["png", "jpg", "jpeg", "zip"], key=f"datasets_extras_{attempt}")
            if c2 is not None:
                c2.caption(imports.RAD_LAYOUT)
                c2.code("study.csv\nimages/case_001.png\nimages/case_002.png   (or images.zip)", language=None)
        if key == "study_rad":
            options["split"] = st.selectbox("Split for every row (optional; else the CSV's split column)",
                                            [None, "train", "val", "test"], key="datasets_rad_split")
        name: str = ""
        if key == "task":
            options["dataset"] = st.selectbox("Attach to dataset", list(dataset_choices(eng)),
                                              key="datasets_task_target")
        else:
            name = st.text_input("Name for the new dataset (optional)" if key != "transcripts"
                                 else "Name for the imported experiment", key="datasets_name")
        if key == "generic":
            c1, c2 = st.columns(2)
            options["task"] = c1.text_input("Task", "text", key="datasets_task",
                                            help="rad, drug, text, or a custom task name")
            options["split"] = c2.selectbox("Split for every row (optional)",
                                            [None, "train", "val", "test"], key="datasets_split")
            mapping = st.text_area("Column names (optional), one per line as column=field",
                                   key="datasets_mapping", placeholder="case=key\nfinding=prediction")
            options["mapping"] = [ln.strip() for ln in mapping.splitlines() if ln.strip()]
        if key == "dicom":
            c1, c2 = st.columns(2)
            options["label"] = c1.text_input("One label for every image (optional)",
                                             key="datasets_dicom_label")
            options["labels"] = c2.text_input("Labels CSV inside the zip (optional)",
                                              key="datasets_dicom_labels", placeholder="labels.csv")
        if key == "transcripts":
            c1, c2, c3 = st.columns(3)
            options["n"] = c1.number_input("n", 2, 50, 10, key="datasets_tr_n")
            options["k"] = c2.number_input("k", 1, 50, 3, key="datasets_tr_k")
            options["task"] = c3.text_input("Task", "text", key="datasets_tr_task")
        go = st.form_submit_button("Import", type="primary")
    if go:
        if main is None:
            st.error("Choose a file first.")
            return
        if not auth.permit("import datasets", f"{key} {main.name}"):
            return
        bar = st.progress(0.0, text="Checking and importing…")

        def report(rows: int, fraction: float) -> None:
            bar.progress(min(max(fraction, 0.0), 1.0), text=f"Checking and importing… {rows:,} rows")

        with st.spinner("Checking and importing…"):
            out = imports.run_import(eng, key, main, extras or [], name=name.strip() or None,
                                     options=options, progress=report)
        bar.empty()
        if not out.ok:
            S["datasets_attempt"] = attempt + 1  # the next try starts from empty uploaders
            S["datasets_failed"] = out.messages
            st.rerun()
        auth.audited("imported", out.messages[0])
        st.success(ui.escape_md(out.messages[0]))
        for w in out.messages[1:]:
            st.warning(ui.escape_md(w))
    failed = S.pop("datasets_failed", None)
    if failed:
        st.error(f"Nothing was imported ({len(failed)} problem(s)); the uploads were cleared, choose them again:")
        st.text("\n".join(failed[:50]))


def browse() -> None:
    eng = resources.engine()
    table = datasets_table(eng)
    if not len(table):
        st.info("No dataset yet: import one above.")
        return
    ui.table(table, hide_index=True)
    name = st.selectbox("Browse", list(table["name"]), key="datasets_browse")
    info = dataset_info(eng, name)
    if info is None:
        return
    head = st.container(horizontal=True, vertical_alignment="center")
    with head:
        st.markdown(f"**{ui.escape_md(info.name)}** · task {info.task} · {info.instances} instances · "
                    + ", ".join(f"{s}: {c}" for s, c in sorted(info.splits.items())))
        if info.synthetic:
            ui.synthetic_badge()
    pages = max(1, -(-info.instances // PAGE))
    page = (st.number_input(f"Page (of {pages})", 1, pages, 1, key=f"datasets_page_{name}", width=200)
            if pages > 1 else 1)
    with st.spinner(f"Reading the cases of {name}…"):  # a page that waits says what for
        rows = instances_page(eng, name, offset=(int(page) - 1) * PAGE, limit=PAGE)
    # a card shows its molecule (DRUG), else its text (a task with text cases), else its image
    text = [info.task != "drug" and bool(r.payload) and not r.has_image and info.task != "rad" for r in rows]
    drawn = [info.task == "drug" or (r.has_image and not t) for r, t in zip(rows, text, strict=True)]
    status = st.empty()
    if any(drawn):  # every card is on the page at once, its drawing's place saying it is coming; then the drawings
        n = sum(drawn)
        status.caption(f"Drawing {n} case{'s' * (n != 1)}…")
    cols = st.columns(3)
    slots = []
    for i, r in enumerate(rows):
        with cols[i % 3], st.container(border=True):
            title = str(r.meta.get("name") or r.key)
            st.markdown(f"**{ui.escape_md(title)}** · {r.split or 'no split'}")
            slot = st.empty()
            if drawn[i]:
                slot.caption(f"Drawing the {'molecule' if info.task == 'drug' else 'image'}…")
                slots.append((slot, r))
            elif text[i]:
                with slot:
                    ui.show_text(r.payload)
            st.caption("Reference answer")
            ui.show_prediction(r.reference_prediction, "smiles" if info.task == "drug" else "label")
            ui.show_text(r.reference_explanation, empty="(no explanation)")
    for slot, r in slots:
        with slot.container():
            _drawing(eng, info.task, r)
    status.empty()


def _drawing(eng: Engine, task: str, r: InstanceRow) -> None:
    """A card's molecule (DRUG) or image, in the place its card kept for it."""
    if task == "drug":
        ui.molecule(r.payload, properties=False, width=300, name=str(r.meta.get("name") or "") or None)
        return
    from pxp.data.images import ImageRejected

    try:
        png = ui.display_png(eng, r.id)
    except ImageRejected as err:
        st.warning(ui.escape_md(str(err)))
        return
    if png is not None:  # through the page's session, never a media URL (pxp.app.viewer)
        ui.image_viewer(png, key=f"datasets_img_{r.id}")


def render() -> None:
    st.title("Datasets")
    with st.expander("Import a dataset", icon=":material/upload:"):
        import_panel()
    browse()


render()
