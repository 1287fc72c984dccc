"""UI-side helpers of the Streamlit app: cached resources, data functions, rendering.

Pages call these and never touch the ORM, SQL or an LLM SDK (DESIGN §3, §7).
"""
