"""Launch templates and compact commands (plugin/protocol/launch_templates.h, wire_format.h's
CommandBatch entry forms): through a `vgpu server`, a training step's repeated launches cross the wire as a template
id plus the buffers that changed. Results are bit-identical with templates off, also when the
settings change (the last, smaller batch; a second model in the same process); a tenant naming a
template it has not defined (another connection's, or none) gets an error at its next
synchronisation and keeps its connection; a definition that breaks the protocol ends only its
connection."""
import numpy as np
import pytest

from raw_tenant import (ACTIVATION_DESCRIPTOR, ACTIVATION_FORWARD, COMMAND_BATCH, ENTRY_COMPACT,
                        ENTRY_DEFINE, ENTRY_RELEASE, ENTRY_TEMPLATED, LAUNCH, MEMSET,
                        RECORD_EVENT, RawTenant, ServerProcess, activation_settings,
                        batch_entries, bystander_round_trip, command_payload,
                        descriptor_section, frame, tensor_settings, varint, wait_for,
                        TENSOR_DESCRIPTOR)


def define(sequence, template_id, payload):
    return (sequence, varint(template_id) + payload, ENTRY_DEFINE)


def templated(sequence, template_id, bindings=()):
    """`bindings`: (buffer index, its move from the template's last address, new size or None
    when the size stays)."""
    body = varint(template_id) + varint(len(bindings))
    for index, move, size in bindings:
        body += varint(index << 1 | (size is not None))
        body += varint(((move << 1) ^ (move >> 63)) & (2**64 - 1))  # zigzag
        if size is not None:
            body += varint(size)
    return (sequence, body, ENTRY_TEMPLATED)


def release(sequence, template_id):
    return (sequence, varint(template_id), ENTRY_RELEASE)


def send_batch(tenant, *entries):
    tenant.send_raw(frame(COMMAND_BATCH, 0, batch_entries(*entries)))


def relu_payload(stream, x, y, count):
    return command_payload(
        LAUNCH, stream=stream, obj=ACTIVATION_FORWARD, buffers=[(x, 4 * count), (y, 4 * count)],
        descriptors=descriptor_section((ACTIVATION_DESCRIPTOR, activation_settings()),
                                       (TENSOR_DESCRIPTOR, tensor_settings([count]))))


COUNT = 256
VALUES = np.linspace(-1, 1, COUNT, dtype=np.float32)


def _relu_setup(tenant):
    stream = tenant.create_stream()
    x, y, z = (tenant.allocate(4 * COUNT) for _ in range(3))
    tenant.write(stream, x, VALUES.tobytes())
    return stream, x, y, z


def test_the_welcome_grants_a_template_budget_unless_the_server_is_told_not_to(tmp_path):
    with ServerProcess(tmp_path) as server, RawTenant(server.address) as tenant:
        assert tenant.template_bytes == 4 << 20
    with ServerProcess(tmp_path, flags=["--max_template_bytes=0"]) as server, \
            RawTenant(server.address) as tenant:
        assert tenant.template_bytes == 0


def test_a_templated_launch_runs_its_template_with_the_buffers_it_rebinds(tmp_path):
    with ServerProcess(tmp_path) as server, RawTenant(server.address) as tenant:
        stream, x, y, z = _relu_setup(tenant)
        send_batch(tenant,
                   define(tenant.next_sequence(), 7, relu_payload(stream, x, y, COUNT)),
                   # The same launch writing z instead of y: only buffer 1 is sent.
                   templated(tenant.next_sequence(), 7, [(1, z - y, None)]))
        expected = np.maximum(VALUES, 0)
        np.testing.assert_array_equal(
            np.frombuffer(tenant.read(stream, y, 4 * COUNT), np.float32), expected)
        np.testing.assert_array_equal(
            np.frombuffer(tenant.read(stream, z, 4 * COUNT), np.float32), expected)
        assert tenant.synchronize(stream).ok
        stats = server.stats()
        client = stats["clients"][0]
        assert (client["templates_created"], client["launches_by_template"]) == (1, 1)


def test_a_compact_command_means_its_full_payload(tmp_path):
    """An event recording in the compact form (kind, field mask, the non-zero fields as
    varints) is notified as the full command would be; a memset in it fills its range."""
    with ServerProcess(tmp_path) as server, RawTenant(server.address) as tenant:
        stream, x, _, _ = _relu_setup(tenant)
        token = 41
        # memset: kind, mask (stream, dst, size, pattern, pattern_bytes), the fields.
        memset = (varint(MEMSET) + varint(0b111010010) + varint(stream) + varint(x) +
                  varint(4 * COUNT) + varint(0x7F) + varint(1))
        # record event 5: mask (stream, object, token).
        record = (varint(RECORD_EVENT) + varint(0b1110) + varint(stream) + varint(5) +
                  varint(token))
        send_batch(tenant, (tenant.next_sequence(), memset, ENTRY_COMPACT),
                   (tenant.next_sequence(), record, ENTRY_COMPACT))
        assert tenant.wait_notified(token)[0] == 0
        assert tenant.read(stream, x, 4 * COUNT) == b"\x7f" * (4 * COUNT)
        assert tenant.synchronize(stream).ok


@pytest.mark.parametrize("case", ["never_defined", "another_connections", "binding_out_of_range",
                                  "released"])
def test_naming_a_template_this_connection_does_not_hold_is_an_error_not_a_crash(tmp_path, case):
    with ServerProcess(tmp_path) as server, RawTenant(server.address) as owner, \
            RawTenant(server.address) as tenant:
        owner_stream, ox, oy, _ = _relu_setup(owner)
        send_batch(owner, define(owner.next_sequence(), 3,
                                 relu_payload(owner_stream, ox, oy, COUNT)))
        assert owner.synchronize(owner_stream).ok
        stream, x, y, z = _relu_setup(tenant)
        entries = {
            "never_defined": [templated(tenant.next_sequence(), 5)],
            "another_connections": [templated(tenant.next_sequence(), 3)],  # the owner's id
            "binding_out_of_range": [
                define(tenant.next_sequence(), 0, relu_payload(stream, x, y, COUNT)),
                templated(tenant.next_sequence(), 0, [(2, z - y, 4 * COUNT)])],
            "released": [
                define(tenant.next_sequence(), 0, relu_payload(stream, x, y, COUNT)),
                release(tenant.next_sequence(), 0),
                templated(tenant.next_sequence(), 0)],
        }[case]
        send_batch(tenant, *entries)
        reply = tenant.synchronize(stream)
        assert not reply.ok and "template" in reply.message, reply
        # The connection goes on: the next work runs, and the owner's template is untouched.
        tenant.relu(stream, x, z, COUNT)
        np.testing.assert_array_equal(
            np.frombuffer(tenant.read(stream, z, 4 * COUNT), np.float32), np.maximum(VALUES, 0))
        send_batch(owner, templated(owner.next_sequence(), 3))
        assert owner.synchronize(owner_stream).ok
        assert not tenant.closed and server.alive()


@pytest.mark.parametrize("case", ["onto_another_tenants_buffer", "around_the_address_space",
                                  "straddling_two_allocations", "size_past_the_allocation"])
def test_a_binding_moved_out_of_the_tenants_memory_is_refused_and_touches_nothing(tmp_path,
                                                                                   case):
    # Bindings are moves from the template's last address (wire version 7): whatever a move
    # adds up to is checked against the tenant's own allocations, as a whole address would be.
    with ServerProcess(tmp_path) as server, RawTenant(server.address) as victim, \
            RawTenant(server.address) as tenant:
        victim_stream, vx, vy, _ = _relu_setup(victim)
        victim.write(victim_stream, vy, VALUES.tobytes())
        assert victim.synchronize(victim_stream).ok
        stream, x, y, z = _relu_setup(tenant)
        binding = {
            "onto_another_tenants_buffer": (1, vy - y, None),
            "around_the_address_space": (1, -(y + 4096), None),
            "straddling_two_allocations": (1, 4 * COUNT - 4, None),
            "size_past_the_allocation": (1, 0, 1 << 20),
        }[case]
        send_batch(tenant,
                   define(tenant.next_sequence(), 0, relu_payload(stream, x, y, COUNT)),
                   templated(tenant.next_sequence(), 0, [binding]))
        reply = tenant.synchronize(stream)
        assert not reply.ok, reply
        assert "allocation" in reply.message or "not a device address" in reply.message, reply
        np.testing.assert_array_equal(
            np.frombuffer(victim.read(victim_stream, vy, 4 * COUNT), np.float32), VALUES)
        # The connection goes on.
        tenant.relu(stream, x, z, COUNT)
        np.testing.assert_array_equal(
            np.frombuffer(tenant.read(stream, z, 4 * COUNT), np.float32), np.maximum(VALUES, 0))
        assert not tenant.closed and server.alive()


@pytest.mark.parametrize("case", ["not_a_launch", "over_budget", "release_undefined",
                                  "no_budget"])
def test_a_definition_that_breaks_the_protocol_ends_only_its_connection(tmp_path, case):
    flags = {"over_budget": ["--max_template_bytes=1KiB"],
             "no_budget": ["--max_template_bytes=0"]}.get(case, [])
    with ServerProcess(tmp_path, flags=flags) as server:
        with RawTenant(server.address) as tenant:
            stream, x, y, _ = _relu_setup(tenant)
            relu = relu_payload(stream, x, y, COUNT)
            entries = {
                "not_a_launch": [define(tenant.next_sequence(), 0, command_payload(
                    MEMSET, stream=stream, dst=x, size=16, pattern_bytes=1))],
                # Each template costs 512 bytes beyond its contents: two do not fit 1 KiB.
                "over_budget": [define(tenant.next_sequence(), 0, relu),
                                define(tenant.next_sequence(), 1, relu)],
                "release_undefined": [release(tenant.next_sequence(), 9)],
                "no_budget": [define(tenant.next_sequence(), 0, relu)],
            }[case]
            send_batch(tenant, *entries)
            wait_for(lambda: tenant.closed, 10, "the server to close the connection")
        assert server.alive()
        assert bystander_round_trip(server.address) is not None


TRAINING_PROBE = r"""
import json
import numpy as np
import tensorflow as tf
import vgpu

def train(seed, build, x, y, batch_size):
    tf.keras.utils.set_random_seed(seed)
    model = build()
    model.compile(optimizer=tf.keras.optimizers.SGD(0.05), loss="mse")
    history = model.fit(x, y, batch_size=batch_size, epochs=3, verbose=0, shuffle=False)
    return history.history["loss"], [w.tobytes().hex() for w in model.get_weights()]

rng = np.random.default_rng(0)
# 72 samples in batches of 16: every epoch ends with a batch of 8 (other descriptor settings).
x = rng.normal(size=(72, 8, 8, 3)).astype(np.float32)
y = rng.normal(size=(72, 4)).astype(np.float32)
cnn = lambda: tf.keras.Sequential([
    tf.keras.Input((8, 8, 3)), tf.keras.layers.Conv2D(8, 3, padding="same"),
    tf.keras.layers.BatchNormalization(), tf.keras.layers.ReLU(),
    tf.keras.layers.MaxPooling2D(), tf.keras.layers.Flatten(), tf.keras.layers.Dense(4)])
# A second, different model in the same process.
mlp = lambda: tf.keras.Sequential([
    tf.keras.Input((192,)), tf.keras.layers.Dense(32, activation="tanh"),
    tf.keras.layers.Dropout(0.0), tf.keras.layers.Dense(4)])
vgpu.reset_stats()
first = train(0, cnn, x, y, 16)
second = train(1, mlp, x.reshape(72, -1), y, 24)
stats = vgpu.stats()
print("PROBE " + json.dumps({
    "first": first, "second": second, "launches": stats["launches"],
    "templates_created": stats["templates_created"],
    "launches_by_template": stats["launches_by_template"],
    "command_bytes_sent": stats["command_bytes_sent"], "wire": stats["wire"]}))
"""


def _train(address, templates):
    from conftest import run_probe  # noqa: PLC0415

    return run_probe(TRAINING_PROBE, env={"VGPU_BACKEND": address,
                                          "VGPU_TEMPLATES": "1" if templates else "0"})


def test_training_through_templates_is_bit_identical_and_sends_a_fraction_of_the_bytes(tmp_path):
    with ServerProcess(tmp_path) as server:
        with_templates = _train(server.address, templates=True)
        without = _train(server.address, templates=False)
    # Bit-identical losses and weights, for both models (the second one's launches are new
    # templates; the smaller last batch of each epoch makes its own).
    assert with_templates["first"] == without["first"]
    assert with_templates["second"] == without["second"]
    assert without["templates_created"] == without["launches_by_template"] == 0
    assert with_templates["templates_created"] > 0
    # After each model's first steps nearly every launch goes by template.
    assert with_templates["launches_by_template"] > 0.6 * with_templates["launches"], \
        with_templates
    assert with_templates["command_bytes_sent"] < 0.5 * without["command_bytes_sent"], \
        (with_templates["wire"], without["wire"])
