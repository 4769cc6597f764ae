"""xdrl-export and load_policy: ONNX / pt2 / TorchScript files act as the torch policy on env
observations (discrete equal, continuous within 1e-5 and inside the action bounds, normalization
inside), for every algorithm and observation kind that trains (vector, one-hot, image,
multi-objective), and the policy guide's (docs/policy.md) onnxruntime examples run as written."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime
import pytest
import torch
from tensordict import TensorDict
from torchrl.checkpoint import Checkpoint
from torchrl.envs.utils import ExplorationType, set_exploration_type

from tests.conftest import REPO, compose_config, read_summary, run_cli, run_script
from xdrl.policy import export_cli
from xdrl.policy.loading import load_run
from xdrl.trainer_hooks.observation_norm import observation_norm

TINY = [
    "total_frames=512",
    "frames_per_batch=256",
    "env.num_envs=2",
    "eval.interval_frames=256",
    "eval.episodes=2",
    "eval.max_steps=50",
    "num_threads=1",
]


def _train(tmp_path: Path, name: str, *overrides: str) -> Path:
    run_dir = tmp_path / name
    result = run_cli([*TINY, *overrides, f"hydra.run.dir={run_dir}"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    return run_dir


# Tiny runs of every algorithm x observation kind that trains, made once per module.
ATARI = [
    "env.num_envs=2",
    "frames_per_batch=32",
    "num_threads=1",
    "eval.episodes=1",
    "eval.max_steps=50",
    "eval.interval_frames=2048",
    "checkpoint.interval_frames=1024",
]
RUNS: dict[str, list[str]] = {
    "ppo": [],
    "dqn": ["algorithm=dqn", "algorithm.build.init_random_frames=256"],
    "sac-vecnorm": [
        "algorithm=sac",
        "env=pendulum",
        "algorithm.build.init_random_frames=256",
        "algorithm.build.utd=0.125",  # 32 optimizer steps in the second batch, not 256
        "env.normalize_observations=true",
    ],
    "td3": [
        "algorithm=td3",
        "env=pendulum",
        "algorithm.build.init_random_frames=256",
        "algorithm.build.utd=0.125",
    ],
    "ppo-vecnorm": ["env.normalize_observations=true"],
    "mo-ppo": ["env=mo_mountaincar"],
    "onehot-dqn": ["experiment=dst_dqn", "total_frames=200", "eval.interval_frames=100"],
    "atari-ppo": [
        "experiment=atari_ppo",
        *ATARI,
        "total_frames=256",
        "algorithm.build.minibatch_size=16",
        "algorithm.build.epochs=1",
    ],
    "atari-dqn": [
        "experiment=atari_dqn",
        *ATARI,
        "total_frames=256",  # two batches of 128 frames: the second one optimizes
        "algorithm.build.init_random_frames=128",
        "algorithm.build.buffer_size=1000",
        "algorithm.build.utd=0.125",
    ],
}


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory):
    """``trained(name)``: the run dir of ``RUNS[name]``, trained on first use, in process (the
    tests here are about the exported files; the console script's process is xdrl-export's)."""
    import xdrl.run.lifecycle

    runs: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in runs:
            if name.startswith("atari"):
                pytest.importorskip("ale_py", reason="needs xdrl[atari]")
                pytest.importorskip("cv2", reason="needs xdrl[atari]")
            overrides = RUNS[name]
            tiny = [] if any(o.startswith("experiment=") for o in overrides) else TINY
            run_dir = tmp_path_factory.mktemp(name) / "run"
            xdrl.run.lifecycle.run(compose_config([*tiny, *overrides, "num_threads=1"], run_dir))
            assert read_summary(run_dir)["status"] == "completed"
            runs[name] = run_dir
        return runs[name]

    return get


@pytest.fixture(scope="module")
def ppo_run(trained) -> Path:
    """A tiny PPO CartPole run (two batches)."""
    return trained("ppo")


def _export(run_dir: Path, fmt: str, out: Path) -> subprocess.CompletedProcess:
    return run_script("xdrl-export", [str(run_dir), "--format", fmt, "--out", str(out)])


@pytest.fixture(scope="module")
def exported(trained, tmp_path_factory: pytest.TempPathFactory):
    """``exported(name, fmt)``: ``(xdrl-export's result, the file)`` for ``RUNS[name]``, exported
    once per module (each export checks its file on 1,000 env observations, and several tests
    read the same file), into a folder of its own per run."""
    files: dict[tuple[str, str], tuple[subprocess.CompletedProcess, Path]] = {}
    folders: dict[str, Path] = {}

    def get(name: str, fmt: str) -> tuple[subprocess.CompletedProcess, Path]:
        if (name, fmt) not in files:
            if name not in folders:
                folders[name] = tmp_path_factory.mktemp(f"export-{name}")
            out = folders[name] / f"policy.{fmt}"
            files[name, fmt] = (_export(trained(name), fmt, out), out)
        return files[name, fmt]

    return get


def _torch_actions(run_dir: Path, observations: np.ndarray) -> np.ndarray:
    """The TorchRL policy's deterministic actions on observations as its network saw them in
    training (see :func:`_env_observations`), normalization applied by the env's VecNorm."""
    policy = load_run(run_dir)
    try:
        obs = torch.from_numpy(observations)
        data = TensorDict({"observation": obs}, batch_size=[len(obs)])
        vecnorm = observation_norm(policy.env)
        if vecnorm is not None:  # TorchRL's own normalization with the frozen statistics
            data = vecnorm.to_observation_norm()(data)
        with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
            return policy.module(data)["action"].numpy()
    finally:
        policy.close()


class _Capture:
    """Receives one checkpoint component's state dict as saved."""

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        self.state = state


def _assert_weights_loaded(run_dir: Path) -> None:
    """The rebuilt evaluation policy holds the checkpoint's saved policy tensors."""
    policy = load_run(run_dir)
    saved = _Capture()
    Checkpoint(policy=saved).load(policy.checkpoint, components=["policy"])
    weights = policy.module.state_dict()
    assert saved.state and set(saved.state) == set(weights)
    assert all(torch.equal(saved.state[k], weights[k]) for k in weights)
    policy.close()


def _onnx_actions(path: Path, observations: np.ndarray) -> np.ndarray:
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (inp,), (out,) = session.get_inputs(), session.get_outputs()
    assert (inp.name, out.name) == ("observation", "action")
    assert not isinstance(inp.shape[0], int)  # dynamic batch dimension
    return session.run(["action"], {"observation": observations})[0]


def _env_observations(run_dir: Path, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` observations of the run's env (built as ``xdrl-eval`` builds it) under random
    actions: as its gymnasium ``env.step`` returns them, and as the run's training envs gave
    them to the network (after the gymnasium one-hot wrapper and the env's dtype cast)."""
    from xdrl.envs.observation_encoding import OneHotObservation
    from xdrl.policy.run_env import make_env
    from xdrl.training.env_state import gym_envs

    policy = load_run(run_dir)
    env = make_env(policy.config, num_envs=1, seed=seed)
    try:
        (outer,) = gym_envs(env)
        inner = outer.env if isinstance(outer, OneHotObservation) else outer
        inner.action_space.seed(seed)
        raw = []
        obs, _ = inner.reset(seed=seed)
        while len(raw) < n:
            raw.append(np.asarray(obs))
            obs, _, terminated, truncated, _ = inner.step(inner.action_space.sample())
            if terminated or truncated:
                obs, _ = inner.reset()
        seen = [outer.observation(o) if inner is not outer else o for o in raw]
        dtype = env.observation_spec["observation"].dtype
    finally:
        env.close()
        policy.close()
    return np.stack(raw), torch.as_tensor(np.stack(seen)).to(dtype).numpy()


def test_discrete_onnx_equals_torch_and_other_formats(ppo_run: Path, exported) -> None:
    run_dir = ppo_run
    observations, _ = _env_observations(run_dir, 1000, seed=3)
    expected = _torch_actions(run_dir, observations)
    files = {}
    for fmt in ("onnx", "pt2", "torchscript"):
        result, files[fmt] = exported("ppo", fmt)
        assert result.returncode == 0, result.stderr
        assert files[fmt].is_file()
    assert not list(files["onnx"].parent.glob(".policy*"))  # no temporary left
    actions = _onnx_actions(files["onnx"], observations)
    assert actions.dtype == np.int64 and actions.shape == (1000,)
    assert (actions == expected).all()
    _assert_weights_loaded(run_dir)
    assert len(set(expected.tolist())) == 2  # both actions occur: the check can fail
    loaded = torch.export.load(str(files["pt2"])).module()
    assert (loaded(torch.from_numpy(observations)).numpy() == expected).all()
    scripted = torch.jit.load(str(files["torchscript"]))
    assert (scripted(torch.from_numpy(observations[:5])).numpy() == expected[:5]).all()


@pytest.mark.parametrize("name", ["sac-vecnorm", "td3"])
def test_continuous_onnx_within_1e5_and_bounds(trained, exported, name: str) -> None:
    run_dir, normalize = trained(name), name.endswith("vecnorm")
    result, out = exported(name, "onnx")
    assert result.returncode == 0, result.stderr
    observations, _ = _env_observations(run_dir, 1000, seed=5)
    expected = _torch_actions(run_dir, observations)
    actions = _onnx_actions(out, observations)
    assert actions.dtype == np.float32 and actions.shape == (1000, 1)
    assert np.abs(actions - expected).max() <= 1e-5
    assert actions.min() >= -2.0 and actions.max() <= 2.0
    assert np.ptp(actions) > 1e-3  # the actions depend on the observation
    _assert_weights_loaded(run_dir)
    if normalize:  # the statistics are inside: raw observations without them act differently
        policy = load_run(run_dir)
        stats = observation_norm(policy.env)
        assert stats is not None and not torch.allclose(stats.loc["observation"], torch.zeros(3))
        policy.close()


def test_bad_export_input_one_line_exit_2(tmp_path: Path, monkeypatch, capsys) -> None:
    out = tmp_path / "x.onnx"
    assert export_cli.main([str(tmp_path), "--format", "tflite", "--out", str(out)]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert export_cli.main([str(tmp_path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "is not a run dir" in err and err.count("\n") == 1
    real = export_cli.importlib.util.find_spec
    monkeypatch.setattr(
        export_cli.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "onnxruntime" else real(name, *a),
    )
    assert export_cli.main([str(tmp_path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "pip install 'xdrl[export]'" in err and "onnxruntime" in err and err.count("\n") == 1
    assert not out.exists()


def test_wandb_log_model_records_onnx_and_summary_artifact(tmp_path: Path) -> None:
    import base64
    import hashlib

    from tests.wandb_reader import offline_runs, read_records

    run_dir = _train(tmp_path, "wb", "logging=wandb", "logging.log_model=true")
    onnx_file, summary = run_dir / "policy.onnx", run_dir / "summary.json"
    assert onnx_file.is_file() and summary.is_file()
    (run,) = offline_runs(run_dir)
    (artifact,) = [r["artifact"] for r in read_records(run) if r.get("type") == "artifact"]
    assert artifact["type"] == "model"
    contents = {c["path"]: c["digest"] for c in artifact["manifest"]["contents"]}
    for path in (onnx_file, summary):  # W&B's digest: base64 of the file's md5
        digest = base64.b64encode(hashlib.md5(path.read_bytes()).digest()).decode()
        assert contents[path.name] == digest
        assert (run / "files" / path.name).read_bytes() == path.read_bytes()
    assert (_onnx_actions(onnx_file, np.zeros((3, 4), np.float32)).shape) == (3,)


class _Untraceable(torch.nn.Module):
    """A policy piece with Python control flow on a tensor value (as a future recurrent or pixel
    policy might have): torch.export cannot trace it."""

    def forward(self, data: TensorDict) -> TensorDict:
        if float(data["observation"].sum()) > 0:
            data["action"] = torch.zeros(data.batch_size, dtype=torch.int64)
        else:
            data["action"] = torch.ones(data.batch_size, dtype=torch.int64)
        return data


def test_untraceable_policy_fails_naming_the_part(ppo_run: Path, tmp_path: Path) -> None:
    from xdrl.policy.export import ExportError, export_policy

    policy = load_run(ppo_run)
    policy.deterministic_module.actor = _Untraceable()
    policy.module = policy.deterministic_module.actor
    out = tmp_path / "x.onnx"
    with pytest.raises(ExportError, match="_Untraceable does not trace with torch.export"):
        export_policy(policy, "onnx", out)
    policy.close()
    assert not out.exists() and not list(tmp_path.glob(".x*"))


def _assert_same(actual: np.ndarray, expected: np.ndarray, what: str) -> None:
    assert actual.shape == expected.shape and actual.dtype == expected.dtype, what
    if np.issubdtype(expected.dtype, np.floating):
        assert np.abs(actual - expected).max() <= 1e-5, what
    else:
        assert (actual == expected).all(), what


# Formats beyond ONNX where their graph differs (the one-hot cells, the CNN's reshapes).
ALL_FORMATS = {"onehot-dqn", "atari-ppo"}


@pytest.mark.parametrize("name", list(RUNS))
def test_every_policy_exports_and_replays_as_load_policy(trained, exported, name: str) -> None:
    """Each algorithm x observation kind that trains: the exported file, fed what gymnasium's
    ``env.step`` returns (DST's int32 (row, col), Atari's uint8 stack), acts as load_policy, and
    both act as the TorchRL actor on what the training env gave it (one-hot vectors, casts,
    TorchRL's normalization)."""
    run_dir = trained(name)
    raw, seen = _env_observations(run_dir, 300, seed=11)
    expected = _torch_actions(run_dir, seen)
    policy = load_run(run_dir)
    try:
        loaded = policy(raw)
        assert policy(raw[0]).shape == loaded.shape[1:]  # one observation, unbatched
    finally:
        policy.close()
    _assert_same(loaded, expected, "load_policy vs the TorchRL actor")
    if name == "onehot-dqn":  # raw (row, col) integers, several states visited
        assert raw.dtype == np.int32 and raw.shape[1:] == (2,) and seen.shape[1:] == (144,)
        assert len({tuple(o) for o in raw.tolist()}) > 5
    if name.startswith("atari"):
        assert raw.dtype == np.uint8 and raw.shape[1:] == (4, 84, 84)
    for fmt in ("onnx", "pt2", "torchscript") if name in ALL_FORMATS else ("onnx",):
        result, out = exported(name, fmt)
        assert result.returncode == 0, result.stderr[-2000:]
        assert "Traceback" not in result.stderr and "Warning" not in result.stderr
        if fmt == "onnx":
            session = onnxruntime.InferenceSession(str(out), providers=["CPUExecutionProvider"])
            onnx_type = {"float32": "float", "float64": "double"}.get(
                raw.dtype.name, raw.dtype.name
            )
            assert session.get_inputs()[0].type == f"tensor({onnx_type})"
            _assert_same(_onnx_actions(out, raw), loaded, "onnxruntime vs load_policy")
        else:
            module = torch.export.load(str(out)).module() if fmt == "pt2" else torch.jit.load(out)
            with torch.no_grad():
                actions = module(torch.from_numpy(raw)).numpy()
            _assert_same(actions, loaded, f"{fmt} vs load_policy")


def test_load_policy_takes_what_env_step_returns(trained) -> None:
    """``xdrl.load_policy(run)(np.array([0, 0]))`` on a one-hot run is the action of the start
    cell's one-hot vector; on an Atari run it takes a (4, 84, 84) uint8 stack."""
    import xdrl

    policy = xdrl.load_policy(trained("onehot-dqn"))
    try:
        start = np.zeros((1, 144), np.float32)
        start[0, 0] = 1.0  # cell (0, 0)
        data = TensorDict({"observation": torch.from_numpy(start)}, batch_size=[1])
        with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
            expected = policy.module(data)["action"].numpy()[0]
        assert policy(np.array([0, 0])) == expected
        assert policy.obs_shape == (2,) and policy.obs_dtype == np.int32
    finally:
        policy.close()
    # xdrl-eval's batched envs: a SerialEnv whose sub-envs start later
    serial = load_run(trained("onehot-dqn"), overrides=["env.batching=serial"], num_envs=3)
    try:
        assert serial.obs_shape == (2,) and serial(np.array([0, 0])) == expected
    finally:
        serial.close()
    pytest.importorskip("ale_py", reason="needs xdrl[atari]")
    policy = xdrl.load_policy(trained("atari-ppo"))
    try:
        stack = np.random.default_rng(0).integers(0, 256, (4, 84, 84), dtype=np.uint8)
        data = TensorDict({"observation": torch.from_numpy(stack[None])}, batch_size=[1])
        with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
            expected = policy.module(data)["action"].numpy()[0]
        assert policy(stack) == expected and policy(stack).shape == ()
    finally:
        policy.close()


def test_torchscript_export_keeps_stderr_quiet(exported) -> None:
    """The tracer's boolean-conversion TracerWarning is filtered where it arises."""
    result, _ = exported("ppo", "torchscript")
    assert result.returncode == 0, result.stderr
    assert "TracerWarning" not in result.stderr, result.stderr


def _guide_example(marker: str) -> str:
    """The ```python block of the policy guide (docs/policy.md) that contains ``marker``."""
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "docs" / "policy.md").read_text(), re.S)
    (block,) = [b for b in blocks if marker in b]
    return block


def _run_example(code: str, cwd: Path) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter where torch, TorchRL, xdrl and pygame cannot be imported
    and there is no display: a venv with only onnxruntime, numpy and gymnasium (+ ale-py)."""
    prelude = (
        "import sys\n"
        "for name in ('torch', 'tensordict', 'torchrl', 'xdrl', 'pygame'):\n"
        "    sys.modules[name] = None\n"
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd)}  # no DISPLAY
    return subprocess.run(
        [sys.executable, "-c", prelude + code], cwd=cwd, env=env, capture_output=True, text=True
    )


def test_guide_onnxruntime_example_runs_as_written(exported, tmp_path: Path) -> None:
    result, out = exported("ppo", "onnx")
    assert result.returncode == 0, result.stderr
    shutil.copyfile(out, tmp_path / "policy.onnx")  # where the example opens it
    code = _guide_example('gym.make("CartPole-v1")  # add render_mode')
    ran = _run_example(code, tmp_path)
    assert ran.returncode == 0, ran.stderr[-2000:]


def test_guide_atari_example_plays_a_game(exported, tmp_path: Path) -> None:
    """The policy guide's Atari example, with a time limit of 2,000 emulator frames so that a tiny
    policy's game ends quickly."""
    result, out = exported("atari-ppo", "onnx")
    assert result.returncode == 0, result.stderr
    shutil.copyfile(out, tmp_path / "policy.onnx")  # where the example opens it
    code = _guide_example("AtariPreprocessing")
    assert code.count("frameskip=1)") == 1
    code = code.replace("frameskip=1)", "frameskip=1, max_episode_steps=2000)")
    ran = _run_example(code, tmp_path)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert re.search(r"game over: score \d", ran.stdout), ran.stdout


def test_one_hot_module_is_the_gymnasium_encoding() -> None:
    """The exported one-hot cells are :class:`OneHotObservation`'s for a 3-d Box with lows
    other than 0 (row-major, every value of the space)."""
    import gymnasium

    from xdrl.envs.observation_encoding import OneHotObservation, integer_grid
    from xdrl.policy.module import OneHot

    space = gymnasium.spaces.Box(np.array([0, -1, 2]), np.array([2, 2, 6]), dtype=np.int32)
    env = gymnasium.make("CartPole-v1")
    env.observation_space = space
    wrapper = OneHotObservation(env)
    axes = [np.arange(lo, hi + 1) for lo, hi in zip(space.low, space.high, strict=True)]
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3).astype(np.int32)
    expected = np.stack([wrapper.observation(o) for o in grid])
    actual = OneHot(*integer_grid(space))(torch.from_numpy(grid)).numpy()
    assert actual.shape == (60, 60) and (actual == expected).all()
