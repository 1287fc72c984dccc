"""Interfaces: the Streamlit app. Helpers here (cached resources, data functions, rendering),
the pages in `views`, the router in `router`, the scorekeeping game's play in `scorekeeping`.

Pages call these helpers and never touch the ORM, SQL or an LLM SDK (DESIGN §3, §7). May import
every layer below; only the app and the CLI import streamlit.
"""
