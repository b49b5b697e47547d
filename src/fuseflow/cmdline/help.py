"""`fuseflow help [TOPIC | COMMAND]`: the command's summary, a help topic (`cmdline.topics`), or a
command's own help.

    fuseflow help schedules
"""
from __future__ import annotations

from ..errors import UserError
from . import grammar
from .topics import TOPICS, topic_text


def run(args) -> int:
    if not args.topic:
        print(grammar.__doc__.strip())
        print(f"\nhelp topics: {', '.join(TOPICS)} (fuseflow help TOPIC); fuseflow COMMAND --help for a command")
        return 0
    if args.topic in TOPICS:
        print(topic_text(args.topic))
        return 0
    commands = args.subcommands
    if args.topic in commands:
        commands[args.topic].print_help()
        return 0
    raise UserError(f"no help topic or command {args.topic!r}", "help",
                    f"topics: {', '.join(TOPICS)}; commands: {', '.join(sorted(commands))}")
