"""The app's accessibility (docs/accessibility.md): the theme's CSS and the one page script every page
installs (page), the text alternatives of the drawings (alt), and where the keyboard focus goes (focus).
Imports streamlit and nothing of pxp outside this package.
"""
