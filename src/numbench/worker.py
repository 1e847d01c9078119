"""The measuring worker: one fresh process per cell, started by ``numbench.cell``.

Usage: ``python -m numbench.worker SPEC.json RESULT.json``. It pins the CPUs and imports the
library first (the supervisor has already set the environment), then loads inputs, places
them on the device, compiles, measures, checks the output and writes its result as JSON.
Anything that goes wrong inside is caught and reported as a status; a crash or hang is
seen by the supervisor instead.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback


def _write_json(obj: dict, path: str) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(obj, fh)
    os.replace(tmp, path)


def _peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def measure(spec: dict) -> dict:
    from numbench.libraries import Unavailable, get, pin_cpus

    out: dict = {}
    pin_cpus(int(spec["threads"]))
    adapter = get(spec["library"])(spec["device"], spec["dtype"], int(spec["threads"]))

    # Import the library first, in a fresh interpreter, so import_s is the whole import
    # (NumPy included) as a user's script would pay it.
    t0 = time.perf_counter()
    try:
        adapter.load()
    except Unavailable as exc:
        return {"status": "unavailable", "error": str(exc)}
    except ImportError as exc:
        return {"status": "unavailable", "error": f"{adapter.module} cannot be imported: {exc}"}
    out["import_s"] = time.perf_counter() - t0

    from numbench import operations

    op = operations.get(spec["operation"])
    reason = op.unsupported_reason(adapter.family)
    if reason is not None:
        return {**out, "status": "unsupported", "error": reason}
    out["library_version"] = adapter.version()
    out["device_name"] = adapter.device_name()
    out["device_details"] = json.dumps(adapter.device_details()) if adapter.device_details() else ""
    out["blas"] = adapter.blas()

    import numpy as np

    from numbench.timing import Timer, TimingSettings

    params = op.resolve_params(spec.get("params"))
    with np.load(spec["inputs"]) as data:
        inputs = [data[name] for name in op.input_names]
        n_refs = int(data["n_outputs"])
        reference = tuple(data[f"ref_{i}"] for i in range(n_refs))
        inputs_params = str(data["params_json"]) if "params_json" in data else ""
    reference = reference[0] if n_refs == 1 else reference
    if inputs_params != operations.params_json(params):
        return {
            **out,
            "status": "failed",
            "error": f"the inputs file was made with parameters {inputs_params or '{}'} but the "
            f"cell asks for {operations.params_json(params) or '{}'}; remake the inputs",
        }

    args = tuple(adapter.to_device(a) for a in inputs)
    fn = adapter.compile(op.build(adapter.family, adapter.xp, spec["dtype"], params))
    adapter.reset_device_peak()

    settings = TimingSettings(**spec["timing"])
    try:
        m = Timer(fn, args, adapter.sync).measure(settings)
    except Exception as exc:  # noqa: BLE001 - the library's own error is the message
        traceback.print_exc()
        out.update(status="failed", error=f"{type(exc).__name__}: {exc}")
        return out

    tolerance = op.tolerance_for(adapter.family, spec["dtype"])
    try:
        rel_error = operations.relative_error(adapter.to_numpy(m.result), reference)
    except ValueError as exc:
        rel_error = float("inf")
        out["error"] = f"output does not match the reference: {exc}"
    out.update(
        first_call_s=m.first_call_s,
        loops=m.loops,
        samples_s=m.samples_s,
        rel_error=rel_error,
        tolerance=tolerance,
        device_peak_mb=adapter.device_peak_mb(),
    )
    if rel_error <= tolerance:
        out["status"] = "ok"
    else:
        out["status"] = "mismatch"
        out.setdefault(
            "error",
            f"relative error {rel_error:.3g} exceeds the {spec['dtype']} tolerance {tolerance:g}",
        )
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m numbench.worker SPEC.json RESULT.json", file=sys.stderr)
        return 2
    spec_path, result_path = argv
    with open(spec_path, encoding="utf-8") as fh:
        spec = json.load(fh)
    try:
        result = measure(spec)
    except Exception as exc:  # noqa: BLE001 - reported as the cell's status
        traceback.print_exc()
        result = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}
    result["peak_rss_mb"] = _peak_rss_mb()
    _write_json(result, result_path)
    print(
        f"worker: {spec['library']}/{spec['device']}/{spec['operation']}/{spec['size']}: "
        f"{result['status']}" + (f" ({result['error']})" if result.get("error") else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
