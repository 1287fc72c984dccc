"""pxp's Streamlit app: routing only (st.navigation over pages/)."""

import streamlit as st

st.set_page_config(page_title="pxp", layout="wide")
st.title("pxp")
st.write("The app pages arrive with the app issue.")
