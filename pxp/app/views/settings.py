"""Settings: provider and model per role, base URL, which keys are present, n and k."""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from pxp.app import auth, resources, ui
from pxp.app.prefs import load_prefs, save_prefs
from pxp.llm.models import model_checks

_KEY_OF = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}


def _missing_keys(models: list[str], own_server: bool) -> list[str]:
    """Keys the chosen provider:model agents need that are not present (names only)."""
    present = resources.key_status()
    out = []
    for m in models:
        provider = m.split(":", 1)[0] if ":" in m else ""
        key = _KEY_OF.get(provider)
        if key and not present.get(key) and not (provider == "openai" and own_server) and key not in out:
            out.append(key)
    return out


def _server_models(base_url: str, generator: str) -> None:
    """The models the saved OpenAI-compatible server offers (its /v1/models), on demand (docs/research.md,
    Local models)."""
    from pxp.llm.base import LLMConfigError, LLMError
    from pxp.llm.models import served_models

    if not st.button("List the server's models", key="settings_list_models"):
        return
    try:
        served = served_models("openai:any", base_url)
    except (LLMError, LLMConfigError) as err:
        st.error(ui.escape_md(str(err)))
        return
    mine = generator.partition(":")[2] if generator.startswith("openai:") else None
    st.dataframe({"model": served, "the generator": ["yes" if m == mine else "" for m in served]},
                 hide_index=True, key="settings_models")
    if mine and mine not in served:
        st.warning(ui.escape_md(f"The generator {generator} is not among the {len(served)} model(s) this "
                                "server lists."))


def render() -> None:
    eng = resources.engine()
    st.title("Settings")
    prefs = load_prefs(eng)
    with st.form("settings_form", enter_to_submit=False):
        st.subheader("Machine agent")
        gen = st.text_input(
            "Generator (answers the cases)", prefs.generator, key="settings_generator",
            help="simulated (offline, no key), or provider:model such as "
                 "anthropic:claude-sonnet-4-6 or openai:gpt-4.1",
        )
        c1, c2 = st.columns(2)
        temp = c1.number_input("Generator temperature", 0.0, 2.0, float(prefs.generator_temperature),
                               0.1, key="settings_temperature")
        max_tokens = c2.number_input("Generator max tokens (0 = task default)", 0, 32000,
                                     int(prefs.generator_max_tokens), key="settings_max_tokens")
        checker = st.text_input(
            "Checker (AGREE between explanations)", prefs.checker, key="settings_checker",
            help="lexical (offline word overlap), or provider:model; temperature 0, 10 tokens",
        )
        base_url = st.text_input(
            "Base URL for an OpenAI-compatible server (optional)", prefs.base_url,
            key="settings_base_url", placeholder="http://localhost:11434/v1",
            help="Ollama, vLLM or llama.cpp on your own network: data need not leave the hospital",
        )
        st.subheader("Protocol defaults")
        c1, c2 = st.columns(2)
        n = c1.number_input("n: messages per session", 2, 50, prefs.n, key="settings_n")
        k = c2.number_input("k: REJECT allowed after message", 1, 50, prefs.k, key="settings_k")
        if st.form_submit_button("Save", type="primary") and auth.permit("save settings"):
            new = replace(prefs, generator=gen.strip() or "simulated",
                          checker=checker.strip() or "lexical", base_url=base_url.strip(),
                          generator_temperature=float(temp), generator_max_tokens=int(max_tokens),
                          n=int(n), k=int(k))
            try:
                save_prefs(eng, new)
            except ValueError as err:
                st.error(ui.escape_md(str(err)))
            else:
                auth.audited("saved settings", f"generator {new.generator}, checker {new.checker}, n={new.n} k={new.k}")
                st.success("Saved. New experiments use these settings.")
                for warning in model_checks([new.generator, new.checker], new.base_url):
                    st.warning(ui.escape_md(warning))
                missing = _missing_keys([new.generator, new.checker], bool(new.base_url))
                if missing:
                    st.warning(f"Not set: {', '.join(missing)}. The model cannot answer until the "
                               "key is in the environment or Streamlit secrets.")
    if prefs.base_url:
        _server_models(prefs.base_url, prefs.generator)
    st.subheader("API keys")
    st.caption("Keys are read from the environment or Streamlit secrets; pxp never stores or shows them.")
    for name, where in resources.key_status().items():
        if where:
            st.markdown(f":material/check_circle: `{name}` is set ({where})")
        else:
            st.markdown(f":material/cancel: `{name}` is not set")
    st.caption(f"Database: {resources.database_url().split('://')[0]}")


render()
