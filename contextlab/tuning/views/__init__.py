"""The Tune pages: saved configs, A/B comparisons and sweeps, one module each."""
