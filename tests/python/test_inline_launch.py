"""Small launches run inline (VGPU_INLINE_LAUNCH_BYTES, backend/stream_queue.h): a launch whose
buffers are small runs on TensorFlow's thread when its stream is idle instead of waking the
stream's worker. Stream order and results must not change: Keras training with inline launches
off and on gives bit-identical losses and the same launches, and a bad value is refused with a
message naming the variable. Each configuration runs in a child process."""
import json
import os

PROBE = os.path.join(os.path.dirname(__file__), "training_probe.py")


def _probe(env):
    from conftest import run_python_code  # noqa: PLC0415

    result = run_python_code(
        f"import runpy, sys; sys.argv = [{PROBE!r}, 'gpu']; "
        f"runpy.run_path({PROBE!r}, run_name='__main__')",
        env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(l for l in result.stdout.splitlines() if l.startswith("PROBE "))
    return json.loads(line.split(" ", 1)[1])


def test_inline_launches_train_to_the_same_losses_as_launches_on_the_worker():
    on_worker = _probe({"VGPU_INLINE_LAUNCH_BYTES": "0"})
    inline = _probe({})  # the default: launches up to 64 KiB inline
    everything_inline = _probe({"VGPU_INLINE_LAUNCH_BYTES": "64MiB"})
    assert on_worker["losses"] == inline["losses"] == everything_inline["losses"]
    launches = [[step["launches"] for step in run["steps"]]
                for run in (on_worker, inline, everything_inline)]
    assert launches[0] == launches[1] == launches[2]
    assert sum(launches[0]) > 0


def test_a_bad_inline_launch_size_is_refused_naming_the_variable():
    from conftest import declined_info  # noqa: PLC0415

    info = declined_info({"VGPU_INLINE_LAUNCH_BYTES": "lots"})
    assert "VGPU_INLINE_LAUNCH_BYTES" in info["declined"]
