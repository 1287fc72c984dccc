"""The scorekeeping game in the app: a person plays the answerer (`play`); the page is
pxp/app/views/scorekeeping.py (the router loads pages from views/).
"""
