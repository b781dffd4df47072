"""CommandBatch frames (wire_format.h): the client gathers posted commands into one frame and one
write; the server runs a batch's commands in order as if each had come alone, and a batch that
is malformed or carries what a batch may not (a call, host data) ends only that connection."""
import numpy as np
import pytest

from raw_tenant import (ACTIVATION_DESCRIPTOR, ACTIVATION_FORWARD, ALLOCATE, COMMAND_BATCH, LAUNCH,
                        MEMCPY_HTOD, MEMSET, RawTenant, ServerProcess, activation_settings,
                        batch_entries as batch, bystander_round_trip, command_payload,
                        descriptor_section, frame, tensor_settings, varint, wait_for,
                        TENSOR_DESCRIPTOR)


def relu_payload(stream, x, y, count):
    return command_payload(
        LAUNCH, stream=stream, obj=ACTIVATION_FORWARD, buffers=[(x, 4 * count), (y, 4 * count)],
        descriptors=descriptor_section((ACTIVATION_DESCRIPTOR, activation_settings()),
                                       (TENSOR_DESCRIPTOR, tensor_settings([count]))))


def test_a_batch_runs_its_commands_in_order(tmp_path):
    count = 256
    values = np.linspace(-1, 1, count, dtype=np.float32)
    with ServerProcess(tmp_path) as server, RawTenant(server.address) as tenant:
        stream = tenant.create_stream()
        x, y = tenant.allocate(4 * count), tenant.allocate(4 * count)
        tenant.write(stream, x, values.tobytes())
        # memset y to 0x7f..., then relu into y, then memset x: order matters for the result.
        entries = [
            (tenant.next_sequence(), command_payload(MEMSET, stream=stream, dst=y, size=4 * count,
                                                     pattern=0x7F, pattern_bytes=1)),
            (tenant.next_sequence(), relu_payload(stream, x, y, count)),
            (tenant.next_sequence(), command_payload(MEMSET, stream=stream, dst=x, size=4 * count,
                                                     pattern=0, pattern_bytes=1)),
        ]
        tenant.send_raw(frame(COMMAND_BATCH, 0, batch(*entries)))
        result = np.frombuffer(tenant.read(stream, y, 4 * count), np.float32)
        np.testing.assert_array_equal(result, np.maximum(values, 0))
        assert tenant.read(stream, x, 4 * count) == bytes(4 * count)
        assert tenant.synchronize(stream).ok


@pytest.mark.parametrize("case", ["empty", "truncated_header", "length_overruns", "zero_sequence",
                                  "a_call", "host_data", "malformed_command"])
def test_a_bad_batch_ends_only_its_connection(tmp_path, case):
    with ServerProcess(tmp_path) as server:
        with RawTenant(server.address) as tenant:
            stream = tenant.create_stream()
            x = tenant.allocate(1024)
            good = command_payload(MEMSET, stream=stream, dst=x, size=1024, pattern_bytes=1)
            payload = {
                "empty": b"",
                "truncated_header": batch((1000, good))[:1],  # half a varint
                "length_overruns": varint(2000) + varint((len(good) + 1) << 3) + good,
                "zero_sequence": batch((0, good)),
                "a_call": batch((1000, good), (1001, command_payload(ALLOCATE, size=4096))),
                "host_data": batch((1000, command_payload(MEMCPY_HTOD, stream=stream, dst=x,
                                                          size=16, host_data=bytes(16)))),
                "malformed_command": batch((1000, good[:40])),
            }[case]
            tenant.send_raw(frame(COMMAND_BATCH, 0, payload))
            wait_for(lambda: tenant.closed, 10, "the server to close the connection")
        assert server.alive()
        assert bystander_round_trip(server.address) is not None


BATCH_PROBE = r"""
import json
import numpy as np
import tensorflow as tf
import vgpu

tf.keras.utils.set_random_seed(0)
model = tf.keras.Sequential([tf.keras.Input((16,)), tf.keras.layers.Dense(32, activation="relu"),
                             tf.keras.layers.Dense(4)])
model.compile(optimizer="sgd", loss="mse")
x = np.random.default_rng(0).normal(size=(64, 16)).astype(np.float32)
y = np.random.default_rng(1).normal(size=(64, 4)).astype(np.float32)
history = model.fit(x, y, batch_size=16, epochs=2, verbose=0, shuffle=False)
stats = vgpu.stats()
print("PROBE " + json.dumps({"frames": stats["frames_sent"], "commands": stats["commands_sent"],
                             "losses": history.history["loss"]}))
"""


def _probe(address, batching):
    from conftest import run_probe  # noqa: PLC0415

    return run_probe(BATCH_PROBE, env={"VGPU_BACKEND": address,
                                       "VGPU_BATCH": "1" if batching else "0"})


def test_the_client_batches_posted_commands_into_fewer_frames_with_the_same_results(tmp_path):
    with ServerProcess(tmp_path) as server:
        batched = _probe(server.address, batching=True)
        unbatched = _probe(server.address, batching=False)
    assert unbatched["frames"] == unbatched["commands"] > 0
    assert 0 < batched["frames"] < batched["commands"]
    # The same commands in fewer frames (a sync or host-data copy goes alone, so not all fold).
    assert batched["frames"] < 0.8 * batched["commands"], batched
    assert batched["losses"] == unbatched["losses"]
