"""The ``vgpu`` command line: ``vgpu info`` (what TensorFlow sees and how the plugin is set up)
and ``vgpu stats`` (the counters of a small probe run)."""
from __future__ import annotations

import json
import sys

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_bool("json", False, "Print machine-readable JSON instead of text.")

_USAGE = """usage: vgpu <command> [flags]

commands:
  info     the plugin path, TensorFlow version, devices, backend and limits
"""


def _format_bytes(count: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if count < 1024 or unit == "TiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return str(count)


def _info() -> int:
    import vgpu  # noqa: PLC0415 - imports TensorFlow, which is slow: only when asked

    try:
        details = vgpu.info()
    except vgpu.PluginNotLoadedError as error:
        print(f"vgpu: {error}", file=sys.stderr)
        return 1
    details["devices"] = vgpu.devices()
    if FLAGS.json:
        print(json.dumps(details, indent=2))
        return 0
    print(f"tensorflow-vgpu {details['version']}")
    print(f"plugin:            {details['plugin_path']}")
    print(f"TensorFlow:        {details['tensorflow_running']} "
          f"(built against {details['tensorflow_built_against']})")
    print(f"platform / type:   {details['platform']} / {details['device_type']}")
    print(f"devices:           {', '.join(details['devices']) or 'none'}")
    print(f"backends:          {', '.join(details['backends'])}")
    print(f"descriptor mode:   {details['descriptor_mode']}")
    print(f"memory per device: {_format_bytes(details['memory_limit_bytes'])}")
    if details["declined"]:
        print(f"NO DEVICE OFFERED: {details['declined']}")
        return 1
    return 0


_COMMANDS = {"info": _info}


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[1] not in _COMMANDS:
        print(_USAGE, file=sys.stderr)
        return 2
    return _COMMANDS[argv[1]]()


def run() -> None:
    """Console-script entry point."""
    app.run(main)


if __name__ == "__main__":
    run()
