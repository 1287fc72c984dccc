"""Scorekeeping game data: clembench's episode layout (`clembench`)."""
