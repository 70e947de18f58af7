"""The book layer: chapter specs, runner, claims, run cards and plots (apart from the science)."""
