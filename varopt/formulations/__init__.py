"""Ready-made models from the papers, with their classical baselines."""
