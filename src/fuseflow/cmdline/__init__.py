"""Pieces of the `fuseflow` command that its subcommands share: argument types with one-line
errors (`args`), the model vocabulary every command accepts (`source`), library noise kept out
of command output (`quiet`), help topics (`topics`). Files it reads and writes: `fuseflow.files`."""
