"""Analysis: pure functions of measured samples (statistics, steady state, breakdown,
tuner, verdict, findings, diff, MaxText log parsing)."""
