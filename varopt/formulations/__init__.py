"""Ready-made models from the seed papers, with their classical baselines."""
