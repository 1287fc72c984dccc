"""The scorekeeping game ("private and shared", clembench's privateshared): pure rules, episodes and scores."""
