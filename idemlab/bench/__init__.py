"""`make bench`: measurements side by side in one run, reported as ratios."""
