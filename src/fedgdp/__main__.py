from .commands.cli import console

console()
