"""Running the scorekeeping game: `runs` (many episodes at once, resumable), `games` (stored games,
clembench import/export), `play` (a person plays the answerer in the app).
"""
