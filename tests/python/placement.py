"""The one helper of the tests that check where TensorFlow places the ops of a Keras train step.

`run_child` runs a script in a fresh Python with TensorFlow's placement log on; after the script
the child prints the dtypes of the nodes of every function TensorFlow traced. The test then reads
the placement log back: `train_step_placements` (each node of the train step and its device),
`cpu_placements` (the train step's nodes on the CPU, with their dtypes), `off_device` (those that
are not host bookkeeping by `is_bookkeeping`)."""
import json
import os
import re
import textwrap
from typing import NamedTuple

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))

_DONE = "PLACEMENT CHILD DONE"
_NODE_DTYPES = "NODE_DTYPES "

# Graph placement lines, one per node: "<node>: (<OpType>): /job:localhost/replica:0/task:0/
# device:<TYPE>:<n>", as TensorFlow's placer prints them to stdout and, after a log prefix
# ("I0000 00:00:... placer.cc:162] "), to its INFO log on stderr. Both forms are read (a node
# found twice counts once), so a test may read either stream.
_PLACEMENT = re.compile(
    r"^(?:[IWEF]\d{4} [^\]\n]*\] )?(\S+): \((\w+)\): "
    r"/job:localhost/replica:0/task:0/device:(\w+):\d+\s*$", re.MULTILINE)
# The nodes of a train step: those of the function Keras' fit calls, inlined into the caller's
# graph under its StatefulPartitionedCall (function inputs and outputs under Func/...).
_TRAIN_STEP = "StatefulPartitionedCall/"


class Placement(NamedTuple):
    node: str
    op: str
    device: str  # the device type: "CPU", "GPU"


def placements(log):
    """Every graph node of the placement log in `log`, once each, sorted."""
    return sorted({Placement(*found) for found in _PLACEMENT.findall(log)})


def train_step_placements(log):
    """The placements of the train step's nodes (see _TRAIN_STEP)."""
    return [p for p in placements(log) if _TRAIN_STEP in p.node]


def ops_on(placed, device):
    """The op types of `placed` on devices of type `device`."""
    return {p.op for p in placed if p.device == device}


def node_dtypes(stdout):
    """{node name: [dtype names]} that a child of run_child printed (print_node_dtypes)."""
    for line in stdout.splitlines():
        if line.startswith(_NODE_DTYPES):
            return json.loads(line[len(_NODE_DTYPES):])
    raise AssertionError("the child printed no node dtypes")


def cpu_placements(log, dtypes):
    """[(node, op, dtypes)] of the train step's nodes (under StatefulPartitionedCall/) that
    TensorFlow placed on the CPU; dtypes are the node's type attributes (None if unknown)."""
    found = []
    for node, op, device in train_step_placements(log):
        if device != "CPU":
            continue
        # Inlined function nodes keep their name in the function after the call's prefixes.
        name = re.sub(r"^(Func/)?(StatefulPartitionedCall/)+", "", node)
        found.append((node, op, dtypes.get(name)))
    return sorted(found)


def is_bookkeeping(op, node_types):
    """Const, Identity, or an op on int32 only (shapes, sizes, indices on the host)."""
    if op in ("Const", "Identity", "NoOp"):
        return True
    return node_types is not None and set(node_types) <= {"int32"}


def off_device(log, dtypes, tolerated=lambda op, node_types: False):
    """["node (op, dtypes)"] of the train step's nodes on the CPU that are neither host
    bookkeeping nor `tolerated(op, node_types)` by the test."""
    return [f"{node} ({op}, {types})" for node, op, types in cpu_placements(log, dtypes)
            if not is_bookkeeping(op, types) and not tolerated(op, types)]


def registered_dtypes(op):
    """The dtypes the plugin registers `op` for (empty if none)."""
    import vgpu  # noqa: PLC0415

    for entry in vgpu.ops():
        if entry["op"] == op:
            return set(entry["dtypes"])
    return set()


def unimplemented(ops):
    """A `tolerated` rule for off_device: an op of `ops` (another family's) at dtypes the plugin
    has no kernel for yet. Once the plugin registers the op at the node's dtype, it must run on
    the device."""

    def tolerated(op, node_types):
        return op in ops and not set(node_types or []) & registered_dtypes(op)

    return tolerated


def traced_node_dtypes(seen_functions=None):
    """In a child: {node name: [dtype names of its type attributes]} of the functions TensorFlow
    traced (those named in `seen_functions` are skipped, then added to it)."""
    import tensorflow as tf  # noqa: PLC0415
    from tensorflow.python.eager import context  # noqa: PLC0415

    seen_functions = set() if seen_functions is None else seen_functions
    ctx = context.context()
    types = {}
    for function in ctx.list_function_names():
        if function in seen_functions:
            continue
        seen_functions.add(function)
        try:
            definition = ctx.get_function_def(function)
        except tf.errors.NotFoundError:  # released since it was listed
            continue
        for node in definition.node_def:
            found = set()
            for value in node.attr.values():
                if value.HasField("type"):
                    found.add(tf.dtypes.as_dtype(value.type).name)
                found.update(tf.dtypes.as_dtype(t).name for t in value.list.type)
            types.setdefault(node.name, set()).update(found)
    return {name: sorted(found) for name, found in types.items()}


def print_node_dtypes():
    """In a child: prints one line with traced_node_dtypes() (read back by node_dtypes)."""
    print(_NODE_DTYPES + json.dumps(traced_node_dtypes()), flush=True)


class ChildRun(NamedTuple):
    stdout: str
    stderr: str

    @property
    def log(self):
        return self.stdout + self.stderr

    @property
    def dtypes(self):
        return node_dtypes(self.stdout)

    def train_step(self):
        """The train step's placements; fails if the log holds none."""
        placed = train_step_placements(self.log)
        assert placed, "no placement log of a train step found"
        return placed

    def off_device(self, tolerated=lambda op, node_types: False):
        """off_device() of this run's log; fails if the log holds no train step."""
        self.train_step()
        return off_device(self.log, self.dtypes, tolerated)


_PRELUDE = """\
import tensorflow as tf
tf.debugging.set_log_device_placement(True)
"""
_EPILOGUE = f"""
import placement as _placement
_placement.print_node_dtypes()
print({_DONE!r}, flush=True)
"""


def run_child(script, env=None, timeout=300, log_placement=True):
    """Runs `script` in a fresh Python (the VGPU_* environment reset as conftest's run_python
    does, plus `env`; TensorFlow's INFO log on; tests/python importable) and checks it ran to
    the end. With log_placement, TensorFlow's placement log is on from the start and the node
    dtypes are printed after the script."""
    from conftest import run_python_code  # noqa: PLC0415

    code = textwrap.dedent(script)
    if log_placement:
        code = _PRELUDE + code + _EPILOGUE
    else:
        code += f"\nprint({_DONE!r}, flush=True)\n"
    result = run_python_code(
        code, env={"TF_CPP_MIN_LOG_LEVEL": "0", "PYTHONPATH": TESTS_DIR, **(env or {})},
        timeout=timeout)
    assert result.returncode == 0 and _DONE in result.stdout, result.stderr[-3000:]
    return ChildRun(result.stdout, result.stderr)
