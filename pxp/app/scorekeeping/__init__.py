"""The scorekeeping game in the app: a person plays the answerer (`play`); the page is
pxp/app/views/scorekeeping.py (the router loads pages from views/).
"""

#: the Scorekeeping page's tabs, in its order (kept here, not in the page script, which renders when imported)
TABS = ("Leaderboard", "Probe accuracy per round", "Episodes", "Play as the answerer")
