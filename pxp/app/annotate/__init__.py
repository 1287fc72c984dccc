"""The Annotate page's parts (DESIGN §1): the sidebar (who, what, progress), the case pane, the
conversation pane and the reply form, as functions the thin page pxp/app/views/annotate.py calls.
"""
