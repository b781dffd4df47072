"""Helpers for the tests that check where the ops of a Keras training step are placed: a child
script trains with TensorFlow's placement log on and prints the dtypes of every node of the
traced functions; `cpu_placements` reads back the nodes placed on the CPU, with their dtypes."""
import json
import os
import re

# Appended to a child script after model.fit: one line with the type attributes of every node
# of every function TensorFlow traced, keyed by node name.
DUMP_NODE_DTYPES = """
from tensorflow.python.eager import context as _context
_ctx = _context.context()
_types = {}
for _name in _ctx.list_function_names():
    for _node in _ctx.get_function_def(_name).node_def:
        _found = set()
        for _value in _node.attr.values():
            if _value.HasField("type"):
                _found.add(tf.dtypes.as_dtype(_value.type).name)
            _found.update(tf.dtypes.as_dtype(t).name for t in _value.list.type)
        _types.setdefault(_node.name, set()).update(_found)
print("NODE_DTYPES " + json.dumps({k: sorted(v) for k, v in _types.items()}))
"""

# "name: (OpType): /job:localhost/replica:0/task:0/device:CPU:0"
_PLACEMENT = re.compile(
    r"^(\S+): \((\w+)\): /job:localhost/replica:0/task:0/device:CPU:0\s*$", re.MULTILINE)


def node_dtypes(stdout):
    for line in stdout.splitlines():
        if line.startswith("NODE_DTYPES "):
            return json.loads(line[len("NODE_DTYPES "):])
    raise AssertionError("the child printed no node dtypes")


def cpu_placements(log, dtypes):
    """[(node, op, dtypes)] of the train step's nodes (under StatefulPartitionedCall/) that
    TensorFlow placed on the CPU; dtypes are the node's type attributes (None if unknown)."""
    found = []
    for node, op in set(_PLACEMENT.findall(log)):
        if "StatefulPartitionedCall/" not in node:
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


def child_env():
    return {"TF_CPP_MIN_LOG_LEVEL": "0", "PYTHONPATH": os.path.dirname(__file__)}
