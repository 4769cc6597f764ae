"""Algorithm builders: build(env, *, ...) -> AlgorithmParts; no training loop. ``recurrent``:
the LSTM/GRU actor and critic PPO and A2C take (``algorithm.build.recurrent``)."""
