"""A wedged `vgpu server` must not hang its TensorFlow clients (issue 10, finding 10).

The server is stopped with SIGSTOP while a TensorFlow child process works through it: the
child's operation fails with a clear error (DeadlineExceeded, naming the server and VGPU_TIMEOUT)
within VGPU_TIMEOUT plus a margin, and an honest bystander tenant is unaffected once the server
runs again (SIGCONT); the child's new work then reconnects and succeeds."""
import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time

from raw_tenant import ServerProcess, bystander_round_trip

TIMEOUT_S = 2  # VGPU_TIMEOUT of the child: small, so the test is fast
MARGIN_S = 15  # generous: the point is not hanging, not the exact time

CHILD = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    import tensorflow as tf

    def say(*words):
        print(*words, flush=True)

    with tf.device("/GPU:0"):
        a = tf.constant(np.full((64, 64), 0.5, np.float32))
        before = tf.matmul(a, a).numpy()
    say("ready", float(before[0, 0]))
    sys.stdin.readline()  # the server is stopped now
    start = time.monotonic()
    try:
        with tf.device("/GPU:0"):
            tf.matmul(a, a).numpy()
        say("no-error")
    except Exception as error:  # an op error (not an abort) is what is checked
        message = " ".join(str(error).split())
        say("error", type(error).__name__, round(time.monotonic() - start, 3), message[:600])
    sys.stdin.readline()  # the server runs again
    with tf.device("/GPU:0"):
        x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
        y = tf.matmul(x, x).numpy()
    say("new-work", y.tolist())
    """
)


class Child:
    """The TensorFlow child, spoken to line by line; every read has a deadline."""

    def __init__(self, env):
        self.process = subprocess.Popen(
            [sys.executable, "-c", CHILD], env=env, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines = queue.Queue()
        self.stderr = []
        threading.Thread(target=self._pump, args=(self.process.stdout, self.lines.put),
                         daemon=True).start()
        threading.Thread(target=self._pump, args=(self.process.stderr, self.stderr.append),
                         daemon=True).start()

    @staticmethod
    def _pump(stream, sink):
        for line in stream:
            sink(line.rstrip("\n"))

    def read(self, timeout):
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(
                f"the child said nothing for {timeout} s; stderr:\n" + "\n".join(self.stderr[-40:]))

    def send(self):
        self.process.stdin.write("\n")
        self.process.stdin.flush()

    def finish(self):
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(15)


def child_env(address):
    env = {k: v for k, v in os.environ.items() if not k.startswith("VGPU_")}
    env.pop("TF_PLUGGABLE_DEVICE_LIBRARY_PATH", None)
    env.update({"VGPU_BACKEND": address, "VGPU_TIMEOUT": str(TIMEOUT_S),
                "TF_CPP_MIN_LOG_LEVEL": "1"})
    return env


def test_a_stopped_server_gives_a_clear_error_within_the_timeout_and_new_work_reconnects(tmp_path):
    with ServerProcess(tmp_path) as server:
        child = Child(child_env(server.address))
        try:
            ready = child.read(timeout=120)
            assert ready == "ready 16.0", ready
            server.process.send_signal(signal.SIGSTOP)
            try:
                stopped_at = time.monotonic()
                child.send()
                outcome = child.read(timeout=TIMEOUT_S + MARGIN_S)
                waited = time.monotonic() - stopped_at
            finally:
                server.process.send_signal(signal.SIGCONT)
            words = outcome.split(" ", 3)
            assert words[0] == "error", outcome
            assert words[1] == "DeadlineExceededError", outcome
            assert server.address in words[3] and "VGPU_TIMEOUT" in words[3], outcome
            assert TIMEOUT_S <= float(words[2]) and waited < TIMEOUT_S + MARGIN_S, outcome

            # The server is alive, and serves an honest tenant as before.
            assert server.alive(), server.output()
            bystander_round_trip(server.address)

            child.send()
            assert child.read(timeout=60) == "new-work [[7.0, 10.0], [15.0, 22.0]]"
            assert child.process.wait(30) == 0, "\n".join(child.stderr[-40:])
            assert server.alive(), server.output()
        finally:
            child.finish()
