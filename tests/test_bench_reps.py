"""benchmarks/runner.py --reps: rounds alternated, each contender's figure the median of its
rounds."""

from benchmarks.runner import alternated, median_result


def test_rounds_alternate_and_give_medians() -> None:
    calls: list[str] = []
    values = {"a": iter([5.0, 1.0, 3.0]), "b": iter([10.0, 30.0, 20.0]), "c": iter([7.0] * 3)}

    def runner(name: str):
        def run() -> float:
            calls.append(name)
            return next(values[name])

        return run

    out = alternated({name: runner(name) for name in values}, seed=1, reps=3)
    assert out == {"a": 3.0, "b": 20.0, "c": 7.0}
    # seed 1 starts round 0 at "b", round 1 at "c", round 2 at "a"
    assert calls == ["b", "c", "a", "c", "a", "b", "a", "b", "c"]


def test_one_round_is_the_run_itself() -> None:
    summary = {"frames_per_second": 5.0, "segments": [{"torch_threads": 2}]}
    out = alternated({"xdrl": lambda: summary}, seed=0, reps=1)
    assert out["xdrl"] is summary


def test_sb3_best_is_the_best_of_the_per_thread_medians() -> None:
    rounds = [
        {"best": 140.0, "threads_1": 100.0, "threads_2": 140.0},
        {"best": 170.0, "threads_1": 102.0, "threads_2": 170.0},
        {"best": 120.0, "threads_1": 104.0, "threads_2": 120.0},
    ]
    # 2 threads: median 140 against 102
    assert median_result(rounds) == {"best": 140.0, "threads_1": 102.0, "threads_2": 140.0}
    noisy = [
        {"best": 150.0, "threads_1": 110.0, "threads_2": 150.0},
        {"best": 112.0, "threads_1": 112.0, "threads_2": 90.0},
        {"best": 114.0, "threads_1": 114.0, "threads_2": 95.0},
    ]
    # one lucky 2-thread draw does not pick 2 threads (the per-round best's median would be 114)
    assert median_result(noisy) == {"best": 112.0, "threads_1": 112.0, "threads_2": 95.0}


def test_summary_median_keeps_the_run_nearest_below() -> None:
    rounds = [
        {"frames_per_second": 200.0, "segments": [{"torch_threads": 2}], "run": 0},
        {"frames_per_second": 150.0, "segments": [{"torch_threads": 2}], "run": 1},
        {"frames_per_second": 180.0, "segments": [{"torch_threads": 2}], "run": 2},
        {"frames_per_second": 160.0, "segments": [{"torch_threads": 2}], "run": 3},
    ]
    out = median_result(rounds)
    assert out["frames_per_second"] == 170.0  # (160 + 180) / 2
    assert out["run"] == 3
