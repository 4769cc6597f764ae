"""Algorithm builders: build(env, *, ...) -> AlgorithmParts; no training loop."""
