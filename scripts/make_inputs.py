"""Entry point of rule inputs: seeded arrays and the float64 reference output."""

import argparse
import json
import sys

import _path  # noqa: F401

from numbench import inputs_file as inputs
from numbench.inputs_file import InputsFileError
from numbench.operations import OperationError

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--operation", required=True)
parser.add_argument("--size", type=int, required=True)
parser.add_argument("--seed", type=int, required=True)
parser.add_argument("--output", required=True)
parser.add_argument("--params", default="", help="the operation's parameters as JSON")
parser.add_argument(
    "--operation-file",
    default="",
    help="the user's file of the operation ('' for one found by name)",
)
parser.add_argument(
    "--inputs-from",
    default="",
    help="the user's file of inputs ({size} replaced by the size; '' to draw them)",
)
parser.add_argument(
    "--operation-hash",
    required=True,
    help="the hash its code must have (numbench.operations.loading)",
)
args = parser.parse_args()
params = json.loads(args.params) if args.params else {}
try:
    inputs.write(
        args.operation,
        args.size,
        args.seed,
        args.output,
        params,
        args.operation_file or None,
        args.operation_hash,
        args.inputs_from or None,
    )
except OSError as exc:  # a full disk, a folder that is not writable: the job fails, named
    sys.exit(f"inputs: cannot write {args.output}: {exc.strerror or exc}")
except OperationError as exc:  # its code changed since the workflow planned it, or is gone
    sys.exit(f"inputs: {exc}")
except InputsFileError as exc:  # the user's file of inputs: missing, or the wrong arrays
    sys.exit(f"inputs: {exc}")
print(f"inputs: {args.operation} n={args.size} seed={args.seed} params={params} -> {args.output}")
