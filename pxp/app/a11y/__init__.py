"""The app's accessibility (docs/accessibility.md): the theme's CSS and the one page script every page
installs (page), and the text alternatives of the drawings (alt). Imports streamlit and nothing of pxp.
"""
