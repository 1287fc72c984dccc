"""Rendering helpers: tag badges, messages, transcripts, instances (X-ray or molecule).

Untrusted text (LLM and human) is always shown as text: every ASCII punctuation mark
is backslash-escaped before st.markdown, so no HTML, image, link or autolink can come
out of it (DESIGN §3). No unsafe_allow_html anywhere.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import streamlit as st

from pxp.app.a11y.alt import molecule_alt, reaction_alts
from pxp.app.viewer import image_viewer as image_viewer  # the pages' one way to show a radiograph
from pxp.app.viewer import radiograph_viewer
from pxp.llm.bytecache import MB, byte_cached
from pxp.protocols.pxp.intelligibility import METRIC_LABELS
from pxp.protocols.pxp.rules import Msg, Sender, Tag

if TYPE_CHECKING:
    import pandas as pd

TAG_COLORS: dict[str, str] = {
    "INIT": "gray",
    "RATIFY": "green",
    "REFUTE": "orange",
    "REVISE": "blue",
    "REJECT": "red",
}
TAG_HELP: dict[str, str] = {
    "INIT": "the machine's first answer",
    "RATIFY": "I agree with the prediction and the explanation",
    "REFUTE": "I disagree and keep my answer",
    "REVISE": "I changed my answer",
    "REJECT": "I disagree with both and stop (only after message k)",
}
_PUNCT = re.compile(r"([!-/:-@\[-`{-~])")


_AUTOLINK = re.compile(r"(?i)(://|www\.|@)")
_WJ = "\u2060"  # WORD JOINER: invisible, but no GFM autolink spans it
MISSING = "—"  # a missing value, on every page (a data grid draws None as the word "None")


def table(df: Any, *, counts: Sequence[str] = (), **kw: Any) -> None:
    """st.dataframe, "—" for a missing value (its column then text, numbers `:g`) and `counts` right-aligned as the
    page's headlines write them (423,314). Downloads keep the frame itself."""
    import pandas as pd
    out = pd.DataFrame(df).copy()
    for c in [c for c in out.columns if c in counts or out[c].isna().any()]:
        out[c] = [MISSING if v is None or v != v else f"{int(v):,}" if c in counts else
                  f"{v:g}" if isinstance(v, float) else str(v) for v in out[c]]
    st.dataframe(out, column_config={**{c: st.column_config.TextColumn(alignment="right") for c in counts},
                                     **kw.pop("column_config", {})}, **kw)


def small_table(df: pd.DataFrame, numeric: Collection[str] = ()) -> None:
    """A small table as Markdown (no data grid to load), every cell escaped; numbers and `numeric` right-aligned."""
    def cell(v: Any) -> str:
        return escape_md(" ".join(str(v).split())) if v is not None and v == v else MISSING

    num = [str(t).startswith(("int", "float")) or c in numeric for c, t in zip(df.columns, df.dtypes, strict=True)]
    lines = ["| " + " | ".join(cell(c) for c in df.columns) + " |",
             "|" + "|".join("---:" if n else ":---" for n in num) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    st.markdown("\n".join(lines))


def escape_md(text: str) -> str:
    """Untrusted text (a user's, a file's or a provider's) that any Markdown-rendering element shows
    literally: the one escaping helper of the app, for messages, error and warning lines, toasts,
    captions, subheaders, expander labels, file names and the logged-in name.

    Every ASCII punctuation mark is backslash-escaped, which breaks links, images,
    HTML tags, `javascript:` links, emphasis, LaTeX $…$, Streamlit's :color[...] and
    :material/…: directives and emoji shortcodes; a word joiner
    after "://", "www." and "@" stops GFM's autolinks, which ignore escapes. Line
    breaks are kept as hard breaks. Longer text goes through show_text (st.text).
    """
    text = _AUTOLINK.sub(lambda m: m.group(1) + _WJ, text.replace("\r\n", "\n"))
    escaped = _PUNCT.sub(r"\\\1", text)
    return "  \n".join(escaped.split("\n"))


def show_text(text: str, *, empty: str = "(empty)") -> None:
    """Untrusted text (LLM or human) as plain text: st.text parses no markdown or HTML."""
    if text.strip():
        st.text(text)
    else:
        st.caption(empty)


def tag_badge(tag: str | Tag) -> None:
    t = str(tag.value if isinstance(tag, Tag) else tag)
    st.badge(t, color=TAG_COLORS.get(t, "gray"))  # type: ignore[arg-type]  # streamlit's color is a Literal; TAG_COLORS holds only its names


def sender_name(sender: Sender, machine_label: str, annotator: str | None = None) -> str:
    if sender is Sender.MACHINE:
        return f"Machine ({machine_label})"
    return f"Human ({annotator})" if annotator else "Human"


def show_prediction(prediction: str, task_kind: str) -> None:
    if not prediction.strip():
        st.caption("(no prediction)")
    elif task_kind == "smiles":
        st.code(prediction, language=None, wrap_lines=True)
    else:
        st.markdown("**" + escape_md(prediction) + "**")


def show_message(m: Msg, *, machine_label: str, task_kind: str, annotator: str | None = None,
                 target: str | None = None, target_name: object = None) -> None:
    """One message: number, sender, tag badge, prediction, explanation.

    In DRUG (task_kind "smiles", with the target given) the proposed step is drawn, reactants →
    target, beside its SMILES (proposed_step).
    """
    with st.container(border=True):
        head = st.container(horizontal=True, vertical_alignment="center")
        with head:
            st.markdown(f"**#{m.j}** · {escape_md(sender_name(m.sender, machine_label, annotator))}")
            tag_badge(m.tag)
        show_prediction(m.prediction, task_kind)
        proposed_step(m, task_kind, target, target_name=target_name)
        show_text(m.explanation, empty="(no explanation)")


def proposed_step(m: Msg, task_kind: str, target: str | None, max_width: int | None = None,
                  target_name: object = None) -> None:
    """A message's proposed reaction drawn under its SMILES (DRUG only), the machine's and the human's
    alike; a human's SMILES that RDKit cannot read stays text only (it was shown above)."""
    if not (target and task_kind == "smiles" and m.prediction.strip()):
        return
    who = "The machine's" if m.sender is Sender.MACHINE else "The human's"
    reaction(m.prediction, target, caption=f"{who} proposed step: reactants → target",
             max_width=max_width or REACTION_WIDTH, quiet=m.sender is Sender.HUMAN, target_name=target_name)


def show_flags(flags: Mapping[str, bool]) -> None:
    """The session's intelligibility (Definitions 1 and 2) as yes/no lines."""
    rows = [
        (":green[:material/check_circle:] " if v else ":gray[:material/radio_button_unchecked:] ")
        + METRIC_LABELS.get(k, k).replace(" sessions", "") + (" — **yes**" if v else " — no")
        for k, v in flags.items()
    ]
    st.markdown("  \n".join(rows))


def synthetic_badge() -> None:
    st.badge("synthetic", icon=":material/science:", color="violet",
             help="A synthetic phantom made for demos, not a real patient image")


#: what the simulated agent is, in one sentence, wherever it is named (docs/annotating.md, the simulated agent)
SIMULATED_SAYS = ("The Simulated agent is an offline stand-in for an LLM (no API key, no network): it argues each "
                  "finding with the demo's own texts and is wrong on purpose now and then, so that there is "
                  "something to refute.")


def simulated_badge() -> None:
    st.badge("Simulated agent", icon=":material/smart_toy:", color="gray", help=SIMULATED_SAYS)


#: byte budgets of the drawing caches (docs/development.md, Memory budgets; a display X-ray is megabytes)
DISPLAY_PNG_BYTES = 16 * MB  # the current cases of a few annotators; a miss costs ~0.1 s
#: the viewer's payloads: the current and the prepared next case of several annotators (a 2048-px film is
#: 3.5 MB at 8 bits, 7 MB at 16); a miss costs ~0.1 s of decoding and scaling
VIEWER_BYTES = 64 * MB
PREVIEW_BYTES = 4 * MB  # films' previews (about 50-130 kB each)
MOLECULE_BYTES = 4 * MB
REACTION_BYTES = 4 * MB


@byte_cached(MOLECULE_BYTES)
def _molecule(smiles: str, width: int, height: int) -> tuple[str, dict[str, Any]]:
    """Drawn in a worker process with a timeout (pxp.data.sandbox): never in the server."""
    from pxp.data.chem import check_smiles_size
    from pxp.data.render import molecule_drawing
    from pxp.data.sandbox import run_sandboxed

    check_smiles_size(smiles)  # refused here, without a worker
    return run_sandboxed(molecule_drawing, smiles, width, height)


@byte_cached(REACTION_BYTES)
def _reaction(reactants: str, target: str, max_width: int) -> list[tuple[str, int]]:
    """Drawn in a worker process with a timeout (pxp.data.sandbox): never in the server."""
    from pxp.data.chem import check_smiles_size
    from pxp.data.render import reaction_parts
    from pxp.data.sandbox import run_sandboxed

    check_smiles_size(reactants)
    check_smiles_size(target)
    return run_sandboxed(reaction_parts, reactants, target, max_width)


@byte_cached(DISPLAY_PNG_BYTES)
def _display_png(url: str, instance_id: int, window: float | None, level: float | None) -> bytes | None:
    from pxp.data.render import instance_display_png
    from pxp.storage.store import get_engine

    return instance_display_png(get_engine(url), instance_id, window=window, level=level)


def display_png(engine: Any, instance_id: int, *, window: float | None = None,
                level: float | None = None) -> bytes | None:
    """The display PNG of an instance's image (cached: images do not change)."""
    url = engine.url.render_as_string(hide_password=False)
    return _display_png(url, instance_id, window, level)


def molecule_svg(smiles: str, width: int = 420) -> tuple[str, dict[str, Any]]:
    """The molecule's SVG and properties, cached per server (made ahead for a prepared case)."""
    return _molecule(smiles, width, int(width * 0.7))


def molecule(smiles: str, *, caption: str | None = None, properties: bool = True,
             width: int = 420, name: object = None) -> None:
    """The molecule drawing (its alt text: `name` where known and the SMILES) and, below it, its
    properties; a bad SMILES is one line."""
    from pxp.data.chem import InvalidSmiles
    from pxp.data.sandbox import ChemFailed

    try:
        svg, props = molecule_svg(smiles, width)
    except InvalidSmiles as err:
        st.warning(escape_md(str(err)))
        return
    except ChemFailed as err:
        st.warning(escape_md(f"The molecule is not drawn: the drawing {err}."))
        return
    st.image(svg, caption=caption, width=width, alt=molecule_alt(smiles, name))
    st.code(smiles, language=None, wrap_lines=True)
    if properties and props:
        st.markdown(
            f"**Formula** {escape_md(str(props['formula']))} · **Mol. weight** {props['mw']:.1f} g/mol · "
            f"**Aromatic rings** {props['aromatic_rings']} · "
            f"**H-bond donors / acceptors** {props['hbd']} / {props['hba']}"
        )


#: the narrowest column a reaction is drawn in at a 1280 px wide window (pixels): the Annotate
#: conversation, and a side of the Sessions transcript (docs/annotating.md, "Drawing the reactants")
REACTION_WIDTH = 440
PAPERS_REACTION_WIDTH = 260


def reaction(reactants: str, target: str, caption: str = "Proposed step: reactants → target", *,
             max_width: int = REACTION_WIDTH, quiet: bool = False, target_name: object = None) -> None:
    """The proposed step reactants → target, or one line why it cannot be drawn (`quiet`: nothing).

    Its pieces (pxp.data.render.reaction_parts) wrap to the column like words, at their natural size
    so that atom labels stay legible; no piece is wider than `max_width`.
    """
    from pxp.data.chem import InvalidSmiles
    from pxp.data.sandbox import ChemFailed

    try:
        parts = _reaction(reactants, target, max_width)
    except InvalidSmiles as err:
        if not quiet:
            st.warning(escape_md(str(err)))
        return
    except ChemFailed as err:
        st.warning(escape_md(f"The step is not drawn: the drawing {err}."))
        return
    st.image([svg for svg, _ in parts], width="content", alt=reaction_alts(reactants, target, target_name))
    st.caption(caption)


def xray(engine: Any, instance_id: int, meta: Mapping[str, Any], *, key: str) -> dict[str, Any] | None:
    """The X-ray in the browser-side viewer: window/level by right-drag or presets at the image's full
    stored depth (the DICOM units when known), zoom and pan; returns the window the user settled on
    ({center, width, invert}; None while it is the image's default). The first time in a browser session, a
    low-resolution copy is sent before the film, in the same place: drawn at once, it gives way to the film when
    the film is drawn (docs/annotating.md, Pages)."""
    from pxp.data.images import ImageRejected

    try:
        payload = xray_payload(engine, instance_id)
    except ImageRejected as err:
        st.warning(escape_md(str(err)))
        return None
    if payload is None:
        st.info("This case has no image.")
        return None
    vkey = viewer_key(key)
    shown = st.session_state.setdefault("pxp_films_sent", set())
    with st.container(key=f"{vkey}_film"):
        st.html(_FILM_CSS.replace("FILM", re.sub(r"[^A-Za-z0-9_-]", "", vkey)))
        preview = None if vkey in shown else xray_preview(engine, instance_id)
        if preview is not None:
            radiograph_viewer(preview, key=f"{vkey}_preview")
        else:
            st.empty()  # its place kept: the film stays the same element from one run to the next
        shown.add(vkey)
        return radiograph_viewer(payload, key=vkey)


#: a film's preview and the film in one place: the film hidden while the preview is drawn and the film not yet, then
#: the preview gone (the viewer marks its element `data-pxp-preview` or `data-pxp-drawn` once drawn); our own
#: constant CSS on our own element key
_FILM_CSS = """<style>.st-key-FILM_film { display: grid; }
.st-key-FILM_film > [data-testid="stElementContainer"] { grid-area: 1 / 1; min-width: 0; }
.st-key-FILM_film:has([data-pxp-drawn]) > .st-key-FILM_preview { display: none; }
.st-key-FILM_film:has([data-pxp-preview]):not(:has([data-pxp-drawn])) > .st-key-FILM { visibility: hidden; }
</style>"""


def xray_preview(engine: Any, instance_id: int) -> bytes | None:
    """The film's low-resolution copy (pxp.data.pixels.preview_payload), cached; None for a small film."""
    return _preview(engine.url.render_as_string(hide_password=False), instance_id)


@byte_cached(PREVIEW_BYTES)
def _preview(url: str, instance_id: int) -> bytes | None:
    from pxp.data.pixels import preview_payload
    from pxp.storage.store import get_engine

    payload = xray_payload(get_engine(url), instance_id)
    return None if payload is None else preview_payload(payload)


def viewer_key(key: str) -> str:
    """The session-state key of the viewer `xray(..., key=key)` draws (its settled window is there)."""
    return f"{key}_viewer"


def xray_payload(engine: Any, instance_id: int) -> bytes | None:
    """The viewer's payload of an instance's X-ray (pxp/data/pixels.py), cached per server: made ahead for
    a prepared case, so the case opens without decoding its image (ImageRejected for a bad image)."""
    return _pixels(engine.url.render_as_string(hide_password=False), instance_id)


@byte_cached(VIEWER_BYTES)
def _pixels(url: str, instance_id: int) -> bytes | None:
    from pxp.data.pixels import instance_pixels
    from pxp.storage.store import get_engine

    return instance_pixels(get_engine(url), instance_id)


def transcript_papers(
    messages: Sequence[Msg], *, machine_label: str, task_kind: str, instance_render: Any = None,
    target: str | None = None, notes: Mapping[int, str] | None = None, target_name: object = None,
) -> None:
    """A transcript in the papers' layout: Human | instance | Machine, numbered and tagged; `notes`
    adds a caption line under message j (e.g. the image window the expert viewed it at)."""
    left, mid, right = st.columns([5, 3, 5])
    left.markdown("#### Human")
    right.markdown(f"#### Machine ({escape_md(machine_label)})")
    with mid:
        st.markdown("#### Instance")
        if instance_render is not None:
            instance_render()
    for m in messages:
        lcol, mcol, rcol = st.columns([5, 3, 5])
        with mcol:
            st.markdown(f"**message {m.j}**")
            tag_badge(m.tag)
        with (lcol if m.sender is Sender.HUMAN else rcol), st.container(border=True):
            show_prediction(m.prediction, task_kind)
            proposed_step(m, task_kind, target, PAPERS_REACTION_WIDTH, target_name)
            show_text(m.explanation, empty="(no explanation)")
            if m.match is not None:
                st.caption(f"match={m.match} · agree={m.agree} · changed={m.changed}")
            if notes and m.j in notes:
                st.caption(escape_md(notes[m.j]))


def chart_table(what: str, df: pd.DataFrame, key: str) -> None:
    """The data of the chart above as a table, folded under it: a chart's text alternative
    (docs/accessibility.md, "Text alternatives")."""
    with st.expander(f"{what} as a table"):
        st.dataframe(df, hide_index=True, key=key)


def session_links(df: Any, columns: Sequence[str]) -> tuple[Any, dict[str, Any]]:
    """`df` with its session-id columns as links to the Sessions page (`sessions?session=N`), and the
    column config that shows each link as its session id."""
    out = df.copy()
    config: dict[str, Any] = {}
    for col in columns:
        out[col] = [f"sessions?session={int(v)}" for v in out[col]]
        config[col] = st.column_config.LinkColumn(col, display_text=r"session=(\d+)")
    return out, config


def launch_summary(name: str, config: dict[str, object]) -> str:
    """The run that started, named from its stored configuration (the Experiments page's line; a helper
    here so that tests import it without running the page)."""
    split = config.get("split") or "all"
    return (f"Started {name!r}: dataset {config.get('dataset')}, split {split}, machine {config.get('machine')}, "
            f"n={config.get('n')}, k={config.get('k')}, R={config.get('reps')}"
            + (", with the common-ground probe." if config.get("probe") else "."))
